"""Recall's caches: what recall keeps in memory between calls, in one object
(:class:`RecallCache`, ``Runtime.caches``), and how a write drops what it made stale.

Kept here: each tenant's entity index (names, document frequencies, label vectors) and cue
index (use cues and counts, cue vectors), the word-vector index of keyword expansion (word
vectors of query words, their expansions), the query embeddings, the keyword words of each
memory, each memory's links as recall read them, and what the last recalls returned (the
cue of a use reported later).

Everything kept is read from the store; a write that changes what an index was built from
drops it (it is built again on the next recall that needs it). A recall that read before a
write must not keep what it built after the write dropped it: every drop moves the tenant's
epoch, and an index is kept only if the epoch did not move since its reads began and no
write of the tenant's memories is under way (:meth:`RecallCache.index_epoch`,
:meth:`RecallCache.keep_index`). Two writes do not drop the entity index: an add, or an
enrichment, that went through (:class:`Added`) leaves it kept and what it added pending, and
the next recall counts that in (:meth:`RecallCache.entity_index`), so a recall after one does
not read the whole tenant's entity counts again. New word vectors do not drop the word index
either: the words a write stored are read in after it ends (:meth:`RecallCache.new_terms`).

No service drops a cache by hand. A write's scope (``Runtime.writing``, ``exclusive``,
``changing``) names what the write changes (:class:`Changes`: a tenant's memories, its use
events, all its relations) and hands it to :meth:`RecallCache.changed` when it ends; the
store's write methods report, as they write, what only they know (the memories whose
relations they touch, new word vectors) to :meth:`RecallCache.changing`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from mnemonia.embeddings import QueryCache
from mnemonia.store.changes import Added, Changes, Removed
from mnemonia.store.rowcache import split_kept

__all__ = ["KEPT_MEMORIES", "NEAR_LINKS", "RECENT_QUERIES", "Added", "Changes", "CueIndex",
           "EntityIndex", "Pending", "RecallCache", "Removed", "TermIndex"]

Pending = Added | Removed
"""A write the kept entity index has still to count in (an add, an enrichment) or out (a soft
delete)."""


@dataclass
class EntityIndex:
    """Per-tenant entity names, document frequencies and label vectors, kept in memory."""

    labels: list[str]
    names: list[str]
    df: dict[str, int]
    matrix: np.ndarray | None
    active: int  # active memories of the tenant (recall's IDF)
    # first 3+ character word of a name -> (name, all its 3+ character words), built once
    by_word: dict[str, list[tuple[str, tuple[str, ...]]]] | None = None


@dataclass
class TermIndex:
    """The words memories use that have a word vector (for the store's model, every
    tenant's), kept in memory for recall's keyword expansion; the words a write stores are
    appended after it (``terms`` is then not in order: nothing depends on it)."""

    terms: list[str]
    matrix: np.ndarray | None  # row i: the vector of terms[i] (a view of a larger buffer)
    position: dict[str, int]
    stems: dict[str, list[str]] | None = None  # {Porter stem: its terms}, built when asked


@dataclass
class CueIndex:
    """Per-tenant use cues: the queries memories were used for (with their vectors), and how
    often each memory was used or failed; kept in memory, rebuilt after a use is recorded."""

    ids: list[str]
    queries: list[str]
    matrix: np.ndarray | None
    uses: dict[str, int]
    fails: dict[str, int]


_Index = TypeVar("_Index")

RECENT_QUERIES = 4096
"""Memories per tenant whose last recall query is remembered (for the cue of a later use)."""
KEPT_MEMORIES = 200_000
"""Memories whose keyword words recall keeps in memory, and per tenant and kind of link,
memories whose links it keeps (past this many a cache starts afresh)."""

NEAR_LINKS = "near"
"""Kinds of kept links named with this prefix are neighbourhoods (what lies within some
hops of a memory): they depend on other memories' links, so a write of any relation of the
tenant drops all of them."""

KeywordWords = tuple[str, str, float, frozenset[str], str | None]
"""(text, metadata, created_at, keyword words, speaker) of one memory (recall's fusion)."""


class RecallCache:
    """Every cache recall keeps between calls, for one open store (thread-safe)."""

    def __init__(self, query_cache_size: int) -> None:
        self.query_cache = QueryCache(query_cache_size)  # query text -> its embedding
        self.entity_indexes: dict[str, EntityIndex] = {}
        # Label vectors outlive the entity indexes (which every add drops).
        self.label_vectors: dict[str, np.ndarray] = {}
        self.cue_indexes: dict[str, CueIndex] = {}
        self.cue_vectors: dict[str, np.ndarray] = {}
        self.term_index: TermIndex | None = None
        # words whose vectors a write is storing (reported inside its transaction), and those
        # of writes that ended since, which the word index reads in (new_terms)
        self._terms_written: set[str] = set()
        self._terms_ended: set[str] = set()
        self.terms_reading = threading.Lock()  # held by the recall reading new words in
        self.word_vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # query words
        self.word_expansions: dict[str, dict[str, float]] = {}  # query word -> related words
        # tenant -> memory id -> the query of the last recall (with touches) that returned it
        self.recent_queries: dict[str, OrderedDict[str, str]] = {}
        self.last_recall: dict[str, list[str]] = {}  # tenant -> ids of its last recall
        # memory id -> (text, metadata, created_at, keyword words, speaker) (recall's fusion)
        self.keyword_words: dict[str, KeywordWords] = {}
        # tenant -> kind -> memory id -> its links, as recall read them: "follows" (the
        # memories it follows or that follow it), "spread" (what spreading
        # may follow from it, strongest first), "hidden" (its contradictions and supersessions)
        self.links: dict[str, dict[str, dict[str, tuple[Any, ...]]]] = {}
        self._written: dict[str, set[str]] = {}  # tenant -> ids whose relations a write changes
        self._lock = threading.Lock()  # the index caches, their epochs, recent queries
        self._index_epochs: dict[str, int] = {}  # tenant -> how often its indexes were dropped
        self._under_way: dict[str, int] = {}  # tenant -> writes of its memories under way
        # tenant -> what adds, enrichments and soft deletes ended since its kept entity index
        # was built
        self._pending: dict[str, list[Pending]] = {}

    # -- keeping -----------------------------------------------------------------------------
    def index_epoch(self, tenant: str) -> int:
        """How often the tenant's entity or cue index was dropped so far: read it before the
        reads an index is built from, and hand it to :meth:`keep_index`."""
        return self._index_epochs.get(tenant, 0)

    def keep_index(self, cache: dict[str, _Index], tenant: str, index: _Index,
                   epoch: int) -> None:
        """Cache ``index`` unless a write dropped the tenant's indexes since ``epoch``, or a
        write of its memories is under way: its reads may then predate that write (another
        thread's) or see it in part, so it serves only the recall that built it and the next
        one builds afresh."""
        with self._lock:
            if self._index_epochs.get(tenant, 0) == epoch and not self._under_way.get(tenant):
                cache[tenant] = index
                if cache is self.entity_indexes:
                    self._pending.pop(tenant, None)  # (it counts every add that ended)

    def entity_index(self, tenant: str) -> tuple[EntityIndex | None, list[Pending]]:
        """The tenant's kept entity index (``None``: none), and what adds, enrichments and
        soft deletes ended since it was built (to count in or out,
        :meth:`keep_entity_index`)."""
        with self._lock:
            return self.entity_indexes.get(tenant), list(self._pending.get(tenant, ()))

    def keep_entity_index(self, tenant: str, built_on: EntityIndex, index: EntityIndex,
                          added: int) -> None:
        """Keep ``index``, the kept ``built_on`` with the first ``added`` pending writes
        counted in or out, in its place (unless a write dropped ``built_on`` meanwhile; writes
        that ended meanwhile stay pending)."""
        with self._lock:
            if self.entity_indexes.get(tenant) is built_on:
                self.entity_indexes[tenant] = index
                del self._pending.get(tenant, [])[:added]

    def kept_links(self, tenant: str, kind: str) -> Mapping[str, tuple[Any, ...]]:
        """The links of ``kind`` kept for the tenant's memories (by memory id)."""
        return self.links.get(tenant, {}).get(kind) or {}

    def links_of(self, tenant: str, kind: str, ids: Iterable[str],
                 read: Callable[[list[str]], Mapping[str, tuple[Any, ...]]]
                 ) -> dict[str, tuple[Any, ...]]:
        """The links of ``kind`` of each of ``ids``: the kept ones, and for the others what
        ``read(ids not kept)`` answers (for each id it is given), which is kept too."""
        known = self.kept_links(tenant, kind)
        epoch = self.index_epoch(tenant)
        out, ask = split_kept(known, ids)
        if ask:
            learned = read(sorted(ask))
            self.keep_links(tenant, kind, learned, epoch)
            out.update(learned)
        return out

    def keep_links(self, tenant: str, kind: str, links: Mapping[str, tuple[Any, ...]],
                   epoch: int) -> None:
        """Keep the links of ``kind`` of some memories, unless a write dropped the tenant's
        indexes since ``epoch`` (see :meth:`keep_index`)."""
        with self._lock:
            if self._index_epochs.get(tenant, 0) != epoch:
                return
            known = self.links.setdefault(tenant, {}).setdefault(kind, {})
            if len(known) + len(links) > KEPT_MEMORIES:
                known.clear()
            known.update(links)

    def keep_keyword_words(self, memory_id: str, entry: KeywordWords) -> None:
        """Cache the keyword words of one memory (checked against its text, metadata and
        time when read back, so an edited memory is tokenised afresh)."""
        with self._lock:
            if len(self.keyword_words) >= KEPT_MEMORIES:
                self.keyword_words.clear()
            self.keyword_words[memory_id] = entry

    def note_queries(self, tenant: str, ids: Sequence[str], query: str) -> None:
        """Remember that ``query`` recalled ``ids`` (the cue of a use reported later)."""
        with self._lock:  # recalls on several threads: no pop between set and move
            self.last_recall[tenant] = list(ids)
            recent = self.recent_queries.setdefault(tenant, OrderedDict())
            for mid in ids:
                recent[mid] = query
                recent.move_to_end(mid)
            while len(recent) > RECENT_QUERIES:
                recent.popitem(last=False)

    def last_recalled(self, tenant: str) -> list[str]:
        """Ids of the tenant's last recall with touches in this process (none: ``[]``)."""
        return list(self.last_recall.get(tenant, ()))

    def query_of(self, tenant: str, memory_id: str) -> str | None:
        """The query of the last recall in this process that returned the memory, if any."""
        recent = self.recent_queries.get(tenant)
        return recent.get(memory_id) if recent is not None else None

    # -- dropping: the one place a write makes recall drop what it kept ---------------------
    def changing(self, changes: Changes) -> None:
        """A write method of the store is about to write ``changes``, inside its transaction
        (:meth:`Database.report <mnemonia.store.database.Database.report>`): the kept links of
        the memories whose relations it touches are dropped now, and again when the tenant's
        memories are next reported changed, which the write's scope does after its commit (a
        recall between the two may have read and kept the links as they were before); new
        word vectors (``terms``) are read into the word index after the write ends (any
        others drop it), and the kept expansions of query words are dropped now and then."""
        if changes.tenant is not None and changes.linked:
            self._links_written(changes.tenant, changes.linked)
        if changes.words:
            with self._lock:
                if changes.terms and len(self._terms_written) < KEPT_MEMORIES:
                    self._terms_written.update(changes.terms)
                    self.word_expansions = {}
                else:
                    self._forget_terms()

    def begins(self, *changes: Changes) -> None:
        """Writes that will change ``changes`` begin (the runtime's write scopes, before their
        lock): until they end (:meth:`changed`), no index of a tenant whose memories they
        write is kept."""
        with self._lock:
            for c in changes:
                if c.tenant is not None and c.memories:
                    self._under_way[c.tenant] = self._under_way.get(c.tenant, 0) + 1

    def changed(self, *changes: Changes, begun: Sequence[Changes] = ()) -> None:
        """Writes have ended (committed or rolled back): drop what each of ``changes`` made
        stale (an add, enrichment or soft delete that went through, :class:`Added` or
        :class:`Removed`, is counted into or out of the
        kept entity index by the next recall instead). ``begun``: what :meth:`begins` was
        told of them. Called by the runtime's write scopes (``Runtime.writing``, ``exclusive``,
        ``changing``) as they end; nothing else drops a cache."""
        with self._lock:
            if self._terms_written:  # (committed by now, or rolled back)
                self._terms_ended.update(self._terms_written)
                self._terms_written.clear()
                self.word_expansions = {}
                if len(self._terms_ended) > KEPT_MEMORIES:  # (no recall read them in)
                    self._forget_terms()
            for c in begun:
                if c.tenant is not None and c.memories:
                    left = self._under_way.get(c.tenant, 0) - 1
                    if left > 0:
                        self._under_way[c.tenant] = left
                    else:
                        self._under_way.pop(c.tenant, None)
        for c in changes:
            if c.words:
                with self._lock:
                    self._forget_terms()
            if c.tenant is None:
                continue
            if c.memories:
                self._forget_entities(c.tenant)
            elif c.added is not None or c.removed is not None:
                self._keep_pending(c.tenant, *(p for p in (c.added, c.removed) if p is not None))
            else:
                with self._lock:
                    self._links_ended(c.tenant)
            if c.uses:
                self._drop_index(self.cue_indexes, c.tenant)
            if c.relations:
                self._drop_index(self.links, c.tenant)
            if c.linked:
                with self._lock:
                    self._drop_links(c.tenant, set(c.linked))

    def new_terms(self, index: TermIndex) -> set[str]:
        """The words whose vectors writes that ended since stored, for ``index`` (the kept
        word index) to read in; taken (a word not stored after all goes back with
        :meth:`terms_unread`)."""
        with self._lock:
            if self.term_index is not index or not self._terms_ended:
                return set()
            taken, self._terms_ended = self._terms_ended, set()
            return taken

    def keep_term_index(self, built_on: TermIndex, index: TermIndex) -> None:
        """Keep ``index`` (``built_on`` with new words read in), unless the word index was
        dropped or replaced meanwhile."""
        with self._lock:
            if self.term_index is built_on:
                self.term_index = index

    def terms_unread(self, terms: Iterable[str]) -> None:
        """Words taken by :meth:`new_terms` that have no stored vector (yet: a write still
        open, or rolled back): read again after the next write ends."""
        with self._lock:
            if self.term_index is not None:
                self._terms_written.update(terms)

    def _forget_terms(self) -> None:
        """(The lock held.) Drop the word-vector index (words got vectors it cannot read in)."""
        self.term_index = None
        self.word_expansions = {}
        self._terms_written.clear()
        self._terms_ended.clear()

    def _drop_index(self, cache: dict[str, Any], tenant: str) -> None:
        with self._lock:
            self._index_epochs[tenant] = self._index_epochs.get(tenant, 0) + 1
            cache.pop(tenant, None)

    def _forget_entities(self, tenant: str) -> None:
        """Drop the tenant's entity index (it is rebuilt on the next recall), and the kept
        links of the memories whose relations were written since (:meth:`changing`)."""
        self._drop_index(self.entity_indexes, tenant)
        with self._lock:
            self._pending.pop(tenant, None)
            self._links_ended(tenant)

    def _keep_pending(self, tenant: str, *pending: Pending) -> None:
        """An add, an enrichment or a soft delete went through: the tenant's kept entity index
        stays, with ``pending`` to count (the epoch moves: an index whose reads overlapped the
        write is not kept), and the kept links of the memories whose relations it wrote are
        dropped."""
        with self._lock:
            self._index_epochs[tenant] = self._index_epochs.get(tenant, 0) + 1
            if tenant in self.entity_indexes:
                self._pending.setdefault(tenant, []).extend(pending)
            self._links_ended(tenant)

    def _links_ended(self, tenant: str) -> None:
        """(The lock held.) A write of the tenant ended: the kept links of the memories whose
        relations it wrote are dropped again, after its commit (:meth:`_links_written`)."""
        self._drop_links(tenant, self._written.pop(tenant, set()))

    def _links_written(self, tenant: str, ids: Iterable[str]) -> None:
        """Relations of ``ids`` are being written: their kept links are dropped now, and
        again when the write ends (:meth:`changed`, after its commit)."""
        ids = set(ids)
        with self._lock:
            self._written.setdefault(tenant, set()).update(ids)
            self._drop_links(tenant, ids)

    def _drop_links(self, tenant: str, ids: set[str]) -> None:
        """Drop the kept links of ``ids``, and every kept neighbourhood (:data:`NEAR_LINKS`),
        the cache lock held, so that a recall that read them before cannot keep them (the
        epoch moves)."""
        if not ids:
            return
        self._index_epochs[tenant] = self._index_epochs.get(tenant, 0) + 1
        for kind, kept in self.links.get(tenant, {}).items():
            if kind.startswith(NEAR_LINKS):
                kept.clear()
                continue
            for mid in ids:
                kept.pop(mid, None)
