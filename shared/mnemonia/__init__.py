"""Mnemonia: long-term memory for LLM applications that behaves like human memory."""

from __future__ import annotations

from mnemonia.clock import Clock, ManualClock, SystemClock
from mnemonia.config import MnemoniaConfig
from mnemonia.engine import MemoryEngine
from mnemonia.errors import MnemoniaError
from mnemonia.models import Event, Explanation, Hit, Memory, RecallResult, Relation

__version__ = "0.1.0"
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
    "SystemClock",
    "__version__",
]
