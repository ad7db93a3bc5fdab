"""Storage: the vector index (:class:`VectorIndex`, on Chroma) and the SQL side-store."""

from __future__ import annotations

from mnemonia.store.chroma import ChromaIndex
from mnemonia.store.repository import SideStore
from mnemonia.store.schema import MIGRATIONS
from mnemonia.store.vectors import VectorCollection, VectorIndex

__all__ = ["MIGRATIONS", "ChromaIndex", "SideStore", "VectorCollection", "VectorIndex"]
