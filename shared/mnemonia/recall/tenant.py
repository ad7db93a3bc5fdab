"""What recall knows of a tenant, read once and kept in :class:`~mnemonia.caches.RecallCache`
until a write changes it: the query vectors, the tenant's size, its entity and cue indexes, and
its memories' links (session neighbours, contradictions and supersessions) as recall reads
them. The steps of the pipeline share these reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mnemonia import entities as ent
from mnemonia.caches import NEAR_LINKS, CueIndex, EntityIndex, Pending, Removed
from mnemonia.ranking import use_record
from mnemonia.runtime import Runtime
from mnemonia.store.database import Connection

__all__ = ["HIDDEN_RELATIONS", "cue_index", "entity_index", "hidden_links", "query_vector",
           "session_neighbours", "tenant_size"]

HIDDEN_RELATIONS = ("contradicts", "supersedes")
"""Relations a hit reports (its contradictions and supersession links)."""


def query_vector(rt: Runtime, query: str) -> np.ndarray:
    vec = rt.caches.query_cache.get(query)
    if vec is None:
        vec = rt.embedder.embed_query(query)
        rt.caches.query_cache.put(query, vec)
    return vec


def tenant_size(rt: Runtime, conn: Connection, tenant: str) -> int:
    """Active memories of the tenant (the keyword and entity weights' N), kept with the
    entity index."""
    return entity_index(rt, conn, tenant).active


def entity_index(rt: Runtime, conn: Connection, tenant: str) -> EntityIndex:
    """The tenant's entity index (names, document frequencies, label vectors, active
    memories), cached; the adds, enrichments and soft deletes that ended since it was built
    are counted in or out, so only its first recall, or one after another write of the
    tenant's memories (an import, a restore, an edit, a purge), builds it again: from the
    counts the database keeps on write (one row an entity, :mod:`mnemonia.store.kept_counts`)
    and the stored label vectors, not from the tenant's memories."""
    idx, added = rt.caches.entity_index(tenant)
    if idx is not None:
        if not added:
            return idx
        grown = _count_in(rt, conn, idx, added)
        rt.caches.keep_entity_index(tenant, idx, grown, len(added))
        return grown
    epoch = rt.caches.index_epoch(tenant)
    rows = sorted(rt.sql.graph.entity_counts(conn, tenant))  # (one order on every backend)
    active = rt.sql.memories.active_count(conn, tenant)
    names = [r[0] for r in rows]
    labels = [ent.entity_label(n) for n in names]
    idx = EntityIndex(labels=labels, names=names, df={r[0]: int(r[1]) for r in rows},
                      matrix=_label_matrix(rt, conn, labels), active=active)
    rt.caches.keep_index(rt.caches.entity_indexes, tenant, idx, epoch)
    return idx


def _label_matrix(rt: Runtime, conn: Connection, labels: list[str]) -> np.ndarray | None:
    """The label vectors of ``labels``, stacked. Label vectors outlive the index (which
    some writes drop) and are stored where entity links are written
    (:func:`~mnemonia.keywords.store_label_vectors`): labels not kept in this process are
    read, and only those with no stored vector (a store older than that, a label too long
    to store) are embedded."""
    known = rt.caches.label_vectors
    new = [lb for lb in dict.fromkeys(labels) if lb not in known]
    if new:
        known.update(rt.sql.terms.label_vectors_of(conn, rt.embedder.name, new))
        new = [lb for lb in new if lb not in known]
    if new:
        known.update(zip(new, rt.embedder.embed_documents(new), strict=True))
    return np.stack([known[lb] for lb in labels]) if labels else None


def _count_in(rt: Runtime, conn: Connection, idx: EntityIndex, added: list[Pending]
              ) -> EntityIndex:
    """``idx`` with the memories and entity links of ``added`` counted in (those of a
    :class:`Removed` counted out; an entity no memory names any more leaves the index) (a
    new index: a recall may still be using ``idx``); equal to one built afresh after those
    writes."""
    df = dict(idx.df)
    active = idx.active
    names_changed = False
    for a in added:
        step = -1 if isinstance(a, Removed) else 1
        for name in a.entities:
            had = df.get(name, 0)
            if had + step > 0:
                df[name] = had + step
            else:
                df.pop(name, None)
            names_changed = names_changed or had == 0 or had + step <= 0
        active += step * a.memories
    if not names_changed:  # the same entities: names, labels and vectors stay
        return EntityIndex(labels=idx.labels, names=idx.names, df=df, matrix=idx.matrix,
                           active=active, by_word=idx.by_word)
    names = sorted(df)
    labels = [ent.entity_label(n) for n in names]
    return EntityIndex(labels=labels, names=names, df=df, matrix=_label_matrix(rt, conn, labels),
                       active=active)


