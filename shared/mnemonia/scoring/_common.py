"""Private validation helpers shared by the scoring modules.

Standard library only. These helpers never read a clock: every ``now`` is passed in by the caller.
``bool`` is never accepted where a number is expected (``True`` is an ``int`` to Python, not to
us), and NaN or infinity is always an error.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from datetime import UTC, datetime

from mnemonia.errors import InvalidInputError, InvalidWeightsError, NaiveDatetimeError, shown

__all__ = [
    "SECONDS_PER_DAY",
    "check_weights",
    "clamp",
    "days_between",
    "require_aware",
    "require_finite",
    "require_int",
    "require_positive",
    "require_str",
    "require_unit",
]

SECONDS_PER_DAY = 86400.0


def clamp(value: float, low: float, high: float) -> float:
    """Return ``value`` limited to ``[low, high]``."""
    return max(low, min(high, value))


def require_aware(value: object, name: str) -> datetime:
    """Return ``value`` converted to UTC, or raise if it is not a timezone-aware datetime.

    Converting to UTC keeps arithmetic exact: Python subtracts two datetimes that share a
    ``tzinfo`` on wall-clock time, which is wrong across a daylight-saving change.

    Args:
        value: The candidate datetime.
        name: The argument name used in the error message.

    Raises:
        NaiveDatetimeError: ``value`` is a datetime without a timezone.
        InvalidInputError: ``value`` is not a datetime at all.
    """
    if not isinstance(value, datetime):
        raise InvalidInputError(
            f"{name} must be a timezone-aware datetime, got {shown(value)} ({type(value).__name__})"
        )
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise NaiveDatetimeError(
            f"{name} must be timezone-aware (e.g. datetime.now(timezone.utc)), "
            f"got naive {shown(value)}"
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. datetime.max at UTC-14: past year 9999 in UTC
        raise InvalidInputError(
            f"{name}={shown(value)} is outside the range of datetimes in UTC (years 1-9999)"
        ) from None


def require_finite(
    value: object,
    name: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> float:
    """Return ``value`` as a float, or raise ``error`` unless it is a finite real number.

    Args:
        value: The candidate number (``bool`` is refused).
        name: The argument name used in the error message.
        error: The error class to raise.
    """
    if type(value) is float and math.isfinite(value):  # the common case, checked fast
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a finite number, got {shown(value)} ({type(value).__name__})")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float
        result = math.inf
    if not math.isfinite(result):
        raise error(f"{name} must be a finite number, got {shown(value)}")
    return result


def require_unit(
    value: object,
    name: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> float:
    """Return ``value`` as a float, or raise ``error`` unless it is finite and in ``[0, 1]``."""
    result = require_finite(value, name, error)
    if not 0.0 <= result <= 1.0:
        raise error(f"{name} must be in [0, 1], got {shown(value)}")
    return result


def require_positive(
    value: object,
    name: str,
    error: type[InvalidInputError] = InvalidInputError,
) -> float:
    """Return ``value`` as a float, or raise ``error`` unless it is finite and ``> 0``."""
    result = require_finite(value, name, error)
    if result <= 0.0:
        raise error(f"{name} must be a finite number > 0, got {shown(value)}")
    return result


def require_int(
    value: object,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    error: type[InvalidInputError] = InvalidInputError,
) -> int:
    """Return ``value`` as an int, or raise ``error`` unless it is an integer in range.

    Floats are refused even when integral (``2.0``): an integer argument takes an integer.

    Args:
        value: The candidate integer (``bool`` is refused).
        name: The argument name used in the error message.
        minimum: Smallest allowed value, inclusive, if any.
        maximum: Largest allowed value, inclusive, if any.
        error: The error class to raise.
    """
    if type(value) is int and (minimum is None or value >= minimum) and (
            maximum is None or value <= maximum):  # the common case, checked fast
        return value
    low = "-inf" if minimum is None else str(minimum)
    high = "inf" if maximum is None else str(maximum)
    allowed = f"an int in [{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be {allowed}, got {shown(value)} ({type(value).__name__})")
    result = int(value)
    if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
        raise error(f"{name} must be {allowed}, got {shown(value)}")
    return result


def require_str(value: object, name: str) -> str:
    """Return ``value`` or raise :class:`InvalidInputError` unless it is a ``str``."""
    if not isinstance(value, str):
        raise InvalidInputError(
            f"{name} must be a str, got {shown(value)} ({type(value).__name__})")
    return value


def days_between(start: datetime, end: datetime) -> float:
    """Return the (possibly negative) number of days from ``start`` to ``end``."""
    return (end - start).total_seconds() / SECONDS_PER_DAY


def check_weights(pairs: Sequence[tuple[str, object]]) -> list[float]:
    """Validate named weights and return them as floats.

    Every violation is collected into one :class:`InvalidWeightsError`: each weight must be a
    finite number ``>= 0`` (not a bool), and they must not all be zero.

    Args:
        pairs: ``(name, value)`` for each weight, in order.
    """
    violations: list[str] = []
    values: list[float] = []
    for name, value in pairs:
        number = math.nan
        if not isinstance(value, bool) and isinstance(value, numbers.Real):
            number = float(value)
        if not math.isfinite(number) or number < 0.0:
            violations.append(f"{name} must be a finite number >= 0, got {shown(value)}")
            number = 0.0
        values.append(number)
    if not violations and sum(values) <= 0.0:
        listed = ", ".join(f"{name}={shown(value)}" for name, value in pairs)
        violations.append(f"weights must not all be zero, got {listed}")
    if violations:
        raise InvalidWeightsError("invalid weights: " + "; ".join(violations))
    return values
