"""Everything that differs between the databases a side-store runs on, in one object per
dialect: :class:`SqliteDialect` (the embedded default: FTS5 keyword index with bm25, a file
whose identity is checked), :class:`PostgresDialect` (server mode: full-text search on a
generated ``tsvector`` column, advisory locks, ``jsonb``) and :class:`Dialect` itself, the
generic spelling any other SQLAlchemy database gets (no keyword index, no JSON filters).

The store classes ask their database's dialect instead of testing its name; the tables and
migrations (whose DDL is frozen per dialect) are in :mod:`mnemonia.store.schema`, the JSON
filters each dialect hands out in :mod:`mnemonia.store.json_filters`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from mnemonia.errors import StoreError
from mnemonia.store.json_filters import JsonFilter, PostgresJson, SqliteJson
from mnemonia.store.kept_counts import count_lock_sql
from mnemonia.store.rowcache import RowCache
from mnemonia.store.schema import (
    fill_keyword_df,
    item_expressions,
    keyword_df_key,
    keyword_docs,
    keyword_terms,
    memories,
    tenant_token,
)
from mnemonia.store.statements import (
    COMMITTED_SQL,
    MEMORY_COLUMNS,
    chunks,
)
from mnemonia.validation import row_embed_text

__all__ = ["CHANGED_KEYS", "INCOMING_PARTS", "MIGRATION_LOCK", "STATISTICS_PAGES", "Dialect",
           "JsonFilter", "PostgresDialect", "Reader", "SqliteDialect", "dialect_of",
           "engine_options"]

MIGRATION_LOCK = 7_316_402_913
"""The PostgreSQL advisory lock key the migrations run under (one process at a time)."""
SQLITE_POOL = 24
"""SQLite connections kept open in the pool (as many more may open and close beyond it).
SQLAlchemy keeps 5 by default: with 8 threads recalling (each with its helper reading the
keyword side), 2 adding, the writer thread and the scheduler, most sessions opened a new
connection (its pragmas, an empty page cache, the change triggers of its first write) and
closed it after."""
CHANGED_KEYS = 20_000
"""A write that changed more memory rows and keyword counts than this (an import, a large
``add_many``) is taken to have changed any: the rows kept for recall are dropped at once
rather than one by one (:meth:`Dialect.changed_keys`)."""
INCOMING_PARTS = 300
"""Index ranges (target, type) read by one statement of :meth:`Dialect.strongest_incoming`."""


class Reader(Protocol):
    """What a dialect's reads need of the database (:class:`~mnemonia.store.database.Database`)."""

    def fetch(self, conn: Connection, statement: str, params: Sequence[Any] = (), *,
              named: bool = False) -> list[Any]: ...

    def in_marks(self, n: int) -> str: ...


def engine_options(url: str) -> dict[str, Any]:
    """``sqlalchemy.create_engine`` options for ``url`` (chosen before the engine exists)."""
    if url.startswith("sqlite"):
        options = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if ":memory:" in url:
            return {**options, "poolclass": sa.pool.StaticPool}
        return {**options, "poolclass": sa.pool.QueuePool, "pool_size": SQLITE_POOL,
                "max_overflow": SQLITE_POOL}
    return {"pool_pre_ping": True}


def dialect_of(engine: Engine) -> Dialect:
    """The dialect object of ``engine``'s database."""
    name = engine.dialect.name
    kinds: dict[str, type[Dialect]] = {"sqlite": SqliteDialect, "postgresql": PostgresDialect}
    return kinds.get(name, Dialect)(name)


