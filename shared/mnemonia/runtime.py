"""What every layer below the front door receives: config, clock, embedder, the two stores,
recall's caches (:class:`~mnemonia.caches.RecallCache`, one attribute), and the ``writing()`` /
``reading()`` scopes.

:class:`~mnemonia.engine.MemoryEngine` builds one :class:`Runtime` when it opens a store and
hands it to :mod:`mnemonia.ingest`, :mod:`mnemonia.recall`, :mod:`mnemonia.lifecycle`,
:mod:`mnemonia.consistency`, :mod:`mnemonia.transfer` and the :mod:`mnemonia.maintenance`
jobs; none of them imports the engine.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import numpy as np

from mnemonia import entities as ent
from mnemonia.caches import Changes, RecallCache
from mnemonia.config import MnemoniaConfig
from mnemonia.embeddings import Embedder, Reranker
from mnemonia.errors import InvalidInputError, StoreError, shown
from mnemonia.store.chroma import ChromaIndex
from mnemonia.store.closing import mark_clean_close, take_clean_close
from mnemonia.store.database import Connection
from mnemonia.store.lease import WriterLease, new_holder
from mnemonia.store.repository import SideStore
from mnemonia.store.vectors import VectorCollection, VectorIndex

__all__ = ["Runtime", "StoreLock", "Summariser", "WriteScope", "store_folder", "store_folders"]

Summariser = Callable[[list[str]], str]
"""``texts -> text``: writes a concept's text in consolidation (e.g. an LLM)."""


_Result = TypeVar("_Result")

log = logging.getLogger("mnemonia.store")

HELPER_THREADS = 4
"""Helper threads per engine for the side work of recalls running at the same time."""


