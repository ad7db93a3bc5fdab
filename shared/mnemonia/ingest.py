"""Writing memories: add, add_many and replace; the ingest gatekeeper; enrichment (entities,
automatic relations, SM-2 scheduling) at ingest and for the maintenance sweep.

A write is SQL row first (pending), the Chroma upsert (idempotent by id), then the SQL row
committed (DESIGN section 3), so a crash leaves nothing that :func:`mnemonia.consistency.repair`
cannot finish or undo.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia import lifecycle, updates
from mnemonia.caches import Added, Changes, Removed
from mnemonia.clock import to_ts
from mnemonia.errors import (
    InvalidInputError,
    StoreError,
    StoreWriteTakenOverError,
    WriteOutcomeUnknownError,
)
from mnemonia.keywords import store_label_vectors, store_term_vectors
from mnemonia.models import Memory
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring import reevaluation as reeval
from mnemonia.store.kv import WRITER_LEASE
from mnemonia.store.vectors import VectorCollection
from mnemonia.validation import PreparedMemory, row_embed_text

__all__ = ["NEIGHBOURS", "add", "enrich_ids", "enrich_items", "gatekeep", "replace_or_add"]

log = logging.getLogger("mnemonia")

SAME_ENTITY_LINKS = 5
"""``same_entity`` edges made per entity for a newly enriched memory."""
NEIGHBOURS = 6
"""Nearest neighbours read at ingest for novelty and ``related_to``."""
ENRICH_BATCH = 256
"""Memories enriched per transaction by :func:`enrich_ids`."""

Near = list[tuple[str, float]]


def _unique_ids(items: Sequence[PreparedMemory]) -> list[str]:
    ids = [p.id for p in items]
    if len(set(ids)) != len(ids):
        raise InvalidInputError("add_many: two items have the same id")
    return ids


def _taken(ids: Sequence[str]) -> InvalidInputError:
    """The error for explicit ids already in use. Ids are unique in the whole store, so an id
    another tenant holds is refused too, with the very same words (nothing says whose)."""
    return InvalidInputError(f"id(s) already exist: {list(ids[:5])}; ids must be unique")


def _embed_missing(rt: Runtime, items: Sequence[PreparedMemory]) -> None:
    """Embed the items that came without a vector (outside any transaction), and check that
    every vector has the embedder's dimension (before anything is written)."""
    todo = [p for p in items if p.vector is None]
    if todo:
        vecs = rt.embedder.embed_documents([p.embed_text for p in todo])
        for p, v in zip(todo, vecs, strict=True):
            p.vector = v
    dim = rt.embedder.dimension
    for p in items:
        size = 0 if p.vector is None else p.vector.shape[0]
        if size != dim:
            raise InvalidInputError(
                f"embedding of {p.id!r} has dimension {size}; the embedder "
                f"{rt.embedder.name!r} has {dim}")


def _matrix(items: Sequence[PreparedMemory]) -> np.ndarray:
    return np.stack([p.vector for p in items if p.vector is not None]).astype(np.float32)


def add(rt: Runtime, tenant: str, items: list[PreparedMemory]) -> list[Memory]:
    """Store validated new memories, all or nothing; returns them in order.

    An id already stored in the tenant with the same text is a retry of an earlier add
    (one that raised, perhaps after storing it): that memory is returned, finished first if
    its write was left half-done, never stored twice. Any other id in use is refused."""
    rt.check_open()
    ids = _unique_ids(items)
    # Embed outside any transaction: nothing is written until every vector exists. What
    # update detection reads without a vector is read meanwhile, beside the model.
    ahead = rt.aside(updates.read_ahead, rt, tenant, items) \
        if rt.config.detect_updates and any(p.vector is None for p in items) else None
    try:
        _embed_missing(rt, items)
    finally:
        if ahead is not None and ahead.exception() is not None:
            # (only a cache was being filled: detection reads everything again and reports
            # a failing store itself)
            log.debug("update detection's read-ahead failed: %r", ahead.exception())
    with rt.exclusive(Changes(tenant=tenant, memories=True)) as scope:
        with rt.reading() as conn:
            clash = rt.sql.memories.existing_ids(conn, ids)
            found = {r.id: r for r in rt.sql.memories.full_rows(conn, clash)} if clash else {}
        done = _retried(rt, tenant, items, found)
        fresh = [p for p in items if p.id not in done]
        if fresh:
            new = _add_new(rt, tenant, fresh)
            done.update((m.id, m) for m in new)
            if not found:  # only new memories (a retry may have finished an older write)
                scope.narrow(Changes(tenant=tenant, added=Added(
                    len(new), tuple(e for m in new for e in sorted(set(m.entities))))))
    return [done[i] for i in ids]


