"""Ebbinghaus retention: memories fade without use and strengthen with it.

``R = exp(-t/S)`` with ``t`` the seconds since the last access and
``S = half_life * importance * stability``. Each access multiplies stability by 1.5 (cap 100).

Example:
    >>> from datetime import datetime, timedelta, timezone
    >>> now = datetime(2025, 1, 2, tzinfo=timezone.utc)
    >>> round(retention(accessed_at=now - timedelta(days=1), now=now,
    ...                 importance=0.8, stability=1.0), 4)
    0.2865
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from mnemonia.errors import InvalidImportanceError, InvalidInputError, shown
from mnemonia.scoring._common import (
    require_aware,
    require_finite,
    require_int,
    require_positive,
    require_unit,
)

__all__ = [
    "DEFAULT_HALF_LIFE",
    "DEFAULT_STABILITY",
    "STABILITY_CAP",
    "STABILITY_GROWTH",
    "AccessEvent",
    "AccessState",
    "access",
    "reinforce",
    "retained",
    "retention",
]

DEFAULT_HALF_LIFE = 86400.0
"""Seconds; the ``retention_half_life`` default (strictly the e-folding time at S = 1)."""
DEFAULT_STABILITY = 1.0
STABILITY_GROWTH = 1.5
STABILITY_CAP = 100.0


def retention(
    *,
    accessed_at: datetime,
    now: datetime,
    importance: float,
    stability: float,
    half_life: float = DEFAULT_HALF_LIFE,
) -> float:
    """Return how much of a memory is retained, in ``[0, 1]``.

    Args:
        accessed_at: Last access, timezone-aware. A time after ``now`` counts as ``t = 0``.
        now: The current time, timezone-aware.
        importance: Finite, in ``[0, 1]``; 0 gives ``R = 0``.
        stability: Finite, ``> 0``.
        half_life: Seconds, finite, ``> 0``.

    Returns:
        ``exp(-t / (half_life * importance * stability))``.

    Raises:
        InvalidImportanceError: ``importance`` is not a finite number in ``[0, 1]``.
        InvalidInputError: ``stability`` or ``half_life`` is not a finite number ``> 0``.
        NaiveDatetimeError: A datetime has no timezone.
    """
    accessed = require_aware(accessed_at, "accessed_at")
    current = require_aware(now, "now")
    imp = require_unit(importance, "importance", InvalidImportanceError)
    stab = require_positive(stability, "stability")
    hl = require_positive(half_life, "half_life")
    return retained((current - accessed).total_seconds(), imp, stab, hl)


def retained(elapsed: float, importance: float, stability: float, half_life: float) -> float:
    """:func:`retention` without checks, from the seconds since the last access (a negative
    count, an access after now, is 0): the recall loop's form (a stored memory's values were
    checked when written; the checks cost more than the formula)."""
    if importance == 0.0:
        return 0.0
    elapsed = max(0.0, elapsed)
    strength = half_life * importance * stability
    if strength <= 0.0:  # the product underflowed (importance ~1e-300): as good as importance 0
        return 0.0 if elapsed > 0.0 else 1.0
    return math.exp(-elapsed / strength)


def reinforce(
    stability: float,
    *,
    growth: float = STABILITY_GROWTH,
    cap: float = STABILITY_CAP,
) -> float:
    """Return the stability after one access: ``min(cap, stability * growth)``.

    Raises:
        InvalidInputError: ``stability`` or ``cap`` is not finite and ``> 0``, or ``growth`` is
            not finite and ``>= 1``.
    """
    stab = require_positive(stability, "stability")
    grow = require_finite(growth, "growth")
    if grow < 1.0:
        raise InvalidInputError(f"growth must be a finite number >= 1, got {shown(growth)}")
    limit = require_positive(cap, "cap")
    return min(limit, stab * grow)


class AccessState(NamedTuple):
    """The access-related fields of a memory after an access.

    A ``NamedTuple`` rather than a dataclass on purpose: it is immutable, has named fields, and
    still unpacks as ``(stability, access_count)``.
    """

    stability: float
    access_count: int


@dataclass(frozen=True, kw_only=True)
class AccessEvent:
    """What one access did (``at`` is also the new ``accessed_at``)."""

    at: datetime
    stability_before: float
    stability_after: float
    access_count_before: int
    access_count_after: int


def access(
    *,
    stability: float,
    access_count: int,
    now: datetime,
    growth: float = STABILITY_GROWTH,
    cap: float = STABILITY_CAP,
) -> tuple[AccessState, AccessEvent]:
    """Record one access: ``access_count + 1`` and stability reinforced.

    The new ``accessed_at`` is ``now`` (``event.at``).

    Args:
        stability: Current stability, finite ``> 0``.
        access_count: Current access count, an int ``>= 0``.
        now: Time of the access, timezone-aware.
        growth: Stability multiplier per access.
        cap: Stability cap.

    Returns:
        The new :class:`AccessState` and an :class:`AccessEvent`.

    Raises:
        InvalidInputError: A number is out of range.
        NaiveDatetimeError: ``now`` has no timezone.
    """
    at = require_aware(now, "now")
    count = require_int(access_count, "access_count", minimum=0)
    before = require_positive(stability, "stability")
    after = reinforce(before, growth=growth, cap=cap)
    event = AccessEvent(
        at=at,
        stability_before=before,
        stability_after=after,
        access_count_before=count,
        access_count_after=count + 1,
    )
    return AccessState(stability=after, access_count=count + 1), event
