"""Mnemonia: long-term memory for LLM applications that behaves like human memory.

The public names are imported lazily, so ``import mnemonia.scoring`` (pure, standard library
only) does not pull in Chroma, SQLAlchemy or numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Clock": "mnemonia.clock",
    "ManualClock": "mnemonia.clock",
    "SystemClock": "mnemonia.clock",
    "MnemoniaConfig": "mnemonia.config",
    "MemoryEngine": "mnemonia.engine",
    "MnemoniaError": "mnemonia.errors",
    "Event": "mnemonia.models",
    "Explanation": "mnemonia.models",
    "Hit": "mnemonia.models",
    "Memory": "mnemonia.models",
    "RecallResult": "mnemonia.models",
    "Relation": "mnemonia.models",
    "Scheduler": "mnemonia.maintenance",
}

__all__ = [
    "Clock",
    "Event",
    "Explanation",
    "Hit",
    "ManualClock",
    "Memory",
    "MemoryEngine",
    "MnemoniaConfig",
    "MnemoniaError",
    "RecallResult",
    "Relation",
    "Scheduler",
    "SystemClock",
    "__version__",
]

if TYPE_CHECKING:
    from mnemonia.clock import Clock, ManualClock, SystemClock
    from mnemonia.config import MnemoniaConfig
    from mnemonia.engine import MemoryEngine
    from mnemonia.errors import MnemoniaError
    from mnemonia.maintenance import Scheduler
    from mnemonia.models import Event, Explanation, Hit, Memory, RecallResult, Relation


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mnemonia' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