def _add_new(rt: Runtime, tenant: str, items: list[PreparedMemory]) -> list[Memory]:
    ids = [p.id for p in items]
    col = rt.collection(tenant, create=True)
    matrix = _matrix(items)
    states, neighbours = gatekeep(rt, col, items, matrix)
    mem_rows = _insert_pending(rt, tenant, items, states, neighbours, rt.now())
    try:
        rt.vectors.upsert(col, ids, matrix, [p.embed_text for p in items],
                          [{"kind": p.kind} for p in items])
    except BaseException as e:
        _take_back_or_unknown(rt, col, tenant, ids, e)
        raise
    _commit(rt, col, tenant, ids)
    return [rt.sql.memories.to_memory(r) for r in mem_rows]


def _commit(rt: Runtime, col: VectorCollection, tenant: str, ids: list[str]) -> None:
    """Mark the pending rows of ``ids`` committed (their vectors are in Chroma). If the side-
    store fails, the commit is tried once more (it may have gone through unanswered); then
    the write is taken back, and if that cannot be done either the outcome is unknown
    (:class:`WriteOutcomeUnknownError`). A row another process's repair took over makes the
    whole write undone (:class:`StoreWriteTakenOverError`)."""
    try:
        with rt.sql.begin() as conn:
            if rt.sql.memories.mark_committed(conn, ids) == len(ids):
                return
            statuses = rt.sql.memories.statuses(conn, ids)
    except StoreError as first:
        try:
            with rt.sql.begin() as conn:
                rt.sql.memories.mark_committed(conn, ids)
                statuses = rt.sql.memories.statuses(conn, ids)
        except StoreError:
            _take_back_or_unknown(rt, col, tenant, ids, first)
            raise first from None
    lost = [i for i in ids if statuses.get(i) != "committed"]
    if not lost:
        return  # committed by an earlier attempt whose answer was lost, or by a repair
    taken = StoreWriteTakenOverError(
        f"{len(lost)} of the {len(ids)} memories of this write (e.g. {lost[0]!r}) were taken "
        f"over by another process's repair while their vectors were written (this engine's "
        f"writer lease ran out: was it stalled, or cut off from the side-store for more than "
        f"{WRITER_LEASE:g} s?); the write was undone and nothing of it is stored: add again")
    _take_back_or_unknown(rt, col, tenant, ids, taken)
    raise taken


def _take_back_or_unknown(rt: Runtime, col: VectorCollection, tenant: str, ids: list[str],
                          cause: BaseException) -> None:
    """Undo a write that failed after its rows were written; if even that cannot be done,
    raise :class:`WriteOutcomeUnknownError` (from ``cause``) naming the ids."""
    try:
        _take_back(rt, col, tenant, ids)
    except StoreError as e:
        raise WriteOutcomeUnknownError(
            f"the write of {len(ids)} memories of tenant {tenant!r} failed ({cause}) and "
            f"could not be taken back ({e}): whether they are stored is unknown. Retry the "
            "same add with the same ids and texts: it is idempotent (finishes or writes them "
            f"once); ids: {ids[:5]}{' ...' if len(ids) > 5 else ''}", ids=ids) from cause


