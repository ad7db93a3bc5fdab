"""The SQL side-store (SQLAlchemy Core): the system of record for lifecycle state, relations,
logs and the keyword index, and the one home of every SQL statement Mnemonia runs.

SQLite by default (a file next to the Chroma folder, FTS5 with bm25 ranking); any SQLAlchemy URL
works, with PostgreSQL full-text search in server mode. Dialect branches live here only; the
tables and migrations are in :mod:`mnemonia.store.schema`.
Times are stored as float seconds since the epoch (UTC).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import time
from collections import Counter, namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from mnemonia.clock import from_ts
from mnemonia.config import DEFAULT_KEYWORD_POSTINGS
from mnemonia.errors import (
    MemoryNotFoundError,
    StoreError,
    StoreFileChangedError,
    StoreUnavailableError,
)
from mnemonia.models import KINDS, Event, Memory, Relation
from mnemonia.scoring.reevaluation import STATES
from mnemonia.scoring.sm2 import SM2State
from mnemonia.store.retry import FailureLog, first_then
from mnemonia.store.rowcache import RowCache
from mnemonia.store.schema import (
    ITEM_KEY,
    MIGRATIONS,
    access_log,
    collections,
    item_expressions,
    keyword_terms,
    kv,
    maintenance_leases,
    memories,
    memory_entities,
    memory_events,
    memory_vectors,
    memory_writers,
    relations,
    schema_migrations,
    tenant_token,
    term_vectors,
)
from mnemonia.validation import memory_id as check_id

__all__ = ["MAX_KEYWORD_POSTINGS", "WRITER_LEASE", "Connection", "SideStore", "SqlCondition",
           "chunks"]

log = logging.getLogger("mnemonia")

# bm25 ranking scores every memory a query word occurs in, so a word found in a large share of
# a big store would make keyword search grow with the store. Query words are taken rarest
# first while their total number of postings (in the asking tenant) stays within a budget
# (``MnemoniaConfig.keyword_postings``); the words left out are the most common ones, whose
# idf is the smallest anyway.
MAX_KEYWORD_POSTINGS = DEFAULT_KEYWORD_POSTINGS

_WORD = re.compile(r"\w+")



MIGRATION_LOCK = 7_316_402_913
"""The PostgreSQL advisory lock key the migrations run under (one process at a time)."""
WRITER_JOB = "writer:"
"""Lease name prefix of a process writing to the store (``writer:<holder>``)."""
WRITER_LEASE = 30.0
"""Seconds a writer lease runs unless renewed; an open engine renews it every quarter of
this. A process stalled or cut off from the side-store for longer may see a write of its
taken over by another process's repair (:class:`~mnemonia.errors.StoreWriteTakenOverError`)."""


def _open_hint(reason: object) -> str:
    """What to do about a SQLite store that cannot be opened for ``reason``."""
    text = str(reason).lower()
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return ("The file is damaged or not a Mnemonia store: restore it from a backup, or "
                "move it away to start an empty store.")
    if "readonly" in text or "read-only" in text or "unable to open" in text \
            or "permission" in text:
        return ("The file or its folder cannot be written: make them writable (an embedded "
                "store writes on every call, recall included).")
    return ""

_MEMORY_COLUMNS = ", ".join(f"m.{c.name}" for c in memories.columns)
_MEMORY_COLUMNS_EDGES = _MEMORY_COLUMNS + (
    ", (EXISTS (SELECT 1 FROM relations AS r WHERE r.tenant = m.tenant AND r.src = m.id) OR "
    "EXISTS (SELECT 1 FROM relations AS r WHERE r.tenant = m.tenant AND r.dst = m.id)) "
    "AS has_edges")


def _committed(status: Any) -> Any:
    """``status = 'committed'``, written (``status || ''``) so that no index on the status
    serves it. Nearly every row is committed, but without statistics SQLite takes the status
    index as selective: ``id IN (...) AND status = 'committed'`` then walked the whole status
    index instead of the primary key (0.75 s against 0.02 s for 2,000 ids at 1M memories)."""
    return status.concat("") == "committed"


_COMMITTED_SQL = "(m.status || '') = 'committed'"
""":func:`_committed` in the raw SQL over ``memories AS m``."""


def _opt_dt(ts: float | None) -> datetime | None:
    return None if ts is None else from_ts(ts)


# Values shared by the rows that hold the same (both are immutable): most memories have the
# starting SM-2 state, and the entity lists of a tenant repeat. Bounded (least recently used
# go first); keyed by type too, so an int and an equal float never share a value.
_SHARED_VALUES = 4096


@functools.lru_cache(maxsize=_SHARED_VALUES, typed=True)
def _sm2(easiness: float, interval_days: int, repetitions: int, next_review: float | None,
         last_quality: int) -> SM2State:
    return SM2State(easiness=easiness, interval_days=interval_days, repetitions=repetitions,
                    next_review=_opt_dt(next_review), last_quality=last_quality)


@functools.lru_cache(maxsize=_SHARED_VALUES, typed=True)
def _entities(stored: str) -> tuple[str, ...]:
    return tuple(json.loads(stored))


@dataclass(frozen=True)
class SqlCondition:
    """A boolean SQL expression over a ``memories`` row (alias ``m``), written with ``?``
    placeholders, and its parameters: how a filter built here reaches the reads that apply
    it (recall's candidate rows, item pages) without SQL anywhere else."""

    sql: str
    params: tuple[Any, ...] = ()

    def and_(self, other: SqlCondition | None) -> SqlCondition:
        if other is None:
            return self
        return SqlCondition(f"({self.sql}) AND ({other.sql})", self.params + other.params)


_TRUE = SqlCondition("1 = 1")
_FALSE = SqlCondition("1 = 0")


def _all(conds: Sequence[SqlCondition]) -> SqlCondition:
    if not conds:
        return _TRUE
    return SqlCondition(" AND ".join(f"({c.sql})" for c in conds),
                        tuple(p for c in conds for p in c.params))


def _any(conds: Sequence[SqlCondition]) -> SqlCondition:
    if not conds:
        return _FALSE
    return SqlCondition(" OR ".join(f"({c.sql})" for c in conds),
                        tuple(p for c in conds for p in c.params))


def _not(cond: SqlCondition) -> SqlCondition:
    return SqlCondition(f"NOT ({cond.sql})", cond.params)


_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_SQLITE_TYPES = {"object": ("object",), "array": ("array",), "string": ("text",),
                 "null": ("null",), "number": ("integer", "real")}
_ITEM_VALUE = (ITEM_KEY, "value")
Path = tuple[str | int, ...]


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


class _JsonFilter:
    """Predicates on the JSON inside ``m.metadata``, spelled for SQLite (``json_type`` /
    ``json_extract``) or PostgreSQL (``jsonb``). Each one is TRUE or FALSE, never NULL (a
    missing field is FALSE), so NOT and OR of them mean what they say.

    Semantics are JSON's (what PostgreSQL's jsonb compares): ``true`` is not ``1``,
    ``1`` equals ``1.0``, objects compare by keys and lists by position.
    """

    def __init__(self, dialect: str) -> None:
        if dialect not in ("sqlite", "postgresql"):
            raise StoreError(f"value filters need SQLite or PostgreSQL, not {dialect!r}")
        self.pg = dialect == "postgresql"

    # -- leaves ----------------------------------------------------------------------------
    def _at(self, path: Path) -> SqlCondition:
        """PostgreSQL: the jsonb value at ``path`` (NULL when missing)."""
        return SqlCondition("(m.metadata::jsonb #> CAST(? AS text[]))",
                            ([str(p) for p in path],))

    @staticmethod
    def _sqlite_path(path: Path) -> str:
        # Labels are quoted as the stored JSON spells them (json.dumps escapes), which is
        # what SQLite's path lookup compares; '"' cannot be quoted (validation refuses it).
        return "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{json.dumps(p)[1:-1]}"'
                             for p in path)

    def type_is(self, path: Path, kind: str) -> SqlCondition:
        if self.pg:
            at = self._at(path)
            return SqlCondition(f"COALESCE(jsonb_typeof({at.sql}) = ?, FALSE)",
                                (*at.params, kind))
        names = _SQLITE_TYPES[kind]
        return SqlCondition(f"COALESCE(json_type(m.metadata, ?) IN ({','.join('?' * len(names))})"
                            ", FALSE)", (self._sqlite_path(path), *names))

    def present(self, path: Path) -> SqlCondition:
        if self.pg:
            at = self._at(path)
            return SqlCondition(f"({at.sql}) IS NOT NULL", at.params)
        return SqlCondition("json_type(m.metadata, ?) IS NOT NULL", (self._sqlite_path(path),))

    def eq(self, path: Path, value: Any) -> SqlCondition:
        """The JSON value at ``path`` equals a scalar (or, on PostgreSQL, any) ``value``."""
        if self.pg:
            at = self._at(path)
            return SqlCondition(f"COALESCE({at.sql} = CAST(? AS jsonb), FALSE)",
                                (*at.params, json.dumps(value)))
        p = self._sqlite_path(path)
        if value is None or isinstance(value, bool):
            name = "null" if value is None else ("true" if value else "false")
            return SqlCondition("COALESCE(json_type(m.metadata, ?) = ?, FALSE)", (p, name))
        kind = "number" if _number(value) else "string"
        typed = self.type_is(path, kind)
        return SqlCondition(f"{typed.sql} AND COALESCE(json_extract(m.metadata, ?) = ?, FALSE)",
                            (*typed.params, p, value))

    def length_is(self, path: Path, n: int) -> SqlCondition:
        if self.pg:
            at = self._at(path)
            return SqlCondition(f"CASE WHEN jsonb_typeof({at.sql}) = 'array' THEN "
                                f"jsonb_array_length({at.sql}) = ? ELSE FALSE END",
                                (*at.params, *at.params, n))
        return SqlCondition("COALESCE(json_type(m.metadata, ?) = 'array' AND "
                            "json_array_length(m.metadata, ?) = ?, FALSE)",
                            (self._sqlite_path(path), self._sqlite_path(path), n))

    def compare(self, path: Path, op: str, arg: Any) -> SqlCondition:
        """Numbers with numbers, strings with strings (code-point order); else FALSE."""
        sym = _COMPARE[op]
        if not (_number(arg) or isinstance(arg, str)):
            return _FALSE
        if self.pg:
            at = self._at(path)
            kind, cast = ("number", "::float8") if _number(arg) else ("string", ' COLLATE "C"')
            return SqlCondition(f"CASE WHEN jsonb_typeof({at.sql}) = '{kind}' THEN "
                                f"({at.sql} #>> '{{}}'){cast} {sym} ? ELSE FALSE END",
                                (*at.params, *at.params, arg))
        typed = self.type_is(path, "number" if _number(arg) else "string")
        return SqlCondition(f"{typed.sql} AND COALESCE(json_extract(m.metadata, ?) {sym} ?, "
                            "FALSE)", (*typed.params, self._sqlite_path(path), arg))

    # -- structure -------------------------------------------------------------------------
    def exact(self, path: Path, value: Any) -> SqlCondition:
        """Equal as JSON: objects with the same keys, lists of the same length."""
        if self.pg:
            return self.eq(path, value)  # jsonb equality is exactly that
        if isinstance(value, Mapping):
            count = SqlCondition("(SELECT count(*) FROM json_each(m.metadata, ?)) = ?",
                                 (self._sqlite_path(path), len(value)))
            return _all([self.type_is(path, "object"), count,
                         *(self.exact((*path, k), v) for k, v in value.items())])
        if isinstance(value, list | tuple):
            return _all([self.length_is(path, len(value)),
                         *(self.exact((*path, i), v) for i, v in enumerate(value))])
        return self.eq(path, value)

    def match(self, path: Path, expected: Any) -> SqlCondition:
        """LangGraph's filter value: operators, else a dict matches the fields it names
        (recursively), a list element by element, a scalar by equality."""
        if isinstance(expected, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in expected):
                return _all([self.operator(path, op, arg) for op, arg in expected.items()])
            return _all([self.type_is(path, "object"),
                         *(self.match((*path, k), v) for k, v in expected.items())])
        if isinstance(expected, list | tuple):
            return _all([self.length_is(path, len(expected)),
                         *(self.match((*path, i), v) for i, v in enumerate(expected))])
        return self.eq(path, expected)

    def operator(self, path: Path, op: str, arg: Any) -> SqlCondition:
        if op == "$eq":
            return self.exact(path, arg)
        if op == "$ne":
            return _not(self.exact(path, arg))
        if op in ("$in", "$nin"):
            either = _any([self.exact(path, a) for a in arg])
            return either if op == "$in" else _not(either)
        return self.compare(path, op, arg)

    def field(self, key: str, expected: Any) -> SqlCondition:
        """One top-level filter entry: ``key`` is a field of the value or, when the value has
        no such field and ``key`` has dots, a path into nested objects (``"meta.lang"``)."""
        cond = self.match((*_ITEM_VALUE, key), expected)
        if "." not in key:
            return cond
        nested = self.match((*_ITEM_VALUE, *key.split(".")), expected)
        there = self.present((*_ITEM_VALUE, key))
        return SqlCondition(f"CASE WHEN {there.sql} THEN ({cond.sql}) ELSE ({nested.sql}) END",
                            there.params + cond.params + nested.params)


