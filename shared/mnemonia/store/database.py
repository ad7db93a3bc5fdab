"""The database under every store class: the SQLAlchemy engine, sessions (transactions,
reads, snapshots), the retry policy of connecting, the deferred writer thread, the SQLite
file's identity check, driver-level reads for the hot paths, the row cache's hooks, the
report of what a write changes (:meth:`Database.report`) and the migrations.

SQLite by default (a file next to the Chroma folder); any SQLAlchemy URL works, PostgreSQL
in server mode. What differs between them is asked of :attr:`Database.dialect`
(:mod:`mnemonia.store.dialect`); the tables and migrations are in :mod:`mnemonia.store.schema`.
Times are stored as float seconds since the epoch (UTC).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from tenacity import RetryError

from mnemonia.errors import StoreError, StoreFileChangedError, StoreUnavailableError
from mnemonia.store.changes import Changes
from mnemonia.store.dialect import Dialect, dialect_of, engine_options
from mnemonia.store.retry import FailureLog, bounded, first_then
from mnemonia.store.rowcache import RowCache
from mnemonia.store.schema import MIGRATIONS, kv, schema_migrations

__all__ = ["STATISTICS_EVERY", "Connection", "Database"]

log = logging.getLogger("mnemonia")

STATISTICS_EVERY = 1000
"""Memories committed by this process between two looks at the database's planner
statistics (:meth:`Database.grew`), where the dialect keeps them (:attr:`Dialect.analyses`);
the look is one cheap query, the refresh (PostgreSQL's ``ANALYZE``) happens only when the
dialect finds them out of date."""


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


class Database:
    """One SQL database and its sessions. Thread-safe for one process (one writer at a
    time)."""

    def __init__(self, url: str, *, attempts: int = 5, max_wait: float = 2.0) -> None:
        self.url = url
        self._attempts = attempts
        self._max_wait = max_wait
        try:
            self.engine: Engine = sa.create_engine(url, **engine_options(url))
        except Exception as e:  # bad URL or missing driver
            raise StoreError(f"cannot open SQL store {url!r}: {e}") from e
        self.dialect: Dialect = dialect_of(self.engine)
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
        # memories inserted since the planner's statistics were last looked at (:meth:`grew`)
        self._grown = 0
        self._grown_lock = threading.Lock()
        # rows kept between recalls (:meth:`keep_rows`): only where this process is the one
        # writer, which is the opener's to say
        self.row_cache: RowCache | None = None
        # told what a write method is about to change (:meth:`report`): the opener's caches
        self.on_change: Callable[[Changes], None] | None = None
        # A SQLite file's identity (device, inode), taken on the first connection and checked
        # before every session and before every commit: a file deleted or replaced under an
        # open engine is noticed before anything more is written to (or read from) it.
        self.file: str | None = self.dialect.database_file(self.engine.url.database)
        self._identity: tuple[int, int] | None = None
        self.dialect.prepare(self.engine)

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
            self.dialect.lock_migrations(conn)
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
        return self.dialect.unanswered(exc, self.engine.dialect.loaded_dbapi)

    def _checkout(self) -> Connection:
        """A pooled connection. Reaching a database server goes through tenacity (exponential
        backoff with jitter, bounded) once a first attempt failed; when the attempts run out:
        StoreUnavailableError."""
        return first_then(self.engine.connect, self._connect_retrying)

    def _connect_retrying(self, connect: Callable[[], Connection]) -> Connection:
        retrying = bounded(self._attempts, self._max_wait, self._unavailable)
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

    # -- kept rows -------------------------------------------------------------------------
    def keep_rows(self) -> None:
        """Keep the rows recall reads between calls (:mod:`mnemonia.store.rowcache`). Only
        for a store no other process writes to: its writes are not seen here."""
        if self.row_cache is None:
            self.row_cache = RowCache()

    def kept(self, asked: bool) -> RowCache | None:
        """The kept rows and counts a read ``asked`` for may use: none inside a write
        transaction of this thread, which must see its own writes."""
        writing: int = getattr(self._local, "writing", 0)
        return self.row_cache if asked and not writing else None

    def report(self, changes: Changes) -> None:
        """A write method is about to write ``changes``, inside the caller's transaction:
        tell :attr:`on_change` (the runtime drops what recall kept of them). Write methods
        report what only they know (the memories whose relations they touch, new word
        vectors); a write's scope declares the rest."""
        if self.on_change is not None:
            self.on_change(changes)

    # -- sessions --------------------------------------------------------------------------
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
            cache.write_begins(changes)
            self._local.writing = getattr(self._local, "writing", 0) + 1
        try:
            with conn:
                if transaction:
                    # a write that does not name its rows has them recorded as it writes
                    recorded = cache is not None and changes is None \
                        and self.dialect.track_changes(conn)
                    found: tuple[list[str], list[str]] | None = None  # (None: any)
                    try:
                        with conn.begin():
                            yield conn
                            self.check_file()  # the last moment before the commit
                            if recorded:
                                found = self.dialect.changed_keys(conn)
                    finally:
                        if cache is not None:  # committed or rolled back: nothing read now
                            self._local.writing -= 1  # is older than the store
                            changed, terms = found if found is not None else (None, ())
                            cache.write_ends(changes, changed=changed, terms=terms)
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
        if self._grown >= STATISTICS_EVERY and not getattr(self._local, "depth", 0):
            self._refresh_statistics()

    # -- planner statistics ------------------------------------------------------------------
    def grew(self, rows: int) -> None:
        """``rows`` memories are being committed (inside the caller's transaction): once
        :data:`STATISTICS_EVERY` have been, the next committed write looks at the planner's
        statistics (:meth:`Dialect.refresh_statistics`). Not counted where the dialect keeps
        none (SQLite): no empty write session every 1,000 memories there."""
        if not self.dialect.analyses:
            return
        with self._grown_lock:
            self._grown += rows

    def _refresh_statistics(self) -> None:
        """Ask the dialect to refresh the planner's statistics if they are out of date, in a
        transaction of its own after the write (no row is changed; a failure is logged and
        the write that triggered it stands)."""
        with self._grown_lock:
            if self._grown < STATISTICS_EVERY:
                return  # another thread looked meanwhile
            self._grown = 0
        try:
            with self._session(True, changes=()) as conn:
                if self.dialect.refresh_statistics(conn):
                    log.info("refreshed the planner statistics of %s", self.where)
        except StoreError as e:
            log.warning("could not refresh the planner statistics of %s: %s", self.where, e)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        self._settle()
        with self.peek() as conn:
            yield conn

    @contextmanager
    def peek(self) -> Iterator[Connection]:
        """A connection for a read the deferred writes cannot change (:meth:`defer`: a
        recall's access counts change no vector), which does not wait for them: made under
        a lock the writer thread's work may be waiting behind, waiting could close a
        circle."""
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
            self.dialect.before_snapshot(conn)
            with conn.begin():
                self.dialect.start_snapshot(conn)
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
            raise self._driver_error(conn, e, "read") from e
        finally:
            cur.close()

    def execute_many(self, conn: Connection, statement: str,
                     rows: Sequence[Sequence[Any]]) -> None:
        """A write (``?`` placeholders) of many rows of parameters through the driver's
        cursor, inside ``conn``'s transaction. For ingest's relation rows, ~16 a memory:
        SQLAlchemy building each row's parameters was 14% of a 600,000-memory fill; 12,000
        rows into a fresh table took 0.25 s this way, 0.46 s through SQLAlchemy."""
        if not rows:
            return
        cur = conn.connection.cursor()
        try:
            cur.executemany(self.sql(statement), rows)
        except self._dbapi_error as e:
            raise self._driver_error(conn, e, "write") from e
        finally:
            cur.close()

    def _driver_error(self, conn: Connection, e: Exception, what: str) -> StoreError:
        """What a driver's error on ``conn`` is raised as: an outage invalidates the
        connection (:class:`StoreUnavailableError`), anything else is a failed ``what``."""
        if self._unavailable(e):
            conn.invalidate()
            return StoreUnavailableError(f"the SQL store stopped answering: {e}")
        return StoreError(f"SQL {what} failed: {e}")

    def insert_or_ignore(self, conn: Connection, table: sa.Table,
                         rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows``; a row whose key is already there (another process's) is left."""
        if not rows:
            return
        conn.execute(self.dialect.insert_or_ignore(table), [dict(r) for r in rows])


@functools.lru_cache(maxsize=64)
def _row_class(columns: tuple[str, ...]) -> Any:
    return namedtuple("Row", columns, rename=True)
