"""Exact nearest neighbours for small collections: their vectors mirrored in memory.

An embedded store is written by one process only (its folder is locked), and every write to
its Chroma collections goes through :class:`~mnemonia.store.chroma.ChromaIndex`, so that
process can keep a copy of a small collection's vectors next to Chroma's HNSW index and answer
a query by one matrix product: exact where HNSW is approximate (two openings of the same store
could rank a memory near the cut differently), and for a few thousand vectors faster than
Chroma's query. Recall also reads the cosine of any other memory of the tenant from the same
product instead of reading its stored vector.

A mirror is only ever appended to: a replaced or deleted vector's row is marked dead (in a
fresh mask), a new one takes the next row, and the row map is replaced, never edited, so a
query's :class:`ExactScores` stays valid while writes go on. Rows are normalised, so a score
is the cosine Chroma's ``cosine`` space gives (``1 - distance``).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mnemonia.embeddings import normalise_rows

__all__ = ["LANES", "SPLIT_COLUMNS", "ExactScores", "Mirror", "rows_per_slice"]

_FIRST_CAPACITY = 256
QUERY_BLOCK = 64
"""Query vectors multiplied with a mirror at once by :meth:`Mirror.nearest`."""
SINGLE_THREAD_PRODUCT = 1 << 18
"""OpenBLAS computes a product with fewer than 4 * 65,536 multiplications on the calling thread
alone; a larger one starts its own threads, which compete with the model embedding the query
and with recall's helper thread for the cores (and spin after): measured at 11,000 vectors,
one product made recall ~2 ms slower than Chroma's query, the same product in slices faster."""


