"""Retries of store calls: the call is tried once as is, and only a failure goes through the
retry loop (tenacity's machinery costs ~20 µs a call, a fair share of a recall's own work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def first_then(fn: Callable[[], T], retrying: Callable[[Callable[[], T]], T]) -> T:
    """``fn()``; if it raises, ``retrying`` runs it again in its loop, where the failure just
    seen stands for the loop's first attempt, so attempts, waits and errors are those of
    ``retrying(fn)``."""
    try:
        return fn()
    except BaseException as e:  # whatever it is, the loop decides (as it would have)
        seen: list[BaseException] = [e]

    def again() -> T:
        if seen:
            raise seen.pop()
        return fn()

    return retrying(again)
