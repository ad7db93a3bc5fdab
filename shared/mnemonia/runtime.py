"""What every layer below the front door receives: config, clock, embedder, the two stores, the
entity cache, and the ``writing()`` / ``reading()`` scopes.

:class:`~mnemonia.engine.MemoryEngine` builds one :class:`Runtime` when it opens a store and
hands it to :mod:`mnemonia.ingest`, :mod:`mnemonia.recall`, :mod:`mnemonia.lifecycle`,
:mod:`mnemonia.consistency`, :mod:`mnemonia.transfer` and the :mod:`mnemonia.maintenance`
jobs; none of them imports the engine.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import numpy as np

from mnemonia import entities as ent
from mnemonia.config import MnemoniaConfig
from mnemonia.embeddings import Embedder, QueryCache, Reranker
from mnemonia.errors import InvalidInputError, StoreError, shown
from mnemonia.store.chroma import ChromaIndex
from mnemonia.store.database import Connection
from mnemonia.store.lease import WriterLease, new_holder
from mnemonia.store.repository import SideStore
from mnemonia.store.rowcache import split_kept
from mnemonia.store.vectors import VectorCollection, VectorIndex

__all__ = ["EntityIndex", "Runtime", "StoreLock", "Summariser", "TermIndex", "store_folder",
           "store_folders"]

Summariser = Callable[[list[str]], str]
"""``texts -> text``: writes a concept's text in consolidation (e.g. an LLM)."""


@dataclass
class EntityIndex:
    """Per-tenant entity names, document frequencies and label vectors, kept in memory."""

    labels: list[str]
    names: list[str]
    df: dict[str, int]
    matrix: np.ndarray | None
    active: int | None = None  # active memories of the tenant, read once (recall's IDF)
    # first 3+ character word of a name -> (name, all its 3+ character words), built once
    by_word: dict[str, list[tuple[str, tuple[str, ...]]]] | None = None


@dataclass
class TermIndex:
    """The words memories use that have a word vector (for the store's model, every
    tenant's), kept in memory for recall's keyword expansion; rebuilt after enrichment."""

    terms: list[str]
    matrix: np.ndarray | None
    position: dict[str, int]
    stems: dict[str, list[str]] | None = None  # {Porter stem: its terms}, built when asked


@dataclass
class CueIndex:
    """Per-tenant use cues: the queries memories were used for (with their vectors), and how
    often each memory was used or failed; kept in memory, rebuilt after a use is recorded."""

    ids: list[str]
    queries: list[str]
    matrix: np.ndarray | None
    uses: dict[str, int]
    fails: dict[str, int]


_Index = TypeVar("_Index")
_Result = TypeVar("_Result")

RECENT_QUERIES = 4096
"""Memories per tenant whose last recall query is remembered (for the cue of a later use)."""
HELPER_THREADS = 4
"""Helper threads per engine for the side work of recalls running at the same time."""
KEPT_MEMORIES = 200_000
"""Memories whose keyword words recall keeps in memory, and per tenant and kind of link,
memories whose links it keeps (past this many a cache starts afresh)."""

NEAR_LINKS = "near"
"""Kinds of kept links named with this prefix are neighbourhoods (what lies within some
hops of a memory): they depend on other memories' links, so a write of any relation of the
tenant drops all of them."""


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


