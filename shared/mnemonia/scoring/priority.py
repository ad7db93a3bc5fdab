"""Memory priority and eviction: which memories matter least right now.

``priority = w_imp*importance + w_rec*recency + w_acc*min(1, access_count/100) + w_ret*R`` with
normalised weights (default .4/.3/.2/.1), ``recency = 1/(1 + days since created_at)`` and ``R``
the Ebbinghaus retention.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from mnemonia.errors import InvalidImportanceError, InvalidInputError, InvalidWeightsError, shown
from mnemonia.scoring._common import (
    check_weights,
    days_between,
    require_aware,
    require_finite,
    require_int,
    require_str,
    require_unit,
)
from mnemonia.scoring.reevaluation import IMMEDIATE, validate_state
from mnemonia.scoring.retention import DEFAULT_HALF_LIFE, retention

__all__ = [
    "ACCESS_SATURATION",
    "DEFAULT_EVICTION_BUDGET",
    "DEFAULT_EVICTION_POLICY",
    "DEFAULT_WEIGHTS",
    "EVICTION_POLICIES",
    "PROTECTED_IMPORTANCE",
    "EvictionCandidate",
    "PriorityWeights",
    "eviction_count",
    "is_protected",
    "priority",
    "recency",
    "select_for_eviction",
]

ACCESS_SATURATION = 100.0
DEFAULT_EVICTION_BUDGET = 0.05
EVICTION_POLICIES = ("composite", "unused_first")
"""Eviction orders: ``composite`` (the seed's priority alone, lowest first), ``unused_first``
(memories never used first, each pool by that priority)."""
DEFAULT_EVICTION_POLICY = "unused_first"
PROTECTED_IMPORTANCE = 0.9
_PRIORITY_FIELDS = ("importance", "recency", "access", "retention")
_FLOAT_SLACK = 1e-9  # so that int(100 * 0.29) counts 29, not 28.999999999999996 -> 28


@dataclass(frozen=True, kw_only=True)
class PriorityWeights:
    """Weights of the four priority terms: non-negative, finite, not all zero.

    Raises:
        InvalidWeightsError: Listing every bad weight.
    """

    importance: float = 0.4
    recency: float = 0.3
    access: float = 0.2
    retention: float = 0.1

    def __post_init__(self) -> None:
        values = check_weights([(name, getattr(self, name)) for name in _PRIORITY_FIELDS])
        for name, value in zip(_PRIORITY_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def normalised(self) -> PriorityWeights:
        """Return the same weights scaled to sum to 1."""
        total = self.importance + self.recency + self.access + self.retention
        return PriorityWeights(
            importance=self.importance / total,
            recency=self.recency / total,
            access=self.access / total,
            retention=self.retention / total,
        )


DEFAULT_WEIGHTS = PriorityWeights()


def recency(created_at: datetime, now: datetime) -> float:
    """Return ``1/(1 + days since created_at)``, in ``(0, 1]`` (a future ``created_at`` is 1).

    Raises:
        NaiveDatetimeError: A datetime has no timezone.
    """
    created = require_aware(created_at, "created_at")
    current = require_aware(now, "now")
    return 1.0 / (1.0 + max(0.0, days_between(created, current)))


def priority(
    *,
    importance: float,
    created_at: datetime,
    accessed_at: datetime,
    access_count: int,
    stability: float,
    now: datetime,
    weights: PriorityWeights = DEFAULT_WEIGHTS,
    half_life: float = DEFAULT_HALF_LIFE,
) -> float:
    """Return a memory's priority, in ``[0, 1]``.

    Args:
        importance: Finite, in ``[0, 1]``.
        created_at: Creation time, timezone-aware.
        accessed_at: Last access, timezone-aware.
        access_count: An int ``>= 0``; saturates at 100.
        stability: Finite, ``> 0``.
        now: The current time, timezone-aware.
        weights: The term weights (normalised here).
        half_life: Retention half-life in seconds.

    Raises:
        InvalidImportanceError: ``importance`` is not a finite number in ``[0, 1]``.
        InvalidInputError: Another argument is out of range.
        NaiveDatetimeError: A datetime has no timezone.
    """
    if not isinstance(weights, PriorityWeights):
        raise InvalidWeightsError(f"weights must be a PriorityWeights, got {shown(weights)}")
    imp = require_unit(importance, "importance", InvalidImportanceError)
    count = require_int(access_count, "access_count", minimum=0)
    r = retention(
        accessed_at=accessed_at,
        now=now,
        importance=imp,
        stability=stability,
        half_life=half_life,
    )
    w = weights.normalised()
    value = (
        w.importance * imp
        + w.recency * recency(created_at, now)
        + w.access * min(1.0, count / ACCESS_SATURATION)
        + w.retention * r
    )
    return max(0.0, min(1.0, value))


@dataclass(frozen=True, kw_only=True)
class EvictionCandidate:
    """An active memory as eviction sees it. ``seq`` is its place in the order memories were
    stored (of equal priority and ``accessed_at``, the first stored goes first; ids, random
    uuids, decide only what ``seq`` leaves tied, so the choice is the same in every process).

    Raises:
        InvalidInputError: A field is out of range (state must be skipped/batched/immediate).
        InvalidImportanceError: ``importance`` is not a finite number in ``[0, 1]``.
        NaiveDatetimeError: ``accessed_at`` has no timezone.
    """

    id: str
    priority: float
    accessed_at: datetime
    importance: float
    pinned: bool = False
    state: str = "batched"
    seq: int = 0

    def __post_init__(self) -> None:
        require_str(self.id, "id")
        require_int(self.seq, "seq", minimum=0)
        object.__setattr__(self, "priority", require_finite(self.priority, "priority"))
        object.__setattr__(self, "accessed_at", require_aware(self.accessed_at, "accessed_at"))
        object.__setattr__(
            self, "importance", require_unit(self.importance, "importance", InvalidImportanceError)
        )
        if not isinstance(self.pinned, bool):
            raise InvalidInputError(f"pinned must be a bool, got {shown(self.pinned)}")
        validate_state(self.state)


def is_protected(candidate: EvictionCandidate) -> bool:
    """Return whether a memory may never be evicted.

    Protected: importance > 0.9, pinned, or state ``immediate``.
    """
    return (
        candidate.importance > PROTECTED_IMPORTANCE
        or candidate.pinned
        or candidate.state == IMMEDIATE
    )


def eviction_count(active: int, budget: float = DEFAULT_EVICTION_BUDGET) -> int:
    """Return how many memories one eviction run may remove: ``max(1, int(active * budget))``.

    Zero when there are no active memories.

    Raises:
        InvalidInputError: ``active`` is not an int ``>= 0`` or ``budget`` is not in ``(0, 1]``.
    """
    n = require_int(active, "active", minimum=0)
    b = require_finite(budget, "budget")
    if not 0.0 < b <= 1.0:
        raise InvalidInputError(f"budget must be in (0, 1], got {shown(budget)}")
    if n == 0:
        return 0
    return max(1, int(n * b + _FLOAT_SLACK))


def select_for_eviction(
    candidates: Iterable[EvictionCandidate],
    *,
    budget: float = DEFAULT_EVICTION_BUDGET,
    count: int | None = None,
) -> list[str]:
    """Return the ids to evict: the lowest-priority memories that are not protected.

    Ties are broken by older ``accessed_at``, then by ``seq`` (the first stored), then by id.
    A protected memory is never chosen, so fewer than ``count`` ids come back when too few
    memories are unprotected.

    Args:
        candidates: All active memories of one tenant (ids must be unique).
        budget: Share of the active memories to evict, in ``(0, 1]``.
        count: How many to evict; defaults to ``eviction_count(len(candidates), budget)``.

    Returns:
        The ids to evict, lowest priority first.

    Raises:
        InvalidInputError: Duplicate ids, a bad ``budget`` or a ``count`` that is not an int >= 0.
    """
    items = list(candidates)
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, EvictionCandidate):
            raise InvalidInputError(
                f"candidates must be EvictionCandidate objects, got {shown(item)}")
        if item.id in seen:
            raise InvalidInputError(f"candidate ids must be unique, got {shown(item.id)} twice")
        seen.add(item.id)
    default = eviction_count(len(items), budget)
    n = default if count is None else require_int(count, "count", minimum=0)
    evictable = sorted(
        (c for c in items if not is_protected(c)),
        key=lambda c: (c.priority, c.accessed_at, c.seq, c.id),
    )
    return [c.id for c in evictable[:n]]
