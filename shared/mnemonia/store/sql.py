"""The SQL side-store (SQLAlchemy Core): the system of record for lifecycle state, relations,
logs and the keyword index.

SQLite by default (a file next to the Chroma folder, FTS5 with bm25 ranking); any SQLAlchemy URL
works, with PostgreSQL full-text search in server mode. Schema changes are an append-only list of
migrations applied by the idempotent :meth:`SideStore.setup`.
Times are stored as float seconds since the epoch (UTC).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import time
import unicodedata
from collections import Counter, namedtuple
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from mnemonia.errors import StoreError, StoreUnavailableError

__all__ = ["MIGRATIONS", "SideStore", "keyword_terms", "tenant_token"]

metadata = sa.MetaData()

memories = sa.Table(
    "memories", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("topic", sa.String(128)),
    sa.Column("entities", sa.Text, nullable=False, default="[]"),
    sa.Column("importance", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("accessed_at", sa.Float, nullable=False),
    sa.Column("access_count", sa.Integer, nullable=False, default=0),
    sa.Column("stability", sa.Float, nullable=False, default=1.0),
    sa.Column("easiness", sa.Float, nullable=False, default=2.5),
    sa.Column("interval_days", sa.Integer, nullable=False, default=0),
    sa.Column("repetitions", sa.Integer, nullable=False, default=0),
    sa.Column("next_review", sa.Float),
    sa.Column("last_quality", sa.Integer, nullable=False, default=0),
    sa.Column("utility", sa.Float, nullable=False, default=0.5),
    sa.Column("state", sa.String(16), nullable=False, default="batched"),
    sa.Column("pinned", sa.Boolean, nullable=False, default=False),
    sa.Column("deleted_at", sa.Float),
    sa.Column("superseded_by", sa.String(64)),
    sa.Column("consolidated_into", sa.String(64)),
    sa.Column("session_id", sa.String(256)),
    sa.Column("metadata", sa.Text, nullable=False, default="{}"),
    sa.Column("embedding_model", sa.String(256), nullable=False),
    sa.Column("enriched_at", sa.Float),
    sa.Column("last_reviewed_at", sa.Float),
    sa.Column("last_reevaluated_at", sa.Float),
    sa.Column("heat_counter", sa.Float, nullable=False, default=0.0),
    sa.Column("heat_at", sa.Float),
    # 'pending' while the vector write is under way, 'committed' once both stores agree,
    # 'deleting' while a hard forget is under way.
    sa.Column("status", sa.String(16), nullable=False, default="pending"),
    sa.Index("ix_memories_tenant_seq", "tenant", "seq"),
    sa.Index("ix_memories_tenant_session", "tenant", "session_id"),
    sa.Index("ix_memories_status", "status"),
)

relations = sa.Table(
    "relations", metadata,
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("src", sa.String(64), nullable=False),
    sa.Column("dst", sa.String(64), nullable=False),
    sa.Column("type", sa.String(48), nullable=False),
    sa.Column("strength", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.PrimaryKeyConstraint("tenant", "src", "dst", "type"),
    sa.Index("ix_relations_dst", "tenant", "dst"),
)

access_log = sa.Table(
    "access_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("score", sa.Float, nullable=False),
    sa.Column("user_id", sa.String(256)),
    sa.Column("at", sa.Float, nullable=False),
    sa.Index("ix_access_log_memory", "memory_id"),
    sa.Index("ix_access_log_at", "at"),
)

memory_events = sa.Table(
    "memory_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("event", sa.String(32), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("before", sa.Text),
    sa.Column("after", sa.Text),
    sa.Index("ix_memory_events_memory", "memory_id", "id"),
)

memory_entities = sa.Table(
    "memory_entities", metadata,
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("entity", sa.String(256), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.PrimaryKeyConstraint("tenant", "entity", "memory_id"),
    sa.Index("ix_memory_entities_memory", "memory_id"),
)

collections = sa.Table(
    "collections", metadata,
    sa.Column("tenant", sa.String(64), primary_key=True),
    sa.Column("embedding_model", sa.String(256), nullable=False),
    sa.Column("dimension", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("next_seq", sa.Integer, nullable=False, default=0),
)

kv = sa.Table(
    "kv", metadata,
    sa.Column("key", sa.String(128), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# Each memory's vector, also kept here so recall can score keyword and entity candidates
# without a round trip to Chroma (float32 bytes, little-endian).
memory_vectors = sa.Table(
    "memory_vectors", metadata,
    sa.Column("memory_id", sa.String(64), primary_key=True),
    sa.Column("vector", sa.LargeBinary, nullable=False),
)

schema_migrations = sa.Table(
    "schema_migrations", metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)


def tenant_token(tenant: str) -> str:
    """A single alphanumeric token for a tenant (17 characters: ``t`` and 16 hex digits)."""
    return "t" + hashlib.blake2b(tenant.encode(), digest_size=8).hexdigest()


_TERM = re.compile(r"[^\W_]+")


def keyword_terms(text: str, token: str) -> list[str]:
    """The keyword-index terms of ``text`` for the tenant whose token is ``token``.

    Words are case-folded, stripped of diacritics and split on anything that is not a letter
    or digit; each is prefixed with the tenant token, so a term's postings list (and its
    document frequency) belongs to one tenant alone and a search never reads another tenant's
    postings. Indexing and search both go through here, so they always agree.
    """
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [token + w for w in _TERM.findall(folded)]


def _create_core(conn: Connection) -> None:
    metadata.create_all(conn, tables=[
        memories, relations, access_log, memory_events, memory_entities, collections, kv,
    ])


def _create_fts(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
            "body, ttok, memory_id UNINDEXED, tokenize='unicode61 remove_diacritics 2')"
        )
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "ALTER TABLE memories ADD COLUMN IF NOT EXISTS tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED"
        )
        conn.exec_driver_sql(
            "CREATE INDEX IF NOT EXISTS ix_memories_tsv ON memories USING GIN (tsv)"
        )


def _create_fts_vocab(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts_vocab "
            "USING fts5vocab(memories_fts, 'row')"
        )


def _tenant_terms(conn: Connection) -> None:
    """Move the keyword index to tenant-prefixed terms (see :func:`keyword_terms`).

    The first index matched ``ttok:<tenant> AND (words)``, which reads the tenant's whole
    postings list on every search (its cost grew with the tenant) and took document
    frequencies across all tenants.
    """
    if conn.dialect.name != "sqlite":
        return
    conn.exec_driver_sql(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_kw USING fts5("
        "body, memory_id UNINDEXED, tokenize='ascii')")
    conn.exec_driver_sql(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_kw_vocab USING fts5vocab(memories_kw, 'row')")
    old = conn.exec_driver_sql("SELECT body, ttok, memory_id FROM memories_fts").fetchall()
    if old:
        conn.exec_driver_sql(
            "INSERT INTO memories_kw(body, memory_id) VALUES (?, ?)",
            [(" ".join(keyword_terms(body, ttok)), mid) for body, ttok, mid in old])
    conn.exec_driver_sql("DROP TABLE IF EXISTS memories_fts_vocab")
    conn.exec_driver_sql("DROP TABLE IF EXISTS memories_fts")


def _create_vectors(conn: Connection) -> None:
    # Stores made before this keep their vectors in Chroma only; recall reads those from Chroma.
    metadata.create_all(conn, tables=[memory_vectors])


def _keyword_df(conn: Connection) -> None:
    """Document frequencies in a table of their own, kept by every index write.

    fts5vocab counts a term's documents by walking its postings, so looking up a common
    word cost as much as searching it (0.5 ms for five words at 100k memories).
    """
    if conn.dialect.name != "sqlite":
        return
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS keyword_df (term TEXT PRIMARY KEY, docs INTEGER NOT NULL)"
        " WITHOUT ROWID")
    conn.exec_driver_sql(
        "INSERT INTO keyword_df(term, docs) SELECT term, doc FROM memories_kw_vocab")
    conn.exec_driver_sql("DROP TABLE IF EXISTS memories_kw_vocab")


# Append-only: never edit or reorder an entry that has shipped; add a new one.
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "core tables", _create_core),
    (2, "keyword index", _create_fts),
    (3, "keyword document frequencies", _create_fts_vocab),
    (4, "keyword index with tenant-prefixed terms", _tenant_terms),
    (5, "vectors in the side-store", _create_vectors),
    (6, "keyword document frequencies kept on write", _keyword_df),
]

# bm25 ranking scores every memory a query word occurs in, so a word found in a large share of
# a big store would make keyword search grow with the store. Query words are taken rarest
# first while their total number of postings (in the asking tenant) stays within a budget
# (``MnemoniaConfig.keyword_postings``); the words left out are the most common ones, whose
# idf is the smallest anyway.
MAX_KEYWORD_POSTINGS = 500

_WORD = re.compile(r"\w+")


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
        if self.dialect == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)

    # -- setup -----------------------------------------------------------------------------
    def setup(self) -> list[int]:
        """Apply every migration not yet applied. Idempotent; returns the versions applied."""
        applied: list[int] = []
        with self.begin() as conn:
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
        backoff with jitter, bounded); when the attempts run out: StoreUnavailableError."""
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential_jitter(multiplier=0.05, max=self._max_wait, jitter=0.05),
            retry=retry_if_exception(self._unavailable),
            reraise=False,
        )
        try:
            return retrying(self.engine.connect)
        except RetryError as e:
            last = e.last_attempt.exception()
            raise StoreUnavailableError(
                f"the SQL store ({self.engine.url.render_as_string(hide_password=True)}) did "
                f"not answer after {self._attempts} attempts: {last}") from last

    @contextmanager
    def _session(self, transaction: bool) -> Iterator[Connection]:
        conn = self._checkout()
        try:
            with conn:
                if transaction:
                    with conn.begin():
                        yield conn
                else:
                    yield conn
        except sa.exc.DBAPIError as e:
            # A transaction cut off by a lost server is rolled back by the server: nothing
            # of it is written. The caller gets a typed error.
            if self._unavailable(e):
                raise StoreUnavailableError(f"the SQL store stopped answering: {e.orig}") from e
            raise

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A connection in a transaction, committed on leaving (one writer at a time)."""
        with self._lock, self._session(True) as conn:
            yield conn

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._session(False) as conn:
            yield conn

    def dispose(self) -> None:
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
        for chunk in _chunks(list(ids), 500):
            out.update((r[0], bytes(r[1])) for r in self.fetch(
                conn, "SELECT memory_id, vector FROM memory_vectors "
                f"WHERE memory_id IN ({self.in_marks(len(chunk))})", chunk))
        return out

    def vectors_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        for chunk in _chunks(list(ids), 500):
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
        conn.exec_driver_sql(
            "INSERT INTO keyword_df(term, docs) VALUES (?, ?) "
            "ON CONFLICT(term) DO UPDATE SET docs = docs + excluded.docs", list(df.items()))

    def fts_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        ids = list(ids)
        if self.dialect != "sqlite" or not ids:
            return
        for chunk in _chunks(ids, 500):
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

    def _within_budget(self, conn: Connection, terms: Sequence[str], budget: int
                       ) -> list[str]:
        """The query terms, rarest first, while their postings fit in ``budget``."""
        df = dict(self.fetch(
            conn, f"SELECT term, docs FROM keyword_df WHERE term IN ({self.in_marks(len(terms))})",
            terms))
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
        max_postings: int = MAX_KEYWORD_POSTINGS,
    ) -> list[tuple[str, float]]:
        """Best keyword matches as ``(memory_id, score)``, best first (bm25 / ts_rank).

        On SQLite the query words are limited to a postings budget (rarest first in the
        tenant), so the cost stays bounded however large the store grows.
        """
        words = [t for t in tokens if _WORD.fullmatch(t)]
        if not words or limit <= 0:
            return []
        if self.dialect == "sqlite":
            token = tenant_token(tenant)
            terms = list(dict.fromkeys(t for w in words for t in keyword_terms(w, token)))
            terms = self._within_budget(conn, terms, max_postings) if terms else []
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

    # -- kv --------------------------------------------------------------------------------
    def kv_get(self, conn: Connection, key: str) -> Any:
        row = conn.execute(sa.select(kv.c.value).where(kv.c.key == key)).first()
        return None if row is None else json.loads(row[0])

    def kv_set(self, conn: Connection, key: str, value: Any) -> None:
        payload = json.dumps(value)
        updated = conn.execute(kv.update().where(kv.c.key == key).values(value=payload)).rowcount
        if not updated:
            conn.execute(kv.insert().values(key=key, value=payload))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


@functools.lru_cache(maxsize=64)
def _row_class(columns: tuple[str, ...]) -> Any:
    return namedtuple("Row", columns, rename=True)


def _f32_bytes(vector: Any) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def chunks(items: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    """Split ``items`` for ``IN (...)`` clauses that stay under driver limits."""
    return _chunks(items, size)
