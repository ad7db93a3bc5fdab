"""Memory rows: reads of a tenant's memories (by id, pages for the maintenance jobs, the
``Memory`` of a row) and every write of their lifecycle (insert, update, the pending /
deleting / committed states of a write in progress and their writers, soft and hard
deletes)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from mnemonia.clock import from_ts
from mnemonia.errors import MemoryNotFoundError
from mnemonia.models import Memory
from mnemonia.scoring.sm2 import SM2State
from mnemonia.store.database import Connection, Database
from mnemonia.store.keyword_index import KeywordIndex
from mnemonia.store.schema import (
    access_log,
    memories,
    memory_entities,
    memory_events,
    memory_writers,
    relations,
)
from mnemonia.store.sql_vectors import SideVectors
from mnemonia.store.statements import (
    MEMORY_COLUMNS,
    MEMORY_COLUMNS_EDGES,
    SqlCondition,
    chunks,
    is_committed,
)
from mnemonia.validation import memory_id as check_id

__all__ = ["MemoryRows"]


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


class MemoryRows:
    """The ``memories`` table (and ``memory_writers``, the writers of unfinished rows). A
    hard delete also removes the memory's vector and keyword entry."""

    def __init__(self, db: Database, vectors: SideVectors, keywords: KeywordIndex) -> None:
        self.db = db
        self.vectors = vectors
        self.keywords = keywords

    # -- reading memories --------------------------------------------------------------
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
        ``edges``, each row also says in ``has_edges`` whether a relation may start or end at
        it (false: none does, the tenant has none; so recall reads no relations of a tenant
        without any; :data:`~mnemonia.store.statements.MEMORY_COLUMNS_EDGES`).

        ``kept``: rows kept by :meth:`keep_rows` may answer (recall's reads; never inside a
        write transaction of this thread, which must see its own writes), and rows read with
        ``edges`` are kept. Rows of another tenant, or not matching ``where``, are not
        answered either way."""
        ids = list(dict.fromkeys(ids))
        cache = self.db.kept(kept) if where is None else None
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
        first = (tenant,) if edges else ()
        for chunk in chunks(ids):
            # Only the primary key in WHERE: with the tenant there too, SQLite may choose the
            # tenant index and scan the whole tenant. Tenant and status are checked here.
            for r in self.db.fetch(conn, f"SELECT {columns} FROM memories AS m "
                                f"WHERE m.id IN ({self.db.in_marks(len(chunk))}){extra}",
                                (*first, *chunk, *params), named=True):
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
        """The tenant's committed, undeleted memories, as the database keeps the count on
        every write (``tenant_sizes``, :mod:`mnemonia.store.kept_counts`)."""
        rows = self.db.fetch(conn, "SELECT active FROM tenant_sizes WHERE tenant = ?", (tenant,))
        return int(rows[0][0]) if rows else 0

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

    # -- writing memories --------------------------------------------------------------
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
        self.db.grew(done)
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
        self.keywords.fts_delete(conn, ids)  # first: PostgreSQL reads the rows' texts
        for chunk in chunks(ids):
            conn.execute(relations.delete().where(relations.c.tenant == tenant, sa.or_(
                relations.c.src.in_(chunk), relations.c.dst.in_(chunk))))
            conn.execute(access_log.delete().where(access_log.c.memory_id.in_(chunk)))
            conn.execute(memory_events.delete().where(memory_events.c.memory_id.in_(chunk)))
            conn.execute(memory_entities.delete().where(
                memory_entities.c.memory_id.in_(chunk)))
            conn.execute(memories.delete().where(memories.c.id.in_(chunk)))
            conn.execute(memory_writers.delete().where(memory_writers.c.memory_id.in_(chunk)))
        self.vectors.vectors_delete(conn, ids)

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
