"""The engine an adapter uses when the caller passes none: the process's shared embedded store."""

from __future__ import annotations

from mnemonia import MemoryEngine

__all__ = ["default_engine"]


def default_engine() -> MemoryEngine:
    """The embedded default (``./memory`` with the bundled model), opened once per process and
    shared with every other adapter built without ``engine=`` (LangChain or LlamaIndex):
    :meth:`mnemonia.MemoryEngine.shared`."""
    return MemoryEngine.shared()
