"""Storage: the Chroma vector index and the SQL side-store."""

from __future__ import annotations

from mnemonia.store.repository import SideStore
from mnemonia.store.schema import MIGRATIONS
from mnemonia.store.vector import VectorIndex

__all__ = ["MIGRATIONS", "SideStore", "VectorIndex"]