def _retried(rt: Runtime, tenant: str, items: Sequence[PreparedMemory],
             found: dict[str, Any]) -> dict[str, Memory]:
    """The memories of ``items`` already stored by an earlier attempt of the same add (same
    id, tenant and text), a half-done one finished now; raises for an id in use otherwise.
    A row left ``deleting`` (a failed attempt taken back) is removed now, and the item is
    written afresh."""
    if not found:
        return {}
    other = [p.id for p in items if p.id in found and (
        found[p.id].tenant != tenant or found[p.id].text != p.text)]
    if other:
        raise _taken(other)
    col = rt.collection(tenant, create=True)
    pending = [p for p in items if p.id in found and found[p.id].status == "pending"]
    deleting = [p.id for p in items if p.id in found and found[p.id].status == "deleting"]
    if deleting:
        rt.vectors.delete(col, deleting)
        with rt.changing(Changes.wholesale(tenant)), rt.sql.begin() as conn:
            rt.sql.memories.purge_deleting(conn, tenant, deleting)
    if pending:
        ids = [p.id for p in pending]
        rt.vectors.upsert(col, ids, _matrix(pending), [p.embed_text for p in pending],
                          [{"kind": p.kind} for p in pending])
        _commit(rt, col, tenant, ids)
    with rt.reading() as conn:
        stored = rt.sql.memories.full_rows(conn, [p.id for p in items if p.id in found
                                                  and p.id not in deleting])
    return {r.id: rt.sql.memories.to_memory(r) for r in stored}


def _take_back(rt: Runtime, col: VectorCollection, tenant: str, ids: list[str]) -> None:
    """Undo an add whose vector write failed, perhaps part way: the rows are marked
    ``deleting``, the vectors Chroma may have taken are deleted, then the rows go. If Chroma
    cannot be reached, the rows stay ``deleting`` (no read shows them) and this engine's
    close, or the next open, finishes the job, so no vector is left behind that the
    side-store does not know. Raises :class:`StoreError` when the side-store cannot mark
    them."""
    with rt.sql.begin() as conn:
        rt.sql.memories.mark_deleting(conn, ids, rt.writer, to_ts(rt.now()))
    try:
        rt.vectors.delete(col, ids)
    except StoreError as e:
        log.warning("could not take back %d vectors of tenant %s (%s); closing this engine, "
                    "or the next open, removes them", len(ids), tenant, e)
        return
    try:
        with rt.sql.begin() as conn:
            rt.sql.memories.purge_deleting(conn, tenant, ids)
    except StoreError as e:
        log.warning("could not remove %d taken-back rows of tenant %s (%s); closing this "
                    "engine, or the next open, removes them", len(ids), tenant, e)


def replace_or_add(rt: Runtime, tenant: str, items: list[PreparedMemory]) -> list[Memory]:
    """``add_many(replace=True)``: items whose id exists in the tenant replace that memory in
    place (text, vector, metadata; history, access statistics and relations stay); the new
    vector is written before the old text goes, so a failure never loses the stored version."""
    ids = _unique_ids(items)
    with rt.reading() as conn:
        found = rt.sql.memories.owners(conn, ids)
    foreign = [i for i, t in found.items() if t != tenant]
    if foreign:
        raise _taken(foreign)  # the same answer as for a clash in the tenant: no leak
    _embed_missing(rt, items)  # every vector checked before the new ones are written
    old = [p for p in items if p.id in found]
    new = [p for p in items if p.id not in found]
    done = {m.id: m for m in add(rt, tenant, new)} if new else {}
    if old:
        done.update(_replace(rt, tenant, old))
    return [done[i] for i in ids]


