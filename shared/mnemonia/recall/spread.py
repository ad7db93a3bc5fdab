"""Step 4 of recall: bounded spreading activation along the relation graph (the
neighbours function :func:`mnemonia.scoring.activation.spread` calls), memories reached
passing the gate's :meth:`~mnemonia.recall.run.RecallRun.read`."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from typing import Any

from mnemonia.recall.run import RecallRun
from mnemonia.scoring import activation as act

__all__ = ["EDGES_PER_SOURCE", "spread"]

EDGES_PER_SOURCE = 16
"""Strongest relations one memory spreads along per hop."""


class _Spreader:
    """The neighbours function of :func:`mnemonia.scoring.activation.spread`: reads the
    edges of a frontier from the side-store, strongest first, within the bound."""

    def __init__(self, run: RecallRun, bound: float) -> None:
        rt = run.rt
        self.run, self.rt, self.conn, self.req, self.c = run, rt, run.conn, run.req, run.c
        self.bound = bound
        self.topics = {mid: r.topic for mid, r in run.c.rows.items()}
        spread_types = set(act.RELATION_WEIGHTS) | set(rt.type_weights)
        self.type_weight = {t: act.relation_weight(t, rt.type_weights or None)
                            for t in spread_types}
        self.symmetric = sorted(act.SYMMETRIC_RELATIONS)
        self.types = sorted(self.type_weight)
        self.decay = rt.config.spread_decay
        # the most a relation passes on is its type's weight (a strength is at most 1): a
        # memory whose activation times the strongest cannot reach the bound spreads along
        # nothing, so its edges are not read (multiplied in _choose's order, so rounding
        # cannot leave out one that _choose keeps)
        self.strongest = max(self.type_weight.values(), default=0.0)

    def seq(self, mid: str) -> int:
        """Where a memory stands among equals in spreading: the order it was stored."""
        return int(self.c.rows[mid].seq)

    def __call__(self, given: Collection[str]) -> list[act.Edge]:
        level = given if isinstance(given, Mapping) else dict.fromkeys(given, 1.0)
        rows = self.c.rows
        frontier = {m for m, a in level.items() if a * self.strongest * self.decay >= self.bound
                    and m in rows and rows[m].has_edges}
        if not frontier:
            return []
        edges = self._choose(self._spread_lists(frontier), level)
        new = [i for i in {e.dst for e in edges} | {e.src for e in edges} if i not in rows]
        # Another topic does not stop spreading: the target is reached at x cross_topic_penalty
        # (scoring.activation.spread reads the topics), so the gate ignores the topic here.
        ends = set(self.run.read({e.dst for e in edges} | {e.src for e in edges}, topic=False))
        self.topics.update({i: rows[i].topic for i in new if i in rows})
        return [e for e in edges if e.src in ends and e.dst in ends]

    def _spread_lists(self, frontier: set[str]) -> dict[str, tuple[Any, ...]]:
        """``{id: what it spreads along}`` for ``frontier``: its :data:`EDGES_PER_SOURCE`
        strongest edges of a spreading type (``Graph.edges_around``: those leaving it, and the
        strongest of the symmetric types that point at it), strongest first, as ``(-weight,
        other end, type, src, strength)``. Each memory's are read once and kept
        (:meth:`RecallCache.links_of`) until a write that changes them."""
        type_weight = self.type_weight

        def read(ask: list[str]) -> dict[str, tuple[Any, ...]]:
            got: dict[str, list[Any]] = {m: [] for m in ask}
            for n, (src, dst, rtype, strength, incoming, seq) in enumerate(
                    self.rt.sql.graph.edges_around(self.conn, self.req.tenant, ask, self.types,
                                                   self.symmetric, EDGES_PER_SOURCE)):
                tw = type_weight.get(rtype)
                if tw is None:
                    continue  # not a spreading type
                # equal weights: the other end stored first goes first (never by id), then
                # the order read (n: no two edges are equal, so the rest never compares)
                if incoming:  # a symmetric edge: its target spreads back to its source
                    got[dst].append((-strength * tw, seq, rtype, 1, n, src, src, strength))
                else:
                    got[src].append((-strength * tw, seq, rtype, 0, n, dst, src, strength))
            # only the EDGES_PER_SOURCE strongest are ever spread along (_choose)
            return {m: tuple((e[0], e[5], e[2], e[6], e[7])
                             for e in heapq.nsmallest(EDGES_PER_SOURCE, out))
                    for m, out in got.items()}

        return self.rt.caches.links_of(self.req.tenant, "spread", frontier, read)

    def _choose(self, lists: Mapping[str, tuple[Any, ...]], level: Mapping[str, float]
                ) -> list[act.Edge]:
        """Each frontier memory spreads along its EDGES_PER_SOURCE strongest edges only,
        so a hub (a memory many others link to) costs no more than any other memory; and
        only along those whose spread can reach the bound (a list is strongest first, so
        the first that cannot ends it)."""
        decay, bound = self.decay, self.bound
        chosen: dict[tuple[str, str, str], act.Edge] = {}
        for source, out in lists.items():
            a = level[source]
            for nw, other, rtype, src, strength in out[:EDGES_PER_SOURCE]:
                if a * -nw * decay < bound:
                    break
                dst = other if src == source else source
                if (src, dst, rtype) not in chosen:
                    chosen[(src, dst, rtype)] = act.Edge(src=src, dst=dst, type=rtype,
                                                         strength=strength)
        return list(chosen.values())


def spread(run: RecallRun, bound: float) -> None:
    """Spread the seeds' activation ``spread_depth`` hops: only the ``spread_frontier`` most
    activated memories spread per hop, each along its :data:`EDGES_PER_SOURCE` strongest
    relations, and only where the spread value could still matter (reach the top k, or pass
    the floor: ``bound``)."""
    cfg, c = run.rt.config, run.c
    spreader = _Spreader(run, bound)
    c.activations = act.spread(
        c.seeds, spreader, depth=cfg.spread_depth, decay=cfg.spread_decay,
        type_weights=run.rt.type_weights or None, topics=spreader.topics,
        query_topic=run.req.topic, cross_topic_penalty=cfg.cross_topic_penalty,
        max_frontier=cfg.spread_frontier, order=spreader.seq)
