"""Memory priority and eviction: which memories matter least right now.

``priority = w_imp*importance + w_rec*recency + w_acc*min(1, access_count/100) + w_ret*R`` with
normalised weights (default .4/.3/.2/.1), ``recency = 1/(1 + days since created_at)`` and ``R``
the Ebbinghaus retention.

Eviction orders (:data:`EVICTION_POLICIES`, the config key ``eviction_policy``), each a sort key
over :class:`EvictionCandidate` (:func:`eviction_key`; lowest goes first):

- ``informative`` (the default): memories never used first; then those the ingest gatekeeper
  ``skipped``; then the least :func:`information` (``importance * content words *
  (1 + recency)``); ties by the older last access.
- ``unused_first``: memories never used first, then the lowest priority.
- ``composite``: the seed's priority alone, lowest first.

Ties left after a policy's own terms go to the older ``accessed_at``, then the first stored
(``seq``), then the id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
from mnemonia.scoring.activation import MIN_TOKEN_LENGTH, STOP_WORDS, words
from mnemonia.scoring.reevaluation import IMMEDIATE, SKIPPED, validate_state
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
    "content_words",
    "eviction_count",
    "eviction_key",
    "eviction_reason",
    "information",
    "is_protected",
    "priority",
    "recency",
    "select_for_eviction",
    "validate_policy",
]

ACCESS_SATURATION = 100.0
DEFAULT_EVICTION_BUDGET = 0.05
EVICTION_POLICIES = ("informative", "unused_first", "composite")
"""Eviction orders: ``informative`` (never used first, then ``skipped`` ones, then the least
:func:`information`), ``unused_first`` (never used first, then the lowest priority),
``composite`` (the seed's priority alone, lowest first)."""
DEFAULT_EVICTION_POLICY = "informative"
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
    ``uses`` counts its reported uses (``used`` events, feedback 4-5), ``content_words`` its
    distinct content words (:func:`content_words`) and ``information`` its
    :func:`information`; the ``composite`` policy reads none of the three.

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
    uses: int = 0
    content_words: int = 0
    information: float = 0.0

    def __post_init__(self) -> None:
        require_str(self.id, "id")
        require_int(self.seq, "seq", minimum=0)
        require_int(self.uses, "uses", minimum=0)
        require_int(self.content_words, "content_words", minimum=0)
        object.__setattr__(self, "priority", require_finite(self.priority, "priority"))
        info = require_finite(self.information, "information")
        if info < 0.0:
            raise InvalidInputError(f"information must be >= 0, got {shown(self.information)}")
        object.__setattr__(self, "information", info)
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


def validate_policy(policy: object) -> str:
    """Return ``policy`` if it names an eviction order of :data:`EVICTION_POLICIES`.

    Raises:
        InvalidInputError: Naming the value and the allowed names.
    """
    if not isinstance(policy, str) or policy not in EVICTION_POLICIES:
        raise InvalidInputError(
            f"eviction policy must be one of {', '.join(EVICTION_POLICIES)}, got {shown(policy)}")
    return policy


def content_words(text: str) -> int:
    """Return how many distinct content words ``text`` holds.

    Content words are the lower-cased word tokens (:func:`~mnemonia.scoring.activation.words`)
    of at least two characters that are not stop words: the gatekeeper's distinct tokens
    without the words every sentence has. "haha nice!" holds 2, "ok, see you then" 2 ("ok",
    "see"), "I moved to Lisbon in May to work for Atlas" 4 ("may" is a stop word).

    Raises:
        InvalidInputError: ``text`` is not a str.
    """
    return len({w for w in words(text) if len(w) >= MIN_TOKEN_LENGTH and w not in STOP_WORDS})


def information(*, importance: float, content_words: int, created_at: datetime,
                now: datetime) -> float:
    """Return what a memory is worth keeping for the ``informative`` eviction order.

    ``importance * content_words * (1 + recency)``, ``recency = 1/(1 + days since
    created_at)``: the information a memory holds (its distinct content words), weighed by
    how much it matters (importance) and counted up to double while it is new, so a memory
    just stored is not the first to go for being short.

    Raises:
        InvalidImportanceError: ``importance`` is not a finite number in ``[0, 1]``.
        InvalidInputError: ``content_words`` is not an int ``>= 0``.
        NaiveDatetimeError: A datetime has no timezone.
    """
    imp = require_unit(importance, "importance", InvalidImportanceError)
    n = require_int(content_words, "content_words", minimum=0)
    return imp * n * (1.0 + recency(created_at, now))


_POLICY_TERMS: dict[str, tuple[str, ...]] = {
    "composite": ("priority", "accessed_at", "seq", "id"),
    "unused_first": ("use", "priority", "accessed_at", "seq", "id"),
    "informative": ("use", "state", "information", "accessed_at", "seq", "id"),
}
"""Each policy's sort key, term by term (:func:`eviction_key`, :func:`eviction_reason`)."""


def _term(term: str, c: EvictionCandidate) -> Any:
    if term == "use":
        return c.uses > 0  # False (never used) sorts first
    if term == "state":
        return c.state != SKIPPED
    return getattr(c, term)


def eviction_key(candidate: EvictionCandidate, policy: str = "composite") -> tuple[Any, ...]:
    """Return the sort key of ``candidate`` under ``policy``: the lowest key goes first.

    - ``composite``: ``(priority, accessed_at, seq, id)``;
    - ``unused_first``: ``(used, priority, accessed_at, seq, id)``;
    - ``informative``: ``(used, not skipped, information, accessed_at, seq, id)``;

    ``used`` is ``uses > 0`` (False sorts first).

    Raises:
        InvalidInputError: ``policy`` is not one of :data:`EVICTION_POLICIES`.
    """
    return tuple(_term(t, candidate) for t in _POLICY_TERMS[validate_policy(policy)])


def _words(n: int) -> str:
    return f"{n} content word{'s' * (n != 1)}"


def _said(term: str, a: EvictionCandidate, b: EvictionCandidate) -> str:
    if term == "use":
        return f"never used (the other was used {b.uses} time{'s' * (b.uses != 1)})"
    if term == "state":
        return f"skipped by the gatekeeper (the other is {b.state})"
    if term == "information":
        return (f"less information: {a.information:.3g} ({_words(a.content_words)}, "
                f"importance {a.importance:g}) < {b.information:.3g} "
                f"({_words(b.content_words)}, importance {b.importance:g})")
    if term == "priority":
        return f"lower priority: {a.priority:.4f} < {b.priority:.4f}"
    if term == "accessed_at":
        return (f"last accessed earlier ({a.accessed_at.isoformat(timespec='seconds')} < "
                f"{b.accessed_at.isoformat(timespec='seconds')})")
    if term == "seq":
        return f"stored earlier (#{a.seq} < #{b.seq})"
    return f"id {a.id} sorts before {b.id}"


def eviction_reason(first: EvictionCandidate, then: EvictionCandidate,
                    policy: str = "composite") -> str:
    """Return why ``first`` goes before ``then`` under ``policy``, in words: the first term of
    :func:`eviction_key` where they differ ("never used (the other was used 2 times)",
    "less information: 1.5 (3 content words, importance 0.5) < 4 (...)").

    Raises:
        InvalidInputError: ``policy`` is unknown, or ``then`` goes first, or they are equal.
    """
    a, b = eviction_key(first, policy), eviction_key(then, policy)
    if not a < b:
        raise InvalidInputError(
            f"{shown(first.id)} does not go before {shown(then.id)} under {policy}")
    for term, x, y in zip(_POLICY_TERMS[policy], a, b, strict=True):
        if x != y:
            return _said(term, first, then)
    raise InvalidInputError(f"{shown(first.id)} and {shown(then.id)} have equal keys")


def select_for_eviction(
    candidates: Iterable[EvictionCandidate],
    *,
    budget: float = DEFAULT_EVICTION_BUDGET,
    count: int | None = None,
    policy: str = "composite",
) -> list[str]:
    """Return the ids to evict: the first unprotected memories in ``policy``'s order
    (:func:`eviction_key`).

    Under ``composite`` (the default here) those are the lowest-priority memories, ties broken
    by older ``accessed_at``, then by ``seq`` (the first stored), then by id. A protected
    memory is never chosen, so fewer than ``count`` ids come back when too few memories are
    unprotected.

    Args:
        candidates: All active memories of one tenant (ids must be unique).
        budget: Share of the active memories to evict, in ``(0, 1]``.
        count: How many to evict; defaults to ``eviction_count(len(candidates), budget)``.
        policy: One of :data:`EVICTION_POLICIES`.

    Returns:
        The ids to evict, first to go first.

    Raises:
        InvalidInputError: Duplicate ids, a bad ``budget``, a ``count`` that is not an int >= 0,
            or an unknown ``policy``.
    """
    name = validate_policy(policy)
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
    evictable = sorted((c for c in items if not is_protected(c)),
                       key=lambda c: eviction_key(c, name))
    return [c.id for c in evictable[:n]]
