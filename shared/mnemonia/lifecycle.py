"""Reads and edits of stored memories: get, list, history, relations and stats; feedback (one
SM-2 review), relate, supersede and unsupersede, forget, restore, pin and metadata updates; and
:func:`review_update`, the one SM-2 + utility review update that ``feedback`` and the review
job share.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from mnemonia import validation as check
from mnemonia.caches import Added, Changes, Removed
from mnemonia.clock import from_ts, to_ts
from mnemonia.errors import InvalidInputError, MemoryDeletedError, MemoryNotFoundError
from mnemonia.models import Event, Memory, Relation
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring import sm2
from mnemonia.store.database import Connection

__all__ = ["entity_links", "feedback", "forget", "get", "history", "list_memories", "pin",
           "purge", "relate", "relations", "restore", "review_update", "soft_deleted", "stats",
           "supersede", "supersede_in", "unsupersede", "update_metadata"]


def review_update(state: sm2.SM2State, utility: float, quality: int, now: datetime
                  ) -> tuple[sm2.SM2State, float, dict[str, Any]]:
    """One review with ``quality``: the new SM-2 state, the new utility, and the column
    values to store."""
    new_state, _ = sm2.review(state, quality, now)
    new_utility, _ = sm2.update_utility(utility, quality)
    nxt = new_state.next_review
    values = dict(easiness=new_state.easiness, interval_days=new_state.interval_days,
                  repetitions=new_state.repetitions, next_review=to_ts(nxt) if nxt else None,
                  last_quality=new_state.last_quality, utility=new_utility,
                  last_reviewed_at=to_ts(now))
    return new_state, new_utility, values


def feedback(rt: Runtime, tenant: str, memory_id: str, quality: int,
             query: str | None = None) -> Memory:
    """One SM-2 review with a checked ``quality`` 0..5 plus the utility update.

    The event keeps the query the memory answered: ``query``, else the last recall in this
    process that returned it. With quality 4 or 5 that query becomes a use cue (the lifecycle
    mode lifts the memory most for queries like it); quality 0-2 counts as a failed use."""
    check.memory_id(memory_id)
    now = rt.now()
    cue = query if query is not None else rt.caches.query_of(tenant, memory_id)
    with rt.writing(Changes(tenant=tenant, uses=True)) as conn:
        mem = rt.sql.memories.memory(conn, tenant, memory_id)
        new_state, utility, values = review_update(mem.sm2, mem.utility, quality, now)
        rt.sql.memories.update_memory(conn, memory_id, **values)
        rt.sql.events.event(conn, tenant, memory_id, "feedback", to_ts(now),
                            {"quality": None, "utility": mem.utility,
                             "interval_days": mem.sm2.interval_days, "easiness": mem.sm2.easiness},
                            {"quality": quality, "utility": utility,
                             "interval_days": new_state.interval_days,
                             "easiness": new_state.easiness,
                             **({"query": cue} if cue else {})})
        out = rt.sql.memories.memory(conn, tenant, memory_id)
    return out


def relate(rt: Runtime, tenant: str, src: str, dst: str, rel_type: str,
           strength: float, *, allow_deleted: bool = False) -> Relation:
    """Add (or update) a typed relation ``src -> dst`` between two memories of ``tenant``.

    A memory of another tenant is answered exactly like an unknown id
    (:class:`MemoryNotFoundError`), so a caller learns nothing of other tenants; a soft-deleted
    memory is refused (:class:`MemoryDeletedError`: restore it first) unless ``allow_deleted``
    (an import bringing back the relations of deleted memories)."""
    check.memory_id(src, "src")
    check.memory_id(dst, "dst")
    act.relation_weight(rel_type, rt.type_weights or None)
    s = act.validate_strength(strength)
    if src == dst:
        raise InvalidInputError(f"a memory cannot relate to itself (id {src!r})")
    now = rt.now()
    # all the tenant's kept links: a ``follows`` relation changes recall's session context
    with rt.writing(Changes(tenant=tenant, relations=True)) as conn:
        for mid in (src, dst):
            row = rt.sql.memories.row(conn, tenant, mid)  # another tenant's id: not found, no leak
            if row.deleted_at is not None and not allow_deleted:
                raise MemoryDeletedError(
                    f"memory {mid!r} in tenant {tenant!r} is deleted; restore it first "
                    f"(engine.restore({mid!r}, tenant={tenant!r})) to relate it")
        rt.sql.graph.upsert_relation(conn, tenant, src, dst, rel_type, s, to_ts(now))
    return Relation(tenant=tenant, src=src, dst=dst, type=rel_type, strength=s,
                    created_at=now)


def supersede(rt: Runtime, tenant: str, old_id: str, new_id: str, *,
              evidence: Mapping[str, Any] | None = None) -> Memory:
    """Mark ``old_id`` as superseded by ``new_id`` (in one transaction, see
    :func:`supersede_in`); returns the old memory.

    Args:
        rt: The open store.
        tenant: Whose memories.
        old_id: The memory that leaves recall.
        new_id: The memory that carries the ``supersedes`` link to it.
        evidence: Why, as a JSON-safe dict (e.g. the detector's ``automatic``, ``frame``,
            ``old_value``, ``new_value``, ``cue``, ``confidence``); kept in the
            ``superseded`` event as ``after["evidence"]``. ``None`` (a call by hand) keeps
            none.
    """
    check.memory_id(old_id, "old_id")
    check.memory_id(new_id, "new_id")
    now = rt.now()
    # all the tenant's kept links, as relate drops them
    with rt.writing(Changes(tenant=tenant, relations=True)) as conn:
        supersede_in(rt, conn, tenant, old_id, new_id, now, evidence)
        return rt.sql.memories.memory(conn, tenant, old_id)


def supersede_in(rt: Runtime, conn: Connection, tenant: str, old_id: str, new_id: str,
                 now: datetime, evidence: Mapping[str, Any] | None = None) -> None:
    """:func:`supersede` inside a write transaction the caller holds (``conn``, e.g. ingest's,
    where ``new_id``, and ``old_id`` too for a memory of the same batch, may still be pending):
    the ``supersedes`` relation ``new_id -> old_id`` (strength 1.0) is added or updated (the
    one from the memory that superseded ``old_id`` until now, if another, is removed),
    ``old_id.superseded_by`` set, and one ``superseded`` event written on ``old_id`` with
    the previous ``superseded_by`` before and, after, the new one and ``evidence`` (if any).

    Every check comes before the first write, so a refusal writes nothing:
    :class:`InvalidInputError` for the same id twice or ``evidence`` that is not a JSON-safe
    dict, :class:`MemoryNotFoundError` for an id of no memory of ``tenant`` (another
    tenant's included, in the same words), :class:`MemoryDeletedError` for a forgotten one.

    Recall's caches: the relation write reports the two memories (their kept links are
    dropped); the caller's write scope must declare the tenant's memories or relations
    changed when it ends (ingest's ``Changes(tenant=..., memories=True)`` does), which drops
    them again after the commit.
    """
    if old_id == new_id:
        raise InvalidInputError(f"a memory cannot supersede itself (id {old_id!r})")
    proof = None if evidence is None else check.evidence(
        evidence, max_bytes=rt.config.max_metadata_bytes,
        max_depth=rt.config.max_metadata_depth)
    rows = {r.id: r for r in rt.sql.memories.full_rows(conn, [old_id, new_id])}
    for mid in (old_id, new_id):
        r = rows.get(mid)
        if r is None or r.tenant != tenant or r.status == "deleting":
            # another tenant's id is answered like a missing one: no leak
            raise MemoryNotFoundError(f"no memory with id {mid!r} in tenant {tenant!r}")
        if r.deleted_at is not None:
            raise MemoryDeletedError(
                f"memory {mid!r} in tenant {tenant!r} is deleted; restore it first "
                f"(engine.restore({mid!r}, tenant={tenant!r})) to supersede with it")
    at = to_ts(now)
    previous = rows[old_id].superseded_by
    if previous is not None and previous != new_id:  # the new version takes its place
        rt.sql.graph.delete_relation(conn, tenant, previous, old_id, "supersedes")
    rt.sql.graph.upsert_relation(conn, tenant, new_id, old_id, "supersedes", 1.0, at)
    rt.sql.memories.update_memory(conn, old_id, superseded_by=new_id)
    after: dict[str, Any] = {"superseded_by": new_id}
    if proof is not None:
        after["evidence"] = proof
    rt.sql.events.event(conn, tenant, old_id, "superseded", at, {"superseded_by": previous},
                        after)
    _concept_gives_way(rt, conn, tenant, rows[old_id], new_id, at)


def _concept_gives_way(rt: Runtime, conn: Connection, tenant: str, member: Any, new_id: str,
                       at: float) -> None:
    """A concept that merged ``member``, now superseded by ``new_id``, holds a replaced value:
    it is superseded by ``new_id`` too (an event on it names the member), so default recall
    shows its other members on their own and the current version instead, and the concept
    stays reachable with ``include_superseded``. Undone by :func:`unsupersede` of the last of
    its members still superseded."""
    concept_id = member.consolidated_into
    if concept_id is None or concept_id == new_id:
        return
    concept = rt.sql.memories.full_rows(conn, [concept_id])
    if not concept or concept[0].deleted_at is not None or concept[0].tenant != tenant \
            or concept[0].superseded_by is not None:
        return
    rt.sql.graph.upsert_relation(conn, tenant, new_id, concept_id, "supersedes", 1.0, at)
    rt.sql.memories.update_memory(conn, concept_id, superseded_by=new_id)
    rt.sql.events.event(conn, tenant, concept_id, "superseded", at,
                        {"superseded_by": concept[0].superseded_by},
                        {"superseded_by": new_id, "member": member.id})


def _concept_comes_back(rt: Runtime, conn: Connection, tenant: str, member: Any, new_id: str,
                        at: float) -> None:
    """Undo :func:`_concept_gives_way` once ``member`` is current again: the concept that
    gave way to ``new_id`` comes back unless another of its members (its ``part_of``
    relations) is still superseded."""
    concept_id = member.consolidated_into
    if concept_id is None:
        return
    concept = rt.sql.memories.row(conn, tenant, concept_id)
    if concept.superseded_by != new_id:
        return
    others = [r.src for r in rt.sql.graph.relations_of(conn, tenant, concept_id)
              if r.type == "part_of" and r.dst == concept_id and r.src != member.id]
    if any(r.superseded_by is not None for r in rt.sql.memories.full_rows(conn, others)):
        return
    rt.sql.graph.delete_relation(conn, tenant, new_id, concept_id, "supersedes")
    rt.sql.memories.update_memory(conn, concept_id, superseded_by=None)
    rt.sql.events.event(conn, tenant, concept_id, "unsuperseded", at,
                        {"superseded_by": new_id}, {"superseded_by": None, "member": member.id})


def unsupersede(rt: Runtime, tenant: str, old_id: str) -> Memory:
    """Undo the supersession of ``old_id`` (by hand or detected): ``superseded_by`` is cleared,
    the ``supersedes`` relations into it are removed (the one from the memory that superseded
    it, and any an earlier supersession left), and one
    ``unsuperseded`` event is written on ``old_id`` (before ``{"superseded_by": new_id}``,
    after ``{"superseded_by": None, "kept_apart": new_id}``). The memory comes back to recall
    (a forgotten one stays forgotten), and the pair is never superseded automatically again,
    either way round (:meth:`~mnemonia.store.events.Events.kept_apart`). Returns the memory.

    Refused, with nothing written: :class:`MemoryNotFoundError` for an id of no memory of
    ``tenant`` (another tenant's included), :class:`InvalidInputError` for a memory that is
    not superseded.
    """
    check.memory_id(old_id, "old_id")
    now = rt.now()
    with rt.writing(Changes(tenant=tenant, relations=True)) as conn:
        row = rt.sql.memories.row(conn, tenant, old_id)
        new_id = row.superseded_by
        if new_id is None:
            raise InvalidInputError(
                f"memory {old_id!r} in tenant {tenant!r} is not superseded; unsupersede "
                "undoes a supersession (engine.supersede, or one detected at ingest)")
        # every supersedes link into it: the current one, and any an earlier supersession
        # left behind (nothing supersedes a memory that is current)
        for rel in rt.sql.graph.relations_of(conn, tenant, old_id):
            if rel.type == "supersedes" and rel.dst == old_id:
                rt.sql.graph.delete_relation(conn, tenant, rel.src, old_id, "supersedes")
        rt.sql.memories.update_memory(conn, old_id, superseded_by=None)
        rt.sql.events.event(conn, tenant, old_id, "unsuperseded", to_ts(now),
                            {"superseded_by": new_id},
                            {"superseded_by": None, "kept_apart": new_id})
        _concept_comes_back(rt, conn, tenant, row, new_id, to_ts(now))
        return rt.sql.memories.memory(conn, tenant, old_id)


def forget(rt: Runtime, tenant: str, memory_id: str, *, hard: bool) -> None:
    """Soft-delete (restorable) or, with ``hard``, remove vector, rows and logs."""
    check.memory_id(memory_id)
    check.boolean(hard, "hard")
    now = rt.now()
    if not hard:
        with rt.narrowing(Changes(tenant=tenant, memories=True)) as (scope, conn):
            r = rt.sql.memories.row(conn, tenant, memory_id)
            if r.deleted_at is None:
                rt.sql.memories.update_memory(conn, memory_id, deleted_at=to_ts(now))
                rt.sql.events.event(conn, tenant, memory_id, "deleted", to_ts(now),
                                    {"deleted_at": None}, {"deleted_at": now.isoformat()})
                scope.narrow(soft_deleted(rt, conn, tenant, [memory_id]))
            else:
                scope.narrow(Changes(tenant=tenant))  # deleted already: nothing changed
        return
    with rt.exclusive():
        with rt.sql.begin() as conn:
            rt.sql.memories.row(conn, tenant, memory_id)
        purge(rt, tenant, [memory_id])


def soft_deleted(rt: Runtime, conn: Connection, tenant: str, ids: Sequence[str]) -> Changes:
    """What soft-deleting ``ids`` (committed memories of ``tenant`` this transaction just
    deleted) changed of the tenant: those memories and their entity links, which recall's
    kept entity index counts out (:class:`~mnemonia.caches.Removed`)."""
    return Changes(tenant=tenant, removed=Removed(len(ids), entity_links(rt, conn, ids)))


def entity_links(rt: Runtime, conn: Connection, ids: Sequence[str]) -> tuple[str, ...]:
    """The entity of each entity link of ``ids`` (what recall's entity index counts)."""
    links = rt.sql.graph.entity_links(conn, ids)
    return tuple(e for i in ids for e in links.get(i, ()))


def purge(rt: Runtime, tenant: str, ids: list[str]) -> None:
    """Remove memories of ``tenant`` for good: vectors, rows, logs, relations (what a hard
    ``forget`` does, for many at once). Rows are marked ``deleting`` first, so a crash
    half-way is finished by the next open."""
    if not ids:
        return
    with rt.exclusive(Changes.wholesale(tenant)) as scope:
        with rt.sql.begin() as conn:
            purged = _purged(rt, conn, tenant, ids)
            rt.sql.memories.mark_deleting(conn, ids, rt.writer, to_ts(rt.now()))
        col = rt.collection(tenant, create=False)
        if col is not None:
            rt.vectors.delete(col, ids)
        with rt.sql.begin() as conn:
            rt.sql.memories.purge(conn, tenant, ids)
            rt.sql.memories.clear_references(conn, ids)
        if purged is not None:
            scope.narrow(purged)


def _purged(rt: Runtime, conn: Connection, tenant: str, ids: Sequence[str]
            ) -> Changes | None:
    """What purging ``ids`` changes of the tenant, read before it, when each of them is a
    committed memory of the tenant or not stored at all: those not deleted and their entity
    links (counted out of recall's kept entity index, :class:`~mnemonia.caches.Removed`),
    their use events, and the links of every memory a relation joins to one of them (kept
    links of the tenant's other memories stay). ``None`` (the tenant changed wholesale) if
    any is another tenant's or an unfinished write's."""
    rows = rt.sql.memories.rows(conn, tenant, ids)
    if set(rt.sql.memories.owners(conn, ids)) != set(rows):
        return None
    active = [i for i in ids if i in rows and rows[i].deleted_at is None]
    linked = rt.sql.graph.linked_ends(conn, tenant, list(rows)) | set(rows)
    return Changes(tenant=tenant, uses=True, linked=frozenset(linked),
                   removed=Removed(len(active), entity_links(rt, conn, active)))


def restore(rt: Runtime, tenant: str, memory_id: str) -> Memory:
    """Bring back a soft-deleted memory whole."""
    now = rt.now()
    with rt.narrowing(Changes(tenant=tenant, memories=True)) as (scope, conn):
        r = rt.sql.memories.row(conn, tenant, memory_id)
        if r.deleted_at is not None:
            rt.sql.memories.update_memory(conn, memory_id, deleted_at=None)
            rt.sql.events.event(conn, tenant, memory_id, "restored", to_ts(now),
                                {"deleted_at": from_ts(r.deleted_at).isoformat()},
                                {"deleted_at": None})
            # it comes back with its entity links: counted into recall's entity index
            scope.narrow(Changes(tenant=tenant,
                                 added=Added(1, entity_links(rt, conn, [memory_id]))))
        else:
            scope.narrow(Changes(tenant=tenant))  # not deleted: nothing changed
        mem = rt.sql.memories.memory(conn, tenant, memory_id)
    return mem


def pin(rt: Runtime, tenant: str, memory_id: str, pinned: bool) -> Memory:
    """Pin (never evicted) or unpin a memory."""
    with rt.writing() as conn:
        rt.sql.memories.row(conn, tenant, memory_id)
        rt.sql.memories.update_memory(conn, memory_id, pinned=pinned)
        return rt.sql.memories.memory(conn, tenant, memory_id)


def update_metadata(rt: Runtime, tenant: str, memory_id: str,
                    patch: Mapping[str, Any]) -> Memory:
    """Merge a checked JSON-safe ``patch`` into a memory's metadata; one
    ``metadata_updated`` event with the previous and new values of the keys."""
    now = rt.now()
    with rt.writing() as conn:
        r = rt.sql.memories.row(conn, tenant, memory_id)
        before = json.loads(r.metadata)
        merged = check.metadata({**before, **patch}, max_bytes=rt.config.max_metadata_bytes,
                                max_depth=rt.config.max_metadata_depth)
        rt.sql.memories.update_memory(conn, memory_id, metadata=json.dumps(merged))
        rt.sql.events.event(conn, tenant, memory_id, "metadata_updated", to_ts(now),
                            {k: before.get(k) for k in patch}, dict(patch))
        return rt.sql.memories.memory(conn, tenant, memory_id)


# -- reads ------------------------------------------------------------------------------------
def get(rt: Runtime, tenant: str, memory_id: str, *, touch: bool = False) -> Memory:
    """The memory with that id in that tenant (deleted ones too), or MemoryNotFoundError.
    With ``touch`` the read counts as an access: like a recall hit at rank 1."""
    if not touch:
        with rt.reading() as conn:
            return rt.sql.memories.memory(conn, tenant, memory_id)
    cfg = rt.config
    with rt.writing() as conn:
        rt.sql.memories.row(conn, tenant, memory_id)
        rt.sql.events.record_access(conn, tenant, [(memory_id, 1.0)], k=1, user_id=None,
                                    at=to_ts(rt.now()), growth=cfg.stability_growth,
                                    cap=cfg.stability_cap)
        return rt.sql.memories.memory(conn, tenant, memory_id)


def list_memories(rt: Runtime, tenant: str, *, session_id: str | None, include_deleted: bool,
                  limit: int | None) -> list[Memory]:
    """A tenant's memories in insertion order (optionally one session's)."""
    check.optional_label(session_id, "session_id", 256, strip=False)
    check.boolean(include_deleted, "include_deleted")
    if limit is not None:
        check.positive_int(limit, "limit", minimum=0)
    with rt.reading() as conn:
        return rt.sql.memories.list_memories(conn, tenant, session_id=session_id,
                                             include_deleted=include_deleted, limit=limit)


def history(rt: Runtime, tenant: str, memory_id: str) -> list[Event]:
    """The audit trail of one memory, oldest first: its ``memory_events`` and, as
    ``recalled`` events, its access-log rows (every recall hit, kept in the access log so the
    recall path writes one row per hit, not two)."""
    with rt.reading() as conn:
        rt.sql.memories.row(conn, tenant, memory_id)
        events = rt.sql.events.events_of(conn, tenant, memory_id)
        recalls = rt.sql.events.recalls_of(conn, tenant, memory_id)
    merged = sorted([(e.at, 0, i, e) for i, e in enumerate(events)]
                    + [(e.at, 1, i, e) for i, e in enumerate(recalls)], key=lambda t: t[:3])
    return [e for *_, e in merged]


def relations(rt: Runtime, tenant: str, memory_id: str) -> list[Relation]:
    """Every relation from or to one memory."""
    with rt.reading() as conn:
        rt.sql.memories.row(conn, tenant, memory_id)
        return rt.sql.graph.relations_of(conn, tenant, memory_id)


def stats(rt: Runtime, tenant: str | None) -> dict[str, Any]:
    """Counts over one tenant or all of them."""
    with rt.reading() as conn:
        return rt.sql.inspect.stats(conn, tenant)
