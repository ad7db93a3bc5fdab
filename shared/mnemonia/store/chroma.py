"""The Chroma half of a store (:class:`~mnemonia.store.vectors.VectorIndex` on Chroma): one
collection per tenant, vectors supplied by us.

Chroma never chooses an embedder (we always pass embeddings) and telemetry is off. Every call
goes through tenacity: exponential backoff with jitter, bounded; when retries run out the caller
gets :class:`~mnemonia.errors.StoreUnavailableError`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import numpy as np
from tenacity import RetryError

from mnemonia.errors import InvalidInputError, StoreError, StoreUnavailableError
from mnemonia.store.approximate import Approximate, OwnIndexes
from mnemonia.store.exact import ExactScores, Mirror
from mnemonia.store.retry import bounded, first_then

__all__ = ["ChromaCollection", "ChromaIndex", "VectorSource", "collection_name"]

log = logging.getLogger("mnemonia.store")
T = TypeVar("T")
_MAX_BATCH = 4000
_ID_PAGE = 20000
_VECTOR_PAGE = 4096  # Chroma hands vectors back as float64: ~12 MB a page at 384 dimensions
_MAX_RESULTS = 2**31 - 1
"""Chroma takes ``n_results`` as a 32-bit count; it never returns more than it holds anyway."""
MIRRORED_VECTORS = 100_000
"""At most this many vectors are mirrored for exact search over all collections (~150 MB at
384 dimensions); past it, the least recently searched collections' mirrors go first."""


ChromaCollection = Any
"""A chromadb ``Collection`` (chromadb's own type is not imported: it would load chromadb with
this module); it is the :class:`~mnemonia.store.vectors.VectorCollection` of this index."""
VectorSource = Callable[[Sequence[str]], tuple[list[str], np.ndarray]]
"""``ids -> (found, rows)``: those of ``ids`` it keeps a vector of, and those vectors as the
rows of a matrix: where a mirror's vectors are read from."""

_TRANSIENT_SERVER_ERRORS = (
    # a Chroma server that restarted, or compacts, may answer this for a moment before its
    # segment files are there again (a known Chroma bug); the next attempt finds them
    "Error creating hnsw segment reader",
    "Nothing found on disk",
)


def collection_name(tenant: str, namespace: str = "mnemonia") -> str:
    """Chroma collection of a tenant: ``<namespace>-<tenant>``."""
    return f"{namespace}-{tenant}"


def _usearch() -> bool:
    """Whether usearch (the own indexes' library) imports; without it Chroma's query answers."""
    try:
        import usearch.index  # noqa: F401
    except ImportError as e:  # pragma: no cover - a dependency; a platform without a wheel
        log.warning("usearch cannot be imported (%s): big collections use Chroma's query", e)
        return False
    return True


def _transient(exc: BaseException) -> bool:
    """Network trouble worth retrying: connection, timeout, 5xx and rate limits."""
    try:
        import httpx
        if isinstance(exc, httpx.TransportError):
            return True
        if isinstance(exc, httpx.HTTPStatusError):
            return exc.response.status_code >= 500 or exc.response.status_code == 429
    except ImportError:  # pragma: no cover
        pass
    name = type(exc).__name__
    if name in ("RateLimitError", "InternalError") and "Connect" in str(exc):
        return True
    if any(sign in str(exc) for sign in _TRANSIENT_SERVER_ERRORS):
        return True
    return isinstance(exc, ConnectionError | TimeoutError) or "Could not connect" in str(exc)