def _replace(rt: Runtime, tenant: str, old: list[PreparedMemory]) -> dict[str, Memory]:
    _embed_missing(rt, old)
    nowts = to_ts(rt.now())
    ids = [p.id for p in old]
    with rt.exclusive(Changes(tenant=tenant, memories=True)) as scope:
        col = rt.collection(tenant, create=True)
        rt.vectors.upsert(col, ids, _matrix(old), [p.embed_text for p in old],
                          [{"kind": p.kind} for p in old])
        with rt.sql.begin() as conn:
            prev = rt.sql.memories.rows(conn, tenant, ids)
            # each a committed memory: what recall's entity index counts changes by the
            # entity links of those not deleted, the old ones out and the new ones in
            kept = [p for p in old if p.id in prev and prev[p.id].deleted_at is None]
            relinked = None
            if len(prev) == len(old):
                added = tuple(e for p in kept for e in sorted(set(p.entities)))
                removed = lifecycle.entity_links(rt, conn, [p.id for p in kept])
                relinked = Changes(tenant=tenant, added=Added(0, added),
                                   removed=Removed(0, removed))
            rt.sql.keywords.fts_delete(conn, ids)
            rt.sql.keywords.fts_insert(conn, [(p.id, tenant, p.indexed_text) for p in old])
            rt.sql.vectors.vectors_put(conn, [(p.id, p.vector) for p in old], replace=True)
            for p in old:
                rt.sql.memories.update_memory(
                    conn, p.id, text=p.text, kind=p.kind, topic=p.topic,
                    entities=json.dumps(p.entities), importance=p.importance,
                    session_id=p.session_id, metadata=json.dumps(p.metadata), pinned=p.pinned)
                rt.sql.graph.unlink_entities(conn, p.id)
                rt.sql.graph.link_entities(conn, [dict(tenant=tenant, entity=e, memory_id=p.id)
                                                  for e in p.entities])
                r = prev.get(p.id)
                rt.sql.events.event(conn, tenant, p.id, "updated", nowts,
                                    {"text": r.text if r is not None else None}, {"text": p.text})
            store_label_vectors(rt, conn, [e for p in old for e in p.entities])
            rows = rt.sql.memories.rows(conn, tenant, ids)
        # Chroma took the new vectors before the side-store: a mirror read from the side-store
        # in between holds the old ones
        rt.vectors.refresh(col)
        if relinked is not None:
            scope.narrow(relinked)
    return {i: rt.sql.memories.to_memory(r) for i, r in rows.items()}


def _top_earlier(row: np.ndarray, i: int) -> list[int]:
    """Indices of the (at most) :data:`NEIGHBOURS` most similar of the first ``i`` items of
    ``row``: selecting them is linear in the batch, so a batch of ``b`` items costs
    ``O(b * NEIGHBOURS)`` Python work, not ``O(b^2)``."""
    if i <= NEIGHBOURS:
        return list(range(i))
    return [int(j) for j in np.argpartition(-row[:i], NEIGHBOURS - 1)[:NEIGHBOURS]]


def gatekeep(rt: Runtime, col: VectorCollection, items: Sequence[PreparedMemory], matrix: np.ndarray
             ) -> tuple[list[str], list[Near]]:
    """Gatekeeper state per item, and its nearest existing or earlier-in-batch memories."""
    ids_existing, sims_existing = rt.vectors.query(col, matrix, NEIGHBOURS)
    within = matrix @ matrix.T
    states: list[str] = []
    neighbours: list[Near] = []
    for i, p in enumerate(items):
        near = list(zip(ids_existing[i], sims_existing[i], strict=True))
        near += [(items[j].id, float(within[i, j])) for j in _top_earlier(within[i], i)]
        near.sort(key=lambda t: -t[1])
        near = near[:NEIGHBOURS]
        max_sim = near[0][1] if near else 0.0
        g = reeval.gatekeeper_score(
            importance=p.importance, novelty=min(1.0, max(0.0, 1.0 - max_sim)),
            distinct_tokens=len(act.word_tokens(p.text)))
        states.append(reeval.gatekeeper_state(
            g, immediate_threshold=rt.config.immediate_threshold,
            batch_threshold=rt.config.batch_threshold))
        neighbours.append(near)
    return states, neighbours


