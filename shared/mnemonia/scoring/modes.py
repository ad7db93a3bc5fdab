"""Recall modes: how similarity, confidence, recency and utility weigh in the final score.

``score = w_sim*activation + w_conf*importance + w_rec*retention + w_util*utility`` with the
mode's weights, normalised to sum 1. An optional cross-encoder rerank blends
``0.4*score + 0.6*sigmoid(logit)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from mnemonia.errors import InvalidImportanceError, InvalidInputError, UnknownModeError, shown
from mnemonia.scoring._common import check_weights, require_finite, require_unit

__all__ = [
    "MODES",
    "RERANK_SCORE_WEIGHT",
    "ModeWeights",
    "final_score",
    "mode_weights",
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


def _mode(sim: float, conf: float, rec: float, util: float) -> ModeWeights:
    return ModeWeights(sim=sim, conf=conf, rec=rec, util=util)


MODES: Mapping[str, ModeWeights] = MappingProxyType(
    {
        "agent_memory": _mode(0.35, 0.20, 0.25, 0.20),
        "general": _mode(0.40, 0.30, 0.20, 0.10),
        "belief": _mode(0.30, 0.45, 0.20, 0.05),
        "procedural": _mode(0.40, 0.40, 0.15, 0.05),
        "relevance": _mode(1.0, 0.0, 0.0, 0.0),
    }
)
"""Built-in recall modes (read-only)."""


def mode_weights(name: str, extra: Mapping[str, ModeWeights] | None = None) -> ModeWeights:
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
        if not isinstance(weights, ModeWeights):
            raise InvalidInputError(
                f"mode {shown(name)} must map to ModeWeights, got {shown(weights)}")
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
