"""The recall pipeline (DESIGN section 5): dense + keyword candidates, fusion, session context,
entity seeds, bounded spreading activation, scoring by mode, hits with explanations, and the
access side effects. Scoring formulas come from the pure :mod:`mnemonia.scoring` core.

The package's rooms: :mod:`~mnemonia.recall.run` (the request, the per-call
:class:`~mnemonia.recall.run.RecallRun` and its ``admit`` gate, which every candidate source
goes through), :mod:`~mnemonia.recall.keywords` (a memory's keyword words and relevance),
:mod:`~mnemonia.recall.tenant` (what recall keeps of a tenant between calls), and the steps,
each a function of the run that imports no other step: :mod:`~mnemonia.recall.candidates`,
:mod:`~mnemonia.recall.context`, :mod:`~mnemonia.recall.entities`,
:mod:`~mnemonia.recall.spread`, :mod:`~mnemonia.recall.score`, :mod:`~mnemonia.recall.hits`.
This module runs them in order.
"""

from __future__ import annotations

from concurrent import futures

from mnemonia.models import RecallResult
from mnemonia.ranking import priority_of, weights
from mnemonia.recall import candidates, context, entities, hits, score, spread
from mnemonia.recall.run import Candidates, RecallRequest, RecallRun, SeedInfo, visible
from mnemonia.recall.score import final_score
from mnemonia.recall.spread import EDGES_PER_SOURCE
from mnemonia.recall.tenant import cue_index, entity_index, query_vector
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act

__all__ = ["EDGES_PER_SOURCE", "Candidates", "RecallRequest", "RecallRun", "SeedInfo",
           "cue_index", "entity_index", "final_score", "recall"]


def recall(rt: Runtime, req: RecallRequest) -> RecallResult:
    """Run the pipeline for a checked request."""
    col = rt.collection(req.tenant, create=False)
    if col is None:
        return RecallResult(query=req.query, tenant=req.tenant, mode=req.mode, memories=[])
    if not req.query:
        return _entity_recall(rt, req)
    qtok = act.query_tokens(req.query)
    n_dense = max(rt.config.recall_initial_candidates * 2, 2 * req.k)
    qvec = rt.caches.query_cache.get(req.query)
    if qvec is None:
        # The keyword side reads the side-store while the model embeds the query, and Chroma
        # finds the nearest neighbours while it finishes: model, Chroma and the side-store
        # release the GIL, so on two cores they overlap.
        aside = rt.aside(candidates.keyword_side, rt, req, col, qtok)
        try:
            qvec = query_vector(rt, req.query)
            exact = rt.vectors.scores(col, qvec)
            dense = candidates.nearest(rt, col, qvec, n_dense, exact)
        except BaseException:
            futures.wait([aside])
            raise
        side = aside.result()
    else:
        exact = rt.vectors.scores(col, qvec)
        dense = candidates.nearest(rt, col, qvec, n_dense, exact)
        side = candidates.keyword_side(rt, req, col, qtok)
    with rt.reading() as conn:
        run = RecallRun(rt=rt, conn=conn, req=req, col=col, qvec=qvec, qtok=qtok, side=side,
                        c=Candidates(rows=dict(side.rows), exact=exact))
        _activate(run, dense)
        found = hits.hits(rt, conn, req, list(score.ranked(run)), run.c)
    top = found[:req.k]
    top_ids = {h.memory.id for h in top}
    episodes = [h for h in found if h.memory.kind == "episode" and h.explanation.path is None
                and h.memory.id not in top_ids][:req.episode_k]
    if req.touch and top:
        hits.touch(rt, req, top)
    return RecallResult(query=req.query, tenant=req.tenant, mode=req.mode, memories=top,
                        episodes=episodes)


def _activate(run: RecallRun, dense: tuple[int, dict[str, float]]) -> None:
    """Steps 1-4: candidates and seeds, session context, use cues, entity seeds, spreading
    (only boosts and spreads that could reach the top k are worth reading)."""
    candidates.gather(run, dense)
    context.lift(run)
    score.match_cues(run)
    bound = score.spread_bound(run)
    if entities.seed(run, bound):
        bound = score.spread_bound(run)  # (new seeds can only raise it)
    spread.spread(run, bound)
    req, c = run.req, run.c
    if req.entity is not None:
        linked = run.rt.sql.graph.entity_members(run.conn, req.tenant, req.entity)
        c.activations = {m: a for m, a in c.activations.items() if m in linked}


def _entity_recall(rt: Runtime, req: RecallRequest) -> RecallResult:
    """``recall(entity=...)`` without a query: the entity's memories ranked by the lifecycle
    (the composite priority: importance, recency, access, retention)."""
    w = weights(rt.config)
    with rt.reading() as conn:
        ids = sorted(rt.sql.graph.entity_members(conn, req.tenant, req.entity or ""))
        c = Candidates(rows=rt.sql.memories.rows(conn, req.tenant, ids, where=req.where))
        shown = {i: r for i, r in c.rows.items() if i not in req.exclude_ids
                 and visible(r, req.topic, req.include_superseded)}
        ranked = sorted(((priority_of(rt.config, r, req.now, w), i) for i, r in shown.items()
                         if r.consolidated_into not in shown),
                        key=lambda t: (-t[0], shown[t[1]].seq))
        found = hits.hits(rt, conn, req, [(p, i, None) for p, i in ranked[:req.k]], c)
    if req.touch and found:
        hits.touch(rt, req, found)
    return RecallResult(query=req.query, tenant=req.tenant, mode=req.mode, memories=found)