def rows_per_slice(per_row: int) -> int:
    """Rows of a product's sliced operand, each costing ``per_row`` multiplications, that
    OpenBLAS computes on the calling thread (:data:`SINGLE_THREAD_PRODUCT`)."""
    return max(1, SINGLE_THREAD_PRODUCT // max(1, per_row) - 1)


LANES = 16
"""Every slice of a product is a whole number of this many columns, starting at a multiple of
it, and a mirror's capacity is one too (its unused columns are zero): OpenBLAS then computes
every column the same way, so equal vectors get equal scores wherever they sit (a narrower
tail, or a slice starting elsewhere, can round the last bit differently: measured on the
development machine for vectors per row and per column alike)."""


def _columns(n: int) -> int:
    """``n`` rounded up to a whole number of :data:`LANES`."""
    return -(-n // LANES) * LANES


def _product(columns: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``columns.T @ query`` (``columns``: one vector per column, a whole number of
    :data:`LANES` of them; ``query`` a vector, or a matrix of query columns), in slices small
    enough for OpenBLAS to keep on this thread. A vector per column makes the product stream
    the matrix once, reading a slice's rows from start to end: on the 2-core development
    machine (2026-11-29, 11,000 and 16,000 vectors of 384 dimensions, the matrix out of the
    cache as it is after the model embedded the query) 1.13 and 1.84 ms against 1.68 and
    2.59 for a vector per row."""
    cols = query.shape[1] if query.ndim == 2 else 1
    step = max(LANES, rows_per_slice(columns.shape[0] * cols) // LANES * LANES)
    n = columns.shape[1]
    if n <= step:
        return np.asarray(query.T @ columns).T
    return np.concatenate([np.asarray(query.T @ columns[:, at:at + step]).T
                           for at in range(0, n, step)])


SPLIT_COLUMNS = 4096
"""A query's product with a mirror of at least this many vectors is computed in two halves at
once, the second on a helper thread, when that thread is idle (:func:`_scores_product`):
numpy lets go of the GIL in the product, and a product this large streams a matrix that is
no longer in the cache after the model embedded the query, faster from two cores. On the
2-core development machine (2026-11-30, thirteenth session; the matrix evicted from the
cache before each product, 200 in turns) 11,168 vectors: p50 0.81 ms on one thread, 0.61 on
two; 40,000: 3.42 against 2.77. The halves split at a multiple of :data:`LANES`, so every
score is the same to the bit as the one-thread product's."""

_helper_free = threading.Lock()  # held while the helper computes a half
_helper: tuple[int, ThreadPoolExecutor] | None = None  # (the process it belongs to, it)


def _helper_pool() -> ThreadPoolExecutor:
    """The helper thread's pool, this process's own (a forked child starts a new one: the
    parent's thread is not in it). Called with ``_helper_free`` held."""
    global _helper
    if _helper is None or _helper[0] != os.getpid():
        _helper = (os.getpid(), ThreadPoolExecutor(max_workers=1,
                                                   thread_name_prefix="mnemonia-exact"))
    return _helper[1]


def _scores_product(columns: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``columns.T @ query`` for one query vector: :func:`_product`, in two halves at once
    when ``columns`` holds at least :data:`SPLIT_COLUMNS` vectors and the helper thread is
    free (another recall's half there: this one computes all of its own, never waits)."""
    n = columns.shape[1]
    if n < SPLIT_COLUMNS or not _helper_free.acquire(blocking=False):
        return _product(columns, query)
    try:
        half = n // 2 // LANES * LANES
        later = _helper_pool().submit(_product, columns[:, half:], query)
        try:
            first = _product(columns[:, :half], query)
        finally:  # the helper is free again only once its half is done, whatever happened
            futures.wait([later])
        return np.concatenate([first, later.result()])
    finally:
        _helper_free.release()


class ExactScores:
    """The cosine of one query with every vector a mirror held when it was asked."""

    def __init__(self, sims: np.ndarray, ids: Sequence[str], position: dict[str, int]) -> None:
        self._sims, self._ids, self._position = sims, ids, position

    def top(self, n: int) -> tuple[list[str], list[float]]:
        """The ``n`` nearest (ids and cosines, best first; ties by position)."""
        sims = self._sims
        live = int(np.count_nonzero(sims > -np.inf))
        n = min(n, live)
        if n <= 0:
            return [], []
        idx = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
        idx = idx[np.lexsort((idx, -sims[idx]))]
        return [self._ids[j] for j in idx.tolist()], sims[idx].tolist()

    def of(self, ids: Iterable[str]) -> dict[str, float]:
        """``{id: cosine}`` of those of ``ids`` the mirror held."""
        sims, position, gone = self._sims, self._position, -math.inf
        out: dict[str, float] = {}
        for i in ids:
            j = position.get(i)
            if j is not None:
                value = float(sims[j])  # (one read of the array per id)
                if value > gone:
                    out[i] = value
        return out


class Mirror:
    """The vectors of one collection, in memory (see the module)."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        self._lock = threading.Lock()
        self._ids: list[str] = []
        self._position: dict[str, int] = {}
        dim = int(vectors.shape[1]) if len(vectors) else 0
        # one vector per column (see _product); row i of the ids is column i
        self._matrix = np.zeros((dim, _columns(max(_FIRST_CAPACITY, len(ids)))),
                                dtype=np.float32)
        self._alive = np.zeros(self._matrix.shape[1], dtype=bool)
        self._n = 0
        self._dead = 0
        if len(ids):
            self.put(ids, vectors)

    @property
    def size(self) -> int:
        """Vectors held (live ones)."""
        return self._n - self._dead

    def put(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add or replace vectors (after Chroma stored them)."""
        if not len(ids):
            return
        rows = normalise_rows(vectors)
        with self._lock:
            if self._matrix.shape[0] != rows.shape[1]:
                if self._n - self._dead:
                    raise ValueError(f"vectors of dimension {rows.shape[1]} in a mirror of "
                                     f"dimension {self._matrix.shape[0]}")
                self._matrix = np.zeros((rows.shape[1], self._matrix.shape[1]),
                                        dtype=np.float32)
            self._kill([i for i in ids if i in self._position])
            last = {i: j for j, i in enumerate(ids)}  # a repeated id: its last vector wins
            keep = sorted(last.values())
            need = self._n + len(keep)
            if need > self._matrix.shape[1]:
                self._grow(need)
            position = dict(self._position)
            alive = self._alive
            self._matrix[:, self._n:self._n + len(keep)] = rows[keep].T
            for j in keep:
                alive[self._n] = True
                position[ids[j]] = self._n
                self._ids.append(ids[j])
                self._n += 1
            self._position = position

    def drop(self, ids: Iterable[str]) -> None:
        """Forget vectors (after Chroma deleted them)."""
        with self._lock:
            self._kill([i for i in ids if i in self._position])

    def nearest(self, queries: np.ndarray, n: int) -> tuple[list[list[str]], list[list[float]]]:
        """Exact kNN: per row of ``queries``, the ``n`` nearest held vectors (ids and cosines,
        best first, ties by position), the same in every process (an HNSW answer may vary
        with the threads that built the index)."""
        with self._lock:
            count, matrix, alive = self._n, self._matrix, self._alive
            ids, position = self._ids, self._position
            live = alive[:count].copy() if self._dead else None
        found: list[list[str]] = []
        sims: list[list[float]] = []
        if count == 0:
            return [[] for _ in range(len(queries))], [[] for _ in range(len(queries))]
        rows = normalise_rows(queries)
        for start in range(0, len(rows), QUERY_BLOCK):
            block = _product(matrix[:, :_columns(count)],
                             rows[start:start + QUERY_BLOCK].T)[:count]
            if live is not None:
                block[~live] = -np.inf
            for j in range(block.shape[1]):
                got = ExactScores(np.ascontiguousarray(block[:, j]), ids, position).top(n)
                found.append(got[0])
                sims.append(got[1])
        return found, sims

    def scores(self, query: np.ndarray) -> ExactScores:
        """Every held vector's cosine with ``query``."""
        with self._lock:
            n, matrix, alive = self._n, self._matrix, self._alive
            ids, position = self._ids, self._position
            live = alive[:n].copy() if self._dead else None
        if n == 0:  # nothing held (perhaps not even a dimension yet)
            return ExactScores(np.zeros(0, dtype=np.float32), ids, position)
        q = normalise_rows(query)[0]
        sims = _scores_product(matrix[:, :_columns(n)], q)[:n]
        if live is not None:
            sims[~live] = -np.inf
        return ExactScores(sims, ids, position)

    # -- the lock held ---------------------------------------------------------------------
    def _kill(self, ids: list[str]) -> None:
        if not ids:
            return
        alive = self._alive.copy()  # a query's scores keep the mask they were made with
        position = dict(self._position)
        for i in ids:
            alive[position.pop(i)] = False
        self._alive, self._position = alive, position
        self._dead += len(ids)
        if self._dead > max(_FIRST_CAPACITY, self._n // 2):
            self._compact()

    def _grow(self, need: int) -> None:
        size = _columns(max(need, 2 * self._matrix.shape[1]))
        matrix = np.zeros((self._matrix.shape[0], size), dtype=np.float32)
        matrix[:, :self._n] = self._matrix[:, :self._n]
        alive = np.zeros(size, dtype=bool)
        alive[:self._n] = self._alive[:self._n]
        self._matrix, self._alive = matrix, alive

    def _compact(self) -> None:
        """Rows of the live vectors only, in new arrays (queries under way keep the old)."""
        keep = np.nonzero(self._alive[:self._n])[0]
        size = _columns(max(_FIRST_CAPACITY, 2 * len(keep)))
        matrix = np.zeros((self._matrix.shape[0], size), dtype=np.float32)
        matrix[:, :len(keep)] = self._matrix[:, keep]
        alive = np.zeros(size, dtype=bool)
        alive[:len(keep)] = True
        self._ids = [self._ids[j] for j in keep.tolist()]
        self._position = {i: j for j, i in enumerate(self._ids)}
        self._matrix, self._alive, self._n, self._dead = matrix, alive, len(keep), 0
