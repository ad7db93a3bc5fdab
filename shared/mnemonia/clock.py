"""Clocks: where services get ``now``. Scoring functions never read a clock themselves."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from mnemonia.errors import InvalidInputError, NaiveDatetimeError, shown

__all__ = ["Clock", "ManualClock", "SystemClock", "ensure_aware", "from_ts", "to_ts"]


def ensure_aware(value: datetime, name: str = "datetime") -> datetime:
    """Return ``value`` in UTC, or raise if it is naive or not a datetime."""
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{name} must be a timezone-aware datetime, got {shown(value)}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise NaiveDatetimeError(
            f"{name} must be timezone-aware (e.g. datetime.now(timezone.utc)), got naive "
            f"{shown(value)}"
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. datetime.max at UTC-14: past year 9999 in UTC
        raise InvalidInputError(
            f"{name}={shown(value)} is outside the range of datetimes in UTC "
            "(years 1-9999)") from None


def to_ts(dt: datetime) -> float:
    """Epoch seconds of an aware datetime (how the side-store keeps times)."""
    return dt.timestamp()


def from_ts(ts: float) -> datetime:
    """The UTC datetime of epoch seconds ``ts``."""
    return datetime.fromtimestamp(ts, tz=UTC)


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now() -> aware datetime``."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that only moves when told to; for tests, notebooks and demos.

    Example:
        >>> from datetime import datetime, timedelta, timezone
        >>> clock = ManualClock(datetime(2025, 1, 1, tzinfo=timezone.utc))
        >>> clock.advance(timedelta(days=1)).isoformat()
        '2025-01-02T00:00:00+00:00'
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = ensure_aware(start, "start") if start is not None else datetime.now(UTC)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[datetime], None]] = []

    def subscribe(self, listener: Callable[[datetime], None]) -> None:
        """Call ``listener(now)`` after every :meth:`advance` / :meth:`set`, in the caller's
        thread (what runs an engine's background maintenance deterministically in tests)."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[datetime], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _moved(self, now: datetime) -> datetime:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(now)
        return now

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move forward by ``delta`` (never backwards) and return the new now."""
        if not isinstance(delta, timedelta) or delta < timedelta(0):
            raise InvalidInputError(f"advance() takes a non-negative timedelta, got {shown(delta)}")
        with self._lock:
            self._now = self._now + delta
            now = self._now
        return self._moved(now)

    def set(self, value: datetime) -> datetime:
        """Jump to ``value`` (aware datetime) and return it."""
        with self._lock:
            self._now = ensure_aware(value, "value")
            now = self._now
        return self._moved(now)

    def __repr__(self) -> str:
        return f"ManualClock({self._now.isoformat()})"
