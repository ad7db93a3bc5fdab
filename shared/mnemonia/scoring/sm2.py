"""SM-2 spaced repetition: when a memory should be reviewed again, and how useful it proved.

Pure: ``now`` is always passed in, updates return ``(new_state, event)`` and mutate nothing.

Example:
    >>> from datetime import datetime, timezone
    >>> now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    >>> state = SM2State()
    >>> for q in (4, 5, 5, 1):
    ...     state, event = review(state, q, now)
    ...     print(state.interval_days, state.repetitions)
    1 1
    6 2
    15 3
    1 0
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from mnemonia.errors import InvalidInputError, InvalidQualityError, shown
from mnemonia.scoring._common import (
    clamp,
    days_between,
    require_aware,
    require_finite,
    require_int,
    require_unit,
)

__all__ = [
    "DEFAULT_EASINESS",
    "FAILED_INTERVAL_DAYS",
    "FIRST_INTERVAL_DAYS",
    "MAX_EASINESS",
    "MAX_INTERVAL_DAYS",
    "MAX_QUALITY",
    "MIN_EASINESS",
    "MIN_QUALITY",
    "PASSING_QUALITY",
    "PRIORITY_HORIZON_DAYS",
    "REPETITIONS_SATURATION",
    "SECOND_INTERVAL_DAYS",
    "UTILITY_GAIN",
    "UTILITY_LOSS",
    "ReviewEvent",
    "SM2State",
    "UtilityEvent",
    "is_due",
    "priority",
    "review",
    "update_utility",
    "validate_quality",
]

DEFAULT_EASINESS = 2.5
MIN_EASINESS = 1.3
MAX_EASINESS = 2.5
MIN_QUALITY = 0
MAX_QUALITY = 5
PASSING_QUALITY = 3
FIRST_INTERVAL_DAYS = 1
SECOND_INTERVAL_DAYS = 6
FAILED_INTERVAL_DAYS = 1
MAX_INTERVAL_DAYS = 36500
"""Longest interval (100 years): reviews given more often than scheduled multiply the interval
by the easiness each time, and an uncapped interval overflows the calendar."""
PRIORITY_HORIZON_DAYS = 30.0
REPETITIONS_SATURATION = 10.0
UTILITY_GAIN = 0.05
UTILITY_LOSS = 0.02


@dataclass(frozen=True, kw_only=True)
class SM2State:
    """The SM-2 schedule of one memory.

    Attributes:
        easiness: Easiness factor, in ``[1.3, 2.5]``.
        interval_days: Days between the last review and the next one (0 before any review).
        repetitions: Consecutive successful reviews (quality >= 3).
        next_review: When the memory is due again, timezone-aware (stored in UTC);
            ``None`` means due now.
        last_quality: Quality of the last review, 0..5 (0 before any review).

    Raises:
        InvalidInputError: A field is out of range or of the wrong type.
        NaiveDatetimeError: ``next_review`` has no timezone.
    """

    easiness: float = DEFAULT_EASINESS
    interval_days: int = 0
    repetitions: int = 0
    next_review: datetime | None = None
    last_quality: int = 0

    def __post_init__(self) -> None:
        easiness = require_finite(self.easiness, "easiness")
        if not MIN_EASINESS <= easiness <= MAX_EASINESS:
            raise InvalidInputError(
                f"easiness must be in [{MIN_EASINESS}, {MAX_EASINESS}], got {shown(self.easiness)}"
            )
        object.__setattr__(self, "easiness", easiness)
        require_int(self.interval_days, "interval_days", minimum=0)
        require_int(self.repetitions, "repetitions", minimum=0)
        validate_quality(self.last_quality)
        if self.next_review is not None:
            object.__setattr__(self, "next_review", require_aware(self.next_review, "next_review"))


@dataclass(frozen=True, kw_only=True)
class ReviewEvent:
    """What one review did: the quality, when, and the state before and after."""

    quality: int
    at: datetime
    before: SM2State
    after: SM2State


@dataclass(frozen=True, kw_only=True)
class UtilityEvent:
    """What one utility update did: the quality and the utility before and after."""

    quality: int
    before: float
    after: float


def validate_quality(q: object) -> int:
    """Return ``q`` if it is an SM-2 quality: an int in 0..5 (not a bool, not a float).

    Raises:
        InvalidQualityError: ``q`` is anything else.
    """
    return require_int(
        q, "quality", minimum=MIN_QUALITY, maximum=MAX_QUALITY, error=InvalidQualityError
    )


def _next_easiness(easiness: float, quality: int) -> float:
    miss = MAX_QUALITY - quality
    return clamp(easiness + 0.1 - miss * (0.08 + miss * 0.02), MIN_EASINESS, MAX_EASINESS)


def review(state: SM2State, quality: int, now: datetime) -> tuple[SM2State, ReviewEvent]:
    """Apply one SM-2 review.

    ``easiness' = clamp(e + 0.1 - (5-q)*(0.08 + (5-q)*0.02), 1.3, 2.5)``. A failed review
    (q < 3) resets repetitions to 0 with a 1-day interval. A success increments repetitions;
    the interval is 1 day on the first success, 6 on the second, then
    ``round(previous_interval * easiness')`` (Python's ``round``; at least 1 day, at most
    ``MAX_INTERVAL_DAYS``).

    Args:
        state: The current schedule (not modified).
        quality: An int in 0..5.
        now: The time of the review, timezone-aware.

    Returns:
        The new state and a :class:`ReviewEvent`.

    Raises:
        InvalidQualityError: ``quality`` is not an int in 0..5.
        NaiveDatetimeError: ``now`` has no timezone.
    """
    q = validate_quality(quality)
    at = require_aware(now, "now")
    easiness = _next_easiness(state.easiness, q)
    if q < PASSING_QUALITY:
        repetitions = 0
        interval = FAILED_INTERVAL_DAYS
    else:
        repetitions = state.repetitions + 1
        if repetitions == 1:
            interval = FIRST_INTERVAL_DAYS
        elif repetitions == 2:
            interval = SECOND_INTERVAL_DAYS
        else:
            interval = min(MAX_INTERVAL_DAYS, max(1, round(state.interval_days * easiness)))
    after = SM2State(
        easiness=easiness,
        interval_days=interval,
        repetitions=repetitions,
        next_review=at + timedelta(days=interval),
        last_quality=q,
    )
    return after, ReviewEvent(quality=q, at=at, before=state, after=after)


def is_due(state: SM2State, now: datetime) -> bool:
    """Return whether the memory is due: ``next_review`` is ``None`` or not after ``now``.

    Raises:
        NaiveDatetimeError: ``now`` has no timezone.
    """
    at = require_aware(now, "now")
    return state.next_review is None or state.next_review <= at


def priority(state: SM2State, now: datetime) -> float:
    """Return the review priority of a memory, in ``[0, 1]`` (higher = review sooner).

    ``overdue_days`` is the fractional number of days since ``next_review`` (0 when not yet
    due or never scheduled). ``p = min(1, (overdue_days + 1)/30)``, then
    ``p = .6p + .4(2.5 - easiness)/1.2``, then ``p = .7p + .3(1 - min(1, repetitions/10))``.

    Raises:
        NaiveDatetimeError: ``now`` has no timezone.
    """
    at = require_aware(now, "now")
    overdue = 0.0 if state.next_review is None else max(0.0, days_between(state.next_review, at))
    p = min(1.0, (overdue + 1.0) / PRIORITY_HORIZON_DAYS)
    p = 0.6 * p + 0.4 * (MAX_EASINESS - state.easiness) / (MAX_EASINESS - MIN_EASINESS)
    p = 0.7 * p + 0.3 * (1.0 - min(1.0, state.repetitions / REPETITIONS_SATURATION))
    return clamp(p, 0.0, 1.0)


def update_utility(utility: float, quality: int) -> tuple[float, UtilityEvent]:
    """Update a memory's utility after a review.

    Quality >= 3 adds ``0.05*q/5``; lower quality subtracts ``0.02*(3-q)``; the result is
    clamped to ``[0, 1]``.

    Args:
        utility: The current utility, finite in ``[0, 1]``.
        quality: An int in 0..5.

    Returns:
        The new utility and a :class:`UtilityEvent`.

    Raises:
        InvalidQualityError: ``quality`` is not an int in 0..5.
        InvalidInputError: ``utility`` is not a finite number in ``[0, 1]``.
    """
    q = validate_quality(quality)
    before = require_unit(utility, "utility")
    if q >= PASSING_QUALITY:
        after = before + UTILITY_GAIN * q / MAX_QUALITY
    else:
        after = before - UTILITY_LOSS * (PASSING_QUALITY - q)
    after = clamp(after, 0.0, 1.0)
    return after, UtilityEvent(quality=q, before=before, after=after)
