"""The engine an adapter uses when the caller passes none: one embedded store per process."""

from __future__ import annotations

import threading

from mnemonia import MemoryEngine

__all__ = ["default_engine"]

_lock = threading.Lock()
_engine: MemoryEngine | None = None


def default_engine() -> MemoryEngine:
    """The embedded default (``./memory`` with the bundled model), opened once and shared.

    An embedded store allows one engine per folder, so every adapter built without ``engine=``
    shares this one.
    """
    global _engine
    with _lock:
        if _engine is None or _engine.closed:
            _engine = MemoryEngine.open()
        return _engine
