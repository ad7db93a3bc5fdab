"""The vector-index seam: what the layers above the store need of a vector backend, declared
once as two protocols. :class:`~mnemonia.store.chroma.ChromaIndex` implements them (embedded
``PersistentClient`` or a Chroma server); another backend is a module implementing
:class:`VectorIndex` and :class:`VectorCollection`, chosen where
:meth:`~mnemonia.runtime.Runtime.open` builds the index.

Vectors are always supplied by Mnemonia (a backend never embeds), similarities are cosines
(``1 - cosine distance``), and every call of a backend that reaches a server retries as the
SQL side does: a :class:`~mnemonia.errors.StoreUnavailableError` when retries run out, a
:class:`~mnemonia.errors.StoreError` for anything else that failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, overload

import numpy as np

from mnemonia.store.exact import ExactScores

__all__ = ["VectorCollection", "VectorIndex"]


class VectorCollection(Protocol):
    """One tenant's collection, as :meth:`VectorIndex.collection` hands it out; callers pass
    it back to the index's methods and read nothing of it but its name."""

    @property
    def name(self) -> str:
        """The collection's name in the backend (``<namespace>-<tenant>``)."""
        ...


class VectorIndex(Protocol):
    """A vector backend with one collection per tenant."""

    mode: str
    """``embedded`` (the store's own folder, one writing process) or ``server``."""
    exact_limit: int
    """Collections of at most this many vectors are searched exactly in memory (0: never)."""
    write_failed: bool
    """A write (``upsert`` or ``delete``) raised since the index was opened: what Chroma
    holds may differ from what the side-store says (the next open compares them)."""

    # -- collections -----------------------------------------------------------------------
    @overload
    def collection(self, tenant: str, *, model: str, dimension: int,
                   create: Literal[True] = ...) -> VectorCollection: ...

    @overload
    def collection(self, tenant: str, *, model: str, dimension: int,
                   create: bool) -> VectorCollection | None: ...

    def collection(self, tenant: str, *, model: str, dimension: int,
                   create: bool = True) -> VectorCollection | None:
        """The tenant's collection, made (recording ``model`` and ``dimension``) unless
        ``create`` is off, when a missing one is ``None``."""
        ...

    def drop_cached(self, tenant: str) -> None:
        """Forget the handle (and any in-memory copy) of the tenant's collection."""
        ...

    def opened(self) -> dict[str, VectorCollection]:
        """``{tenant: its collection}`` of the collections this index has opened (kept
        handles)."""
        ...

    def tenants(self) -> list[str]:
        """The tenants whose collection exists, sorted (``[]`` where the backend cannot tell
        this store's collections from others')."""
        ...

    def delete_collection(self, tenant: str) -> None:
        """Remove the tenant's collection; missing is fine."""
        ...

    # -- vectors ---------------------------------------------------------------------------
    def upsert(self, col: VectorCollection, ids: Sequence[str], vectors: np.ndarray,
               documents: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Write (or overwrite) the vectors of ``ids`` with their documents and metadata."""
        ...

    def query(self, col: VectorCollection, vectors: np.ndarray, n: int
              ) -> tuple[list[list[str]], list[list[float]]]:
        """kNN: per query row, ids and cosine similarities, best first."""
        ...

    def get_vectors(self, col: VectorCollection, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of ``ids`` that exist."""
        ...

    def existing(self, col: VectorCollection, ids: Sequence[str]) -> set[str]:
        """Those of ``ids`` that have a vector."""
        ...

    def delete(self, col: VectorCollection, ids: Sequence[str]) -> None:
        """Remove the vectors of ``ids`` (missing ones are fine)."""
        ...

    def count(self, col: VectorCollection) -> int:
        ...

    def all_ids(self, col: VectorCollection) -> list[str]:
        """Every id in the collection."""
        ...

    # -- exact search ----------------------------------------------------------------------
    def scores(self, col: VectorCollection, query: np.ndarray) -> ExactScores | None:
        """The cosine of ``query`` with every vector of the collection when the index holds
        them in memory, else ``None`` (ask :meth:`query`)."""
        ...

    def mirrored(self, col: VectorCollection) -> bool:
        """Whether :meth:`scores` answers for the collection without reading the backend."""
        ...

    def refresh(self, col: VectorCollection) -> None:
        """Forget what the process holds of the collection's vectors (read again when next
        needed): after a write that changed the side-store's copy of vectors the backend had
        already taken."""
        ...

    # -- the client ------------------------------------------------------------------------
    def close(self) -> None:
        """Release the client (sockets, files); safe to call twice."""
        ...

    def heartbeat(self) -> int:
        """Ask the backend whether it answers (a timestamp)."""
        ...
