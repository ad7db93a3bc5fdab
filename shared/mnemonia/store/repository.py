"""The SQL side-store: the system of record for lifecycle state, relations, logs and the
keyword index, and the one home of every SQL statement Mnemonia runs.

The database, its sessions and its dialect are :class:`~mnemonia.store.database.Database`;
what differs between SQLite and PostgreSQL is :mod:`mnemonia.store.dialect`; the tables and
migrations are in :mod:`mnemonia.store.schema`.
Times are stored as float seconds since the epoch (UTC).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa

from mnemonia.clock import from_ts
from mnemonia.config import DEFAULT_KEYWORD_POSTINGS
from mnemonia.errors import MemoryNotFoundError
from mnemonia.models import KINDS, Event, Memory, Relation
from mnemonia.scoring.reevaluation import STATES
from mnemonia.scoring.sm2 import SM2State
from mnemonia.store.database import Connection, Database
from mnemonia.store.rowcache import RowCache
from mnemonia.store.schema import (
    ITEM_KEY,
    access_log,
    collections,
    keyword_terms,
    kv,
    maintenance_leases,
    memories,
    memory_entities,
    memory_events,
    memory_vectors,
    memory_writers,
    relations,
    tenant_token,
    term_vectors,
)
from mnemonia.store.statements import (
    COMMITTED_SQL,
    MEMORY_COLUMNS,
    MEMORY_COLUMNS_EDGES,
    SqlCondition,
    all_of,
    chunks,
    is_committed,
    not_,
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

WRITER_JOB = "writer:"
"""Lease name prefix of a process writing to the store (``writer:<holder>``)."""
WRITER_LEASE = 30.0
"""Seconds a writer lease runs unless renewed; an open engine renews it every quarter of
this. A process stalled or cut off from the side-store for longer may see a write of its
taken over by another process's repair (:class:`~mnemonia.errors.StoreWriteTakenOverError`)."""


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