# -- the dialects -------------------------------------------------------------------------------
class Dialect:
    """A database without a dialect of its own here (any other SQLAlchemy URL): no keyword
    index (recall runs on the vectors alone), no JSON filters or keyed items, plain inserts.
    :class:`SqliteDialect` and :class:`PostgresDialect` spell what their databases do."""

    keyword_index = "none"
    """What the doctor reports as the keyword index."""
    keyword_table = False
    """The keyword index is a table of its own (SQLite's ``memories_kw``): it can disagree
    with ``memories`` and be counted, and the inspector walks it for word searches."""

    def __init__(self, name: str) -> None:
        self.name = name
        """SQLAlchemy's name of the dialect (``sqlite``, ``postgresql``, ...)."""

    # -- engine and connections ----------------------------------------------------------------
    def database_file(self, database: str | None) -> str | None:
        """The file the database lives in, whose identity the store checks (``None``)."""
        return None

    def prepare(self, engine: Engine) -> None:
        """Set up ``engine``'s new connections (nothing here)."""

    def unanswered(self, exc: BaseException, dbapi: Any) -> bool:
        """The driver's error ``exc`` says that the database did not answer (as opposed to
        rejecting a statement)."""
        kinds = (sa.exc.OperationalError, dbapi.OperationalError)
        return isinstance(exc, (*kinds, sa.exc.InterfaceError, dbapi.InterfaceError))

    def lock_migrations(self, conn: Connection) -> None:
        """Make other processes that migrate the same store wait for this transaction."""

    analyses = False
    """:meth:`refresh_statistics` does something here (the engine counts commits for it)."""

    def refresh_statistics(self, conn: Connection) -> bool:
        """Refresh the planner's statistics if out of date; whether it did (nothing here)."""
        return False

    def before_snapshot(self, conn: Connection) -> None:
        """Prepare ``conn`` (before its transaction) for reads that see one snapshot."""

    def start_snapshot(self, conn: Connection) -> None:
        """Take the snapshot of the transaction just begun on ``conn``."""

    # -- what a write changed --------------------------------------------------------------------
    def track_changes(self, conn: Connection) -> bool:
        """Record from now on which memory rows and keyword counts the transactions on
        ``conn`` change (:meth:`changed_keys`); whether this dialect can (not here)."""
        return False

    def changed_keys(self, conn: Connection) -> tuple[list[str], list[str]] | None:
        """``(memory ids, keyword_df terms)`` the transaction under way on ``conn`` changed
        since :meth:`track_changes` (a memory's row, a relation starting or ending at it, a
        term's document count), then forgotten; ``None`` when they are more than
        :data:`CHANGED_KEYS` (a bulk write: as if it could have changed anything). Only
        where :meth:`track_changes` said yes."""
        raise NotImplementedError(f"{self.name} records no changes")

    # -- statements ----------------------------------------------------------------------------
    def insert_or_ignore(self, table: sa.Table) -> Any:
        """An insert into ``table`` that leaves a row whose key is already there."""
        return table.insert()

    def or_ignore(self, stmt: Any) -> Any:
        """SQLite's ``INSERT OR IGNORE`` of the insert ``stmt``; elsewhere ``stmt`` as it is."""
        return stmt

    def json_filter(self) -> JsonFilter:
        raise StoreError(f"value filters need SQLite or PostgreSQL, not {self.name!r}")

    def item_expressions(self) -> dict[str, str]:
        """The indexed expressions of keyed items (:func:`.schema.item_expressions`)."""
        raise StoreError(f"keyed items need SQLite or PostgreSQL, not {self.name!r}")

    # -- keyword index ---------------------------------------------------------------------
    def index_keywords(self, conn: Connection, rows: Sequence[tuple[str, str, str]]) -> None:
        """Index ``(memory_id, tenant, text)`` rows in a keyword table of its own."""

    def unindex_keywords(self, reader: Reader, conn: Connection, ids: list[str]) -> None:
        """Take ``ids`` out of a keyword table of its own."""

    def move_keywords(self, conn: Connection, pairs: Sequence[tuple[str, str]]) -> None:
        """Keyword-table entries of each ``(old_id, new_id)`` take the new id."""

    def keyword_search(self, reader: Reader, conn: Connection, tenant: str,
                       words: Sequence[str], limit: int, max_postings: int,
                       docs: Mapping[str, int] | None) -> list[tuple[str, float]]:
        """Best keyword matches as ``(memory_id, score)``, best first."""
        return []

    def term_docs(self, reader: Reader, conn: Connection, tenant: str, terms: Mapping[str, str],
                  cache: RowCache | None) -> dict[str, int]:
        """``{word: memories of the tenant that contain it}`` for ``{word: term}``."""
        return {}

    def keyword_count(self, conn: Connection) -> int | None:
        return None

    def keyword_postings(self, conn: Connection) -> dict[str, int] | None:
        return None

    def stray_keyword_ids(self, conn: Connection) -> list[str]:
        return []

    def recount_keyword_terms(self, conn: Connection) -> None:
        """Recompute the terms' document frequencies from the keyword table."""

    def keyword_page(self, reader: Reader, conn: Connection, tenant: str,
                     words: Sequence[str], cond: list[str], params: list[Any],
                     after: tuple[int, str] | None, limit: int) -> list[Any] | None:
        """An inspector page of the rows holding every one of ``words``, walked in the
        keyword table (``None``: no such walk here, the caller matches the text)."""
        return None

    # -- relations -----------------------------------------------------------------------------
    def strongest_incoming(self, reader: Reader, conn: Connection, tenant: str,
                           pairs: Sequence[tuple[str, str]], per_target: int) -> list[Any]:
        """``(src, dst, type, strength, src_seq)`` of the ``per_target`` strongest edges
        pointing at each ``(target, type)`` of ``pairs`` (spreading's frontier), one range of
        ``ix_relations_incoming`` each: a ``UNION ALL`` of one select a pair, at most
        :data:`INCOMING_PARTS` a statement (SQLite's limit of compound selects)."""
        out: list[Any] = []
        for part in chunks(list(pairs), INCOMING_PARTS):
            one = ("SELECT * FROM (SELECT src, dst, type, strength, src_seq FROM relations "
                   "WHERE tenant = ? AND type = ? AND dst = ? "
                   "ORDER BY strength DESC, src_seq LIMIT ?) AS p{}")
            statement = " UNION ALL ".join(one.format(i) for i in range(len(part)))
            out += reader.fetch(conn, statement,
                                [x for d, t in part for x in (tenant, t, d, per_target)])
        return out


