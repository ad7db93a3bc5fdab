"""Step 2b of recall: session context. A candidate's relevance is lifted by the best
relevance among its session neighbours; the neighbours of the strongest candidates join
through the gate."""

from __future__ import annotations

import heapq

from mnemonia.recall.run import Candidates, RecallRun
from mnemonia.recall.tenant import session_neighbours
from mnemonia.scoring import activation as act

__all__ = ["CONTEXT_SOURCES", "lift"]

CONTEXT_SOURCES = 10
"""Candidates (the best fused) whose unread session neighbours are read and scored."""


def lift(run: RecallRun) -> None:
    """Step 2b: each candidate's relevance is lifted by the best relevance among the
    memories at most ``context_window`` turns from it in its session
    (:func:`mnemonia.scoring.activation.context_lift`); those neighbours are scored too and
    join the candidates (the answer often sits right after the turn that names the topic)."""
    rt, req, c, side = run.rt, run.req, run.c, run.side
    cfg = rt.config
    neighbours = cfg.context_weight > 0 and cfg.context_window > 0
    if not c.info or not (neighbours or cfg.session_weight > 0):
        return
    around: dict[str, tuple[str, ...]] = {}
    if neighbours:  # the keyword candidates' were read beside the query embedding
        around = {m: side.around[m] for m in c.info if m in side.around}
        around.update(session_neighbours(rt, run.conn, req.tenant, set(c.info) - set(around),
                                         cfg.context_window, c.rows))
    # new memories are read around the strongest candidates only
    sources = heapq.nsmallest(CONTEXT_SOURCES, [(-i.fused, c.rows[m].seq, m)
                                                for m, i in c.info.items()])
    new = sorted({n for _, _, m in sources for n in around.get(m, ())} - set(c.info))
    if new:
        run.admit(new, via="context")
    session_best = _session_best(c) if cfg.session_weight > 0 else {}
    # (the loop form of act.context_lift: the weights were checked with the config)
    infos, rows, seeds = c.info, c.rows, c.seeds
    context_weight, session_weight = cfg.context_weight, cfg.session_weight
    threshold, keep_all = cfg.initial_threshold, req.floor == 0
    relevances = {mid: info.fused for mid, info in infos.items()}  # (all >= 0)
    for mid, info in infos.items():
        best = 0.0
        for n in around.get(mid, ()):
            f = relevances.get(n)
            if f is not None and f > best:
                best = f
        info.seed = act.lift(info.fused, best, context_weight)
        if session_best:
            sid = rows[mid].session_id
            if sid in session_best:
                # the session's support counts in proportion to the turn's own relevance, so
                # a turn unrelated to the query is not lifted by a strong match in its session
                info.seed = act.lift(info.seed, session_best[sid] * info.fused, session_weight)
        if info.seed >= threshold or keep_all or run.similar(mid):
            seeds[mid] = info.seed
        else:
            seeds.pop(mid, None)


def _session_best(c: Candidates) -> dict[str, float]:
    """``{session_id: best relevance among the candidates of that session}``."""
    best: dict[str, float] = {}
    for mid, info in c.info.items():
        sid = c.rows[mid].session_id
        if sid is not None:
            best[sid] = max(best.get(sid, 0.0), info.fused)
    return best