def _new_row(rt: Runtime, tenant: str, p: PreparedMemory, seq: int, state: str
             ) -> dict[str, Any]:
    return dict(
        id=p.id, tenant=tenant, seq=seq, text=p.text, kind=p.kind,
        topic=p.topic, entities=json.dumps(p.entities), importance=p.importance,
        created_at=p.at, accessed_at=p.at, access_count=0, stability=1.0,
        easiness=2.5, interval_days=0, repetitions=0, next_review=None,
        last_quality=0, utility=0.5, state=state, pinned=p.pinned, deleted_at=None,
        superseded_by=None, consolidated_into=None, session_id=p.session_id,
        metadata=json.dumps(p.metadata), embedding_model=rt.embedder.name,
        enriched_at=None, last_reviewed_at=None, last_reevaluated_at=None,
        heat_counter=0.0, heat_at=None, status="pending")


def _insert_pending(rt: Runtime, tenant: str, items: list[PreparedMemory], states: list[str],
                    neighbours: list[Near], now: datetime) -> list[Any]:
    nowts = to_ts(now)
    repo = rt.sql
    with repo.begin() as conn:
        seq0 = repo.collections.reserve_seq(conn, tenant, len(items), model=rt.embedder.name,
                                            dimension=rt.embedder.dimension, at=nowts)
        repo.memories.insert_memories(conn, [
            _new_row(rt, tenant, p, seq0 + i, st)
            for i, (p, st) in enumerate(zip(items, states, strict=True))])
        repo.memories.write_by(conn, [p.id for p in items], rt.writer, nowts)
        repo.vectors.vectors_put(conn, [(p.id, p.vector) for p in items])
        repo.keywords.fts_insert(conn, [(p.id, tenant, p.indexed_text) for p in items])
        repo.graph.link_entities(conn, [dict(tenant=tenant, entity=e, memory_id=p.id)
                                        for p in items for e in p.entities])
        repo.events.insert_events(conn, [repo.events.event_row(
            tenant, p.id, "created", nowts, None,
            {"state": st, "importance": p.importance, "kind": p.kind})
            for p, st in zip(items, states, strict=True)])
        enrich = [(p, near) for p, st, near in zip(items, states, neighbours, strict=True)
                  if st == reeval.IMMEDIATE]
        if enrich:
            enrich_items(rt, conn, tenant, enrich, nowts)
        store_label_vectors(rt, conn, [e for p, st in zip(items, states, strict=True)
                                       if st != reeval.IMMEDIATE for e in p.entities])
        updates.detect(rt, conn, tenant, list(zip(items, neighbours, strict=True)), nowts)
        return repo.memories.full_rows(conn, [p.id for p in items])


def _automatic_edges(rt: Runtime, conn: Any, tenant: str, p: PreparedMemory, near: Near,
                     edges: dict[tuple[str, str, str], float]) -> None:
    """``related_to`` close neighbours, ``follows`` the previous memory of the session."""
    for other, sim in near:
        if other != p.id and sim >= rt.config.related_threshold:
            edges[(p.id, other, "related_to")] = min(1.0, max(sim, 1e-6))
    if p.session_id is not None:
        prev = rt.sql.graph.previous_in_session(conn, tenant, p.session_id, p.id, p.at)
        if prev is not None:
            edges[(prev, p.id, "follows")] = 1.0


