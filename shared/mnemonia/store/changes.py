"""What a write changes, for whoever keeps copies of the store between calls (recall's caches,
:mod:`mnemonia.caches`).

Two parties say it: a write scope declares what its write changes of a tenant (its memories,
its use events, all its relations), and the store's write methods report what only they know
as they write it (the memories whose relations an insert touches, new word vectors); see
:meth:`Database.report <mnemonia.store.database.Database.report>`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Added", "Changes", "Removed"]


@dataclass(frozen=True)
class Added:
    """What an add (or an enrichment) wrote of a tenant's memories, when it wrote nothing
    else of them: how many new (committed) memories, and the entity of each entity link it
    added to undeleted memories (once per memory naming it). Recall's entity index counts
    them in instead of reading the whole tenant again."""

    memories: int
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Removed:
    """What a soft delete (an eviction, a ``forget``) wrote of a tenant's memories, when it
    wrote nothing else of them: how many committed memories it deleted, and the entity of
    each entity link of the memories it deleted (once per memory naming it). Recall's entity
    index counts them out instead of reading the whole tenant again."""

    memories: int
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Changes:
    """What one write changes.

    Attributes:
        tenant: The tenant written (``None``: no tenant's rows, e.g. word vectors only).
        memories: The tenant's memories: added, edited, deleted, restored, merged.
        uses: The tenant's use events (feedback, reported uses, reviews).
        relations: Any relation of the tenant (all of them may have changed).
        linked: The memories whose relations the write adds or changes (the others' stay).
        words: Word vectors were added (every tenant's keyword expansion may change).
        terms: With ``words``, the words whose vectors the write stores (recall's word index
            reads those in after the write instead of every word again); none: any word.
        added: New memories or entity links, and nothing else of the tenant's memories (an
            add or an enrichment that went through; with ``memories`` it says nothing more).
        removed: Deleted memories (soft), and nothing else of the tenant's memories, as
            ``added`` (an eviction or a ``forget`` that went through).

    A write that changes other columns of the tenant's memories only (a pin, consolidation
    marking members ``consolidated_into`` a concept) says none of these: what recall keeps
    of the tenant (the entity index: which memories are active, which entities they name)
    does not change, and the store's row cache follows the rows it writes itself.
    """

    tenant: str | None = None
    memories: bool = False
    uses: bool = False
    relations: bool = False
    linked: frozenset[str] = frozenset()
    words: bool = False
    terms: frozenset[str] = frozenset()
    added: Added | None = None
    removed: Removed | None = None

    @classmethod
    def wholesale(cls, tenant: str) -> Changes:
        """The tenant's memories, events and relations changed wholesale (an import, a
        repair, a purge)."""
        return cls(tenant=tenant, memories=True, uses=True, relations=True)
