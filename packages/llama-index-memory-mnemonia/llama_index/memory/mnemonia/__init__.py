"""LlamaIndex adapters for Mnemonia long-term memory."""

from __future__ import annotations

__version__ = "0.1.0"
__all__: list[str] = ["__version__"]