class SideStore:
    """SQL half of a Mnemonia store. Thread-safe for one process (one writer at a time)."""

    def __init__(self, url: str, *, attempts: int = 5, max_wait: float = 2.0) -> None:
        self.db = Database(url, attempts=attempts, max_wait=max_wait)
        self.url = url
        self.engine = self.db.engine
        self.dialect = self.db.dialect.name

    @property
    def where(self) -> str:
        """The database's URL with any password hidden (for messages)."""
        return self.db.where

    @property
    def row_cache(self) -> RowCache | None:
        return self.db.row_cache

    def setup(self) -> list[int]:
        return self.db.setup()

    def keep_rows(self) -> None:
        self.db.keep_rows()

    def _kept(self, asked: bool) -> RowCache | None:
        return self.db.kept(asked)

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        with self.db.begin() as conn:
            yield conn

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self.db.connect() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        with self.db.snapshot() as conn:
            yield conn

    def defer(self, write: Callable[[Connection], None], what: str,
              changes: Sequence[str] | None = None) -> None:
        self.db.defer(write, what, changes)

    def dispose(self) -> None:
        self.db.dispose()

    def sql(self, statement: str) -> str:
        return self.db.sql(statement)

    def in_marks(self, n: int) -> str:
        return self.db.in_marks(n)

    def fetch(self, conn: Connection, statement: str, params: Sequence[Any] = (), *,
              named: bool = False) -> list[Any]:
        return self.db.fetch(conn, statement, params, named=named)

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
        """Index ``(memory_id, tenant, text)`` rows (and count their terms' documents) where
        the keyword index is a table of its own (PostgreSQL keeps a generated tsvector
        column)."""
        self.db.dialect.index_keywords(conn, rows)

    def fts_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        self.db.dialect.unindex_keywords(self.db, conn, list(ids))

    def keyword_search(
        self, conn: Connection, tenant: str, tokens: Sequence[str], limit: int,
        max_postings: int = MAX_KEYWORD_POSTINGS, docs: Mapping[str, int] | None = None,
    ) -> list[tuple[str, float]]:
        """Best keyword matches as ``(memory_id, score)``, best first (bm25 / ts_rank).

        On SQLite the query words are limited to a postings budget (rarest first in the
        tenant), so the cost stays bounded however large the store grows. ``docs``: what
        :meth:`term_docs` answered for these words, when the caller has read it. Other
        dialects have no keyword index here: recall runs on the vectors alone.
        """
        words = [t for t in tokens if _WORD.fullmatch(t)]
        if not words or limit <= 0:
            return []
        return self.db.dialect.keyword_search(self.db, conn, tenant, words, limit,
                                              max_postings, docs)

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
        return self.db.dialect.term_docs(self.db, conn, tenant, terms, self.db.kept(kept))

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
        return self.db.dialect.item_expressions()

    def _live(self, now: float) -> SqlCondition:
        """Committed, not deleted, not expired at ``now``. (The status is written so that no
        index serves it: without statistics SQLite would rather take the status index and
        sort the whole namespace than walk the item index in order.)"""
        x = self._items_sql()
        return SqlCondition(f"{COMMITTED_SQL} AND m.deleted_at IS NULL AND "
                            f"({x['expires']} IS NULL OR {x['expires']} > ?)", (now,))

    def item_filter(self, flt: Mapping[str, Any]) -> SqlCondition:
        """A checked value filter (:func:`mnemonia.validation.item_filter`) as SQL on the
        item's value: every entry must hold."""
        compiler = self.db.dialect.json_filter()
        return all_of([compiler.field(key, expected) for key, expected in flt.items()])

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
        flag = self.db.dialect.json_filter().eq((ITEM_KEY, "indexed"), False)
        return not_(flag) if indexed else flag

    def item_rows(self, conn: Connection, path: str, keys: Sequence[str]) -> list[Any]:
        """``(id, tenant, deleted_at, metadata, expires)`` of the committed items of ``keys``
        at ``path``, deleted and expired ones too (one index read per chunk of keys)."""
        x = self._items_sql()
        out: list[Any] = []
        for chunk in chunks(list(keys)):
            out += self.fetch(conn, (
                f"SELECT m.id, m.tenant, m.deleted_at, m.metadata, {x['expires']} AS expires "
                f"FROM memories AS m WHERE {x['path']} = ? AND {x['key']} IN "
                f"({self.in_marks(len(chunk))}) AND {COMMITTED_SQL}"),
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
            f"SELECT m.id FROM memories AS m WHERE m.tenant = ? AND {COMMITTED_SQL} "
            f"AND m.deleted_at IS NULL AND ({where.sql}) LIMIT ?"),
            (tenant, *where.params, limit))]

    def expired_items(self, conn: Connection, now: float, limit: int) -> list[tuple[str, str]]:
        """``(id, tenant)`` of up to ``limit`` items whose time ran out by ``now``."""
        x = self._items_sql()
        return [(r[0], r[1]) for r in self.fetch(conn, (
            f"SELECT m.id, m.tenant FROM memories AS m WHERE {x['expires']} <= ? "
            f"AND {COMMITTED_SQL} LIMIT ?"), (now, limit))]

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
        return self.db.dialect.keyword_count(conn)

    def keyword_postings(self, conn: Connection) -> dict[str, int] | None:
        """``{memory_id: rows}`` of the SQLite keyword index (``None`` elsewhere)."""
        return self.db.dialect.keyword_postings(conn)

    def stray_keyword_ids(self, conn: Connection) -> list[str]:
        """Keyword-index rows of no memory row (SQLite; nothing elsewhere)."""
        return self.db.dialect.stray_keyword_ids(conn)

    def recount_keyword_terms(self, conn: Connection) -> None:
        """Recompute every term's document frequency (``keyword_df``) from the index itself,
        after rows were put back or taken out by a repair."""
        self.db.dialect.recount_keyword_terms(conn)

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
        columns = MEMORY_COLUMNS_EDGES if edges else MEMORY_COLUMNS
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
                                                   is_committed(memories.c.status))).first()
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
            memories.c.id == memory_id, is_committed(memories.c.status))).first()
        return None if r is None else str(r.tenant)

    def list_memories(self, conn: Connection, tenant: str, *, session_id: str | None,
                      include_deleted: bool, limit: int | None) -> list[Memory]:
        """A tenant's memories in insertion order (optionally one session's)."""
        q = sa.select(memories).where(memories.c.tenant == tenant,
                                      is_committed(memories.c.status))
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
            is_committed(memories.c.status))).scalar_one())

    def active_rows(self, conn: Connection, tenant: str, columns: Sequence[str], *,
                    enriched: bool = False, not_state: str | None = None,
                    unsuperseded: bool = False, unconsolidated: bool = False,
                    not_kind: str | None = None, due_by: float | None = None) -> list[Any]:
        """``columns`` of the tenant's active (committed, not deleted) memories, narrowed by
        the keyword filters (what the maintenance jobs scan)."""
        m = memories.c
        cond = [m.tenant == tenant, is_committed(m.status), m.deleted_at.is_(None)]
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
        cond = [is_committed(m.c.status)]
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
        self.db.insert_or_ignore(conn, table, rows)

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
        if ignore_existing:
            stmt = self.db.dialect.or_ignore(stmt)
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
            cond.append(is_committed(m.status))
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
        cond = [is_committed(m.status)] if committed else []
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
            m.tenant == tenant, is_committed(m.status), m.deleted_at.is_(None),
            m.enriched_at.is_(None), m.state != skipped).order_by(m.seq))]

    # -- export / import ---------------------------------------------------------------------
    def memory_count(self, conn: Connection, tenants: Sequence[str]) -> int:
        """Committed memories (deleted ones too) of ``tenants``."""
        m = memories.c
        total = 0
        for chunk in chunks(list(tenants)):
            total += int(conn.execute(sa.select(sa.func.count()).where(
                m.tenant.in_(chunk), is_committed(m.status))).scalar_one())
        return total

    def memory_page(self, conn: Connection, tenant: str, after: tuple[int, str] | None,
                    limit: int) -> list[Any]:
        """Up to ``limit`` committed rows of ``tenant`` (deleted ones too), every column, in
        ``(seq, id)`` order, after the ``(seq, id)`` of ``after`` (keyset paging: each page
        costs the same however far the export has got)."""
        m = memories.c
        q = sa.select(memories).where(m.tenant == tenant, is_committed(m.status))
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
                is_committed(memories.c.status)).order_by(table.c.id)
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
        self.db.dialect.move_keywords(conn, pairs)

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
        if words:
            page = self.db.dialect.keyword_page(self.db, conn, tenant, words, cond, params,
                                                after, limit)
            if page is not None:
                return page
        for w in words:
            cond.append("lower(m.text) LIKE ? ESCAPE '\\'")
            params.append("%" + _like_escape(w.casefold()) + "%")
        if after is not None:
            # seq alone narrows the index range; the id breaks ties (imports may share a seq)
            cond.append("m.seq <= ? AND (m.seq < ? OR m.id < ?)")
            params += [after[0], after[0], after[1]]
        where = " AND ".join(["m.tenant = ?", COMMITTED_SQL, *cond])
        return self.fetch(conn, f"SELECT {MEMORY_COLUMNS}, m.seq AS cursor_seq, m.id AS "
                          f"cursor_id FROM memories AS m WHERE {where} "
                          "ORDER BY m.seq DESC, m.id DESC LIMIT ?",
                          (tenant, *params, limit), named=True)

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
        return self.fetch(conn, f"SELECT {MEMORY_COLUMNS} FROM memories AS m WHERE "
                          f"m.tenant = ? AND {COMMITTED_SQL} "
                          "AND m.deleted_at IS NOT NULL "
                          "ORDER BY m.deleted_at DESC, m.id LIMIT ?", (tenant, limit), named=True)


def _like_escape(text: str) -> str:
    """``text`` for a ``LIKE`` pattern with ``\\`` as the escape character."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _f32_bytes(vector: Any) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()
