"""Mnemonia long-term memory for LlamaIndex.

- :class:`MnemoniaMemory`: a drop-in for ``ChatMemoryBuffer`` (chat engines, agents).
- :class:`MnemoniaMemoryBlock`: a block for ``Memory.from_defaults(memory_blocks=[...])``.
- :class:`MnemoniaRetriever`: a retriever for ``RetrieverQueryEngine``.
"""

from __future__ import annotations

from llama_index.memory.mnemonia.base import MnemoniaMemory
from llama_index.memory.mnemonia.memory_block import MnemoniaMemoryBlock
from llama_index.memory.mnemonia.retriever import MnemoniaRetriever

__version__ = "0.1.0"
__all__ = ["MnemoniaMemory", "MnemoniaMemoryBlock", "MnemoniaRetriever", "__version__"]