STATISTICS_PAGES = 64
"""PostgreSQL pages ``memories`` fills before its first analysis here (~1,000 memories)."""


class PostgresDialect(Dialect):
    """PostgreSQL: full-text search reads a generated ``tsvector`` column of ``memories``
    (GIN index); migrations under an advisory lock; JSON filters in ``jsonb``."""

    keyword_index = "n/a: PostgreSQL full-text search reads a generated column of memories"
    analyses = True

    def lock_migrations(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")

    def refresh_statistics(self, conn: Connection) -> bool:
        """``ANALYZE`` the searched tables once ``memories`` holds twice the pages of its last
        analysis (at least :data:`STATISTICS_PAGES`). Never analysed, a fast-filled store made
        keyword searches read the whole tenant: 10 ms each at 4,000 memories, ``add_many`` at
        67/s against 124/s analysed (2026-11-28). One catalog query; a few analyses a store."""
        pages, analysed = conn.exec_driver_sql(
            "SELECT pg_relation_size(c.oid) / current_setting('block_size')::int, c.relpages "
            "FROM pg_class c WHERE c.oid = 'memories'::regclass").one()
        if pages < max(STATISTICS_PAGES, 2 * analysed):
            return False
        conn.exec_driver_sql("ANALYZE memories, relations, memory_entities")
        return True

    def before_snapshot(self, conn: Connection) -> None:
        conn.execution_options(isolation_level="REPEATABLE READ")

    def insert_or_ignore(self, table: sa.Table) -> Any:
        return pg_insert(table).on_conflict_do_nothing()

    def json_filter(self) -> JsonFilter:
        return PostgresJson()

    def item_expressions(self) -> dict[str, str]:
        return item_expressions(self.name)

    # -- keyword index: the tsvector column, and the terms' document counts ---------------
    def index_keywords(self, conn: Connection, rows: Sequence[tuple[str, str, str]]) -> None:
        """Count the terms of the rows' texts in ``keyword_df`` (the index itself is the
        generated tsvector column of ``memories``)."""
        _count_docs(conn, [(tenant, text) for _, tenant, text in rows], 1)

    def unindex_keywords(self, reader: Reader, conn: Connection, ids: list[str]) -> None:
        """Take the memories ``ids`` off the document counts: their rows must still be in
        ``memories`` (their indexed text is read there)."""
        rows: list[Any] = []
        for chunk in chunks(ids, 500):
            rows += conn.execute(sa.select(memories.c.tenant, memories.c.text,
                                           memories.c.metadata)
                                 .where(memories.c.id.in_(chunk))).fetchall()
        _count_docs(conn, [(r.tenant, row_embed_text(r)) for r in rows], -1)

    def keyword_search(self, reader: Reader, conn: Connection, tenant: str,
                       words: Sequence[str], limit: int, max_postings: int,
                       docs: Mapping[str, int] | None) -> list[tuple[str, float]]:
        """ts_rank over the query words, limited to a postings budget as on SQLite (rarest
        first in the tenant, by the counts of ``keyword_df``, or ``docs`` when the caller
        read them), so the cost stays bounded however large the tenant grows: ranking every
        memory that holds any query word read most of a big tenant for a common word (24 ms
        a search at 5,000 memories, growing with the tenant; ingest runs one per new
        memory)."""
        words = list(dict.fromkeys(w.lower() for w in words))
        token = tenant_token(tenant)
        single = {w: parts[0] for w in words if len(parts := keyword_terms(w, token)) == 1}
        if docs is not None and len(single) == len(words):
            counted = {w: int(docs.get(w, 0)) for w in words}
        else:
            counted = {w: 0 for w in words} | self.term_docs(reader, conn, tenant, single, None)
            several = [w for w in words if w not in single]
            if several:  # words of several terms (``x_y``): counted up to the budget
                counted |= {w: int(n) for w, n in conn.execute(sa.text(
                    "SELECT w, (SELECT count(*) FROM (SELECT 1 FROM memories AS m "
                    f"WHERE tenant = :t AND {COMMITTED_SQL} "
                    "AND tsv @@ to_tsquery('simple', w) LIMIT :cap) s) "
                    "FROM unnest(CAST(:ws AS text[])) AS w"),
                    {"t": tenant, "cap": max_postings + 1, "ws": several}).fetchall()}
        kept: list[str] = []
        total = 0
        for w in sorted(words, key=lambda w: (counted[w], words.index(w))):
            n = counted[w]
            if not n:
                continue  # occurs nowhere in this tenant: nothing to match
            if total + n > max_postings:
                break
            kept.append(w)
            total += n
        if not kept:
            return []
        query = " | ".join(kept)
        found = conn.execute(
            sa.text(
                "SELECT id, ts_rank(tsv, to_tsquery('simple', :q)) AS r FROM memories AS m "
                # (no index serves the status: nearly every row is committed, and the
                # status index taken as selective read the whole tenant)
                f"WHERE tenant = :t AND {COMMITTED_SQL} "
                # equal ranks: the first stored first (else the heap's order, which
                # updates and vacuum change)
                "AND tsv @@ to_tsquery('simple', :q) ORDER BY r DESC, seq LIMIT :n"
            ),
            {"q": query, "t": tenant, "n": limit},
        ).fetchall()
        return [(r[0], float(r[1])) for r in found]

    def recount_keyword_terms(self, conn: Connection) -> None:
        """Count ``keyword_df`` again from every memory row. Writers of counts (in any
        process) wait for it (the table's lock), and it waits for those under way, so no
        write is counted twice or missed."""
        conn.exec_driver_sql("LOCK TABLE keyword_df IN EXCLUSIVE MODE")
        conn.exec_driver_sql("DELETE FROM keyword_df")
        fill_keyword_df(conn)

    def term_docs(self, reader: Reader, conn: Connection, tenant: str, terms: Mapping[str, str],
                  cache: RowCache | None) -> dict[str, int]:
        """Read in ``keyword_df`` (one index lookup a word, whatever the tenant's size)."""
        return _kept_docs(reader, conn, {w: keyword_df_key(t) for w, t in terms.items()},
                          cache)

    def strongest_incoming(self, reader: Reader, conn: Connection, tenant: str,
                           pairs: Sequence[tuple[str, str]], per_target: int) -> list[Any]:
        """One ``LATERAL`` join over the pairs: planning the ``UNION ALL`` took 2.2 ms
        for 27 pairs at 100k memories, three times its execution."""
        if not pairs:
            return []
        return reader.fetch(conn, (
            "SELECT p.src, p.dst, p.type, p.strength, p.src_seq "
            "FROM unnest(CAST(? AS text[]), CAST(? AS text[])) AS q(dst, type) "
            "CROSS JOIN LATERAL (SELECT src, dst, type, strength, src_seq FROM relations "
            "WHERE tenant = ? AND type = q.type AND dst = q.dst "
            "ORDER BY strength DESC, src_seq LIMIT ?) AS p"),
            ([d for d, _ in pairs], [t for _, t in pairs], tenant, per_target))


def _count_docs(conn: Connection, texts: Sequence[tuple[str, str]], sign: int) -> None:
    """Add (``sign`` 1) or take off (-1) the ``(tenant, indexed text)`` rows' terms in
    PostgreSQL's ``keyword_df``; a count that reaches 0 goes.

    Every write of a tenant's counts first takes that tenant's advisory lock (held to the
    end of the transaction; tenants in one order), so two processes writing one tenant wait
    for each other instead of locking its count rows in two orders (a deadlock): an add
    holds its tenant's ``collections`` row from the start anyway. The lock is the one the
    triggers of its entity and size counts take (:func:`.kept_counts.count_lock_sql`), so
    the two kinds of count never wait for each other in two orders either."""
    df = keyword_docs(texts)
    if not df:
        return  # texts without letters or digits ("🙂", "???"): no keyword terms
    for tenant in sorted({tenant for tenant, _ in texts}):
        conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({count_lock_sql(':t')})"),
                     {"t": tenant})
    terms = sorted(df)
    conn.execute(sa.text(
        "INSERT INTO keyword_df(term, docs) SELECT * FROM "
        "unnest(CAST(:t AS text[]), CAST(:d AS integer[])) "
        "ON CONFLICT (term) DO UPDATE SET docs = keyword_df.docs + excluded.docs"),
        {"t": terms, "d": [sign * df[t] for t in terms]})
    if sign < 0:
        conn.execute(sa.text("DELETE FROM keyword_df WHERE term = ANY(CAST(:t AS text[])) "
                             "AND docs <= 0"), {"t": terms})