def enrich_items(rt: Runtime, conn: Any, tenant: str,
                 items: Sequence[tuple[PreparedMemory, Near]], nowts: float) -> int:
    """Entities, automatic relations and SM-2 scheduling for enriched memories; returns the
    relations added."""
    edges: dict[tuple[str, str, str], float] = {}
    new_links: list[dict[str, Any]] = []
    grown: list[dict[str, Any]] = []  # the rows whose entities grew, written in one go
    for p, near in items:
        extracted = [e for e in dict.fromkeys(rt.extract(p.text)) if e not in p.entities]
        if extracted:
            p.entities = p.entities + extracted
            new_links += [dict(tenant=tenant, entity=e, memory_id=p.id) for e in extracted]
            grown.append({"b_id": p.id, "entities": json.dumps(p.entities)})
        _automatic_edges(rt, conn, tenant, p, near, edges)
    rt.sql.memories.update_each(conn, grown, ["entities"])
    rt.sql.graph.link_entities(conn, new_links, ignore_existing=True)
    # each memory links to the first SAME_ENTITY_LINKS others of each of its entities: one
    # read per entity of the batch (a speaker's name is in most of a chat's memories), not
    # one per memory and entity (in server mode a read is a round trip)
    first: dict[str, list[str]] = {}
    for p, _ in items:
        for e in p.entities:
            if e not in first:
                first[e] = rt.sql.graph.entity_first(conn, tenant, e, SAME_ENTITY_LINKS + 1)
            for other in [m for m in first[e] if m != p.id][:SAME_ENTITY_LINKS]:
                edges.setdefault((p.id, other, "same_entity"), 0.5)
    rt.sql.memories.update_ids(conn, [p.id for p, _ in items], enriched_at=nowts)
    added = rt.sql.graph.insert_edges(conn, tenant, edges, nowts)
    store_term_vectors(rt, conn, [p.embed_text for p, _ in items])
    store_label_vectors(rt, conn, [e for p, _ in items for e in p.entities])
    return added


def _prepared_from_row(r: Any) -> PreparedMemory:
    return PreparedMemory(
        id=r.id, text=r.text, embed_text=row_embed_text(r), kind=r.kind,
        topic=r.topic, entities=list(json.loads(r.entities)),
        importance=float(r.importance), at=float(r.created_at),
        session_id=r.session_id, metadata=json.loads(r.metadata), pinned=bool(r.pinned))


def _enrich_chunk(rt: Runtime, col: VectorCollection, tenant: str, chunk: Sequence[str]
                  ) -> tuple[int, list[str]]:
    """Enrich one chunk in one transaction: ``(relations added, the entity of each entity
    link added)``."""
    with rt.reading() as conn:
        vectors = rt.candidate_vectors(conn, col, chunk)
    order = [i for i in chunk if i in vectors]
    if not order:
        return 0, []
    matrix = np.stack([vectors[i] for i in order]).astype(np.float32)
    near_ids, near_sims = rt.vectors.query(col, matrix, NEIGHBOURS + 1)
    with rt.writing() as conn:
        rows = rt.sql.memories.rows(conn, tenant, order)
        gone = set(rt.sql.memories.select_ids(conn, sorted({o for row in near_ids for o in row}),
                                              deleted=True))
        items = []
        for i, mid in enumerate(order):
            r = rows.get(mid)
            if r is None or r.deleted_at is not None or r.enriched_at is not None:
                continue
            near = [(o, float(s)) for o, s in zip(near_ids[i], near_sims[i], strict=True)
                    if o != mid and o not in gone][:NEIGHBOURS]
            items.append((_prepared_from_row(r), near))
        if not items:
            return 0, []
        known = [len(p.entities) for p, _ in items]
        # the count of inserted edges, not two COUNT(*) of the tenant's relations per chunk
        # (each a scan of the whole relation table: quadratic over a sweep)
        added = enrich_items(rt, conn, tenant, items, to_ts(rt.now()))
        # (enrichment links the entities it extracts, appended to each memory's own)
        return added, [e for (p, _), n in zip(items, known, strict=True) for e in p.entities[n:]]


def enrich_ids(rt: Runtime, tenant: str, ids: Sequence[str]) -> int:
    """Enrich stored memories (entities, related_to / same_entity / follows, SM-2 schedule);
    returns the relations added."""
    if not ids:
        return 0
    col = rt.collection(tenant, create=False)
    if col is None:
        return 0
    added = 0
    ids = list(ids)
    linked: list[str] = []
    with rt.changing(Changes(tenant=tenant, memories=True)) as scope:
        for start in range(0, len(ids), ENRICH_BATCH):
            edges, entities = _enrich_chunk(rt, col, tenant, ids[start:start + ENRICH_BATCH])
            added += edges
            linked += entities
        # it went through: stored memories (none deleted) gained entity links, nothing else
        # of the tenant's memories changed (the entity index counts them in)
        scope.narrow(Changes(tenant=tenant, added=Added(0, tuple(linked))))
    return added