class StoreLock:
    """An exclusive advisory lock on an embedded store folder: one writing process at a time."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".mnemonia.lock"
        try:
            self._fh = open(self.path, "a+")  # noqa: SIM115 - held for the engine's lifetime
        except OSError as e:
            raise StoreError(
                f"cannot use the store folder {str(folder)!r}: {e.strerror or e} (writing "
                f"{self.path.name!r}); an embedded store needs a folder it can write to"
            ) from e
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            self._fh.close()
            raise StoreError(
                f"the embedded store at {str(folder)!r} is open in another process; an embedded "
                "store allows one process at a time (close the other engine, or use server mode: "
                "MemoryEngine.open(chroma_url=..., sql_url=...))"
            ) from e

    def release(self) -> None:
        if not self._fh.closed:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()


def store_folders(path: Any, chroma_url: str | None, sql_url: str | None
             ) -> tuple[Path | None, str]:
    """The store folder (made if missing) and the side-store URL."""
    folder: Path | None = None
    if chroma_url is None or path is not None:
        folder = _make_folder(path)
    if sql_url is None:
        if folder is None:
            raise InvalidInputError(
                "server mode needs sql_url (e.g. 'postgresql+psycopg://user@host/db') or a "
                "path for a local SQLite side-store"
            )
        sql_url = f"sqlite:///{folder / 'mnemonia.sqlite3'}"
    return folder, sql_url


def _check_path(path: Any) -> None:
    if path is not None and not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"path={shown(path)}: must be a folder path (str or Path)")


def store_folder(path: Any) -> Path:
    """The absolute embedded store folder of ``path`` (default ``./memory``)."""
    _check_path(path)
    return Path(path if path is not None else "./memory").expanduser().resolve()


def _make_folder(path: Any) -> Path:
    """The embedded store folder of ``path`` (default ``./memory``), made if missing."""
    _check_path(path)
    try:
        folder = store_folder(path)
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:
        raise InvalidInputError(f"path={str(path)!r} is a file, not a folder; an embedded "
                                "store is a folder (made if missing)") from e
    except NotADirectoryError as e:
        raise InvalidInputError(f"path={str(path)!r}: a folder on the way is a file; an "
                                "embedded store is a folder (made if missing)") from e
    except (OSError, ValueError) as e:  # no permission, read-only, a NUL in the name, ...
        raise StoreError(f"cannot make the store folder {str(path)!r}: {e}") from e
    if not folder.is_dir():
        raise InvalidInputError(f"path={str(path)!r} is not a folder")
    return folder


class WriteScope:
    """A write scope's declared changes (:meth:`Runtime.changing`), which the write may
    narrow once it knows what it wrote."""

    def __init__(self, declared: Sequence[Changes]) -> None:
        self.declared = tuple(declared)
        self.narrowed: tuple[Changes, ...] | None = None

    def narrow(self, *changes: Changes) -> None:
        """What the write changed, if it goes through (instead of the declared changes),
        each of the tenant of a declared one."""
        tenants = {c.tenant for c in self.declared}
        stray = [c.tenant for c in changes if c.tenant not in tenants]
        if stray:
            raise ValueError(f"narrowed to tenant {stray[0]!r}, not declared by the scope")
        self.narrowed = changes


class Runtime:
    """The open store and everything the layers below the engine share.

    Thread-safe within one process: writers take :meth:`writing` (or hold :meth:`exclusive`
    across several transactions); readers take :meth:`reading`. A write scope names what
    its write changes (:class:`~mnemonia.caches.Changes`); recall's caches
    (:attr:`caches`) drop what it made stale when the scope ends.
    """

    def __init__(self, *, vectors: VectorIndex, sql: SideStore, config: MnemoniaConfig,
                 clock: Any, embedder: Embedder, path: Path | None = None,
                 entity_extractor: ent.EntityExtractor | None = None,
                 summariser: Summariser | None = None, lock: StoreLock | None = None,
                 reranker: Reranker | None = None, lease: WriterLease | None = None) -> None:
        self.config = config
        # who writes: the name this engine's unfinished writes carry (memory_writers); with
        # a lease (a store other processes may open), repair elsewhere leaves them alone
        self.lease = lease
        self.writer = lease.holder if lease is not None else new_holder()
        self.reranker = reranker
        self.clock = clock
        self.embedder = embedder
        self.path = path
        self.vectors = vectors
        self.sql = sql
        self.summariser = summariser
        self.extract: ent.EntityExtractor = entity_extractor or ent.extract_entities
        self.type_weights: dict[str, float] = dict(config.relation_types)
        self.known_tenants: set[str] = set()
        self.caches = RecallCache(config.query_cache_size)  # every cache recall keeps
        sql.db.on_change = self.caches.changing  # what the store's write methods report
        self.closed = False
        self._lock = threading.RLock()
        self._helpers_lock = threading.Lock()  # making and closing the helper threads
        self._folder_lock = lock
        self._helpers: ThreadPoolExecutor | None = None  # recall's side work (aside)
        # the clean-close mark (mnemonia.store.closing): whether this store leaves one on
        # close (an embedded store with both stores in its locked folder); whether the two
        # stores are known to agree (the last close vouched for them, or the open's check
        # compared them); whether a write of this process raised since
        self.marks_close = False
        self.consistent = False
        self.write_failed = False

    @classmethod
    def open(cls, path: Any, *, chroma_url: str | None, sql_url: str | None,
             config: MnemoniaConfig, clock: Any, embedder: Embedder,
             entity_extractor: ent.EntityExtractor | None, summariser: Summariser | None,
             namespace: str, reranker: Reranker | None = None) -> Runtime:
        """Open both stores (an embedded store's folder locked for this process)."""
        if not callable(getattr(clock, "now", None)):
            raise InvalidInputError(f"clock={shown(clock)}: must be a Clock (an object whose "
                                    "now() returns an aware datetime), e.g. ManualClock")
        folder, url = store_folders(path, chroma_url, sql_url)
        lock = StoreLock(folder) if chroma_url is None and folder is not None else None
        side: SideStore | None = None
        lease: WriterLease | None = None
        # both stores in the locked folder: its last clean close may vouch for them (the mark
        # taken before anything here touches a store)
        own = folder if lock is not None and sql_url is None else None
        try:
            clean = own is not None and take_clean_close(own)
            side = SideStore(url, attempts=config.retry_attempts, max_wait=config.retry_max_wait)
            side.setup()
            if lock is not None and sql_url is None:
                # the folder's own SQLite file, locked for this process: every write to it
                # is this process's, so recall may keep the rows it read between calls
                side.keep_rows()
            vectors = ChromaIndex(
                path=str(folder / "chroma") if chroma_url is None and folder else None,
                url=chroma_url, attempts=config.retry_attempts, max_wait=config.retry_max_wait,
                namespace=namespace, exact_limit=config.exact_search_limit,
                own_index_limit=config.own_index_limit,
                own_index_folder=folder / "indexes" if chroma_url is None and folder else None,
                vector_source=side.vectors.vectors_of)
            if lock is None:  # other processes may open this store: hold a writer lease
                lease = WriterLease(side, new_holder())
                lease.start()
        except BaseException:
            if lease is not None:
                lease.stop()
            if side is not None:
                side.dispose()
            if lock is not None:
                lock.release()
            raise
        rt = cls(vectors=vectors, sql=side, config=config, clock=clock, embedder=embedder,
                 path=folder, entity_extractor=entity_extractor, summariser=summariser,
                 lock=lock, reranker=reranker, lease=lease)
        rt.marks_close = own is not None
        rt.consistent = clean
        return rt

    # -- scopes ------------------------------------------------------------------------------
    def check_open(self) -> None:
        """Raise :class:`StoreError` once the engine is closed."""
        if self.closed:
            raise StoreError("this MemoryEngine is closed; open a new one")

    def now(self) -> datetime:
        return self.clock.now()  # type: ignore[no-any-return]

    @contextmanager
    def changing(self, *changes: Changes) -> Iterator[WriteScope]:
        """A write (of one or more steps) that changes what ``changes`` says: when it ends,
        committed or not, recall's caches drop what it made stale (what the write narrowed
        it to, :meth:`WriteScope.narrow`, if it went through). The one place they learn of a
        write; the store's write methods report, as they write, what only they know
        (:meth:`~mnemonia.store.database.Database.report`). Takes no lock: see
        :meth:`exclusive` and :meth:`writing`."""
        scope = WriteScope(changes)
        self.caches.begins(*changes)
        went_through = False
        try:
            yield scope
            went_through = True
        except BaseException:
            self.write_failed = True  # (no clean-close mark: the next open checks)
            raise
        finally:
            ended = scope.narrowed if went_through and scope.narrowed is not None else changes
            self.caches.changed(*ended, begun=changes)

    @contextmanager
    def exclusive(self, *changes: Changes) -> Iterator[WriteScope]:
        """The write lock alone, for a write that spans several transactions (``changes``:
        what it changes, as in :meth:`changing`)."""
        with self.changing(*changes) as scope, self._lock:
            yield scope

    @contextmanager
    def writing(self, *changes: Changes) -> Iterator[Connection]:
        """A transaction under the write lock, committed on leaving (``changes``: what it
        changes, as in :meth:`changing`)."""
        with self.narrowing(*changes) as (_, conn):
            yield conn

    @contextmanager
    def narrowing(self, *changes: Changes) -> Iterator[tuple[WriteScope, Connection]]:
        """:meth:`writing`, with the write's scope: the write may narrow what it changes
        once it knows (:meth:`WriteScope.narrow`)."""
        with self.changing(*changes) as scope, self._lock, self.sql.begin() as conn:
            yield scope, conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for reads (no write lock)."""
        with self.sql.connect() as conn:
            yield conn

    def aside(self, fn: Callable[..., _Result], /, *args: Any) -> Future[_Result]:
        """``fn(*args)`` on a helper thread (recall reads its keyword side there while the
        query is embedded); the result or the error comes from the future."""
        with self._helpers_lock:
            self.check_open()  # no new helper threads for a closed engine
            if self._helpers is None:
                self._helpers = ThreadPoolExecutor(max_workers=HELPER_THREADS,
                                                   thread_name_prefix="mnemonia-recall")
            return self._helpers.submit(fn, *args)

    def close(self) -> None:
        """Close both stores and release the folder lock. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        with self._helpers_lock:
            helpers, self._helpers = self._helpers, None
        if helpers is not None:
            helpers.shutdown(wait=True)
        vouched = self.path if self.marks_close and self.consistent and not self.write_failed \
            and not self.vectors.write_failed and self._opened_collections_agree() else None
        self.vectors.close()
        if self.lease is not None:
            self.lease.stop()
        self.sql.dispose()
        if vouched is not None:
            mark_clean_close(vouched)  # (both stores closed: their files are final)
        if self._folder_lock is not None:
            self._folder_lock.release()

    def _opened_collections_agree(self) -> bool:
        """At close: each collection this process opened holds as many vectors as the
        side-store holds memories of its tenant. A write to one behind the engine's back
        (chromadb's own call on its handle) then leaves no clean-close mark, and the next
        open compares the stores. Only opened collections are asked (Chroma has them
        loaded: a count is cheap); anything failing here leaves no mark either."""
        opened = self.vectors.opened()
        if not opened:
            return True
        try:
            with self.reading() as conn:
                counts = self.sql.inspect.row_counts(conn, list(opened))
            return all(self.vectors.count(col) == counts.get(tenant, 0)
                       for tenant, col in opened.items())
        except Exception as e:
            log.warning("could not compare the collections at close (the next open "
                        "compares the stores): %s", e)
            return False

    # -- shared lookups --------------------------------------------------------------------
    @overload
    def collection(self, tenant: str, *, create: Literal[True]) -> VectorCollection: ...

    @overload
    def collection(self, tenant: str, *, create: bool) -> VectorCollection | None: ...

    def collection(self, tenant: str, *, create: bool) -> VectorCollection | None:
        """The tenant's collection (``None`` when it has none and ``create`` is off)."""
        if create:
            return self.vectors.collection(tenant, model=self.embedder.name,
                                           dimension=self.embedder.dimension, create=True)
        if tenant not in self.known_tenants:
            with self.reading() as conn:
                if not self.sql.collections.has_collection(conn, tenant):
                    return None
            self.known_tenants.add(tenant)
        return self.vectors.collection(tenant, model=self.embedder.name, dimension=0,
                                       create=False)

    def candidate_vectors(self, conn: Connection, col: VectorCollection | None, ids: Sequence[str]
                          ) -> dict[str, np.ndarray]:
        """Vectors of ``ids``: from the side-store, and from Chroma for memories stored
        before the side-store kept vectors."""
        out = {i: np.frombuffer(b, dtype="<f4")
               for i, b in self.sql.vectors.vectors_get(conn, ids).items()}
        missing = [i for i in ids if i not in out]
        if missing and col is not None:
            out.update(self.vectors.get_vectors(col, missing))
        return out

    def tenants(self) -> list[str]:
        with self.reading() as conn:
            return self.sql.collections.tenants(conn)
