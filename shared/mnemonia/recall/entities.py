"""Step 3 of recall: entities the query names or resembles boost the memories linked to
them (admitted through the gate), weighted down by how much of the tenant they span."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from mnemonia.caches import EntityIndex
from mnemonia.recall.run import RecallRun
from mnemonia.recall.tenant import entity_index
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.store.database import Connection

__all__ = ["ENTITY_POOL", "MIN_ENTITY_WEIGHT", "NAME_MATCH_STRENGTH", "QUERY_ENTITIES", "seed"]

NAME_MATCH_STRENGTH = 0.5
"""Entity similarity credited when a query word names the entity."""
QUERY_ENTITIES = 4
"""Entities one query may activate (the strongest by ``s * weight``)."""
MIN_ENTITY_WEIGHT = 0.05
"""Entities linked to nearly every memory carry no signal."""
ENTITY_POOL = 5
"""Linked memories read per entity: ``entity_fanout * ENTITY_POOL``, best fused kept."""


def _by_word(idx: EntityIndex) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    if idx.by_word is None:
        by_word: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for name, label in zip(idx.names, idx.labels, strict=True):
            parts = tuple(w for w in label.split() if len(w) >= 3)
            if parts:
                by_word.setdefault(parts[0], []).append((name, parts))
        idx.by_word = by_word
    return idx.by_word


def _entity_strengths(rt: Runtime, idx: EntityIndex, qvec: np.ndarray, qtok: list[str]
                      ) -> dict[str, float]:
    """Entities the query names (every 3+ character word of the name is a query word) or
    resembles (label cosine >= ``entity_similarity_threshold``), with their strength."""
    words = {t for t in act.word_tokens(" ".join(qtok)) if len(t) >= 3}
    strength: dict[str, float] = {}
    by_word = _by_word(idx)
    for word in words:
        for name, parts in by_word.get(word, ()):
            if all(w in words for w in parts):
                strength[name] = NAME_MATCH_STRENGTH
    if idx.matrix is not None:
        sims = idx.matrix @ qvec
        for j in np.nonzero(sims >= rt.config.entity_similarity_threshold)[0]:
            name = idx.names[int(j)]
            strength[name] = max(strength.get(name, 0.0), float(sims[j]))
    return strength


def _weighted_entities(rt: Runtime, conn: Connection, tenant: str, idx: EntityIndex,
                       strength: Mapping[str, float], bound: float
                       ) -> list[tuple[float, str, float, float]]:
    """``(s*weight, name, s, weight)`` of the entities worth reading, strongest first."""
    if idx.active is None:
        idx.active = rt.sql.memories.active_count(conn, tenant)
    total = max(1, idx.active)
    weighted = []
    for name, s in strength.items():
        df = min(total, max(1, idx.df.get(name, 1)))
        weight = math.log((total + 1) / df) / math.log(total + 1)
        if weight >= MIN_ENTITY_WEIGHT and 0.8 * s * weight >= bound:
            weighted.append((s * weight, name, s, weight))
    weighted.sort(key=lambda t: (-t[0], t[1]))
    return weighted[:QUERY_ENTITIES]


def seed(run: RecallRun, bound: float = 0.0) -> bool:
    """Step 3: entities the query names or resembles boost their memories; whether any
    seed was set or raised.

    An entity's strength ``s`` is ``NAME_MATCH_STRENGTH`` when every 3+ character word of
    its name is a query word, else the cosine of its label to the query when that reaches
    ``entity_similarity_threshold``. Its weight ``ln((N+1)/df) / ln(N+1)`` (N active
    memories, df of them linked to it) discounts entities spread over much of the tenant
    (a speaker's name in a long chat); under ``MIN_ENTITY_WEIGHT`` it is ignored. The
    ``QUERY_ENTITIES`` strongest entities (by ``s*weight``) each seed at most
    ``entity_fanout`` memories, best fused first: ``seed = max(seed,
    0.8*s*importance*weight)``. An entity whose boost could not reach ``bound`` (the
    activation a memory needs to reach the top k, or the floor) is skipped.
    """
    rt, conn, tenant = run.rt, run.conn, run.req.tenant
    if rt.config.entity_fanout == 0:
        return False
    idx = entity_index(rt, conn, tenant)
    if not idx.names:
        return False
    strength = _entity_strengths(rt, idx, run.qvec, run.qtok)
    if not strength:
        return False
    boosted = False
    for _, name, s, weight in _weighted_entities(rt, conn, tenant, idx, strength, bound):
        boosted |= _boost_entity(run, (name, s, weight), bound)
    return boosted


def _boost_entity(run: RecallRun, entity: tuple[str, float, float], bound: float) -> bool:
    """Seed the best fused memories linked to one ``(name, strength, weight)`` entity
    (admitted through the gate); whether any seed was set or raised."""
    c, cfg = run.c, run.rt.config
    name, s, weight = entity
    # only memories important enough for their boost to reach the bound
    least = bound / (0.8 * s * weight)
    linked = run.rt.sql.graph.entity_members_by_importance(
        run.conn, run.req.tenant, name, least, cfg.entity_fanout * ENTITY_POOL)
    linked = run.admit(linked, via="entity")
    linked.sort(key=lambda i: (-(c.info[i].seed or c.info[i].fused), c.rows[i].seq))
    boosted = False
    for i in linked[:cfg.entity_fanout]:
        boost = 0.8 * s * c.rows[i].importance * weight
        if boost > c.seeds.get(i, 0.0) and boost >= bound:
            c.seeds[i] = boost
            c.info[i].entity = name
            boosted = True
    return boosted