def _kept_docs(reader: Reader, conn: Connection, keys: Mapping[str, str],
               cache: RowCache | None) -> dict[str, int]:
    """``{word: its count in keyword_df}`` for ``{word: key}`` (words in no memory left
    out); ``cache``: counts kept between recalls may answer, and those read are kept."""
    if cache is None:
        df: dict[str, int] = {}
        ask = list(keys.values())
    else:
        since = cache.reading()
        df, ask = cache.docs(keys.values())
    if ask:
        read = dict(reader.fetch(conn, "SELECT term, docs FROM keyword_df WHERE term IN "
                                 f"({reader.in_marks(len(ask))})", ask))
        if cache is not None:
            cache.keep_docs({t: int(read.get(t) or 0) for t in ask}, since)
        df.update(read)
    return {w: int(df[t]) for w, t in keys.items() if df.get(t)}


class SqliteDialect(Dialect):
    """SQLite: a file (identity checked, WAL, pragmas on every connection); the keyword
    index is the FTS5 table ``memories_kw`` of tenant-prefixed terms, ranked by bm25, with
    the terms' document counts kept in ``keyword_df``; JSON filters in SQLite's JSON
    functions."""

    keyword_index = "sqlite fts5 (memories_kw)"
    keyword_table = True

    def database_file(self, database: str | None) -> str | None:
        """The absolute path of the database file, or ``None`` for an in-memory one."""
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        return os.path.abspath(database)

    def prepare(self, engine: Engine) -> None:
        sa.event.listen(engine, "connect", _sqlite_pragmas)

    def track_changes(self, conn: Connection) -> bool:
        info = conn.info
        if not info.get(_TRACKING):
            for statement in _CHANGE_TRIGGERS:  # once per connection, committed on its own
                conn.exec_driver_sql(statement)
            conn.commit()
            info[_TRACKING] = True
        return True

    def changed_keys(self, conn: Connection) -> tuple[list[str], list[str]] | None:
        found = conn.exec_driver_sql("SELECT DISTINCT kind, key FROM temp.mnemonia_changed "
                                     "LIMIT ?", (CHANGED_KEYS + 1,)).fetchall()
        if not found:
            return [], []
        conn.exec_driver_sql("DELETE FROM temp.mnemonia_changed")
        if len(found) > CHANGED_KEYS:
            return None
        return [k for kind, k in found if kind == 0], [k for kind, k in found if kind == 1]

    def unanswered(self, exc: BaseException, dbapi: Any) -> bool:
        kinds = (sa.exc.OperationalError, dbapi.OperationalError)
        # a local file: only a lock held too long
        return isinstance(exc, kinds) and "locked" in str(exc)

    def lock_migrations(self, conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    def start_snapshot(self, conn: Connection) -> None:
        # pysqlite opens no transaction for reads: open one, and read once so that its
        # snapshot is taken now
        conn.exec_driver_sql("BEGIN")
        conn.exec_driver_sql("SELECT count(*) FROM collections").fetchall()

    def insert_or_ignore(self, table: sa.Table) -> Any:
        return sqlite_insert(table).on_conflict_do_nothing()

    def or_ignore(self, stmt: Any) -> Any:
        return stmt.prefix_with("OR IGNORE")

    def json_filter(self) -> JsonFilter:
        return SqliteJson()

    def item_expressions(self) -> dict[str, str]:
        return item_expressions(self.name)

    # -- keyword index ---------------------------------------------------------------------
    def index_keywords(self, conn: Connection, rows: Sequence[tuple[str, str, str]]) -> None:
        """Index the rows (and count their terms' documents)."""
        if not rows:
            return
        bodies = [(" ".join(keyword_terms(text, tenant_token(tenant))), mid)
                  for mid, tenant, text in rows]
        conn.exec_driver_sql("INSERT INTO memories_kw(body, memory_id) VALUES (?, ?)", bodies)
        df = Counter(t for body, _ in bodies for t in set(body.split()))
        if not df:
            return  # texts without letters or digits ("🙂", "???"): no keyword terms
        conn.exec_driver_sql(
            "INSERT INTO keyword_df(term, docs) VALUES (?, ?) "
            "ON CONFLICT(term) DO UPDATE SET docs = docs + excluded.docs", list(df.items()))

    def unindex_keywords(self, reader: Reader, conn: Connection, ids: list[str]) -> None:
        if not ids:
            return
        for chunk in chunks(ids, 500):
            marks = reader.in_marks(len(chunk))
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

    def move_keywords(self, conn: Connection, pairs: Sequence[tuple[str, str]]) -> None:
        conn.exec_driver_sql("UPDATE memories_kw SET memory_id = ? WHERE memory_id = ?",
                             [(b, a) for a, b in pairs])

    @staticmethod
    def _within_budget(reader: Reader, conn: Connection, terms: Sequence[str], budget: int,
                       df: Mapping[str, int] | None = None) -> list[str]:
        """The query terms, rarest first, while their postings fit in ``budget`` (``df``:
        the terms' document counts when the caller has read them already)."""
        if df is None:
            df = dict(reader.fetch(conn, "SELECT term, docs FROM keyword_df WHERE term IN "
                                   f"({reader.in_marks(len(terms))})", terms))
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

    def keyword_search(self, reader: Reader, conn: Connection, tenant: str,
                       words: Sequence[str], limit: int, max_postings: int,
                       docs: Mapping[str, int] | None) -> list[tuple[str, float]]:
        """bm25 over the query words' terms, limited to a postings budget (rarest first in
        the tenant), so the cost stays bounded however large the store grows."""
        token = tenant_token(tenant)
        split = {w: keyword_terms(w, token) for w in words}
        terms = list(dict.fromkeys(t for parts in split.values() for t in parts))
        df = None
        if docs is not None and all(len(parts) == 1 for parts in split.values()):
            # term_docs covers single-term words, and leaves out those in no memory
            df = {parts[0]: docs.get(w, 0) for w, parts in split.items()}
        terms = self._within_budget(reader, conn, terms, max_postings, df) if terms else []
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = reader.fetch(
            conn, "SELECT memory_id, bm25(memories_kw) AS r FROM memories_kw "
            "WHERE memories_kw MATCH ? ORDER BY r, rowid LIMIT ?",  # equal: the first indexed
            (match, limit))
        return [(r[0], -float(r[1])) for r in rows]

    def term_docs(self, reader: Reader, conn: Connection, tenant: str, terms: Mapping[str, str],
                  cache: RowCache | None) -> dict[str, int]:
        return _kept_docs(reader, conn, terms, cache)

    def keyword_count(self, conn: Connection) -> int | None:
        # FTS5 keeps one row per indexed row in its ``_docsize`` table (a rowid table of a
        # few bytes a row), written in the same statement as the row itself: counting it
        # gives the same number as ``count(*) FROM memories_kw``, which reads every row's
        # stored text. The check at open counts it: 184,000 memories (2026-12-02), 0.005
        # against 0.335 s with the page cache dropped, 0.001 against 0.044 s warm.
        return int(conn.exec_driver_sql("SELECT count(*) FROM memories_kw_docsize")
                   .scalar_one())

    def keyword_postings(self, conn: Connection) -> dict[str, int] | None:
        return {r[0]: int(r[1]) for r in conn.exec_driver_sql(
            "SELECT memory_id, count(*) FROM memories_kw GROUP BY memory_id")}

    def stray_keyword_ids(self, conn: Connection) -> list[str]:
        return [r[0] for r in conn.exec_driver_sql(
            "SELECT k.memory_id FROM memories_kw AS k LEFT JOIN memories AS m "
            "ON m.id = k.memory_id WHERE m.id IS NULL")]

    def recount_keyword_terms(self, conn: Connection) -> None:
        conn.exec_driver_sql("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_kw_recount "
                             "USING fts5vocab(main, memories_kw, 'row')")
        conn.exec_driver_sql("DELETE FROM keyword_df")
        conn.exec_driver_sql("INSERT INTO keyword_df(term, docs) "
                             "SELECT term, doc FROM temp.memories_kw_recount")
        conn.exec_driver_sql("DROP TABLE temp.memories_kw_recount")

    def keyword_page(self, reader: Reader, conn: Connection, tenant: str,
                     words: Sequence[str], cond: list[str], params: list[Any],
                     after: tuple[int, str] | None, limit: int) -> list[Any] | None:
        """The keyword index walked newest first (by its rowid, which the cursor then
        holds: ``cursor_seq``), no bm25 ranking; ``None`` when the words have no terms."""
        terms = list(dict.fromkeys(t for w in words
                                   for t in keyword_terms(w, tenant_token(tenant))))
        if not terms:
            return None
        match = " AND ".join(f'"{t}"' for t in terms)
        more = list(cond)
        extra: list[Any] = []
        if after is not None:
            more.append("k.rowid < ?")
            extra.append(after[0])
        where = " AND ".join(["memories_kw MATCH ?", "m.tenant = ?",
                              COMMITTED_SQL,
                              *more])
        return reader.fetch(conn, f"SELECT {MEMORY_COLUMNS}, k.rowid AS cursor_seq, m.id AS "
                            "cursor_id FROM memories_kw AS k CROSS JOIN memories AS m "
                            f"ON m.id = k.memory_id WHERE {where} ORDER BY k.rowid DESC LIMIT ?",
                            (match, tenant, *params, *extra, limit), named=True)


SQLITE_MMAP_BYTES = 1 << 30
"""How much of an SQLite store each connection reads through a memory map (``PRAGMA
mmap_size``) rather than by copying pages into its own 2 MB cache. Recall's reads of a cold
store (200 new queries right after opening, 2026-11-29, pairs of runs): at 10k memories
(82 MB file) p50 18.08 / 17.55 -> 17.32 / 16.51 ms; at 100k (900 MB) the candidate rows
1.85 / 1.62 -> 1.57 / 1.45 ms and the spreading edges 0.93 / 0.84 -> 0.76 / 0.69 ms a recall.
Writes still go through the file (SQLite maps read-only); pages are the OS page cache's."""


_TRACKING = "mnemonia_tracks_changes"
"""The key in a connection's ``info`` saying its change triggers exist."""


def _change_triggers() -> tuple[str, ...]:
    """A temporary table and the temporary triggers (of one connection) that record which
    memory rows (kind 0) and keyword counts (kind 1) its writes change: a row of
    ``memories``, a relation (both its ends: their ``has_edges``), a row of ``keyword_df``."""
    watched = (("memories", 0, ("id",)), ("relations", 0, ("src", "dst")),
               ("keyword_df", 1, ("term",)))
    out = ["CREATE TEMP TABLE IF NOT EXISTS mnemonia_changed (kind INTEGER NOT NULL, "
           "key TEXT NOT NULL)"]
    for table, kind, columns in watched:
        for op, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            body = " ".join(f"INSERT INTO mnemonia_changed VALUES ({kind}, {row}.{column});"
                            for row in rows for column in columns)
            out.append(f"CREATE TEMP TRIGGER IF NOT EXISTS mnemonia_{table}_{op.lower()} "
                       f"AFTER {op} ON main.{table} BEGIN {body} END")
    return tuple(out)


_CHANGE_TRIGGERS = _change_triggers()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
    cur.close()
