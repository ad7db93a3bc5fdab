"""Retries of store calls: the call is tried once as is, and only a failure goes through the
retry loop (tenacity's machinery costs ~20 µs a call, a fair share of a recall's own work)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

T = TypeVar("T")


def bounded(attempts: int, max_wait: float, worth_retrying: Callable[[BaseException], bool]
            ) -> Retrying:
    """The retry loop of every store call: at most ``attempts`` tries, exponential backoff
    with jitter up to ``max_wait`` seconds, only for errors ``worth_retrying``; when they run
    out, tenacity raises ``RetryError`` (the caller says which store did not answer)."""
    return Retrying(stop=stop_after_attempt(attempts),
                    wait=wait_exponential_jitter(multiplier=0.05, max=max_wait, jitter=0.05),
                    retry=retry_if_exception(worth_retrying), reraise=False)


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


class FailureLog:
    """One log line per kind of failure, with counts, instead of a traceback per call: the
    first failure of a kind is logged at once (its message, no traceback), later ones are
    counted and reported at most every ``every`` seconds, and the recovery says how many
    there were since the last line."""

    def __init__(self, logger: logging.Logger, *, every: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[str, list[float]] = {}  # kind -> [count since the last line, at]

    def failed(self, what: str, exc: BaseException) -> None:
        kind = f"{what} ({type(exc).__name__})"
        now = self._clock()
        with self._lock:
            entry = self._kinds.get(kind)
            if entry is None:
                self._kinds[kind] = [0, now]
                self._log.warning("%s failed: %s; further failures of this kind are counted",
                                  kind, exc)
                return
            entry[0] += 1
            if now - entry[1] < self._every:
                return
            count, since = int(entry[0]), entry[1]
            entry[0], entry[1] = 0, now
        self._log.warning("%s failed %d more times in the last %.0f s: %s", kind, count,
                          now - since, exc)

    def succeeded(self) -> None:
        if not self._kinds:
            return
        with self._lock:
            kinds, self._kinds = self._kinds, {}
        for kind, (count, _) in kinds.items():
            self._log.info("%s works again (%d failures since the last report)", kind,
                           int(count))
