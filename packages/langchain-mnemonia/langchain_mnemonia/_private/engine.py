"""The engine an adapter uses when the caller passes none: the process's shared embedded store."""

from __future__ import annotations

from typing import Any

from mnemonia import MemoryEngine

__all__ = ["default_engine"]


def default_engine(embedder: Any = None) -> MemoryEngine:
    """The embedded default (``./memory`` with the bundled model, or ``embedder`` when given),
    opened once per process and shared with every other adapter built without ``engine=``
    (LangChain or LlamaIndex): :meth:`mnemonia.MemoryEngine.shared`. The first opening decides
    the model; a later ``embedder`` does not change it."""
    if embedder is None:
        return MemoryEngine.shared()
    return MemoryEngine.shared(embedder=embedder)