def _persistent_client(path: str, settings: Any) -> Any:
    """An embedded Chroma client on the folder ``path``, or :class:`StoreError` saying why
    it cannot be opened (damaged files, a read-only folder, ...)."""
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient

    try:
        return chromadb.PersistentClient(path=path, settings=settings)
    except Exception as e:
        # chromadb keeps the half-started system of a failed open in a per-path cache, and
        # every later client of that folder would get it: drop it, so a retry starts afresh.
        cache = SharedSystemClient._identifier_to_system  # noqa: SLF001 - no public way
        system = cache.pop(path, None)
        if system is not None:
            with contextlib.suppress(Exception):
                system.stop()
        raise StoreError(
            f"cannot open the Chroma folder {path!r}: {e}. If its files are damaged, restore "
            "the folder from a backup, or move it away to start an empty store; a read-only "
            "folder must be made writable") from e


class ChromaIndex:
    """Chroma client plus per-tenant collections: the
    :class:`~mnemonia.store.vectors.VectorIndex` of an embedded folder
    (``PersistentClient``) or a Chroma server (``HttpClient``)."""

    def __init__(self, *, path: str | None = None, url: str | None = None,
                 attempts: int = 5, max_wait: float = 2.0, namespace: str = "mnemonia",
                 exact_limit: int = 0, own_index_limit: int = 0,
                 own_index_folder: str | os.PathLike[str] | None = None,
                 vector_source: VectorSource | None = None) -> None:
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        self.namespace = namespace
        self._attempts = attempts
        self._max_wait = max_wait
        self._collections: dict[str, ChromaCollection] = {}
        self.mode = "server" if url else "embedded"
        self.write_failed = False
        # Exact search (embedded stores only: a server's collections may be written by other
        # processes): collection name -> its vectors' mirror, or None when it held more than
        # exact_limit vectors (until deletes may have brought it under: see _mirroring).
        self.exact_limit = exact_limit if self.mode == "embedded" else 0
        self._mirrors: OrderedDict[str, Mirror | None] = OrderedDict()
        # of a collection not mirrored (None above): a number of vectors it holds at least
        # (counted, less the ids deleted since)
        self._at_least: dict[str, int] = {}
        # the vectors we gave Chroma, kept elsewhere (the side-store): a mirror's are read
        # from there (see _mirror_vectors)
        self._vector_source = vector_source
        self._mirror_lock = threading.Lock()  # the two maps (held briefly)
        # collection name -> the lock its writes and its mirror's first read take, so a
        # mirror read from Chroma misses no write (writes to other collections go on)
        self._collection_locks: dict[str, threading.Lock] = {}
        # Collections past exact_limit (embedded stores only, as above): an HNSW index of the
        # process's own, kept in step like a mirror (mnemonia.store.approximate)
        # (with none allowed, writes still delete what an earlier open saved: it goes stale)
        self._own = OwnIndexes(
            self, Path(own_index_folder) if own_index_folder else None,
            own_index_limit if own_index_limit > 0 and _usearch() else 0) \
            if self.mode == "embedded" else None
        if url:
            parsed = urlparse(url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise InvalidInputError(
                    f"chroma_url={url!r}: expected http(s)://host:port, e.g. http://127.0.0.1:8000"
                )
            import httpx

            def probe() -> None:
                # Our own short-lived probe, retried; chromadb's client is created once the
                # server answers (a client whose construction fails leaks its connection pool).
                with httpx.Client(timeout=5.0) as http:
                    http.get(f"{url.rstrip('/')}/api/v2/heartbeat").raise_for_status()

            self._call(probe)
            self._client = self._call(lambda: chromadb.HttpClient(
                host=parsed.hostname or "localhost",
                port=parsed.port or (443 if parsed.scheme == "https" else 8000),
                ssl=parsed.scheme == "https", settings=settings,
            ))
        else:
            self._client = _persistent_client(str(path), settings)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write to Chroma: one that raises sets :attr:`write_failed`."""
        try:
            yield
        except BaseException:
            self.write_failed = True
            raise

    # -- retries ---------------------------------------------------------------------------
    def _call(self, fn: Callable[[], T]) -> T:
        return first_then(fn, self._retrying)

    def _retrying(self, fn: Callable[[], T]) -> T:
        retrying = bounded(self._attempts, self._max_wait, _transient)
        try:
            return retrying(fn)
        except RetryError as e:
            last = e.last_attempt.exception()
            raise StoreUnavailableError(
                f"Chroma did not answer after {self._attempts} attempts: {last}"
            ) from last
        except StoreError:
            raise
        except Exception as e:
            if _transient(e):  # pragma: no cover - handled by RetryError
                raise StoreUnavailableError(f"Chroma is unavailable: {e}") from e
            raise StoreError(f"Chroma call failed: {e}") from e
        except BaseException as e:
            # A panic in Chroma's Rust core (damaged files) is a pyo3 PanicException, which
            # derives from BaseException; everything else (KeyboardInterrupt, ...) passes.
            if type(e).__name__ == "PanicException":
                raise StoreError(f"Chroma failed: {e}") from e
            raise

    # -- collections -----------------------------------------------------------------------
    def collection(self, tenant: str, *, model: str, dimension: int,
                   create: bool = True) -> ChromaCollection:
        col = self._collections.get(tenant)
        if col is not None:
            return col
        name = collection_name(tenant, self.namespace)
        meta = {"hnsw:space": "cosine", "embedding_model": model, "dimension": dimension}
        if create:
            try:
                col = self._call(lambda: self._client.get_or_create_collection(
                    name=name, metadata=meta, embedding_function=None))
            except StoreUnavailableError:
                raise
            except StoreError:
                # another process created it at the same moment (a server may refuse the
                # second create): it is there now
                col = self._call(lambda: self._client.get_collection(
                    name=name, embedding_function=None))
        else:
            try:
                col = self._call(lambda: self._client.get_collection(
                    name=name, embedding_function=None))
            except StoreError:
                return None
        self._collections[tenant] = col
        return col

    def opened(self) -> dict[str, ChromaCollection]:
        return dict(self._collections)

    def drop_cached(self, tenant: str) -> None:
        self._collections.pop(tenant, None)
        self._drop_mirror(collection_name(tenant, self.namespace))
        if self._own is not None:
            self._own.forget(collection_name(tenant, self.namespace))

    def tenants(self) -> list[str]:
        """The tenants whose collection (``<namespace>-<tenant>``) exists, sorted; embedded
        stores only: an embedded Chroma folder is the store's own, while on a shared server a
        name ``a-b-c`` may be tenant ``b-c`` of namespace ``a`` or ``c`` of ``a-b`` (server
        mode returns ``[]``: only the tenants the side-store knows are compared there)."""
        if self.mode != "embedded":
            return []
        prefix = f"{self.namespace}-"
        return sorted(col.name[len(prefix):] for col in self._call(self._client.list_collections)
                      if col.name.startswith(prefix))

    def delete_collection(self, tenant: str) -> None:
        """Remove the tenant's collection (an undone import's empty one); missing is fine."""
        self._collections.pop(tenant, None)
        name = collection_name(tenant, self.namespace)
        self._drop_mirror(name)
        if self._own is not None:
            self._own.forget(name, saved=True)
        with self._writing():
            names = self._call(self._client.list_collections)
            if any(getattr(c, "name", c) == name for c in names):
                self._call(lambda: self._client.delete_collection(name=name))

    # -- vectors ---------------------------------------------------------------------------
    def upsert(self, col: ChromaCollection, ids: Sequence[str], vectors: np.ndarray,
               documents: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        with self._writing(), self._mirroring(col) as mirror:
            for start in range(0, len(ids), _MAX_BATCH):
                end = start + _MAX_BATCH
                self._call(functools.partial(
                    col.upsert, ids=list(ids[start:end]), embeddings=vectors[start:end],
                    documents=list(documents[start:end]), metadatas=list(metadatas[start:end])))
                if self._own is not None:
                    self._own.put(col.name, ids[start:end], vectors[start:end])
                if mirror is not None:
                    # the vectors given (Chroma keeps them normalised by itself, a few 1e-8
                    # off), as a mirror read again from the vector source holds them: scores
                    # do not change when the store is opened again
                    mirror.put(list(ids[start:end]),
                               np.asarray(vectors[start:end], dtype=np.float32))
                    if mirror.size > self.exact_limit:
                        self._past_limit(col.name, mirror.size)
                        mirror = None
            if mirror is not None:  # a grown mirror counts against the budget too
                self._make_room(0, keep=col.name)

    def query(self, col: ChromaCollection, vectors: np.ndarray, n: int
              ) -> tuple[list[list[str]], list[list[float]]]:
        """kNN: per query row, ids and cosine similarities, best first. Exact for a
        collection that is mirrored (at most ``exact_limit`` vectors, see :meth:`scores`):
        Chroma's HNSW answer is approximate, and which neighbours it misses can change from
        one process to the next (the threads that built the index), so what ingest links
        would too."""
        if n <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))], [[] for _ in range(len(vectors))]
        mirror = self._mirror(col)
        if mirror is not None:
            return mirror.nearest(vectors, n)
        own: Approximate | None = self._own_index(col)
        if own is not None:
            return own.nearest(vectors, n)
        res = self._call(lambda: col.query(query_embeddings=vectors,
                                           n_results=min(n, _MAX_RESULTS),
                                           include=["distances"]))
        ids = res["ids"]
        sims = [[1.0 - float(d) for d in row] for row in res["distances"]]
        return ids, sims

    def get_vectors(self, col: ChromaCollection, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        res = self._call(lambda: col.get(ids=list(ids), include=["embeddings"]))
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(res["ids"], res["embeddings"],
                                                                   strict=True)}

    def existing(self, col: ChromaCollection, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        res = self._call(lambda: col.get(ids=list(ids), include=[]))
        return set(res["ids"])

    def delete(self, col: ChromaCollection, ids: Sequence[str]) -> None:
        if ids:
            with self._writing(), self._mirroring(col, deleting=len(set(ids))) as mirror:
                self._call(lambda: col.delete(ids=list(ids)))
                if self._own is not None:
                    self._own.drop(col.name, ids)
                if mirror is not None:
                    mirror.drop(ids)

    # -- exact search ----------------------------------------------------------------------
    def scores(self, col: ChromaCollection, query: np.ndarray) -> ExactScores | None:
        """The cosine of ``query`` with every vector of the collection, when it is mirrored
        in memory (an embedded store's collection of at most ``exact_limit`` vectors; its
        vectors are read from Chroma on the first call); else ``None`` (ask :meth:`query`)."""
        mirror = self._mirror(col)
        return mirror.scores(query) if mirror is not None else None

    def mirrored(self, col: ChromaCollection) -> bool:
        """Whether :meth:`scores` answers for the collection without reading Chroma."""
        return self._mirrors.get(col.name) is not None

    def _mirror(self, col: ChromaCollection) -> Mirror | None:
        if self.exact_limit <= 0:
            return None
        name = col.name
        with self._mirror_lock:
            if name in self._mirrors:
                self._mirrors.move_to_end(name)
                return self._mirrors[name]
        with self._collection_lock(name):  # its writes wait: the copy misses none of them
            if name in self._mirrors:
                return self._mirrors[name]
            mirror = None
            size = self.count(col)
            if size > self.exact_limit:
                self._past_limit(name, size)
                return None
            self._make_room(size)
            ids, vectors = self._mirror_vectors(col)
            mirror = Mirror(ids, vectors)
            self._keep_mirror(name, mirror)
            if self._own is not None:  # (one that shrank to the limit)
                self._own.forget(name, saved=True)
            return mirror

    def _mirror_vectors(self, col: ChromaCollection) -> tuple[list[str], np.ndarray]:
        """A new mirror's ids and vectors (called under the collection's lock): Chroma's
        ids, and their vectors from the vector source (the side-store's copy of what each
        write gave Chroma), those it lacks (a memory stored before the side-store kept
        vectors) from Chroma; all from Chroma when there is no source, when it lacks most,
        or when the lengths disagree. Chroma converts every vector it hands back (as float64):
        the 1,000 vectors of a tenant of a 1M store took 21 ms to read from Chroma, 6 ms from
        the side-store (2026-12-02, eighteenth session)."""
        if self._vector_source is None:
            return self.all_vectors(col)
        ids = self.all_ids(col)
        if not ids:
            return ids, np.zeros((0, 0), dtype=np.float32)
        try:
            found, rows = self._vector_source(ids)
        except StoreError as e:
            log.warning("reading the vectors of %s from the side-store failed (%s); reading "
                        "them from Chroma", col.name, e)
            return self.all_vectors(col)
        at = {i: n for n, i in enumerate(found)}
        missing = [i for i in ids if i not in at]
        if 2 * len(missing) > len(ids) or rows.shape[1] != self._dimension(col, ids[0]):
            return self.all_vectors(col)
        if missing:
            extra = self.get_vectors(col, missing)
            if len(extra) < len(missing) or any(v.shape != rows.shape[1:]
                                                for v in extra.values()):
                return self.all_vectors(col)
            at.update((i, len(found) + n) for n, i in enumerate(missing))
            rows = np.concatenate([rows, np.stack([extra[i] for i in missing])])
        # in Chroma's order: equal scores rank as in a mirror kept by writes
        return ids, rows[[at[i] for i in ids]]

    def _dimension(self, col: ChromaCollection, some: str) -> int:
        """The length of the collection's vectors: as its metadata says (given when it was
        made), else as Chroma holds ``some``'s."""
        meta = getattr(col, "metadata", None) or {}
        dimension = meta.get("dimension")
        if isinstance(dimension, int) and dimension > 0:
            return dimension
        held = self.get_vectors(col, [some])
        return int(held[some].shape[0]) if some in held else -1

    def refresh(self, col: ChromaCollection) -> None:
        """Forget the collection's mirror (read again on its next query), once a write has
        changed the vector source's copy of vectors Chroma took before it (a replace): a
        mirror read from the source in between holds the old ones. Waits for a mirror
        being read."""
        with self._collection_lock(col.name):
            self._drop_mirror(col.name)

    def _own_index(self, col: ChromaCollection) -> Approximate | None:
        """The collection's own HNSW index, when it is built (else Chroma's query answers)."""
        if self._own is None:
            return None
        return self._own.ready(col.name) or self._own.index(col, self._collection_lock(col.name))

    def own_index_ready(self, col: ChromaCollection, timeout: float | None = None) -> bool:
        """Whether a query on the collection is answered by the process's own HNSW index
        (starting it if it is not, and waiting up to ``timeout`` seconds for its build);
        ``False`` for a mirrored collection, and without own indexes."""
        if self._own is None or self._mirror(col) is not None:
            return False
        if self._own_index(col) is not None:
            return True
        return self._own.wait(col.name, timeout)

    def _collection_lock(self, name: str) -> threading.Lock:
        with self._mirror_lock:
            return self._collection_locks.setdefault(name, threading.Lock())

    def _keep_mirror(self, name: str, mirror: Mirror | None) -> None:
        with self._mirror_lock:
            self._mirrors[name] = mirror

    def _past_limit(self, name: str, size: int) -> None:
        """The collection holds ``size`` vectors, more than ``exact_limit``: not mirrored."""
        with self._mirror_lock:
            self._mirrors[name] = None
            self._at_least[name] = size

    def _drop_mirror(self, name: str) -> None:
        with self._mirror_lock:
            self._mirrors.pop(name, None)
            self._at_least.pop(name, None)

    def _make_room(self, size: int, keep: str | None = None) -> None:
        """Drop the least recently searched mirrors (never ``keep``'s) until ``size`` more
        vectors fit in :data:`MIRRORED_VECTORS`."""
        with self._mirror_lock:
            held = sum(m.size for m in self._mirrors.values() if m is not None)
            for other in [n for n, m in self._mirrors.items() if m is not None and n != keep]:
                if held + size <= MIRRORED_VECTORS:
                    return
                mirror = self._mirrors.pop(other)
                held -= mirror.size if mirror is not None else 0

    def all_vectors(self, col: ChromaCollection) -> tuple[list[str], np.ndarray]:
        """Every id of the collection and its vector (one row each), read in pages."""
        ids: list[str] = []
        parts: list[np.ndarray] = []
        while True:
            page = self._call(functools.partial(col.get, include=["embeddings"],
                                                limit=_VECTOR_PAGE, offset=len(ids)))
            ids += page["ids"]
            if len(page["ids"]):
                parts.append(np.asarray(page["embeddings"], dtype=np.float32))
            if len(page["ids"]) < _VECTOR_PAGE:
                break
        return ids, (np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32))

    @contextlib.contextmanager
    def _mirroring(self, col: ChromaCollection, *, deleting: int = 0
                   ) -> Iterator[Mirror | None]:
        """A write to the collection, with its mirror (if any) to update as Chroma takes
        each part: under the collection's lock, so no mirror is read from Chroma half-way. A
        write that fails drops the mirror (read again on the next query). A delete of
        ``deleting`` ids lets a collection too large to mirror be counted again once it may
        have come down to ``exact_limit``: it holds at least its last count less the ids
        deleted since (adds only raise that), so it is not counted on every delete (Chroma's
        count takes 12 ms at 100,000 vectors). The own indexes hear of the write first (what
        is saved of the collection goes) and take its vectors after Chroma did; a write that
        fails drops the collection's own index too."""
        name, own = col.name, self._own
        if self.exact_limit <= 0 and own is None:
            yield None
            return
        with self._collection_lock(name):
            if own is not None:
                own.writing(name)
            mirror = self._mirrors.get(name) if self.exact_limit > 0 else None
            if deleting and mirror is None and self.exact_limit > 0:
                with self._mirror_lock:
                    left = self._at_least.get(name, 0) - deleting
                    if left > self.exact_limit:
                        self._at_least[name] = left
                if left <= self.exact_limit:
                    self._drop_mirror(name)
            try:
                yield mirror
            except BaseException:
                self._drop_mirror(name)
                if own is not None:  # built again on the next query
                    own.forget(name, saved=True)
                raise

    def count(self, col: ChromaCollection) -> int:
        return int(self._call(col.count))

    def all_ids(self, col: ChromaCollection) -> list[str]:
        """Every id in a collection, read in pages (no vectors)."""
        out: list[str] = []
        while True:
            page = self._call(functools.partial(
                col.get, include=[], limit=_ID_PAGE, offset=len(out)))["ids"]
            out += page
            if len(page) < _ID_PAGE:
                return out

    def close(self) -> None:
        """Release the client (sockets of an HTTP client, files of an embedded one)."""
        if self._own is not None:  # saved for the next open (before the client goes)
            self._own.close()
        self._collections.clear()
        self._mirrors.clear()
        self._at_least.clear()
        servers = [getattr(self._client, "_server", None),
                   getattr(getattr(self._client, "_admin_client", None), "_server", None)]
        try:
            closer = getattr(self._client, "close", None)
            if closer is not None:
                closer()
        except Exception as e:  # a dead server must not make close() fail
            log.debug("closing the Chroma client failed: %s", e)
        # chromadb's sync HTTP client never closes its httpx session. Every HttpClient has a
        # system of its own (chromadb gives FastAPI clients unique identifiers), so the
        # session is ours alone: close it so no socket is left open, even if the server died.
        for server in servers:
            session = getattr(server, "_session", None)
            if self.mode == "server" and session is not None:
                session.close()

    def heartbeat(self) -> int:
        return int(self._call(self._client.heartbeat))