class Runtime:
    """The open store and everything the layers below the engine share.

    Thread-safe within one process: writers take :meth:`writing` (or hold :meth:`exclusive`
    across several transactions); readers take :meth:`reading`.
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
        self.query_cache = QueryCache(config.query_cache_size)
        self.entity_indexes: dict[str, EntityIndex] = {}
        # Label vectors outlive the entity indexes (which every add drops).
        self.label_vectors: dict[str, np.ndarray] = {}
        self.cue_indexes: dict[str, CueIndex] = {}
        self.cue_vectors: dict[str, np.ndarray] = {}
        self.term_index: TermIndex | None = None
        self.word_vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # query words
        self.word_expansions: dict[str, dict[str, float]] = {}  # query word -> related words
        # tenant -> memory id -> the query of the last recall (with touches) that returned it
        self.recent_queries: dict[str, OrderedDict[str, str]] = {}
        self.last_recall: dict[str, list[str]] = {}  # tenant -> ids of its last recall
        self.known_tenants: set[str] = set()
        # memory id -> (text, metadata, created_at, keyword words, speaker) (recall's fusion)
        self.keyword_words: dict[str, tuple[str, str, float, frozenset[str], str | None]] = {}
        # tenant -> kind -> memory id -> its links, as recall read them: "follows" (the
        # memories it follows or that follow it), "spread" (what spreading
        # may follow from it, strongest first), "hidden" (its contradictions and supersessions)
        self.links: dict[str, dict[str, dict[str, tuple[Any, ...]]]] = {}
        self._written: dict[str, set[str]] = {}  # tenant -> ids whose relations a write changes
        self.closed = False
        self._lock = threading.RLock()
        self._cache_lock = threading.Lock()  # the index caches, their epochs, recent queries
        self._index_epochs: dict[str, int] = {}  # tenant -> how often its indexes were dropped
        self._folder_lock = lock
        self._helpers: ThreadPoolExecutor | None = None  # recall's side work (aside)

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
        try:
            side = SideStore(url, attempts=config.retry_attempts, max_wait=config.retry_max_wait)
            side.setup()
            if lock is not None and sql_url is None:
                # the folder's own SQLite file, locked for this process: every write to it
                # is this process's, so recall may keep the rows it read between calls
                side.keep_rows()
            vectors = ChromaIndex(
                path=str(folder / "chroma") if chroma_url is None and folder else None,
                url=chroma_url, attempts=config.retry_attempts, max_wait=config.retry_max_wait,
                namespace=namespace, exact_limit=config.exact_search_limit)
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
        return cls(vectors=vectors, sql=side, config=config, clock=clock, embedder=embedder,
                   path=folder, entity_extractor=entity_extractor, summariser=summariser,
                   lock=lock, reranker=reranker, lease=lease)

    # -- scopes ------------------------------------------------------------------------------
    def check_open(self) -> None:
        """Raise :class:`StoreError` once the engine is closed."""
        if self.closed:
            raise StoreError("this MemoryEngine is closed; open a new one")

    def now(self) -> datetime:
        return self.clock.now()  # type: ignore[no-any-return]

    def exclusive(self) -> threading.RLock:
        """The write lock alone, for a write that spans several transactions."""
        return self._lock

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """A transaction under the write lock, committed on leaving."""
        with self._lock, self.sql.begin() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for reads (no write lock)."""
        with self.sql.connect() as conn:
            yield conn

    def aside(self, fn: Callable[..., _Result], /, *args: Any) -> Future[_Result]:
        """``fn(*args)`` on a helper thread (recall reads its keyword side there while the
        query is embedded); the result or the error comes from the future."""
        with self._cache_lock:
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
        with self._cache_lock:
            helpers, self._helpers = self._helpers, None
        if helpers is not None:
            helpers.shutdown(wait=True)
        self.vectors.close()
        if self.lease is not None:
            self.lease.stop()
        self.sql.dispose()
        if self._folder_lock is not None:
            self._folder_lock.release()

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

    def forget_terms(self) -> None:
        """Drop the word-vector index (new words got vectors)."""
        self.term_index = None
        self.word_expansions = {}

    def index_epoch(self, tenant: str) -> int:
        """How often the tenant's entity or cue index was dropped so far: read it before the
        reads an index is built from, and hand it to :meth:`keep_index`."""
        return self._index_epochs.get(tenant, 0)

    def keep_index(self, cache: dict[str, _Index], tenant: str, index: _Index,
                   epoch: int) -> None:
        """Cache ``index`` unless a write dropped the tenant's indexes since ``epoch``: its
        reads may then predate that write (another thread's), so it serves only the recall
        that built it and the next one builds afresh."""
        with self._cache_lock:
            if self._index_epochs.get(tenant, 0) == epoch:
                cache[tenant] = index

    def _drop_index(self, cache: dict[str, Any], tenant: str) -> None:
        with self._cache_lock:
            self._index_epochs[tenant] = self._index_epochs.get(tenant, 0) + 1
            cache.pop(tenant, None)

    def forget_entities(self, tenant: str) -> None:
        """Drop the tenant's entity index (it is rebuilt on the next recall), and the kept
        links of the memories whose relations were written since (:meth:`links_written`)."""
        self._drop_index(self.entity_indexes, tenant)
        self._forget_written(tenant)

    def forget_links(self, tenant: str) -> None:
        """Drop all the tenant's kept links (read again as recall needs them)."""
        self._drop_index(self.links, tenant)

    def links_written(self, tenant: str, ids: Iterable[str]) -> None:
        """Relations of ``ids`` are being written: their kept links are dropped now, and
        again by the :meth:`forget_entities` that follows the write's commit (a recall
        between the two may have read and kept the links as they were before)."""
        ids = set(ids)
        with self._cache_lock:
            self._written.setdefault(tenant, set()).update(ids)
            self._drop_links(tenant, ids)

    def _forget_written(self, tenant: str) -> None:
        with self._cache_lock:
            self._drop_links(tenant, self._written.pop(tenant, set()))

    def _drop_links(self, tenant: str, ids: set[str]) -> None:
        """Drop the kept links of ``ids``, and every kept neighbourhood (:data:`NEAR_LINKS`),
        the cache lock held, so that a recall that read them before cannot keep them (the
        epoch moves)."""
        if not ids:
            return
        self._index_epochs[tenant] = self._index_epochs.get(tenant, 0) + 1
        for kind, kept in self.links.get(tenant, {}).items():
            if kind.startswith(NEAR_LINKS):
                kept.clear()
                continue
            for mid in ids:
                kept.pop(mid, None)

    def kept_links(self, tenant: str, kind: str) -> Mapping[str, tuple[Any, ...]]:
        """The links of ``kind`` kept for the tenant's memories (by memory id)."""
        return self.links.get(tenant, {}).get(kind) or {}

    def links_of(self, tenant: str, kind: str, ids: Iterable[str],
                 read: Callable[[list[str]], Mapping[str, tuple[Any, ...]]]
                 ) -> dict[str, tuple[Any, ...]]:
        """The links of ``kind`` of each of ``ids``: the kept ones, and for the others what
        ``read(ids not kept)`` answers (for each id it is given), which is kept too."""
        known = self.kept_links(tenant, kind)
        epoch = self.index_epoch(tenant)
        out, ask = split_kept(known, ids)
        if ask:
            learned = read(sorted(ask))
            self.keep_links(tenant, kind, learned, epoch)
            out.update(learned)
        return out

    def keep_links(self, tenant: str, kind: str, links: Mapping[str, tuple[Any, ...]],
                   epoch: int) -> None:
        """Keep the links of ``kind`` of some memories, unless a write dropped the tenant's
        indexes since ``epoch`` (see :meth:`keep_index`)."""
        with self._cache_lock:
            if self._index_epochs.get(tenant, 0) != epoch:
                return
            known = self.links.setdefault(tenant, {}).setdefault(kind, {})
            if len(known) + len(links) > KEPT_MEMORIES:
                known.clear()
            known.update(links)

    def keep_keyword_words(self, memory_id: str,
                           entry: tuple[str, str, float, frozenset[str], str | None]) -> None:
        """Cache the keyword words of one memory (checked against its text, metadata and
        time when read back, so an edited memory is tokenised afresh)."""
        with self._cache_lock:
            if len(self.keyword_words) >= KEPT_MEMORIES:
                self.keyword_words.clear()
            self.keyword_words[memory_id] = entry

    def forget_indexes(self, tenant: str) -> None:
        """Drop the tenant's entity and cue indexes: its memories and events changed
        wholesale (an import, a repair, a purge)."""
        self.forget_entities(tenant)
        self.forget_cues(tenant)
        self.forget_links(tenant)

    def forget_cues(self, tenant: str) -> None:
        """Drop the tenant's cue index (it is rebuilt on the next recall)."""
        self._drop_index(self.cue_indexes, tenant)

    def note_queries(self, tenant: str, ids: Sequence[str], query: str) -> None:
        """Remember that ``query`` recalled ``ids`` (the cue of a use reported later)."""
        with self._cache_lock:  # recalls on several threads: no pop between set and move
            self.last_recall[tenant] = list(ids)
            recent = self.recent_queries.setdefault(tenant, OrderedDict())
            for mid in ids:
                recent[mid] = query
                recent.move_to_end(mid)
            while len(recent) > RECENT_QUERIES:
                recent.popitem(last=False)

    def last_recalled(self, tenant: str) -> list[str]:
        """Ids of the tenant's last recall with touches in this process (none: ``[]``)."""
        return list(self.last_recall.get(tenant, ()))

    def query_of(self, tenant: str, memory_id: str) -> str | None:
        """The query of the last recall in this process that returned the memory, if any."""
        recent = self.recent_queries.get(tenant)
        return recent.get(memory_id) if recent is not None else None

    def tenants(self) -> list[str]:
        with self.reading() as conn:
            return self.sql.collections.tenants(conn)
