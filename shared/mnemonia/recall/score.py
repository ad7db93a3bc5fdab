"""Step 5 of recall: each activated memory's final score by the request's mode (the
lifecycle prior with its use cues, or the weighted blend), the floor, concepts over their
members, the optional cross-encoder, and the spreading bound the scores imply."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia.clock import to_ts
from mnemonia.ranking import retention_of
from mnemonia.recall.run import Candidates, RecallRequest, RecallRun
from mnemonia.recall.tenant import cue_index
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring import modes as modes_mod
from mnemonia.scoring import questions, statements
from mnemonia.validation import row_speaker

__all__ = ["final_score", "match_cues", "practice_of", "ranked", "spread_bound"]


def spread_bound(run: RecallRun) -> float:
    """The least spread activation that can still change what ``recall`` returns.

    Below the floor a memory is dropped anyway. And since spreading only raises
    activations, the k-th best seed score is a floor for the k-th best final score; a
    memory whose activation ``a`` gives at most ``w_sim*a + (1 - w_sim)`` (the lifecycle
    mode: ``a*ceiling + tie``) cannot beat it, so activations under the mode's
    ``least_activation(kth)`` need not be spread at all.
    """
    rt, c, req = run.rt, run.c, run.req
    weights, k = req.weights, req.k
    if req.entity is not None or (isinstance(weights, modes_mod.ModeWeights)
                                  and weights.sim <= 0):
        return req.floor
    score, rows = _scorer(rt, req, c), c.rows
    scores = sorted([score(m, a) for m, a in c.seeds.items()
                     if m in rows and rows[m].consolidated_into is None], reverse=True)
    if len(scores) < k:
        return req.floor
    if isinstance(weights, modes_mod.LifecyclePrior):
        return max(req.floor, weights.least_activation(scores[k - 1], _ceiling(weights, c)))
    return max(req.floor, weights.least_activation(scores[k - 1]))


def _ceiling(weights: modes_mod.LifecyclePrior, c: Candidates) -> float:
    """The largest prior of this recall: 1 where nothing was used (the bound is then as
    tight as relevance's), else the best used memory's prior for this query."""
    cues = c.cues
    if cues is None or not cues.uses:
        return 1.0 + weights.practice_gain
    # the prior grows with uses and cue: without a cue match the most used memory has the
    # largest; the few with one are checked each
    best = weights.prior(uses=max(cues.uses.values()), practice=1.0)
    return max([best, *(weights.prior(uses=cues.uses.get(mid, 0), cue=sim, practice=1.0)
                        for mid, sim in c.cue_sims.items())])


def match_cues(run: RecallRun) -> None:
    """Step 3b (lifecycle mode): the tenant's use cues and counts, and the best cue cosine
    with this query of each used memory that has a cue over ``cue_threshold`` (a lower one
    does not move its prior)."""
    weights, c = run.req.weights, run.c
    if not isinstance(weights, modes_mod.LifecyclePrior):
        return
    idx = c.cues = cue_index(run.rt, run.conn, run.req.tenant)
    if idx.matrix is None:
        return
    sims = idx.matrix @ run.qvec
    for j in np.nonzero(sims > weights.cue_threshold)[0].tolist():
        mid, sim = idx.ids[j], float(sims[j])
        if sim > c.cue_sims.get(mid, -1.0):
            c.cue_sims[mid] = sim


def practice_of(r: Any, now: datetime, half_hours: float) -> float:
    """The ACT-R strength of a memory row's accesses (0 when never accessed)."""
    if not r.access_count:
        return 0.0
    nowts = to_ts(now)
    return modes_mod.practice_strength(
        access_count=int(r.access_count), hours_since_access=(nowts - r.accessed_at) / 3600.0,
        lifetime_hours=(nowts - r.created_at) / 3600.0, half_hours=half_hours)


def final_score(rt: Runtime, r: Any, activation: float, weights: modes_mod.Mode,
                now: datetime, c: Candidates | None = None) -> float:
    """The mode's final score of one memory row at ``activation`` (``c``: the recall's use
    counts and cue matches, for the lifecycle mode)."""
    if isinstance(weights, modes_mod.LifecyclePrior):
        return weights.apply(min(1.0, activation), float(r.importance),
                             _prior(r, weights, now, c))
    if weights.is_relevance:
        return weights.sim * min(1.0, activation)  # relevance: nothing else to read
    R = retention_of(rt.config, r, now) if weights.rec > 0.0 else 0.0
    return modes_mod.final_score(activation=min(1.0, activation), importance=r.importance,
                                 retention=R, utility=r.utility, weights=weights)


def _scored(rt: Runtime, req: RecallRequest, c: Candidates, mid: str, activation: float
            ) -> float:
    """:func:`final_score` of a candidate in this recall, kept by activation (the spreading
    bound asks for every seed twice, and the ranking again for most of them)."""
    kept = c.scores.get(mid)
    if kept is not None and kept[0] == activation:
        return kept[1]
    score = final_score(rt, c.rows[mid], activation, req.weights, req.now, c)
    if c.cues is not None or not isinstance(req.weights, modes_mod.LifecyclePrior):
        c.scores[mid] = (activation, score)  # (the lifecycle prior: once the cues are known)
    return score


def _scorer(rt: Runtime, req: RecallRequest, c: Candidates) -> Callable[[str, float], float]:
    """``score(id, activation)``: a candidate's final score in this recall. The lifecycle
    mode's (the default) is computed here, each memory's prior once (known once the cues are
    matched); the other modes' by :func:`_scored`, kept per activation."""
    weights = req.weights
    if not isinstance(weights, modes_mod.LifecyclePrior) or c.cues is None:
        return functools.partial(_scored, rt, req, c)
    rows, priors, now = c.rows, c.priors, req.now

    def score(mid: str, activation: float) -> float:
        r = rows[mid]
        prior = priors.get(mid)
        if prior is None:
            prior = priors[mid] = _prior(r, weights, now, c)
        return weights.apply(min(1.0, activation), float(r.importance), prior)

    return score


def _prior(r: Any, weights: modes_mod.LifecyclePrior, now: datetime, c: Candidates | None
           ) -> float:
    """The lifecycle mode's prior of one memory row in this recall (its uses, failures, cue
    match and practice)."""
    practice = practice_of(r, now, weights.practice_half_hours) \
        if weights.practice_gain > 0 else 0.0
    if c is not None and c.cues is not None and (r.id in c.cues.uses or r.id in c.cues.fails):
        return weights.prior(uses=c.cues.uses.get(r.id, 0), fails=c.cues.fails.get(r.id, 0),
                             cue=c.cue_sims.get(r.id, 0.0), practice=practice)
    # never used: the prior is 1 (with practice off)
    return weights.prior(practice=practice) if practice else 1.0


def ranked(run: RecallRun) -> list[tuple[float, str, act.Activation]]:
    """Activated memories over the floor (or as similar to the query as ``min_similarity``)
    by final score: the top ``k``, then the first
    ``episode_k`` direct episode hits; members whose concept is present give way to it."""
    rt, req, c = run.rt, run.req, run.c
    rows, score, floor = c.rows, _scorer(rt, req, c), req.floor
    prelim = [(score(mid, a.value), mid, a) for mid, a in c.activations.items()
              if (a.value >= floor or run.similar(mid)) and mid in rows]
    prelim.sort(key=lambda t: (-t[0], rows[t[1]].seq))  # equal scores: first stored first
    present = {mid for _, mid, _ in prelim}
    prelim = [t for t in prelim if rows[t[1]].consolidated_into not in present]
    if rt.config.slot_weight > 0 and prelim and req.query:
        prelim = _by_slot(rt, req, c, prelim)
    if rt.reranker is not None and prelim:
        prelim = _rerank(rt, req, c, prelim)
    extra = [t for t in prelim[req.k:] if rows[t[1]].kind == "episode"
             and not (t[2].source and t[2].relation)][:req.episode_k]
    return prelim[:req.k] + extra


SLOT_HEAD = 10
"""Hits read for the question's slot beyond ``2*k``: the best ``max(2*k, SLOT_HEAD)``."""


def _by_slot(rt: Runtime, req: RecallRequest, c: Candidates,
             prelim: list[tuple[float, str, act.Activation]]
             ) -> list[tuple[float, str, act.Activation]]:
    """For a question about one person's one-valued slot ("who is Datour's manager?"):
    the best hits that state a value of that slot (:func:`~mnemonia.scoring.questions.agreement`)
    score ``1 + slot_weight`` times higher; then, of those, the later statements take the
    better places (a version detection did not catch ranks below the one that replaced
    it). The rest keep their order."""
    question = questions.asked(req.query)
    if not question.slot:
        return prelim
    n = max(2 * req.k, SLOT_HEAD)
    head, tail = prelim[:n], prelim[n:]
    w, rows = rt.config.slot_weight, c.rows
    slots: dict[str, str] = {}
    scored = []
    for score, mid, a in head:
        r = rows[mid]
        _, slot = questions.agreement(question, statements.analyse(r.text, row_speaker(r)))
        if slot is not None:
            slots[mid] = slot
        scored.append((score * (1.0 + w) if slot is not None else score, mid, a))
    scored.sort(key=lambda t: (-t[0], rows[t[1]].seq))
    for slot in set(slots.values()):
        places = [i for i, t in enumerate(scored) if slots.get(t[1]) == slot]
        if len(places) > 1:
            newest = sorted((scored[i] for i in places),
                            key=lambda t: (-rows[t[1]].created_at, -rows[t[1]].seq))
            for j, t in zip(places, newest, strict=True):
                scored[j] = (scored[j][0], t[1], t[2])
    return scored + tail


def _rerank(rt: Runtime, req: RecallRequest, c: Candidates,
            prelim: list[tuple[float, str, act.Activation]]
            ) -> list[tuple[float, str, act.Activation]]:
    """The cross-encoder re-scores the best ``rerank_candidates`` (at least ``k``):
    ``0.4*score + 0.6*sigmoid(logit)``; the rest keep their order after them."""
    n = max(req.k, rt.config.rerank_candidates)
    head, tail = prelim[:n], prelim[n:]
    logits = rt.reranker(req.query, [c.rows[mid].text for _, mid, _ in head])  # type: ignore[misc]
    blended = [(modes_mod.rerank_blend(score, logit), mid, a)
               for (score, mid, a), logit in zip(head, logits, strict=True)]
    for (_, mid, _), logit in zip(head, logits, strict=True):
        c.logits[mid] = logit
    blended.sort(key=lambda t: (-t[0], c.rows[t[1]].seq))
    return blended + tail
