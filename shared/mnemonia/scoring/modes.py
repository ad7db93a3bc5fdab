"""Recall modes: how similarity, confidence, recency and utility weigh in the final score.

The seed modes blend: ``score = w_sim*activation + w_conf*importance + w_rec*retention +
w_util*utility`` with the mode's weights, normalised to sum 1 (:class:`ModeWeights`).

The ``lifecycle`` mode (:class:`LifecyclePrior`) multiplies relevance by a bounded prior the
use shapes: ``score = activation * prior(uses, fails) + tie * importance``, the prior
between ``1 - fail_loss`` and ``1 + use_gain + practice_gain``, so use raises a memory, a
failed use lowers it, and time alone never takes a match's relevance away.

An optional cross-encoder rerank blends ``0.4*score + 0.6*sigmoid(logit)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from mnemonia.errors import InvalidImportanceError, InvalidInputError, UnknownModeError, shown
from mnemonia.scoring._common import check_weights, require_finite, require_int, require_unit

__all__ = [
    "MODES",
    "RERANK_SCORE_WEIGHT",
    "LifecyclePrior",
    "Mode",
    "ModeWeights",
    "final_score",
    "mode_weights",
    "practice_strength",
    "rerank_blend",
    "sigmoid",
]

RERANK_SCORE_WEIGHT = 0.4
"""Share of the pipeline score in a reranked score; the cross-encoder gets the rest."""

_FIELDS = ("sim", "conf", "rec", "util")


@dataclass(frozen=True, kw_only=True)
class ModeWeights:
    """Weights of similarity (activation), confidence (importance), recency (retention), utility.

    Normalised to sum 1 on creation: ``ModeWeights(sim=2, conf=2, rec=0, util=0).sim == 0.5``.

    Raises:
        InvalidWeightsError: A weight is negative or not finite, or all are zero; the message
            lists every violation.
    """

    sim: float
    conf: float
    rec: float
    util: float

    def __post_init__(self) -> None:
        values = check_weights([(name, getattr(self, name)) for name in _FIELDS])
        total = sum(values)
        for name, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, name, value / total)

    def normalised(self) -> ModeWeights:
        """Return weights summing to 1 (already true on creation, so ``self``)."""
        return self

    def as_tuple(self) -> tuple[float, float, float, float]:
        """Return ``(sim, conf, rec, util)``."""
        return (self.sim, self.conf, self.rec, self.util)

    @property
    def is_relevance(self) -> bool:
        """Similarity alone (nothing else needs reading)."""
        return self.conf == 0.0 and self.rec == 0.0 and self.util == 0.0

    def least_activation(self, score: float) -> float:
        """The least activation whose best possible score (every other term at 1) reaches
        ``score``; ``-inf`` when similarity has no weight."""
        if self.sim <= 0.0:
            return -math.inf
        return (score - (1.0 - self.sim)) / self.sim


_PRIOR_RANGES: Mapping[str, tuple[float, bool, float, bool]] = MappingProxyType({
    # name: (low, low open, high, high open)
    "use_gain": (0.0, False, math.inf, True), "cue_gain": (0.0, False, math.inf, True),
    "cue_threshold": (0.0, False, 1.0, True), "fail_loss": (0.0, False, 1.0, True),
    "use_scale": (0.0, True, math.inf, True), "practice_gain": (0.0, False, math.inf, True),
    "practice_half_hours": (0.0, True, math.inf, True), "tie": (0.0, False, math.inf, True),
})


@dataclass(frozen=True, kw_only=True)
class LifecyclePrior:
    """Relevance times a bounded prior that use shapes (the ``lifecycle`` mode).

    ``score = activation * prior + tie * importance`` with
    ``prior = 1 + use_gain*(1 - exp(-uses/use_scale)) + cue_gain*clamp((cue - cue_threshold)
    / (1 - cue_threshold), 0, 1) - fail_loss*(1 - exp(-fails/use_scale))
    + practice_gain*practice``:

    - ``uses``: how often the memory was reported used (``report_use``) or rated 4-5
      (``feedback``); ``fails``: how often it was rated 0-2. Reviews the scheduler estimates
      and plain recalls are not use: on LoCoMo in use they lifted whatever recall returned
      often and cost recall (docs/benchmarks/in-use.md).
    - ``cue``: the cosine between this query and the most similar query the memory was used
      for (a use cue): use counts where the question is like the one it answered. By default
      only there (``use_gain=0``, ``cue_gain=0.3``): on LoCoMo in use a lift for use
      everywhere moved used memories above the evidence of test questions that share no
      evidence with a practised one (their R@5: 74.9 without practice, 72.0 with
      ``use_gain`` 0.1 alone, 73.6 with 0.01 beside the cue, 74.4 with the cue alone), and
      a cue lift up to double (``cue_gain`` 1.0) did the same for look-alike questions about
      other turns (docs/benchmarks/in-use.md).
    - ``practice`` in ``[0, 1)``: the ACT-R base-level strength of the memory's accesses
      (:func:`practice_strength`), 0 for a memory never accessed; off by default
      (``practice_gain=0``: measured, it lifts hubs).
    - ``importance`` only breaks near-ties: it never multiplies a memory down to zero.

    The prior lies in ``[1 - fail_loss, 1 + use_gain + cue_gain + practice_gain]``: a memory's
    age alone changes nothing, and nothing it does costs more than ``fail_loss`` of its
    relevance.

    Raises:
        InvalidInputError: A gain, loss or tie is negative or not finite, ``fail_loss`` or
            ``cue_threshold`` is not in [0, 1), or ``use_scale`` / ``practice_half_hours`` is
            not positive; the message lists every violation.
    """

    use_gain: float = 0.0
    cue_gain: float = 0.3
    cue_threshold: float = 0.7
    fail_loss: float = 0.3
    use_scale: float = 2.0
    practice_gain: float = 0.0
    practice_half_hours: float = 24.0
    tie: float = 0.001

    def __post_init__(self) -> None:
        problems = []
        for name, (low, low_open, high, high_open) in _PRIOR_RANGES.items():
            v = getattr(self, name)
            number = float(v) if isinstance(v, int | float) and not isinstance(v, bool) \
                else math.nan
            if not (math.isfinite(number) and (number > low if low_open else number >= low)
                    and (number < high if high_open else number <= high)):
                interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
                problems.append(f"{name}={shown(v)}: must be a finite number in {interval}")
        if problems:
            raise InvalidInputError("; ".join(problems))

    @property
    def is_relevance(self) -> bool:
        return False

    @property
    def ceiling(self) -> float:
        """The largest prior."""
        return 1.0 + self.use_gain + self.cue_gain + self.practice_gain

    def prior(self, *, uses: int = 0, fails: int = 0, cue: float = 0.0,
              practice: float = 0.0) -> float:
        """The multiplier of relevance after ``uses`` and ``fails`` (counts >= 0), with the
        best use-cue cosine ``cue`` in [-1, 1] and ``practice`` in [0, 1]."""
        n_use = require_int(uses, "uses", minimum=0)
        n_fail = require_int(fails, "fails", minimum=0)
        c = require_finite(cue, "cue")
        p = require_unit(practice, "practice")
        t = self.cue_threshold
        return (1.0 + self.use_gain * (1.0 - math.exp(-n_use / self.use_scale))
                + self.cue_gain * min(1.0, max(0.0, (c - t) / (1.0 - t)))
                - self.fail_loss * (1.0 - math.exp(-n_fail / self.use_scale))
                + self.practice_gain * p)

    def score(self, *, activation: float, importance: float, uses: int = 0, fails: int = 0,
              cue: float = 0.0, practice: float = 0.0) -> float:
        """``activation * prior + tie * importance``."""
        a = require_finite(activation, "activation")
        imp = require_unit(importance, "importance", InvalidImportanceError)
        return self.apply(a, imp, self.prior(uses=uses, fails=fails, cue=cue, practice=practice))

    def apply(self, activation: float, importance: float, prior: float = 1.0) -> float:
        """``activation * prior + tie * importance`` without checks: the recall loop's form
        of :meth:`score` (its values are checked where they are stored; a check per
        candidate cost more than the rest of the scoring)."""
        return activation * prior + self.tie * importance

    def least_activation(self, score: float, ceiling: float | None = None) -> float:
        """The least activation whose best possible score reaches ``score``, with the
        largest prior any memory can have (``ceiling``, default :attr:`ceiling`)."""
        return (score - self.tie) / (self.ceiling if ceiling is None else ceiling)


def practice_strength(*, access_count: int, hours_since_access: float, lifetime_hours: float,
                      half_hours: float = 24.0, decay: float = 0.5) -> float:
    """ACT-R base-level strength of a memory's accesses, squashed into ``[0, 1)``.

    ``B = sum_j t_j^-d`` over the accesses (hours ago, at least 1), with Petrov's
    approximation from what a memory row keeps (count, last access, lifetime):
    ``t_last^-d + (n-1) * (L^(1-d) - t_last^(1-d)) / ((1-d) * (L - t_last))``. Returned as
    ``B / (B + half^-d)``: one access ``half_hours`` ago gives 0.5; none gives 0.
    """
    n = int(access_count)
    if n <= 0:
        return 0.0
    t_last = max(1.0, float(hours_since_access))
    life = max(t_last, float(lifetime_hours))
    total: float = t_last ** -decay
    if n > 1 and life > t_last:
        total += (n - 1) * (life ** (1 - decay) - t_last ** (1 - decay)) / (
            (1 - decay) * (life - t_last))
    elif n > 1:
        total += (n - 1) * t_last ** -decay
    ref: float = max(1.0, half_hours) ** -decay
    return total / (total + ref)


Mode = ModeWeights | LifecyclePrior
"""What a recall mode is: a seed blend or the lifecycle prior."""


def _mode(sim: float, conf: float, rec: float, util: float) -> ModeWeights:
    return ModeWeights(sim=sim, conf=conf, rec=rec, util=util)


MODES: Mapping[str, Mode] = MappingProxyType(
    {
        "lifecycle": LifecyclePrior(),
        "agent_memory": _mode(0.35, 0.20, 0.25, 0.20),
        "general": _mode(0.40, 0.30, 0.20, 0.10),
        "belief": _mode(0.30, 0.45, 0.20, 0.05),
        "procedural": _mode(0.40, 0.40, 0.15, 0.05),
        "relevance": _mode(1.0, 0.0, 0.0, 0.0),
    }
)
"""Built-in recall modes (read-only)."""


def mode_weights(name: str, extra: Mapping[str, Mode] | None = None) -> Mode:
    """Return the weights of a recall mode.

    Args:
        name: A built-in mode or one in ``extra``.
        extra: Modes registered in the config; they also override built-ins of the same name.

    Raises:
        UnknownModeError: ``name`` is not a registered mode; the message lists the allowed ones.
        InvalidInputError: A value in ``extra`` is not a :class:`ModeWeights`.
    """
    if extra is not None and name in extra:
        weights = extra[name]
        if not isinstance(weights, ModeWeights | LifecyclePrior):
            raise InvalidInputError(
                f"mode {shown(name)} must map to ModeWeights or LifecyclePrior, "
                f"got {shown(weights)}")
        return weights
    if isinstance(name, str) and name in MODES:
        return MODES[name]
    allowed = sorted({*MODES, *(extra or {})})
    raise UnknownModeError(f"unknown recall mode {shown(name)}; allowed: {', '.join(allowed)}")


def final_score(
    *,
    activation: float,
    importance: float,
    retention: float,
    utility: float,
    weights: ModeWeights,
) -> float:
    """Return ``sim*activation + conf*importance + rec*retention + util*utility``.

    Raises:
        InvalidImportanceError: ``importance`` is not a finite number in ``[0, 1]``.
        InvalidInputError: ``activation`` not finite, ``retention`` or ``utility`` not in
            ``[0, 1]``, or ``weights`` not a :class:`ModeWeights`.
    """
    if not isinstance(weights, ModeWeights):
        raise InvalidInputError(f"weights must be a ModeWeights, got {shown(weights)}")
    a = require_finite(activation, "activation")
    imp = require_unit(importance, "importance", InvalidImportanceError)
    r = require_unit(retention, "retention")
    u = require_unit(utility, "utility")
    return weights.sim * a + weights.conf * imp + weights.rec * r + weights.util * u


def sigmoid(x: float) -> float:
    """Return the logistic function of ``x`` without overflow."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def rerank_blend(score: float, logit: float) -> float:
    """Return ``0.4*score + 0.6*sigmoid(logit)`` (cross-encoder rerank).

    Raises:
        InvalidInputError: ``score`` or ``logit`` is not finite.
    """
    s = require_finite(score, "score")
    z = require_finite(logit, "logit")
    return RERANK_SCORE_WEIGHT * s + (1.0 - RERANK_SCORE_WEIGHT) * sigmoid(z)