def cue_index(rt: Runtime, conn: Connection, tenant: str) -> CueIndex:
    """The tenant's use cues (the queries its memories were used for, embedded) and use
    counts, cached until the next use is recorded."""
    idx = rt.caches.cue_indexes.get(tenant)
    if idx is not None:
        return idx
    epoch = rt.caches.index_epoch(tenant)
    record = use_record(rt.sql, conn, tenant)
    ids = [mid for mid, _ in record.cues]
    queries = [q for _, q in record.cues]
    new = [q for q in dict.fromkeys(queries) if q not in rt.caches.cue_vectors]
    if new:
        rt.caches.cue_vectors.update(zip(new, (query_vector(rt, q) for q in new), strict=True))
    matrix = np.stack([rt.caches.cue_vectors[q] for q in queries]) if queries else None
    idx = CueIndex(ids=ids, queries=queries, matrix=matrix, uses=record.uses,
                   fails=record.fails)
    rt.caches.keep_index(rt.caches.cue_indexes, tenant, idx, epoch)
    return idx


def session_neighbours(rt: Runtime, conn: Connection, tenant: str, ids: set[str],
                         window: int, rows: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``{id: memories at most window turns before or after it}`` along ``follows``. Each
    memory's links, and its neighbourhood, are read once and kept (:meth:`RecallCache.links_of`)
    until a write that changes them; a memory whose row (in ``rows``) says it has no
    relations is not asked."""

    def read(ask: list[str]) -> dict[str, tuple[str, ...]]:
        got: dict[str, set[str]] = {m: set() for m in ask}
        linked = [m for m in ask if m not in rows or rows[m].has_edges]
        for src, dst, _, _ in rt.sql.graph.typed_links(conn, tenant, linked, ("follows",)) \
                if linked else ():
            if src in got:
                got[src].add(dst)
            if dst in got:
                got[dst].add(src)
        return {m: tuple(sorted(n)) for m, n in got.items()}

    def near(ask: list[str]) -> dict[str, tuple[str, ...]]:
        adjacent: dict[str, tuple[str, ...]] = {}
        frontier, seen = set(ask), set(ask)
        for _ in range(window):
            if not frontier:
                break
            adjacent.update(rt.caches.links_of(tenant, "follows", frontier, read))
            frontier = {n for m in frontier for n in adjacent[m]} - seen
            seen |= frontier
        out: dict[str, tuple[str, ...]] = {}
        for mid in ask:
            ring, found = {mid}, set[str]()
            for _ in range(window):
                ring = {n for m in ring for n in adjacent.get(m, ())} - found - {mid}
                found |= ring
            out[mid] = tuple(sorted(found))
        return out

    # a memory whose row says it has no relations has no neighbours (nothing to keep)
    alone = {m for m in ids if m in rows and not getattr(rows[m], "has_edges", True)}
    out: dict[str, tuple[str, ...]] = dict.fromkeys(alone, ())
    if len(alone) < len(ids):
        # (a neighbourhood spans several memories' links: any write of the tenant's relations
        # drops every kept one, see RecallCache.changing)
        out.update(rt.caches.links_of(tenant, f"{NEAR_LINKS}{window}", ids - alone, near))
    return out


def hidden_links(rt: Runtime, conn: Connection, tenant: str, ids: list[str]
           ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """``{id: (the memories it contradicts, those it supersedes)}``, each memory's read once
    and kept (:meth:`RecallCache.links_of`) until a write that changes its relations."""

    def read(ask: list[str]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        contra: dict[str, set[str]] = {m: set() for m in ask}
        sup: dict[str, set[str]] = {m: set() for m in ask}
        for src, dst, rtype, _ in rt.sql.graph.typed_links(conn, tenant, ask, HIDDEN_RELATIONS):
            if rtype == "contradicts":
                for one, other in ((src, dst), (dst, src)):
                    if one in contra:
                        contra[one].add(other)
            elif src in sup:
                sup[src].add(dst)
        return {m: (tuple(sorted(contra[m])), tuple(sorted(sup[m]))) for m in ask}

    if not ids:
        return {}
    return rt.caches.links_of(tenant, "hidden", ids, read)
