"""LangChain adapters for Mnemonia long-term memory.

- :class:`MnemoniaRetriever`: recall as a ``BaseRetriever`` (exactly ``k`` documents).
- :class:`MnemoniaChatMessageHistory`: a ``BaseChatMessageHistory`` whose messages are also
  episode memories.
- :class:`MnemoniaMemory`: legacy ``langchain_classic`` ``BaseMemory`` (extra ``[legacy]``).
- :class:`MnemoniaStore`: a LangGraph ``BaseStore`` (extra ``[langgraph]``).

The two extras are imported lazily, so ``import langchain_mnemonia`` works without them; using
a class whose extra is missing raises ``ImportError`` with the ``pip install`` line.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from langchain_mnemonia.chat_history import MnemoniaChatMessageHistory
from langchain_mnemonia.retrievers import MnemoniaRetriever

if TYPE_CHECKING:
    from langchain_mnemonia.memory import MnemoniaMemory
    from langchain_mnemonia.store import MnemoniaStore

__version__ = "0.1.0"
__all__ = [
    "MnemoniaChatMessageHistory",
    "MnemoniaMemory",
    "MnemoniaRetriever",
    "MnemoniaStore",
    "__version__",
]

_LAZY = {"MnemoniaMemory": "langchain_mnemonia.memory",
         "MnemoniaStore": "langchain_mnemonia.store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'langchain_mnemonia' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
