"""Approximate nearest neighbours for big collections: an HNSW index the process keeps itself.

A collection too large to mirror for exact search (:mod:`mnemonia.store.exact`) is searched
by HNSW. Chroma's ``query`` answers that in ~1.2 ms at 100,000 vectors, ~1.1 ms of it a fixed
cost even for one neighbour; an index held in the process (usearch, M 16, ef 100) answers in
~0.5 ms, finding 99.5% of the 20 nearest where Chroma finds 99.8%
(`benchmarks/ann_index.py`). Like a mirror, it is kept in step with every vector write of the
embedded store's one writing process (:class:`~mnemonia.store.chroma.ChromaIndex` routes them
here), and it is the same vectors Chroma holds, normalised, so a score is the cosine Chroma's
``cosine`` space gives (``1 - distance``).

It is saved beside the store when the store closes and read back on the next open (0.2 s at
100,000 vectors, against ~22 s to build it from Chroma's vectors). A saved index is good
only until its collection is next written: the first write after loading it deletes the
saved manifest, so a process that stops without closing leaves nothing stale behind; the
next open builds the index again (in the background: Chroma answers meanwhile).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mnemonia.embeddings import normalise_rows

__all__ = ["CONNECTIVITY", "EXPANSION_ADD", "EXPANSION_SEARCH", "Approximate", "saved_files",
           "unlink"]

log = logging.getLogger("mnemonia.store")

CONNECTIVITY = 16
"""Links per node (HNSW's M), as Chroma's own index."""
EXPANSION_ADD = 128
"""Candidates kept while linking a new vector (``ef_construction``)."""
EXPANSION_SEARCH = 100
"""Candidates kept while searching (``ef``; a search for more neighbours keeps that many)."""
FORMAT = 1
"""The saved manifest's format."""


def _threads() -> int:
    return max(1, os.cpu_count() or 1)


def saved_files(folder: Path, name: str) -> tuple[Path, Path, Path]:
    """The manifest, index and ids files of collection ``name`` saved in ``folder``."""
    return (folder / f"{name}.json", folder / f"{name}.usearch", folder / f"{name}.ids.json")


class Approximate:
    """One collection's vectors in a usearch HNSW index (inner product of normalised rows),
    each under a key of its own: a running number, the id's place in :attr:`_ids`."""

    def __init__(self, index: Any = None, ids: list[str | None] | None = None) -> None:
        self._index = index  # made by the first put (its dimension then known)
        self._ids: list[str | None] = ids if ids is not None else []
        self._key = {i: k for k, i in enumerate(self._ids) if i is not None}
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """Vectors held."""
        return len(self._key)

    def holds(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` held."""
        return {i for i in ids if i in self._key}

    def holds_besides(self, ids: set[str]) -> list[str]:
        """The held ids not in ``ids``."""
        return [i for i in list(self._key) if i not in ids]

    def put(self, ids: Sequence[str], vectors: np.ndarray, *, threads: int = 0) -> None:
        """Add or replace vectors (after Chroma stored them); a repeated id keeps its last."""
        if not len(ids):
            return
        rows = normalise_rows(np.asarray(vectors, dtype=np.float32))
        last = {i: j for j, i in enumerate(ids)}
        with self._lock:
            if self._index is None:
                from usearch.index import Index

                self._index = Index(
                    ndim=rows.shape[1], metric="ip", dtype="f32", connectivity=CONNECTIVITY,
                    expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
            elif rows.shape[1] != self._index.ndim:
                raise ValueError(f"vectors of dimension {rows.shape[1]} in an index of "
                                 f"dimension {self._index.ndim}")
            self._remove([i for i in last if i in self._key])
            first = len(self._ids)
            keys = np.arange(first, first + len(last), dtype=np.uint64)
            self._index.add(keys, np.ascontiguousarray(rows[list(last.values())]),
                            threads=threads or _threads())
            for k, i in enumerate(last, start=first):
                self._ids.append(i)
                self._key[i] = k

    def drop(self, ids: Iterable[str]) -> None:
        """Forget vectors (after Chroma deleted them)."""
        with self._lock:
            self._remove([i for i in set(ids) if i in self._key])

    def nearest(self, queries: np.ndarray, n: int) -> tuple[list[list[str]], list[list[float]]]:
        """Per row of ``queries``, about the ``n`` nearest held vectors (ids and cosines, best
        first); all of them when ``n`` is at least as many as it holds."""
        rows = normalise_rows(np.asarray(queries, dtype=np.float32))
        with self._lock:
            if not self._key or n <= 0 or self._index is None:
                return [[] for _ in range(len(rows))], [[] for _ in range(len(rows))]
            # (asked for all it holds: every one, which a walk of the graph may not reach)
            found = self._index.search(rows, min(n, len(self._key)),
                                       threads=1 if len(rows) == 1 else _threads(),
                                       exact=n >= len(self._key))
            ids = self._ids
        keys = np.atleast_2d(found.keys)
        distances = np.atleast_2d(found.distances)
        counts = getattr(found, "counts", None)
        counts = [len(keys[0])] if counts is None else np.atleast_1d(counts).tolist()
        out_ids: list[list[str]] = []
        out_sims: list[list[float]] = []
        for row, dist, count in zip(keys, distances, counts, strict=True):
            named = [(ids[k], 1.0 - float(d)) for k, d in zip(row[:count].tolist(),
                                                             dist[:count].tolist(), strict=True)]
            # (an id removed since the search has no name any more: it is gone)
            out_ids.append([i for i, _ in named if i is not None])
            out_sims.append([d for i, d in named if i is not None])
        return out_ids, out_sims

    def _remove(self, ids: list[str]) -> None:
        if ids:
            # (a removed key is never given again: a replaced id takes a new one)
            keys = [self._key.pop(i) for i in ids]
            self._index.remove(np.array(keys, dtype=np.uint64))
            for k in keys:
                self._ids[k] = None

    # -- saved beside the store ------------------------------------------------------------
    def save(self, folder: Path, name: str) -> None:
        """Write the index and its ids under ``folder``, the manifest last (see the module)."""
        manifest, index_file, ids_file = saved_files(folder, name)
        folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            unlink(folder, name)
            if self._index is None:
                return
            self._index.save(str(index_file) + ".tmp")
            ids_file.with_suffix(".tmp").write_text(json.dumps(self._ids), encoding="utf-8")
            os.replace(str(index_file) + ".tmp", index_file)
            os.replace(ids_file.with_suffix(".tmp"), ids_file)
            meta = {"format": FORMAT, "count": self.size, "dimension": int(self._index.ndim),
                    "keys": len(self._ids), "index_bytes": index_file.stat().st_size}
            tmp = manifest.with_suffix(".tmp")
            tmp.write_text(json.dumps(meta), encoding="utf-8")
            os.replace(tmp, manifest)

    @classmethod
    def load(cls, folder: Path, name: str, count: int) -> Approximate | None:
        """The index saved for collection ``name``, if it is complete and holds ``count``
        vectors (what Chroma holds now); else ``None``."""
        from usearch.index import Index

        manifest, index_file, ids_file = saved_files(folder, name)
        try:
            meta = json.loads(manifest.read_text(encoding="utf-8"))
            if (meta.get("format") != FORMAT or meta.get("count") != count
                    or index_file.stat().st_size != meta.get("index_bytes")):
                return None
            ids = json.loads(ids_file.read_text(encoding="utf-8"))
            index = Index.restore(str(index_file))
        except (OSError, ValueError, RuntimeError):
            return None
        if (index is None or len(ids) != meta.get("keys") or len(index) != count
                or index.ndim != meta.get("dimension")):
            return None
        # (not in the file; usearch's setter is one its type stubs do not show)
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]
        loaded = cls(index=index, ids=ids)
        return loaded if loaded.size == count else None


def unlink(folder: Path, name: str) -> None:
    """Delete what is saved for collection ``name`` (the manifest first)."""
    for path in saved_files(folder, name):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


SYNC_BUILD = 5_000
"""A collection of at most this many vectors has its index built on the query that first
needs it (~0.6 s at 5,000); a larger one is built on a thread of its own while Chroma's query
answers (~22 s at 100,000 on two cores, reading its vectors included)."""
_ADD_STEP = 8_192  # vectors added at once while building (a close in between stops it)


class _Build:
    """An index being built: the writes made meanwhile, replayed when it is done."""

    def __init__(self, size: int) -> None:
        self.size = size
        # (ids, their vectors) of a put, (ids, None) of a drop
        self.pending: list[tuple[Sequence[str], np.ndarray | None]] = []
        self.done = threading.Event()


class OwnIndexes:
    """The approximate indexes of one embedded store's big collections (see the module):
    at most ``limit`` vectors over all of them; saved under ``folder`` on :meth:`close`.

    ``source`` is the :class:`~mnemonia.store.chroma.ChromaIndex` they index: its
    ``count``, ``all_ids``, ``get_vectors`` and ``all_vectors`` read what Chroma holds.
    Every write to a collection calls :meth:`put` or :meth:`drop` under the collection's
    lock, after Chroma took it; :meth:`index` takes that lock to start an index, so a build
    misses no write."""

    def __init__(self, source: Any, folder: Path | None, limit: int) -> None:
        self._source, self.folder, self.limit = source, folder, limit
        self._lock = threading.Lock()  # the maps below (held briefly)
        self._ready: dict[str, Approximate] = {}
        self._building: dict[str, _Build] = {}
        self._skipped: dict[str, int] = {}  # over the budget: name -> its size then
        self._clean: set[str] = set()  # held, and as saved
        self._unlinked: set[str] = set()  # saved files this process deleted (none since)
        self._threads: list[threading.Thread] = []
        self._closed = False

    def ready(self, name: str) -> Approximate | None:
        """The collection's index if it is built (else ``None``: ask Chroma)."""
        return self._ready.get(name)

    def index(self, col: Any, lock: threading.Lock) -> Approximate | None:
        """The collection's index: loaded from its saved files, or built now when it is
        small, else ``None`` while a thread builds it (or when it does not fit the budget)."""
        name = col.name
        with self._lock:
            if (self._closed or self.limit <= 0 or name in self._ready or name in self._building
                    or name in self._skipped):
                return self._ready.get(name)
        with lock:  # writes to the collection wait: the build replays any made after this
            size = self._source.count(col)
            with self._lock:
                if name in self._ready or name in self._building or name in self._skipped:
                    return self._ready.get(name)
                if self._held() + size > self.limit:
                    self._skipped[name] = size
                    return None
                build = self._building[name] = _Build(size)
        loaded = Approximate.load(self.folder, name, size) if self.folder is not None else None
        if loaded is None and self.folder is not None:
            unlink(self.folder, name)  # not what Chroma holds (or nothing): built afresh
            with self._lock:
                self._unlinked.add(name)
        if loaded is not None or size <= SYNC_BUILD:
            self._finish(col, lock, build, loaded)
            return self._ready.get(name)
        thread = threading.Thread(target=self._finish, args=(col, lock, build, None),
                                  name=f"mnemonia-index-{name}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return None

    def wait(self, name: str, timeout: float | None = None) -> bool:
        """Wait until the collection's index is built; whether it is."""
        build = self._building.get(name)
        if build is not None:
            build.done.wait(timeout)
        return name in self._ready

    def writing(self, name: str) -> None:
        """The collection is about to be written (its lock held): what is saved of it will
        no longer hold what Chroma holds, so it goes first (once)."""
        with self._lock:
            stale = name in self._clean or name not in self._unlinked
            self._clean.discard(name)
            self._unlinked.add(name)
        if stale and self.folder is not None:
            unlink(self.folder, name)

    def put(self, name: str, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Chroma stored ``vectors`` under ``ids`` (the collection's lock held)."""
        self._write(name, ids, vectors)

    def drop(self, name: str, ids: Sequence[str]) -> None:
        """Chroma deleted ``ids`` (the collection's lock held)."""
        self._write(name, ids, None)

    def forget(self, name: str, *, saved: bool = False) -> None:
        """Stop indexing the collection (a build under way is dropped); ``saved``: delete
        its saved files too."""
        with self._lock:
            self._ready.pop(name, None)
            self._building.pop(name, None)
            self._skipped.pop(name, None)
            self._clean.discard(name)
            if saved:
                self._unlinked.add(name)
        if saved and self.folder is not None:
            unlink(self.folder, name)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the builds and save every index whose saved files are not up to date."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
            self._building.clear()
        for thread in threads:
            thread.join(timeout)
        with self._lock:
            dirty = [(n, a) for n, a in self._ready.items() if n not in self._clean]
            self._ready.clear()
        if self.folder is not None:
            for name, index in dirty:
                try:
                    index.save(self.folder, name)
                except OSError as e:  # next open builds it again
                    log.warning(
                        "could not save the index of %s in %s: %s", name, self.folder, e)

    # -- inside ------------------------------------------------------------------------------
    def _held(self) -> int:
        """Vectors held or being built over all collections (:attr:`_lock` held)."""
        return (sum(a.size for a in self._ready.values())
                + sum(b.size for b in self._building.values()))

    def _write(self, name: str, ids: Sequence[str], vectors: np.ndarray | None) -> None:
        with self._lock:
            index, build = self._ready.get(name), self._building.get(name)
            if build is not None:
                build.pending.append((list(ids), vectors))
                return
        if index is not None:
            _apply(index, ids, vectors)
            if vectors is not None:
                self._within_budget(name)

    def _within_budget(self, name: str) -> None:
        """A collection that grew the indexes past :attr:`limit` goes back to Chroma's query
        (its index is dropped)."""
        with self._lock:
            index = self._ready.get(name)
            if index is None or self._held() <= self.limit:
                return
            del self._ready[name]
            self._clean.discard(name)
            self._skipped[name] = index.size

    def _finish(self, col: Any, lock: threading.Lock, build: _Build,
                loaded: Approximate | None) -> None:
        name = col.name
        try:
            index = loaded if loaded is not None else self._build(col, build)
            if index is None:
                return
            with lock:
                with self._lock:
                    if self._building.get(name) is not build:
                        return  # forgotten, or the store closed, meanwhile
                    pending, build.pending = build.pending, []
                for ids, vectors in pending:
                    _apply(index, ids, vectors)
                if loaded is None or pending:
                    self._repair(col, index)
                with self._lock:
                    if self._building.get(name) is not build:
                        return
                    del self._building[name]
                    self._ready[name] = index
                    if loaded is not None and name not in self._unlinked:
                        self._clean.add(name)  # as saved (no write since: see writing)
        except Exception as e:  # the store closed under the build, Chroma failed, ...
            log.debug("index of %s not built: %s", name, e)
            with self._lock:
                if self._building.get(name) is build:
                    del self._building[name]
        finally:
            build.done.set()

    def _build(self, col: Any, build: _Build) -> Approximate | None:
        ids, vectors = self._source.all_vectors(col)
        index = Approximate()
        for start in range(0, len(ids), _ADD_STEP):
            if self._building.get(col.name) is not build:
                return None
            index.put(ids[start:start + _ADD_STEP], vectors[start:start + _ADD_STEP])
        return index

    def _repair(self, col: Any, index: Approximate) -> None:
        """Make ``index`` hold what Chroma holds now, if a count says it may not (Chroma's
        pages are read by offset: a delete during the read shifts the pages after it)."""
        if self._source.count(col) == index.size:
            return
        ids = self._source.all_ids(col)
        held = index.holds(ids)
        missing = [i for i in ids if i not in held]
        extra = index.holds_besides(set(ids))
        if missing:
            got = self._source.get_vectors(col, missing)
            index.put(list(got), np.stack(list(got.values())))
        if extra:
            index.drop(extra)


def _apply(index: Approximate, ids: Sequence[str], vectors: np.ndarray | None) -> None:
    """A put (``vectors`` given) or a drop of ``ids``."""
    if vectors is not None:
        index.put(ids, vectors)
    else:
        index.drop(ids)