class SideStore:
    """SQL half of a Mnemonia store. Thread-safe for one process (one writer at a time)."""

    def __init__(self, url: str, *, attempts: int = 5, max_wait: float = 2.0) -> None:
        self.url = url
        self._attempts = attempts
        self._max_wait = max_wait
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            kwargs["poolclass"] = sa.pool.StaticPool if ":memory:" in url else sa.pool.QueuePool
        else:
            kwargs["pool_pre_ping"] = True
        try:
            self.engine: Engine = sa.create_engine(url, **kwargs)
        except Exception as e:  # bad URL or missing driver
            raise StoreError(f"cannot open SQL store {url!r}: {e}") from e
        self.dialect = self.engine.dialect.name
        self._qmark = self.engine.dialect.paramstyle == "qmark"
        self._dbapi_error = self.engine.dialect.loaded_dbapi.Error
        self._lock = threading.RLock()
        # deferred writes (:meth:`defer`): one writer thread, the last write handed to it, and
        # per thread how deep it is in sessions of this store
        self._writer: ThreadPoolExecutor | None = None
        self._last_deferred: Future[None] | None = None
        self._writer_lock = threading.Lock()
        self._failures = FailureLog(log)
        self._local = threading.local()
        # rows kept between recalls (:meth:`keep_rows`): only where this process is the one
        # writer, which is the opener's to say
        self.row_cache: RowCache | None = None
        # A SQLite file's identity (device, inode), taken on the first connection and checked
        # before every session and before every commit: a file deleted or replaced under an
        # open engine is noticed before anything more is written to (or read from) it.
        self.file: str | None = _sqlite_file(self.engine.url.database) \
            if self.dialect == "sqlite" else None
        self._identity: tuple[int, int] | None = None
        if self.dialect == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)

    @property
    def where(self) -> str:
        """The database's URL with any password hidden (for messages)."""
        return self.engine.url.render_as_string(hide_password=True)

    # -- setup -----------------------------------------------------------------------------
    def setup(self) -> list[int]:
        """Apply every migration not yet applied, and make sure the store can be written.
        Idempotent; returns the versions applied. A file that is no SQLite database, or one
        that cannot be written, is a :class:`StoreError` saying so."""
        try:
            applied = self._migrate()
            with self.begin() as conn:  # fails at once on a read-only file or folder
                conn.execute(kv.delete().where(sa.false()))
        except (StoreUnavailableError, StoreFileChangedError):
            raise
        except StoreError as e:
            reason = getattr(e.__cause__, "orig", None) or e
            raise StoreError(f"cannot open the SQL store {self._where()}: {reason}. "
                             + _open_hint(reason)) from e
        return applied

    def _where(self) -> str:
        return repr(self.engine.url.render_as_string(hide_password=True))

    def _migrate(self) -> list[int]:
        applied: list[int] = []
        with self.begin() as conn:
            # several processes may open a new store at once: the first one migrates, the
            # others wait for it and then find every migration applied
            if self.dialect == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            elif self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            schema_migrations.create(conn, checkfirst=True)
            done = {r[0] for r in conn.execute(sa.select(schema_migrations.c.version))}
            for version, name, fn in MIGRATIONS:
                if version in done:
                    continue
                fn(conn)
                conn.execute(schema_migrations.insert().values(
                    version=version, name=name, applied_at=time.time()))
                applied.append(version)
        return applied

    # -- connections -----------------------------------------------------------------------
    def _unavailable(self, exc: BaseException) -> bool:
        """The database did not answer (as opposed to rejecting a statement). ``exc`` is
        SQLAlchemy's wrapper or the driver's own error."""
        if isinstance(exc, sa.exc.DBAPIError):
            if exc.connection_invalidated:
                return True
            exc = exc.orig if isinstance(exc.orig, BaseException) else exc
        dbapi = self.engine.dialect.loaded_dbapi
        kinds = (sa.exc.OperationalError, dbapi.OperationalError)
        if self.dialect == "sqlite":  # a local file: only a lock held too long
            return isinstance(exc, kinds) and "locked" in str(exc)
        return isinstance(exc, (*kinds, sa.exc.InterfaceError, dbapi.InterfaceError))

    def _checkout(self) -> Connection:
        """A pooled connection. Reaching a database server goes through tenacity (exponential
        backoff with jitter, bounded) once a first attempt failed; when the attempts run out:
        StoreUnavailableError."""
        return first_then(self.engine.connect, self._connect_retrying)

    def _connect_retrying(self, connect: Callable[[], Connection]) -> Connection:
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential_jitter(multiplier=0.05, max=self._max_wait, jitter=0.05),
            retry=retry_if_exception(self._unavailable),
            reraise=False,
        )
        try:
            return retrying(connect)
        except RetryError as e:
            last = e.last_attempt.exception()
            raise StoreUnavailableError(
                f"the SQL store ({self.engine.url.render_as_string(hide_password=True)}) did "
                f"not answer after {self._attempts} attempts: {last}") from last
        except sa.exc.DBAPIError as e:
            raise StoreError(f"cannot connect to the SQL store {self._where()}: {e.orig}") from e

    def check_file(self) -> None:
        """Raise :class:`StoreFileChangedError` if the SQLite file this store opened was
        deleted or replaced since (one ``os.stat``; nothing for other databases)."""
        if self.file is None:
            return
        if self._identity is None:
            if not os.path.exists(self.file) and os.path.exists(self.file + "-wal"):
                # SQLite would lay the old log over a new empty file
                raise StoreFileChangedError(
                    f"the SQLite side-store {self.file!r} is missing but its write-ahead log "
                    f"{self.file + '-wal'!r} is still there: the file was deleted or moved. "
                    "Put it back; or, to start an empty side-store, delete the -wal and -shm "
                    "files (the Chroma vectors the lost file knew are then reported by "
                    "`mnemonia doctor`)")
            return
        try:
            st = os.stat(self.file)
        except FileNotFoundError:
            what = "was deleted"
        else:
            if (st.st_dev, st.st_ino) == self._identity:
                return
            what = "was replaced by another file"
        raise StoreFileChangedError(
            f"the SQLite side-store {self.file!r} {what} while this engine had it open; "
            "nothing more is written or read through this engine (a write now would land in "
            "a file nobody can open again). Close it; put the original file back if it was "
            "moved, then open the store again (a reopen reports the Chroma vectors the file "
            "now at that path does not know: see `mnemonia doctor --path FOLDER`)")

    def _remember_file(self) -> None:
        if self.file is not None and self._identity is None:
            st = os.stat(self.file)
            self._identity = (st.st_dev, st.st_ino)

    def keep_rows(self) -> None:
        """Keep the rows recall reads between calls (:mod:`mnemonia.store.rowcache`). Only
        for a store no other process writes to: its writes are not seen here."""
        if self.row_cache is None:
            self.row_cache = RowCache()

    def _kept(self, asked: bool) -> RowCache | None:
        """The kept rows and counts a read ``asked`` for may use: none inside a write
        transaction of this thread, which must see its own writes."""
        writing: int = getattr(self._local, "writing", 0)
        return self.row_cache if asked and not writing else None

    @contextmanager
    def _session(self, transaction: bool, changes: Sequence[str] | None = None
                 ) -> Iterator[Connection]:
        """A pooled connection (``transaction``: in a transaction, committed on leaving;
        ``changes``: the only memory rows it changes, when it says so)."""
        self.check_file()  # before connecting: a new connection would make a new empty file
        conn = self._checkout()
        self._remember_file()
        self._local.depth = getattr(self._local, "depth", 0) + 1
        cache = self.row_cache if transaction else None
        if cache is not None:
            cache.write_begins()
            self._local.writing = getattr(self._local, "writing", 0) + 1
        try:
            with conn:
                if transaction:
                    try:
                        with conn.begin():
                            yield conn
                            self.check_file()  # the last moment before the commit
                    finally:
                        if cache is not None:  # committed or rolled back: nothing read now
                            cache.write_ends(changes)  # is older than the store
                            self._local.writing -= 1
                else:
                    yield conn
        except sa.exc.DBAPIError as e:
            # A transaction cut off by a lost server is rolled back by the server: nothing
            # of it is written. The caller gets a typed error.
            if self._unavailable(e):
                raise StoreUnavailableError(f"the SQL store stopped answering: {e.orig}") from e
            # Rolled back as well: the caller gets a typed error and nothing is written.
            raise StoreError(f"the SQL store refused the operation: {e.orig}") from e
        finally:
            self._local.depth -= 1

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A connection in a transaction, committed on leaving (one writer at a time)."""
        self._settle()
        with self._lock, self._session(True) as conn:
            yield conn

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        self._settle()
        with self._session(False) as conn:
            yield conn

    # -- deferred writes -----------------------------------------------------------------
    def defer(self, write: Callable[[Connection], None], what: str,
              changes: Sequence[str] | None = None) -> None:
        """``write(conn)`` in a transaction of its own on this store's writer thread, after
        every write deferred before it; the caller does not wait (a recall's access counts
        are written while its answer is used).

        The process still reads its own writes: every session opened afterwards, on any
        thread, first waits until the deferred writes have finished (a session opened
        inside another one does not wait again: its outer one did). Another process, or a
        connection not opened here, may see the write a moment after the caller returned.
        A write that fails is rolled back and logged as a warning naming ``what``; it is
        not retried. ``changes``: the only memory rows the write changes, when it says so
        (kept rows of other memories stay kept)."""
        def run() -> None:
            try:
                # not begin(): its _settle() would wait for this very write
                with self._lock, self._session(True, changes) as conn:
                    write(conn)
            except StoreError as e:  # an outage: one line per kind, with counts
                self._failures.failed(f"{what} (not written)", e)
            except Exception:
                log.warning("%s failed and was not written", what, exc_info=True)
            else:
                self._failures.succeeded()

        with self._writer_lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1,
                                                  thread_name_prefix="mnemonia-writer")
            self._last_deferred = self._writer.submit(run)

    def _settle(self) -> None:
        """Wait for the deferred writes handed over so far (not inside a session of this
        thread, whose locks the writer may be waiting for)."""
        last = self._last_deferred
        if last is not None and not last.done() and not getattr(self._local, "depth", 0):
            last.result()

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read-only transaction whose reads all see the store as it was at the start
        (SQLite WAL read transaction, PostgreSQL REPEATABLE READ): a long read such as an
        export stays consistent without blocking writers."""
        self._settle()
        with self._session(False) as conn:
            if self.dialect == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                if self.dialect == "sqlite":
                    # pysqlite opens no transaction for reads: open one, and read once so
                    # that its snapshot is taken now
                    conn.exec_driver_sql("BEGIN")
                    conn.exec_driver_sql("SELECT count(*) FROM collections").fetchall()
                yield conn

    def dispose(self) -> None:
        """Finish the deferred writes, then close every pooled connection."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)
        self.engine.dispose()

    # -- driver SQL ----------------------------------------------------------------------
    def sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` placeholders) in the driver's parameter style.

        The recall path sends plain driver SQL: SQLAlchemy's statement building costs more
        than SQLite's execution for these small primary-key reads.
        """
        return statement if self._qmark else statement.replace("?", "%s")

    def in_marks(self, n: int) -> str:
        return ",".join("?" * n)

    def fetch(self, conn: Connection, statement: str, params: Sequence[Any] = (), *,
              named: bool = False) -> list[Any]:
        """Rows of a read (``?`` placeholders) straight from the driver's cursor: tuples, or
        with ``named`` rows whose columns are attributes. For the recall path, where
        SQLAlchemy's result objects cost more than the reads themselves."""
        cur = conn.connection.cursor()
        try:
            cur.execute(self.sql(statement), tuple(params))
            rows: list[Any] = list(cur.fetchall())
            if named and rows:
                make = _row_class(tuple(d[0] for d in cur.description))._make
                rows = [make(r) for r in rows]
            return rows
        except self._dbapi_error as e:
            if self._unavailable(e):
                conn.invalidate()
                raise StoreUnavailableError(f"the SQL store stopped answering: {e}") from e
            raise StoreError(f"SQL read failed: {e}") from e
        finally:
            cur.close()

    # -- vectors ---------------------------------------------------------------------------
    def vectors_put(self, conn: Connection, items: Sequence[tuple[str, Any]], *,
                    replace: bool = False) -> None:
        """Store ``(memory_id, vector)`` pairs as float32 bytes (``replace``: over old ones)."""
        if not items:
            return
        if replace:
            self.vectors_delete(conn, [i for i, _ in items])
        conn.execute(memory_vectors.insert(), [
            {"memory_id": i, "vector": _f32_bytes(v)} for i, v in items])

    def vectors_get(self, conn: Connection, ids: Sequence[str]) -> dict[str, bytes]:
        """The stored vectors (float32 bytes) of those of ``ids`` that have one."""
        out: dict[str, bytes] = {}
        for chunk in chunks(list(ids), 500):
            out.update((r[0], bytes(r[1])) for r in self.fetch(
                conn, "SELECT memory_id, vector FROM memory_vectors "
                f"WHERE memory_id IN ({self.in_marks(len(chunk))})", chunk))
        return out

    def vectors_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        for chunk in chunks(list(ids), 500):
            conn.execute(memory_vectors.delete().where(memory_vectors.c.memory_id.in_(chunk)))

    # -- keyword index ---------------------------------------------------------------------
    def fts_insert(self, conn: Connection, rows: Sequence[tuple[str, str, str]]) -> None:
        """Index ``(memory_id, tenant, text)`` rows (and count their terms' documents)."""
        if self.dialect != "sqlite" or not rows:
            return  # PostgreSQL keeps a generated tsvector column
        bodies = [(" ".join(keyword_terms(text, tenant_token(tenant))), mid)
                  for mid, tenant, text in rows]
        conn.exec_driver_sql("INSERT INTO memories_kw(body, memory_id) VALUES (?, ?)", bodies)
        df = Counter(t for body, _ in bodies for t in set(body.split()))
        if not df:
            return  # texts without letters or digits ("🙂", "???"): no keyword terms
        conn.exec_driver_sql(
            "INSERT INTO keyword_df(term, docs) VALUES (?, ?) "
            "ON CONFLICT(term) DO UPDATE SET docs = docs + excluded.docs", list(df.items()))

    def fts_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        ids = list(ids)
        if self.dialect != "sqlite" or not ids:
            return
        for chunk in chunks(ids, 500):
            marks = self.in_marks(len(chunk))
            bodies = conn.exec_driver_sql(
                f"SELECT body FROM memories_kw WHERE memory_id IN ({marks})", tuple(chunk)
            ).fetchall()
            conn.exec_driver_sql(
                f"DELETE FROM memories_kw WHERE memory_id IN ({marks})", tuple(chunk)
            )
            df = Counter(t for (body,) in bodies for t in set(body.split()))
            if df:
                conn.exec_driver_sql("UPDATE keyword_df SET docs = docs - ? WHERE term = ?",
                                     [(n, t) for t, n in df.items()])
                conn.exec_driver_sql("DELETE FROM keyword_df WHERE term = ? AND docs <= 0",
                                     [(t,) for t in df])

    def _within_budget(self, conn: Connection, terms: Sequence[str], budget: int,
                       df: Mapping[str, int] | None = None) -> list[str]:
        """The query terms, rarest first, while their postings fit in ``budget`` (``df``:
        the terms' document counts when the caller has read them already)."""
        if df is None:
            df = dict(self.fetch(conn, "SELECT term, docs FROM keyword_df WHERE term IN "
                                 f"({self.in_marks(len(terms))})", terms))
        kept: list[str] = []
        total = 0
        for t in sorted(terms, key=lambda t: df.get(t, 0)):
            n = int(df.get(t, 0))
            if n == 0:
                continue  # occurs nowhere in this tenant: nothing to match
            if total + n > budget:
                break
            kept.append(t)
            total += n
        return kept

    def keyword_search(
        self, conn: Connection, tenant: str, tokens: Sequence[str], limit: int,
        max_postings: int = MAX_KEYWORD_POSTINGS, docs: Mapping[str, int] | None = None,
    ) -> list[tuple[str, float]]:
        """Best keyword matches as ``(memory_id, score)``, best first (bm25 / ts_rank).

        On SQLite the query words are limited to a postings budget (rarest first in the
        tenant), so the cost stays bounded however large the store grows. ``docs``: what
        :meth:`term_docs` answered for these words, when the caller has read it.
        """
        words = [t for t in tokens if _WORD.fullmatch(t)]
        if not words or limit <= 0:
            return []
        if self.dialect == "sqlite":
            token = tenant_token(tenant)
            split = {w: keyword_terms(w, token) for w in words}
            terms = list(dict.fromkeys(t for parts in split.values() for t in parts))
            df = None
            if docs is not None and all(len(parts) == 1 for parts in split.values()):
                # term_docs covers single-term words, and leaves out those in no memory
                df = {parts[0]: docs.get(w, 0) for w, parts in split.items()}
            terms = self._within_budget(conn, terms, max_postings, df) if terms else []
            if not terms:
                return []
            match = " OR ".join(f'"{t}"' for t in terms)
            rows = self.fetch(
                conn, "SELECT memory_id, bm25(memories_kw) AS r FROM memories_kw "
                "WHERE memories_kw MATCH ? ORDER BY r LIMIT ?", (match, limit))
            return [(r[0], -float(r[1])) for r in rows]
        if self.dialect == "postgresql":
            query = " | ".join(words)
            found = conn.execute(
                sa.text(
                    "SELECT id, ts_rank(tsv, to_tsquery('simple', :q)) AS r FROM memories "
                    "WHERE tenant = :t AND status = 'committed' "
                    "AND tsv @@ to_tsquery('simple', :q) ORDER BY r DESC LIMIT :n"
                ),
                {"q": query, "t": tenant, "n": limit},
            ).fetchall()
            return [(r[0], float(r[1])) for r in found]
        # Other dialects have no keyword index here: recall runs on the vectors alone.
        return []

    def term_docs(self, conn: Connection, tenant: str, words: Sequence[str], *,
                  kept: bool = False) -> dict[str, int]:
        """``{word: memories of the tenant that contain it}`` for the single-term ``words``
        (folded as the keyword index folds them); words in none are left out. ``kept``:
        counts kept by :meth:`keep_rows` may answer, and those read are kept (recall)."""
        token = tenant_token(tenant)
        split = {w: keyword_terms(w, token) for w in dict.fromkeys(words)}
        terms = {w: t[0] for w, t in split.items() if len(t) == 1}
        if not terms:
            return {}
        if self.dialect == "sqlite":
            cache = self._kept(kept)
            since = cache.reading() if cache is not None else None
            df, ask = cache.docs(terms.values()) if cache is not None \
                else ({}, list(terms.values()))
            if ask:
                read = dict(self.fetch(conn, "SELECT term, docs FROM keyword_df WHERE term IN "
                                       f"({self.in_marks(len(ask))})", ask))
                if cache is not None:
                    cache.keep_docs({t: int(read.get(t) or 0) for t in ask}, since)
                df.update(read)
            return {w: int(df[t]) for w, t in terms.items() if df.get(t)}
        if self.dialect == "postgresql":
            out = {}
            for w, t in terms.items():  # one GIN index count per word
                n = int(conn.execute(sa.text(
                    "SELECT count(*) FROM memories WHERE tenant = :t AND status = 'committed' "
                    "AND tsv @@ to_tsquery('simple', :w)"),
                    {"t": tenant, "w": t[len(token):]}).scalar_one())
                if n:
                    out[w] = n
            return out
        return {}

    # -- word vectors (keyword expansion) ----------------------------------------------------
    def term_vectors_missing(self, conn: Connection, model: str, terms: Iterable[str]
                             ) -> list[str]:
        """Those of ``terms`` that have no word vector for ``model`` yet."""
        terms = sorted(set(terms))
        have: set[str] = set()
        for chunk in chunks(terms, 500):
            have.update(r[0] for r in self.fetch(
                conn, "SELECT term FROM term_vectors WHERE model = ? AND term IN "
                f"({self.in_marks(len(chunk))})", (model, *chunk)))
        return [t for t in terms if t not in have]

    def term_vectors_put(self, conn: Connection, model: str,
                         items: Sequence[tuple[str, Any]]) -> None:
        """Store ``(term, vector)`` pairs; a term another process stored first is kept."""
        if not items:
            return
        self.insert_or_ignore(conn, term_vectors, [
            {"model": model, "term": t, "vector": _f32_bytes(v)} for t, v in items])

    def term_vectors_all(self, conn: Connection, model: str) -> tuple[list[str], np.ndarray]:
        """Every word with a vector for ``model``, and those vectors as rows."""
        rows = self.fetch(conn, "SELECT term, vector FROM term_vectors WHERE model = ? "
                          "ORDER BY term", (model,))
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return ([r[0] for r in rows],
                np.stack([np.frombuffer(bytes(r[1]), dtype=np.float32) for r in rows]))

    def term_vector_count(self, conn: Connection, model: str) -> int:
        return int(conn.execute(sa.select(sa.func.count()).select_from(term_vectors).where(
            term_vectors.c.model == model)).scalar_one())
    # -- keyed items -------------------------------------------------------------------------
    # Items (mnemonia.items) are memories whose metadata holds ``{ITEM_KEY: {...}}``; their
    # path, key, update and expiry times are indexed expressions of the metadata (migration
    # 9), so every read below walks an index and stops at its LIMIT.
    def _items_sql(self) -> dict[str, str]:
        if self.dialect not in ("sqlite", "postgresql"):
            raise StoreError(f"keyed items need SQLite or PostgreSQL, not {self.dialect!r}")
        return item_expressions(self.dialect)

    def _live(self, now: float) -> SqlCondition:
        """Committed, not deleted, not expired at ``now``. (The status is written so that no
        index serves it: without statistics SQLite would rather take the status index and
        sort the whole namespace than walk the item index in order.)"""
        x = self._items_sql()
        return SqlCondition(f"{_COMMITTED_SQL} AND m.deleted_at IS NULL AND "
                            f"({x['expires']} IS NULL OR {x['expires']} > ?)", (now,))

    def item_filter(self, flt: Mapping[str, Any]) -> SqlCondition:
        """A checked value filter (:func:`mnemonia.validation.item_filter`) as SQL on the
        item's value: every entry must hold."""
        compiler = _JsonFilter(self.dialect)
        return _all([compiler.field(key, expected) for key, expected in flt.items()])

    def item_condition(self, path: str, *, now: float, where: SqlCondition | None = None,
                       indexed: bool | None = None) -> SqlCondition:
        """An item at ``path``, not expired, ``indexed`` (or not) if asked, matching
        ``where``: what recall's candidate rows must satisfy in a store search."""
        x = self._items_sql()
        # ``|| ''``: not the indexed expression, so a read by id (recall's candidate rows)
        # keeps its primary-key lookups instead of walking the namespace's path index
        cond = SqlCondition(f"({x['path']} || '') = ? AND ({x['expires']} IS NULL OR "
                            f"{x['expires']} > ?)", (path, now))
        if indexed is not None:
            cond = cond.and_(self.item_indexed(indexed))
        return cond.and_(where)

    def item_indexed(self, indexed: bool) -> SqlCondition:
        """Items written with a text to search (``indexed``), or without one."""
        flag = _JsonFilter(self.dialect).eq((ITEM_KEY, "indexed"), False)
        return _not(flag) if indexed else flag

    def item_rows(self, conn: Connection, path: str, keys: Sequence[str]) -> list[Any]:
        """``(id, tenant, deleted_at, metadata, expires)`` of the committed items of ``keys``
        at ``path``, deleted and expired ones too (one index read per chunk of keys)."""
        x = self._items_sql()
        out: list[Any] = []
        for chunk in chunks(list(keys)):
            out += self.fetch(conn, (
                f"SELECT m.id, m.tenant, m.deleted_at, m.metadata, {x['expires']} AS expires "
                f"FROM memories AS m WHERE {x['path']} = ? AND {x['key']} IN "
                f"({self.in_marks(len(chunk))}) AND {_COMMITTED_SQL}"),
                (path, *chunk), named=True)
        return out

    def item_page(self, conn: Connection, path: str, *, now: float,
                  where: SqlCondition | None, limit: int, offset: int = 0) -> list[Any]:
        """``(id, metadata)`` of live items at ``path`` matching ``where``, last updated
        first (then by key, descending): a walk of the (path, updated, key) index that stops
        after ``offset + limit`` matches."""
        x = self._items_sql()
        cond = self._live(now).and_(where)
        return self.fetch(conn, (
            f"SELECT m.id, m.metadata FROM memories AS m WHERE {x['path']} = ? AND ({cond.sql}) "
            f"ORDER BY {x['updated']} DESC, {x['key']} DESC LIMIT ? OFFSET ?"),
            (path, *cond.params, limit, offset), named=True)

    def next_item_path(self, conn: Connection, low: str, high: str | None, *, now: float,
                       inclusive: bool = False) -> str | None:
        """The first path with a live item after ``low`` (or at it, ``inclusive``) and
        before ``high``: one step of a loose index scan, so listing namespaces costs one
        index seek per namespace listed, whatever their sizes."""
        x = self._items_sql()
        live = self._live(now)
        upper, bound = (f" AND {x['path']} < ?", (high,)) if high is not None else ("", ())
        rows = self.fetch(conn, (
            f"SELECT {x['path']} FROM memories AS m WHERE {x['path']} {'>=' if inclusive else '>'}"
            f" ?{upper} AND {live.sql} ORDER BY {x['path']} LIMIT 1"),
            (low, *bound, *live.params))
        return str(rows[0][0]) if rows else None

    def matching_ids(self, conn: Connection, tenant: str, where: SqlCondition, limit: int
                     ) -> list[str]:
        """Up to ``limit`` ids of active memories of ``tenant`` matching ``where``."""
        return [r[0] for r in self.fetch(conn, (
            f"SELECT m.id FROM memories AS m WHERE m.tenant = ? AND {_COMMITTED_SQL} "
            f"AND m.deleted_at IS NULL AND ({where.sql}) LIMIT ?"),
            (tenant, *where.params, limit))]

    def expired_items(self, conn: Connection, now: float, limit: int) -> list[tuple[str, str]]:
        """``(id, tenant)`` of up to ``limit`` items whose time ran out by ``now``."""
        x = self._items_sql()
        return [(r[0], r[1]) for r in self.fetch(conn, (
            f"SELECT m.id, m.tenant FROM memories AS m WHERE {x['expires']} <= ? "
            f"AND {_COMMITTED_SQL} LIMIT ?"), (now, limit))]

    # -- consistency (doctor) ----------------------------------------------------------------
    def row_counts(self, conn: Connection) -> dict[str, int]:
        """``{tenant: memory rows}`` in any state (after the crash repair at open, all are
        committed): one scan of the (tenant, seq) index, no table reads."""
        m = memories.c
        return {r[0]: int(r[1]) for r in conn.execute(
            sa.select(m.tenant, sa.func.count()).group_by(m.tenant))}

    def tenant_memories(self, conn: Connection, tenant: str) -> list[Any]:
        """``(id, status, deleted_at)`` of every memory row of ``tenant``, in any state."""
        m = memories.c
        return list(conn.execute(sa.select(m.id, m.status, m.deleted_at)
                                 .where(m.tenant == tenant)).fetchall())

    def side_vector_ids(self, conn: Connection, tenant: str) -> set[str]:
        """Ids of the tenant's memories that have a vector in ``memory_vectors``."""
        mv = memory_vectors
        return {r[0] for r in conn.execute(
            sa.select(mv.c.memory_id).select_from(
                mv.join(memories, memories.c.id == mv.c.memory_id))
            .where(memories.c.tenant == tenant))}

    def stray_vector_ids(self, conn: Connection) -> list[str]:
        """``memory_vectors`` rows of no memory row."""
        mv = memory_vectors
        return [r[0] for r in conn.execute(
            sa.select(mv.c.memory_id).select_from(
                mv.outerjoin(memories, memories.c.id == mv.c.memory_id))
            .where(memories.c.id.is_(None)))]

    def keyword_count(self, conn: Connection) -> int | None:
        """Rows in the SQLite keyword index; ``None`` where the index is a generated column
        of ``memories`` (PostgreSQL), which cannot disagree with it."""
        if self.dialect != "sqlite":
            return None
        return int(conn.exec_driver_sql("SELECT count(*) FROM memories_kw").scalar_one())

    def keyword_postings(self, conn: Connection) -> dict[str, int] | None:
        """``{memory_id: rows}`` of the SQLite keyword index (``None`` elsewhere)."""
        if self.dialect != "sqlite":
            return None
        return {r[0]: int(r[1]) for r in conn.exec_driver_sql(
            "SELECT memory_id, count(*) FROM memories_kw GROUP BY memory_id")}

    def stray_keyword_ids(self, conn: Connection) -> list[str]:
        """Keyword-index rows of no memory row (SQLite; nothing elsewhere)."""
        if self.dialect != "sqlite":
            return []
        return [r[0] for r in conn.exec_driver_sql(
            "SELECT k.memory_id FROM memories_kw AS k LEFT JOIN memories AS m "
            "ON m.id = k.memory_id WHERE m.id IS NULL")]

    def recount_keyword_terms(self, conn: Connection) -> None:
        """Recompute every term's document frequency (``keyword_df``) from the index itself,
        after rows were put back or taken out by a repair."""
        if self.dialect != "sqlite":
            return
        conn.exec_driver_sql("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_kw_recount "
                             "USING fts5vocab(main, memories_kw, 'row')")
        conn.exec_driver_sql("DELETE FROM keyword_df")
        conn.exec_driver_sql("INSERT INTO keyword_df(term, docs) "
                             "SELECT term, doc FROM temp.memories_kw_recount")
        conn.exec_driver_sql("DROP TABLE temp.memories_kw_recount")

    # -- kv --------------------------------------------------------------------------------
    def kv_get(self, conn: Connection, key: str) -> Any:
        row = conn.execute(sa.select(kv.c.value).where(kv.c.key == key)).first()
        return None if row is None else json.loads(row[0])

    def kv_set(self, conn: Connection, key: str, value: Any) -> None:
        payload = json.dumps(value)
        updated = conn.execute(kv.update().where(kv.c.key == key).values(value=payload)).rowcount
        if not updated:
            conn.execute(kv.insert().values(key=key, value=payload))

    # -- maintenance leases ------------------------------------------------------------------
    def acquire_lease(self, job: str, holder: str, *, now: float, seconds: float) -> bool:
        """Take (or renew) the lease of ``job`` for ``holder`` until ``now + seconds``, unless
        another holder's lease is still running; True when ``holder`` has it. One short
        transaction of its own, so two processes cannot both win."""
        lease = maintenance_leases.c
        with self.begin() as conn:
            taken = conn.execute(maintenance_leases.update().where(
                lease.job == job, sa.or_(lease.holder == holder, lease.expires_at <= now))
                .values(holder=holder, expires_at=now + seconds)).rowcount
            if taken:
                return True
            if conn.execute(sa.select(lease.job).where(lease.job == job)).first() is not None:
                return False
            try:
                with conn.begin_nested():
                    conn.execute(maintenance_leases.insert().values(
                        job=job, holder=holder, expires_at=now + seconds))
            except sa.exc.IntegrityError:
                return False  # another process inserted it first
            return True

    def release_lease(self, job: str, holder: str) -> None:
        """Give the lease of ``job`` back (only if ``holder`` still has it)."""
        lease = maintenance_leases.c
        with self.begin() as conn:
            conn.execute(maintenance_leases.update().where(
                lease.job == job, lease.holder == holder).values(expires_at=0.0))

    def lease_holder(self, job: str, *, now: float) -> str | None:
        """Who holds an unexpired lease of ``job`` (None: nobody)."""
        lease = maintenance_leases.c
        with self.connect() as conn:
            row = conn.execute(sa.select(lease.holder).where(
                lease.job == job, lease.expires_at > now)).first()
        return None if row is None else str(row[0])

    # -- writer leases ------------------------------------------------------------------------
    def renew_writer(self, holder: str, *, now: float, seconds: float = WRITER_LEASE) -> None:
        """Take or renew the writer lease of ``holder`` (``writer:<holder>``) until
        ``now + seconds``: while it runs, no other process's repair touches the memories
        ``holder`` is writing."""
        self.acquire_lease(WRITER_JOB + holder, holder, now=now, seconds=seconds)

    def release_writer(self, holder: str) -> None:
        """Drop the writer lease of ``holder`` (it closes): its unfinished writes, if any,
        are repaired by the next open."""
        with self.begin() as conn:
            conn.execute(maintenance_leases.delete().where(
                maintenance_leases.c.job == WRITER_JOB + holder))

    def live_writers(self, conn: Connection, *, now: float) -> set[str]:
        """The holders of unexpired writer leases."""
        lease = maintenance_leases.c
        return {r[0] for r in conn.execute(sa.select(lease.holder).where(
            lease.job.startswith(WRITER_JOB, autoescape=True), lease.expires_at > now))}

    def drop_expired_writers(self, conn: Connection, *, now: float) -> None:
        """Remove writer leases that ran out (their holders are gone)."""
        lease = maintenance_leases.c
        conn.execute(maintenance_leases.delete().where(
            lease.job.startswith(WRITER_JOB, autoescape=True), lease.expires_at <= now))

    def kv_items(self, conn: Connection, prefix: str) -> list[tuple[str, Any]]:
        """``(key, value)`` of every key starting with ``prefix``, sorted by key."""
        rows = conn.execute(sa.select(kv.c.key, kv.c.value).where(
            kv.c.key.startswith(prefix, autoescape=True)).order_by(kv.c.key))
        return [(r[0], json.loads(r[1])) for r in rows]

    def kv_delete(self, conn: Connection, keys: Sequence[str]) -> None:
        for chunk in chunks(list(keys)):
            conn.execute(kv.delete().where(kv.c.key.in_(chunk)))

    # -- memory rows -------------------------------------------------------------------------
    @staticmethod
    def to_memory(r: Any) -> Memory:
        """The :class:`~mnemonia.models.Memory` of a ``memories`` row."""
        # What Memory(**fields) makes (a frozen dataclass without __post_init__), without its
        # 21 object.__setattr__ calls: every hit of every recall is one (2.6 -> 0.3 us; the
        # side-store tests check that the two agree).
        memory = object.__new__(Memory)
        memory.__dict__.update(
            id=r.id, tenant=r.tenant, text=r.text, kind=r.kind, topic=r.topic,
            entities=_entities(r.entities), importance=r.importance,
            created_at=from_ts(r.created_at), accessed_at=from_ts(r.accessed_at),
            access_count=r.access_count, stability=r.stability,
            sm2=_sm2(r.easiness, r.interval_days, r.repetitions, r.next_review,
                     r.last_quality),
            utility=r.utility, state=r.state, pinned=bool(r.pinned),
            deleted_at=_opt_dt(r.deleted_at), superseded_by=r.superseded_by,
            consolidated_into=r.consolidated_into, session_id=r.session_id,
            metadata=json.loads(r.metadata), embedding_model=r.embedding_model,
        )
        return memory

    def rows(self, conn: Connection, tenant: str, ids: Iterable[str], *, edges: bool = False,
             where: SqlCondition | None = None, kept: bool = False) -> dict[str, Any]:
        """Committed rows of ``ids`` in ``tenant`` (those matching ``where``, if given); with
        ``edges``, each row also says in ``has_edges`` whether any relation starts or ends at
        it (so spreading reads relations only for memories that have some).

        ``kept``: rows kept by :meth:`keep_rows` may answer (recall's reads; never inside a
        write transaction of this thread, which must see its own writes), and rows read with
        ``edges`` are kept. Rows of another tenant, or not matching ``where``, are not
        answered either way."""
        ids = list(dict.fromkeys(ids))
        cache = self._kept(kept) if where is None else None
        if cache is not None:
            since = cache.reading()
            found, missing = cache.get(ids)
            answer = {mid: r for mid, r in found.items() if r.tenant == tenant}
            if missing:
                got = self.rows(conn, tenant, missing, edges=edges)
                if edges:
                    cache.keep(got, since)
                answer.update(got)
            return answer
        out: dict[str, Any] = {}
        columns = _MEMORY_COLUMNS_EDGES if edges else _MEMORY_COLUMNS
        extra, params = (f" AND ({where.sql})", where.params) if where is not None else ("", ())
        for chunk in chunks(ids):
            # Only the primary key in WHERE: with the tenant there too, SQLite may choose the
            # tenant index and scan the whole tenant. Tenant and status are checked here.
            for r in self.fetch(conn, f"SELECT {columns} FROM memories AS m "
                                f"WHERE m.id IN ({self.in_marks(len(chunk))}){extra}",
                                (*chunk, *params), named=True):
                if r.tenant == tenant and r.status == "committed":
                    out[r.id] = r
        return out

    def row(self, conn: Connection, tenant: str, memory_id: Any) -> Any:
        """The committed row of one memory of ``tenant``, or :class:`MemoryNotFoundError`."""
        check_id(memory_id)
        r = conn.execute(sa.select(memories).where(memories.c.id == memory_id,
                                                   _committed(memories.c.status))).first()
        if r is None or r.tenant != tenant:
            # Another tenant's memory is reported exactly like a missing one: no leak.
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in tenant {tenant!r}")
        return r

    def memory(self, conn: Connection, tenant: str, memory_id: Any) -> Memory:
        return self.to_memory(self.row(conn, tenant, memory_id))

    def full_rows(self, conn: Connection, ids: Sequence[str]) -> list[Any]:
        """Every column of the rows of ``ids``, in the order of ``ids``."""
        result = conn.execute(sa.select(memories).where(memories.c.id.in_(list(ids)))).fetchall()
        order = {mid: i for i, mid in enumerate(ids)}
        return sorted(result, key=lambda r: order[r.id])

    def owners(self, conn: Connection, ids: Sequence[str]) -> dict[str, str]:
        """``{id: tenant}`` of those of ``ids`` that exist (in any state)."""
        found: dict[str, str] = {}
        for chunk in chunks(ids):
            found.update({r[0]: r[1] for r in conn.execute(sa.select(
                memories.c.id, memories.c.tenant).where(memories.c.id.in_(chunk)))})
        return found

    def existing_ids(self, conn: Connection, ids: Sequence[str]) -> list[str]:
        out: list[str] = []
        for chunk in chunks(ids):
            out += [r[0] for r in conn.execute(
                sa.select(memories.c.id).where(memories.c.id.in_(chunk)))]
        return out

    def tenant_of(self, conn: Connection, memory_id: str) -> str | None:
        """The tenant of a committed memory, or ``None``."""
        r = conn.execute(sa.select(memories.c.tenant).where(
            memories.c.id == memory_id, _committed(memories.c.status))).first()
        return None if r is None else str(r.tenant)

    def list_memories(self, conn: Connection, tenant: str, *, session_id: str | None,
                      include_deleted: bool, limit: int | None) -> list[Memory]:
        """A tenant's memories in insertion order (optionally one session's)."""
        q = sa.select(memories).where(memories.c.tenant == tenant,
                                      _committed(memories.c.status))
        if session_id is not None:
            q = q.where(memories.c.session_id == session_id)
        if not include_deleted:
            q = q.where(memories.c.deleted_at.is_(None))
        q = q.order_by(memories.c.seq)
        if limit is not None:
            q = q.limit(limit)
        return [self.to_memory(r) for r in conn.execute(q)]

    def active_count(self, conn: Connection, tenant: str) -> int:
        return int(conn.execute(sa.select(sa.func.count()).where(
            memories.c.tenant == tenant, memories.c.deleted_at.is_(None),
            _committed(memories.c.status))).scalar_one())

    def active_rows(self, conn: Connection, tenant: str, columns: Sequence[str], *,
                    enriched: bool = False, not_state: str | None = None,
                    unsuperseded: bool = False, unconsolidated: bool = False,
                    not_kind: str | None = None, due_by: float | None = None) -> list[Any]:
        """``columns`` of the tenant's active (committed, not deleted) memories, narrowed by
        the keyword filters (what the maintenance jobs scan)."""
        m = memories.c
        cond = [m.tenant == tenant, _committed(m.status), m.deleted_at.is_(None)]
        if enriched:
            cond.append(m.enriched_at.is_not(None))
        if not_state is not None:
            cond.append(m.state != not_state)
        if unsuperseded:
            cond.append(m.superseded_by.is_(None))
        if unconsolidated:
            cond.append(m.consolidated_into.is_(None))
        if not_kind is not None:
            cond.append(m.kind != not_kind)
        if due_by is not None:
            cond.append(sa.or_(m.next_review.is_(None), m.next_review <= due_by))
        return list(conn.execute(sa.select(*(memories.c[c] for c in columns)).where(*cond)).all())

    def stats(self, conn: Connection, tenant: str | None) -> dict[str, Any]:
        """Counts over one tenant (or all): memories, deleted, consolidated, superseded,
        relations, accesses, and active memories by state and by kind."""
        m = memories
        cond = [_committed(m.c.status)]
        if tenant is not None:
            cond.append(m.c.tenant == tenant)

        def count(*more: Any) -> int:
            return int(conn.execute(sa.select(sa.func.count()).where(*cond, *more)).scalar_one())

        def grouped(col: Any) -> dict[str, int]:
            return dict(conn.execute(sa.select(col, sa.func.count()).where(
                *cond, m.c.deleted_at.is_(None)).group_by(col)).all())

        rq = sa.select(sa.func.count()).select_from(relations)
        lq = sa.select(sa.func.count()).select_from(access_log)
        if tenant is not None:
            rq = rq.where(relations.c.tenant == tenant)
            lq = lq.where(access_log.c.tenant == tenant)
        total, deleted = count(), count(m.c.deleted_at.is_not(None))
        consolidated = count(m.c.consolidated_into.is_not(None))
        superseded = count(m.c.superseded_by.is_not(None))
        by_state, by_kind = grouped(m.c.state), grouped(m.c.kind)
        rel_count, log_count = conn.execute(rq).scalar_one(), conn.execute(lq).scalar_one()
        tenants = conn.execute(sa.select(sa.func.count()).select_from(collections)
                               ).scalar_one() if tenant is None else 1
        return {"tenants": tenants, "memories": total, "active": total - deleted,
                "deleted": deleted, "consolidated": consolidated, "superseded": superseded,
                "relations": rel_count, "accesses": log_count,
                "by_state": {s: by_state.get(s, 0) for s in STATES},
                "by_kind": {k: by_kind.get(k, 0) for k in KINDS}}

    # -- writing memories --------------------------------------------------------------------
    def insert_memories(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        conn.execute(memories.insert(), list(rows))

    def update_memory(self, conn: Connection, memory_id: str, **values: Any) -> None:
        """Set ``values`` on one memory row."""
        conn.execute(memories.update().where(memories.c.id == memory_id).values(**values))

    def update_each(self, conn: Connection, rows: Sequence[dict[str, Any]],
                    columns: Sequence[str]) -> None:
        """One executemany: each of ``rows`` (``b_id`` and ``columns``) updates its memory."""
        if rows:
            conn.execute(memories.update().where(memories.c.id == sa.bindparam("b_id")).values(
                **{c: sa.bindparam(c) for c in columns}), list(rows))

    def update_ids(self, conn: Connection, ids: Sequence[str], **values: Any) -> None:
        """Set ``values`` on every memory of ``ids``."""
        for chunk in chunks(list(ids)):
            conn.execute(memories.update().where(memories.c.id.in_(chunk)).values(**values))

    def mark_committed(self, conn: Connection, ids: Sequence[str]) -> int:
        """Commit the pending memories of ``ids`` (compare-and-set: only rows still
        ``pending``, so a row another process's repair took is not brought back) and drop
        their writer rows; returns how many rows it committed."""
        done = 0
        for chunk in chunks(list(ids)):
            done += conn.execute(memories.update().where(
                memories.c.id.in_(chunk), memories.c.status == "pending")
                .values(status="committed")).rowcount
            conn.execute(memory_writers.delete().where(
                memory_writers.c.memory_id.in_(sa.select(memories.c.id).where(
                    memories.c.id.in_(chunk), memories.c.status == "committed"))))
        return done

    def statuses(self, conn: Connection, ids: Sequence[str]) -> dict[str, str]:
        """``{id: status}`` of those of ``ids`` that have a row."""
        out: dict[str, str] = {}
        for chunk in chunks(list(ids)):
            out.update((r[0], r[1]) for r in conn.execute(
                sa.select(memories.c.id, memories.c.status).where(memories.c.id.in_(chunk))))
        return out

    def write_by(self, conn: Connection, ids: Sequence[str], writer: str, at: float) -> None:
        """Record that ``writer`` is writing (adding or deleting) the memories of ``ids``."""
        for chunk in chunks(list(ids)):
            conn.execute(memory_writers.delete().where(memory_writers.c.memory_id.in_(chunk)))
        if ids:
            conn.execute(memory_writers.insert(), [
                {"memory_id": i, "writer": writer, "at": at} for i in ids])

    def mark_deleting(self, conn: Connection, ids: Sequence[str], writer: str,
                      at: float) -> None:
        """Mark ``ids`` ``deleting`` (a hard delete or a take-back under way) by ``writer``."""
        self.update_ids(conn, ids, status="deleting")
        self.write_by(conn, ids, writer, at)

    def take_over(self, conn: Connection, ids: Sequence[str], writer: str, at: float
                  ) -> list[str]:
        """Claim abandoned pending memories for undoing: those of ``ids`` still ``pending``
        become ``deleting`` by ``writer`` (compare-and-set: a row its writer committed in
        the meantime stays committed). Returns the ids claimed."""
        claimed: list[str] = []
        for chunk in chunks(list(ids)):
            conn.execute(memories.update().where(
                memories.c.id.in_(chunk), memories.c.status == "pending")
                .values(status="deleting"))
            mine = [r[0] for r in conn.execute(sa.select(memories.c.id).where(
                memories.c.id.in_(chunk), memories.c.status == "deleting"))]
            self.write_by(conn, mine, writer, at)
            claimed += mine
        return claimed

    def unfinished(self, conn: Connection) -> list[Any]:
        """``(id, tenant, status, writer)`` of memories not committed: pending or deleting
        (``writer``: the process writing them, ``None`` when unknown)."""
        w = memory_writers.c
        return list(conn.execute(
            sa.select(memories.c.id, memories.c.tenant, memories.c.status, w.writer)
            .select_from(memories.outerjoin(memory_writers, w.memory_id == memories.c.id))
            .where(memories.c.status != "committed")).fetchall())

    def clear_references(self, conn: Connection, ids: Sequence[str]) -> None:
        """Memories superseded by or consolidated into one of ``ids`` no longer point at it."""
        for chunk in chunks(list(ids)):
            conn.execute(memories.update().where(memories.c.superseded_by.in_(chunk))
                         .values(superseded_by=None))
            conn.execute(memories.update().where(
                memories.c.consolidated_into.in_(chunk)).values(consolidated_into=None))

    def purge(self, conn: Connection, tenant: str, ids: Sequence[str]) -> None:
        """Remove every SQL trace of ``ids`` (used by hard forget and by rollback)."""
        ids = list(ids)
        if not ids:
            return
        for chunk in chunks(ids):
            conn.execute(relations.delete().where(relations.c.tenant == tenant, sa.or_(
                relations.c.src.in_(chunk), relations.c.dst.in_(chunk))))
            conn.execute(access_log.delete().where(access_log.c.memory_id.in_(chunk)))
            conn.execute(memory_events.delete().where(memory_events.c.memory_id.in_(chunk)))
            conn.execute(memory_entities.delete().where(
                memory_entities.c.memory_id.in_(chunk)))
            conn.execute(memories.delete().where(memories.c.id.in_(chunk)))
            conn.execute(memory_writers.delete().where(memory_writers.c.memory_id.in_(chunk)))
        self.vectors_delete(conn, ids)
        self.fts_delete(conn, ids)

    def purge_deleting(self, conn: Connection, tenant: str, ids: Sequence[str]) -> list[str]:
        """:meth:`purge` those of ``ids`` that are ``deleting`` (nothing brings such a row
        back, so another process's committed memory of the same id is never removed);
        returns the ids purged."""
        gone = [i for i, st in self.statuses(conn, ids).items() if st == "deleting"]
        self.purge(conn, tenant, gone)
        return gone

    def soft_delete(self, conn: Connection, ids: Sequence[str], at: float) -> list[str]:
        """Set ``deleted_at`` on those of ``ids`` still active; returns them."""
        m = memories.c
        still: list[str] = []
        for chunk in chunks(list(ids)):
            still += [r[0] for r in conn.execute(sa.select(m.id).where(
                m.id.in_(chunk), m.deleted_at.is_(None)))]
            conn.execute(memories.update().where(m.id.in_(chunk), m.deleted_at.is_(None))
                         .values(deleted_at=at))
        return still

    # -- collections -------------------------------------------------------------------------
    def has_collection(self, conn: Connection, tenant: str) -> bool:
        return conn.execute(sa.select(collections.c.tenant)
                            .where(collections.c.tenant == tenant)).first() is not None

    def collections(self, conn: Connection) -> list[Any]:
        return list(conn.execute(sa.select(collections)).fetchall())

    def tenants(self, conn: Connection) -> list[str]:
        return [r[0] for r in conn.execute(sa.select(collections.c.tenant)
                                           .order_by(collections.c.tenant))]

    def reserve_seq(self, conn: Connection, tenant: str, n: int, *, model: str, dimension: int,
                    at: float) -> int:
        """The first of ``n`` insertion numbers for new memories of ``tenant`` (the tenant's
        collection row is made on its first memory). Safe when several processes add to one
        tenant at once, new or not: the row is inserted unless there, and the counter moved
        by one atomic ``UPDATE ... RETURNING`` (which holds the row until the commit)."""
        self.insert_or_ignore(conn, collections, [dict(
            tenant=tenant, embedding_model=model, dimension=dimension, created_at=at,
            next_seq=0)])
        c = collections.c
        after = conn.execute(collections.update().where(c.tenant == tenant)
                             .values(next_seq=c.next_seq + n)
                             .returning(c.next_seq)).scalar_one()
        return int(after) - n

    def insert_or_ignore(self, conn: Connection, table: sa.Table,
                         rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows``; a row whose key is already there (another process's) is left."""
        if not rows:
            return
        if self.dialect == "sqlite":
            stmt: Any = sqlite_insert(table).on_conflict_do_nothing()
        elif self.dialect == "postgresql":
            stmt = pg_insert(table).on_conflict_do_nothing()
        else:
            stmt = table.insert()
        conn.execute(stmt, [dict(r) for r in rows])

    # -- events ------------------------------------------------------------------------------
    @staticmethod
    def event_row(tenant: str, memory_id: str, event: str, at: float,
                  before: Mapping[str, Any] | None = None,
                  after: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One ``memory_events`` row (before / after as JSON)."""
        return dict(tenant=tenant, memory_id=memory_id, event=event, at=at,
                    before=json.dumps(before, default=str) if before is not None else None,
                    after=json.dumps(after, default=str) if after is not None else None)

    def insert_events(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        for chunk in chunks(list(rows)):
            conn.execute(memory_events.insert(), list(chunk))

    def event(self, conn: Connection, tenant: str, memory_id: str, event: str, at: float,
              before: Mapping[str, Any] | None = None,
              after: Mapping[str, Any] | None = None) -> None:
        conn.execute(memory_events.insert().values(
            **self.event_row(tenant, memory_id, event, at, before, after)))

    def events_of(self, conn: Connection, tenant: str, memory_id: str) -> list[Event]:
        """The audit trail of one memory, oldest first."""
        rows = conn.execute(sa.select(memory_events).where(
            memory_events.c.memory_id == memory_id, memory_events.c.tenant == tenant)
            .order_by(memory_events.c.id)).fetchall()
        return [Event(memory_id=r.memory_id, event=r.event, at=from_ts(r.at),
                      before=json.loads(r.before) if r.before else None,
                      after=json.loads(r.after) if r.after else None) for r in rows]

    def recalls_of(self, conn: Connection, tenant: str, memory_id: str) -> list[Event]:
        """The access-log rows of one memory as ``recalled`` events (rank, k, score, user)."""
        a = access_log.c
        rows = conn.execute(sa.select(a.at, a.rank, a.k, a.score, a.user_id).where(
            a.memory_id == memory_id, a.tenant == tenant).order_by(a.at, a.id)).fetchall()
        return [Event(memory_id=memory_id, event="recalled", at=from_ts(r.at), before=None,
                      after={"rank": r.rank, "k": r.k, "score": r.score, "user_id": r.user_id})
                for r in rows]

    def use_events(self, conn: Connection, tenant: str, kinds: Sequence[str]
                   ) -> list[tuple[str, str, dict[str, Any]]]:
        """``(memory_id, event, after)`` of a tenant's events of ``kinds``, oldest first."""
        e = memory_events.c
        rows = conn.execute(sa.select(e.memory_id, e.event, e.after).where(
            e.tenant == tenant, e.event.in_(list(kinds))).order_by(e.id)).fetchall()
        return [(r[0], r[1], json.loads(r[2]) if r[2] else {}) for r in rows]

    def events_since(self, conn: Connection, tenant: str, ids: Sequence[str], event: str
                     ) -> list[tuple[str, float]]:
        """``(memory_id, at)`` of every ``event`` of ``ids``."""
        e = memory_events.c
        out: list[tuple[str, float]] = []
        for chunk in chunks(list(ids)):
            out += [(r[0], r[1]) for r in conn.execute(sa.select(e.memory_id, e.at).where(
                e.memory_id.in_(chunk), e.tenant == tenant, e.event == event))]
        return out

    # -- entities ----------------------------------------------------------------------------
    def link_entities(self, conn: Connection, links: Sequence[dict[str, Any]], *,
                      ignore_existing: bool = False) -> None:
        """Insert ``(tenant, entity, memory_id)`` links (skipping existing ones if asked)."""
        if not links:
            return
        stmt = memory_entities.insert()
        if ignore_existing and self.dialect == "sqlite":
            stmt = stmt.prefix_with("OR IGNORE")
        conn.execute(stmt, list(links))

    def unlink_entities(self, conn: Connection, memory_id: str) -> None:
        conn.execute(memory_entities.delete().where(memory_entities.c.memory_id == memory_id))

    def entity_neighbours(self, conn: Connection, tenant: str, entity: str, exclude: str,
                          limit: int) -> list[str]:
        """Up to ``limit`` other memories linked to ``entity`` (by id). Called once per entity
        of every enriched memory: a plain statement, not one built per call (building the
        SQLAlchemy select cost ~3 ms, several times the read)."""
        return [r[0] for r in self.fetch(
            conn, "SELECT memory_id FROM memory_entities WHERE tenant = ? AND entity = ? "
            "AND memory_id != ? ORDER BY memory_id LIMIT ?", (tenant, entity, exclude, limit))]

    def entity_counts(self, conn: Connection, tenant: str) -> list[tuple[str, int]]:
        """``(entity, linked memories not deleted)`` of the tenant."""
        me = memory_entities
        return [(r[0], int(r[1])) for r in conn.execute(
            sa.select(me.c.entity, sa.func.count())
            .select_from(me.join(memories, memories.c.id == me.c.memory_id))
            .where(me.c.tenant == tenant, memories.c.deleted_at.is_(None))
            .group_by(me.c.entity))]

    def entity_members(self, conn: Connection, tenant: str, entity: str) -> set[str]:
        me = memory_entities.c
        return {r[0] for r in conn.execute(sa.select(me.memory_id).where(
            me.tenant == tenant, me.entity == entity))}

    def entity_members_by_importance(self, conn: Connection, tenant: str, entity: str,
                                     least: float, limit: int) -> list[str]:
        """Up to ``limit`` memories linked to ``entity`` with importance >= ``least``."""
        me, m = memory_entities.c, memories.c
        return [r[0] for r in conn.execute(
            sa.select(me.memory_id).select_from(
                memory_entities.join(memories, m.id == me.memory_id)).where(
                me.tenant == tenant, me.entity == entity, m.importance >= least)
            .limit(limit))]

    # -- relations ---------------------------------------------------------------------------
    def previous_in_session(self, conn: Connection, tenant: str, session_id: str,
                            memory_id: str, at: float) -> str | None:
        """The memory of the same session just before ``memory_id`` (by time, then seq).
        Called once per enriched memory: a plain statement (building the select with its
        aliased subquery cost ~10 ms, far more than the indexed read)."""
        rows = self.fetch(conn, (
            "SELECT id FROM memories WHERE tenant = ? AND session_id = ? AND id != ? "
            "AND (created_at < ? OR (created_at = ? "  # same time: an earlier seq only
            "AND seq < (SELECT me.seq FROM memories AS me WHERE me.id = ?))) "
            "ORDER BY created_at DESC, seq DESC LIMIT 1"),
            (tenant, session_id, memory_id, at, at, memory_id))
        return None if not rows else str(rows[0][0])

    def insert_edges(self, conn: Connection, tenant: str,
                     edges: Mapping[tuple[str, str, str], float], at: float) -> int:
        """Insert ``{(src, dst, type): strength}`` edges that do not exist yet; returns how
        many were inserted."""
        if not edges:
            return 0
        existing = set()
        srcs = list({k[0] for k in edges})
        for chunk in chunks(srcs):
            existing |= {(r.src, r.dst, r.type) for r in conn.execute(
                sa.select(relations.c.src, relations.c.dst, relations.c.type).where(
                    relations.c.tenant == tenant, relations.c.src.in_(chunk)))}
        rows = [dict(tenant=tenant, src=s, dst=d, type=t, strength=w, created_at=at)
                for (s, d, t), w in edges.items() if (s, d, t) not in existing and s != d]
        if rows:
            conn.execute(relations.insert(), rows)
        return len(rows)

    def upsert_relation(self, conn: Connection, tenant: str, src: str, dst: str, rel_type: str,
                        strength: float, at: float) -> None:
        """Add a relation, or set the strength of the one that exists."""
        r = relations.c
        key = sa.and_(r.tenant == tenant, r.src == src, r.dst == dst, r.type == rel_type)
        if conn.execute(sa.select(r.src).where(key)).first():
            conn.execute(relations.update().where(key).values(strength=strength))
        else:
            conn.execute(relations.insert().values(tenant=tenant, src=src, dst=dst,
                                                   type=rel_type, strength=strength,
                                                   created_at=at))

    def relations_of(self, conn: Connection, tenant: str, memory_id: str) -> list[Relation]:
        """Every relation from or to one memory."""
        r = relations.c
        rows = conn.execute(sa.select(relations).where(
            r.tenant == tenant, sa.or_(r.src == memory_id, r.dst == memory_id))
            .order_by(r.created_at, r.type)).fetchall()
        return [Relation(tenant=x.tenant, src=x.src, dst=x.dst, type=x.type,
                         strength=x.strength, created_at=from_ts(x.created_at)) for x in rows]

    def tenant_relations(self, conn: Connection, tenant: str) -> list[Any]:
        return list(conn.execute(sa.select(relations).where(relations.c.tenant == tenant)))

    def relation_count(self, conn: Connection, tenant: str) -> int:
        return int(conn.execute(sa.select(sa.func.count()).select_from(relations)
                                .where(relations.c.tenant == tenant)).scalar_one())

    def edges_around(self, conn: Connection, tenant: str, ids: Sequence[str],
                     symmetric: Sequence[str], per_target: int) -> list[Any]:
        """``(src, dst, type, strength, incoming)``: the edges leaving ``ids`` (``incoming``
        0), and the ``per_target`` strongest edges of the ``symmetric`` types that point at
        each of them (``incoming`` 1). What is read for several ids is what is read for each."""
        out: list[Any] = []
        for chunk in chunks(sorted(ids)):
            marks = self.in_marks(len(chunk))
            out += self.fetch(conn, (
                "SELECT src, dst, type, strength, 0 AS incoming FROM relations "
                f"WHERE tenant = ? AND src IN ({marks}) "
                "UNION ALL SELECT src, dst, type, strength, 1 AS incoming FROM ("
                "SELECT src, dst, type, strength, ROW_NUMBER() OVER ("
                "PARTITION BY dst ORDER BY strength DESC, src) AS n FROM relations "
                f"WHERE tenant = ? AND dst IN ({marks}) "
                f"AND type IN ({self.in_marks(len(symmetric))})) AS incoming "
                "WHERE n <= ?"),
                (tenant, *chunk, tenant, *chunk, *symmetric, per_target))
        return out

    def typed_links(self, conn: Connection, tenant: str, ids: Sequence[str],
                    types: Sequence[str]) -> list[Any]:
        """``(src, dst, type, strength)`` of the ``types`` relations touching ``ids``."""
        out: list[Any] = []
        typed = self.in_marks(len(types))
        for chunk in chunks(list(ids)):
            marks = self.in_marks(len(chunk))
            # Two index searches (by source, by target); one OR of both would scan the tenant.
            # (strength is read so that no index covers the query: SQLite would otherwise
            # scan the tenant's primary-key range for the target side.)
            out += self.fetch(conn, (
                "SELECT src, dst, type, strength FROM relations WHERE tenant = ? "
                f"AND src IN ({marks}) AND type IN ({typed}) UNION SELECT src, dst, type, "
                f"strength FROM relations WHERE tenant = ? AND dst IN ({marks}) "
                f"AND type IN ({typed})"),
                (tenant, *chunk, *types, tenant, *chunk, *types))
        return out

    # -- access log --------------------------------------------------------------------------
    def record_access(self, conn: Connection, tenant: str, hits: Sequence[tuple[str, float]],
                      *, k: int, user_id: str | None, at: float, growth: float,
                      cap: float) -> None:
        """One recall's side effects for ``(memory_id, score)`` hits in rank order: access
        count + 1, ``accessed_at``, stability x ``growth`` (capped), one access-log row each.

        One statement for every hit (executemany); the stability update is the one of
        :func:`mnemonia.scoring.retention.access`, done in SQL so it cannot race."""
        conn.exec_driver_sql(self.sql(
            "UPDATE memories SET access_count = access_count + 1, accessed_at = ?, "
            "stability = CASE WHEN stability * ? > ? THEN ? ELSE stability * ? END "
            "WHERE id = ?"),
            [(at, growth, cap, cap, growth, mid) for mid, _ in hits])
        conn.exec_driver_sql(self.sql(
            "INSERT INTO access_log (tenant, memory_id, rank, k, score, user_id, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)"),
            [(tenant, mid, rank, k, score, user_id, at)
             for rank, (mid, score) in enumerate(hits, start=1)])

    def access_ranks(self, conn: Connection, tenant: str, ids: Sequence[str], until: float
                     ) -> list[tuple[str, int, float]]:
        """``(memory_id, rank, at)`` of the access-log rows of ``ids`` up to ``until``."""
        a = access_log.c
        out: list[tuple[str, int, float]] = []
        for chunk in chunks(list(ids)):
            out += [(r[0], r[1], r[2]) for r in conn.execute(sa.select(
                a.memory_id, a.rank, a.at).where(a.memory_id.in_(chunk), a.tenant == tenant,
                                                 a.at <= until))]
        return out

    def access_window(self, conn: Connection, start: float, end: float,
                      disabled: Sequence[str]) -> list[tuple[str, int, int, float]]:
        """Access-log rows in ``(start, end]`` grouped per memory: ``(memory_id, recalls,
        distinct users, sum of min(1, (rank-1)/max(1, k-1)))``, tenants in ``disabled`` left
        out. The database aggregates, so a busy log costs no Python objects per row."""
        al = access_log
        share = sa.cast(al.c.rank - 1, sa.Float) / sa.cast(
            sa.case((al.c.k > 1, al.c.k - 1), else_=1), sa.Float)
        share = sa.case((share > 1.0, 1.0), (share < 0.0, 0.0), else_=share)
        q = (sa.select(al.c.memory_id, sa.func.count().label("n"),
                       sa.func.count(sa.distinct(al.c.user_id)).label("users"),
                       sa.func.sum(share).label("shares"))
             .where(al.c.at > start, al.c.at <= end).group_by(al.c.memory_id))
        if disabled:
            q = q.where(al.c.tenant.not_in(list(disabled)))
        return [(r[0], int(r[1]), int(r[2]), float(r[3])) for r in conn.execute(q)]

    # -- maintenance reads -------------------------------------------------------------------
    def select_ids(self, conn: Connection, ids: Sequence[str], *, committed: bool = False,
                   deleted: bool | None = None, consolidated: bool | None = None,
                   enriched: bool | None = None) -> list[str]:
        """Those of ``ids`` that match every given filter (``None``: either way)."""
        m = memories.c
        cond: list[Any] = []
        if committed:
            cond.append(_committed(m.status))
        for col, want in ((m.deleted_at, deleted), (m.consolidated_into, consolidated),
                          (m.enriched_at, enriched)):
            if want is not None:
                cond.append(col.is_not(None) if want else col.is_(None))
        out: list[str] = []
        for chunk in chunks(list(ids)):
            out += [r[0] for r in conn.execute(sa.select(m.id).where(m.id.in_(chunk), *cond))]
        return out

    def columns_of(self, conn: Connection, ids: Sequence[str], columns: Sequence[str], *,
                   committed: bool = False) -> dict[str, Any]:
        """``{id: row of columns}`` (``id`` always included) for those of ``ids`` found."""
        m = memories.c
        cols = [m.id, *(m[c] for c in columns if c != "id")]
        cond = [_committed(m.status)] if committed else []
        out: dict[str, Any] = {}
        for chunk in chunks(list(ids)):
            for r in conn.execute(sa.select(*cols).where(m.id.in_(chunk), *cond)):
                out[r.id] = r
        return out

    def unenriched(self, conn: Connection, tenant: str, skipped: str) -> list[str]:
        """Active memories of ``tenant`` not enriched yet and not in state ``skipped``, in
        insertion order."""
        m = memories.c
        return [r[0] for r in conn.execute(sa.select(m.id).where(
            m.tenant == tenant, _committed(m.status), m.deleted_at.is_(None),
            m.enriched_at.is_(None), m.state != skipped).order_by(m.seq))]

    # -- export / import ---------------------------------------------------------------------
    def memory_count(self, conn: Connection, tenants: Sequence[str]) -> int:
        """Committed memories (deleted ones too) of ``tenants``."""
        m = memories.c
        total = 0
        for chunk in chunks(list(tenants)):
            total += int(conn.execute(sa.select(sa.func.count()).where(
                m.tenant.in_(chunk), _committed(m.status))).scalar_one())
        return total

    def memory_page(self, conn: Connection, tenant: str, after: tuple[int, str] | None,
                    limit: int) -> list[Any]:
        """Up to ``limit`` committed rows of ``tenant`` (deleted ones too), every column, in
        ``(seq, id)`` order, after the ``(seq, id)`` of ``after`` (keyset paging: each page
        costs the same however far the export has got)."""
        m = memories.c
        q = sa.select(memories).where(m.tenant == tenant, _committed(m.status))
        if after is not None:
            q = q.where(sa.or_(m.seq > after[0], sa.and_(m.seq == after[0], m.id > after[1])))
        return list(conn.execute(q.order_by(m.seq, m.id).limit(limit)).fetchall())

    def entity_links(self, conn: Connection, ids: Sequence[str]) -> dict[str, list[str]]:
        """``{memory_id: [entity, ...]}`` (sorted) of the ``memory_entities`` rows of ``ids``."""
        me = memory_entities.c
        out: dict[str, list[str]] = {}
        for chunk in chunks(list(ids)):
            for r in conn.execute(sa.select(me.memory_id, me.entity).where(
                    me.memory_id.in_(chunk)).order_by(me.memory_id, me.entity)):
                out.setdefault(r[0], []).append(r[1])
        return out

    def stream_tenant(self, conn: Connection, kind: str, tenant: str, size: int = 500
                      ) -> Iterator[Any]:
        """Every ``relations`` (by key), ``events`` or ``access`` row (by id, of committed
        memories only) of ``tenant``, read ``size`` rows at a time."""
        if kind == "relations":
            r = relations.c
            q = sa.select(relations).where(r.tenant == tenant).order_by(r.src, r.dst, r.type)
        else:
            table = memory_events if kind == "events" else access_log
            q = sa.select(table).select_from(table.join(
                memories, memories.c.id == table.c.memory_id)).where(
                table.c.tenant == tenant, memories.c.tenant == tenant,
                _committed(memories.c.status)).order_by(table.c.id)
        result = conn.execute(q.execution_options(yield_per=size))
        for part in result.partitions():
            yield from part

    def collection_row(self, conn: Connection, tenant: str) -> Any:
        """The tenant's ``collections`` row, or ``None``."""
        return conn.execute(sa.select(collections).where(collections.c.tenant == tenant)).first()

    def put_collection(self, conn: Connection, tenant: str, *, model: str, dimension: int,
                       created_at: float, next_seq: int) -> None:
        """Make the tenant's ``collections`` row, or set the ``next_seq`` of the one there."""
        c = collections.c
        if self.collection_row(conn, tenant) is None:
            conn.execute(collections.insert().values(
                tenant=tenant, embedding_model=model, dimension=dimension,
                created_at=created_at, next_seq=next_seq))
        else:
            conn.execute(collections.update().where(c.tenant == tenant)
                         .values(next_seq=next_seq))

    def insert_access(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        """Insert ``access_log`` rows (``tenant, memory_id, rank, k, score, user_id, at``)."""
        for chunk in chunks(list(rows)):
            conn.execute(access_log.insert(), list(chunk))

    def put_relations(self, conn: Connection, rows: Sequence[dict[str, Any]], *,
                      overwrite: bool) -> int:
        """Insert the ``relations`` rows not there yet; with ``overwrite`` the ones there get
        the row's strength and creation time. Returns the rows written."""
        r = relations.c
        written = 0
        for chunk in chunks(list(rows)):
            there: set[tuple[str, str, str, str]] = set()
            for tenant in {x["tenant"] for x in chunk}:
                srcs = sorted({x["src"] for x in chunk if x["tenant"] == tenant})
                there |= {(tenant, q.src, q.dst, q.type) for q in conn.execute(
                    sa.select(r.src, r.dst, r.type).where(r.tenant == tenant,
                                                          r.src.in_(srcs)))}
            new = [x for x in chunk if (x["tenant"], x["src"], x["dst"], x["type"]) not in there]
            old = [x for x in chunk if (x["tenant"], x["src"], x["dst"], x["type"]) in there]
            if new:
                conn.execute(relations.insert(), new)
            if overwrite and old:
                conn.execute(relations.update().where(
                    r.tenant == sa.bindparam("b_tenant"), r.src == sa.bindparam("b_src"),
                    r.dst == sa.bindparam("b_dst"), r.type == sa.bindparam("b_type")).values(
                    strength=sa.bindparam("b_strength"), created_at=sa.bindparam("b_at")),
                    [{"b_tenant": x["tenant"], "b_src": x["src"], "b_dst": x["dst"],
                      "b_type": x["type"], "b_strength": x["strength"],
                      "b_at": x["created_at"]} for x in old])
            written += len(new) + (len(old) if overwrite else 0)
        return written

    def staged(self, conn: Connection, status: str | None = None) -> list[Any]:
        """``(id, tenant, status)`` of the rows an import staged (status ``i:<import id>``;
        one import's rows with ``status``)."""
        m = memories.c
        # a range, not LIKE, so that the status index serves it
        cond = m.status == status if status is not None else sa.and_(m.status >= "i:",
                                                                     m.status < "i;")
        return list(conn.execute(sa.select(m.id, m.tenant, m.status).where(cond)).fetchall())

    def commit_staged(self, conn: Connection, status: str) -> int:
        """Every row staged with ``status`` becomes committed (visible) at once."""
        return int(conn.execute(memories.update().where(memories.c.status == status)
                                .values(status="committed")).rowcount)

    def swap_staged(self, conn: Connection, pairs: Sequence[tuple[str, str]]) -> None:
        """For each ``(staged_id, id)``: the stored memory ``id`` (its row, vector, entity
        links, events, access rows and keyword entry; its relations stay) is replaced by the
        staged one, which takes its id and its place (``seq``) in the tenant."""
        if not pairs:
            return
        real = [b for _, b in pairs]
        seqs: dict[str, int] = {}
        for chunk in chunks(real):
            seqs.update((r[0], r[1]) for r in conn.execute(sa.select(
                memories.c.id, memories.c.seq).where(memories.c.id.in_(chunk))))
        for chunk in chunks(real):
            for table in (access_log, memory_events, memory_entities):
                conn.execute(table.delete().where(table.c.memory_id.in_(chunk)))
            conn.execute(memories.delete().where(memories.c.id.in_(chunk)))
        self.vectors_delete(conn, real)
        self.fts_delete(conn, real)
        conn.execute(memories.update().where(memories.c.id == sa.bindparam("b_tmp")).values(
            id=sa.bindparam("b_id"), seq=sa.bindparam("b_seq")),
            [{"b_tmp": a, "b_id": b, "b_seq": seqs[b]} for a, b in pairs])
        moves = [{"b_tmp": a, "b_id": b} for a, b in pairs]
        for table in (memory_vectors, memory_entities, memory_events, access_log):
            conn.execute(table.update().where(table.c.memory_id == sa.bindparam("b_tmp"))
                         .values(memory_id=sa.bindparam("b_id")), moves)
        if self.dialect == "sqlite":
            conn.exec_driver_sql("UPDATE memories_kw SET memory_id = ? WHERE memory_id = ?",
                                 [(b, a) for a, b in pairs])

    # -- inspector reads (mnemonia.inspection; the ``mnemonia ui`` pages) -------------------
    def inspect_page(self, conn: Connection, tenant: str, *, words: Sequence[str],
                     filters: Mapping[str, Any], after: tuple[int, str] | None,
                     limit: int) -> list[Any]:
        """Up to ``limit`` committed rows of ``tenant`` (every column plus ``cursor_seq`` and
        ``cursor_id``), newest first, after the ``(seq, id)`` cursor ``after``: keyset paging
        on the ``(tenant, seq)`` index, so a deep page costs what the first one does.

        ``filters``: ``kind``, ``topic``, ``state`` (a gatekeeper state, or ``pinned``,
        ``superseded``, ``consolidated``) and ``deleted`` (``no``, ``yes``, ``all``).
        ``words``: every one must occur in the text (the keyword index's word rules on SQLite,
        where the index is searched newest first with the cursor on its rowid; a
        case-insensitive substring match elsewhere).
        """
        cond, params = self._inspect_filters(filters)
        if words and self.dialect == "sqlite":
            terms = list(dict.fromkeys(t for w in words
                                       for t in keyword_terms(w, tenant_token(tenant))))
            if terms:
                return self._inspect_keyword(conn, tenant, terms, cond, params, after, limit)
        for w in words:
            cond.append("lower(m.text) LIKE ? ESCAPE '\\'")
            params.append("%" + _like_escape(w.casefold()) + "%")
        if after is not None:
            # seq alone narrows the index range; the id breaks ties (imports may share a seq)
            cond.append("m.seq <= ? AND (m.seq < ? OR m.id < ?)")
            params += [after[0], after[0], after[1]]
        where = " AND ".join(["m.tenant = ?", _COMMITTED_SQL, *cond])
        return self.fetch(conn, f"SELECT {_MEMORY_COLUMNS}, m.seq AS cursor_seq, m.id AS "
                          f"cursor_id FROM memories AS m WHERE {where} "
                          "ORDER BY m.seq DESC, m.id DESC LIMIT ?",
                          (tenant, *params, limit), named=True)

    def _inspect_keyword(self, conn: Connection, tenant: str, terms: Sequence[str],
                         cond: list[str], params: list[Any], after: tuple[int, str] | None,
                         limit: int) -> list[Any]:
        """:meth:`inspect_page` with words on SQLite: the keyword index walked newest first
        (by its rowid, which the cursor then holds: ``cursor_seq``), no bm25 ranking."""
        match = " AND ".join(f'"{t}"' for t in terms)
        more = list(cond)
        extra: list[Any] = []
        if after is not None:
            more.append("k.rowid < ?")
            extra.append(after[0])
        where = " AND ".join(["memories_kw MATCH ?", "m.tenant = ?",
                              _COMMITTED_SQL,
                              *more])
        return self.fetch(conn, f"SELECT {_MEMORY_COLUMNS}, k.rowid AS cursor_seq, m.id AS "
                          "cursor_id FROM memories_kw AS k CROSS JOIN memories AS m "
                          f"ON m.id = k.memory_id WHERE {where} ORDER BY k.rowid DESC LIMIT ?",
                          (match, tenant, *params, *extra, limit), named=True)

    @staticmethod
    def _inspect_filters(filters: Mapping[str, Any]) -> tuple[list[str], list[Any]]:
        cond: list[str] = []
        params: list[Any] = []
        for key in ("kind", "topic"):
            if filters.get(key) is not None:
                cond.append(f"m.{key} = ?")
                params.append(filters[key])
        state = filters.get("state")
        flags = {"pinned": "m.pinned = ?", "superseded": "m.superseded_by IS NOT NULL",
                 "consolidated": "m.consolidated_into IS NOT NULL"}
        if state == "pinned":
            cond.append(flags[state])
            params.append(True)
        elif state in flags:
            cond.append(flags[state])
        elif state is not None:
            cond.append("m.state = ?")
            params.append(state)
        deleted = filters.get("deleted", "no")
        if deleted == "no":
            cond.append("m.deleted_at IS NULL")
        elif deleted == "yes":
            cond.append("m.deleted_at IS NOT NULL")
        return cond, params

    def recently_deleted(self, conn: Connection, tenant: str, limit: int) -> list[Any]:
        """The tenant's soft-deleted memories (every column), most recently deleted first."""
        return self.fetch(conn, f"SELECT {_MEMORY_COLUMNS} FROM memories AS m WHERE "
                          f"m.tenant = ? AND {_COMMITTED_SQL} "
                          "AND m.deleted_at IS NOT NULL "
                          "ORDER BY m.deleted_at DESC, m.id LIMIT ?", (tenant, limit), named=True)


def _sqlite_file(database: str | None) -> str | None:
    """The absolute path of a SQLite database file, or ``None`` for an in-memory one."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return os.path.abspath(database)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _like_escape(text: str) -> str:
    """``text`` for a ``LIKE`` pattern with ``\\`` as the escape character."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@functools.lru_cache(maxsize=64)
def _row_class(columns: tuple[str, ...]) -> Any:
    return namedtuple("Row", columns, rename=True)


def _f32_bytes(vector: Any) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def chunks(items: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    """Split ``items`` for ``IN (...)`` clauses that stay under driver limits."""
    for i in range(0, len(items), size):
        yield items[i:i + size]
