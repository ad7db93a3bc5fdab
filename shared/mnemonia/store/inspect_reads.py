"""Reads for people rather than recall: the inspector's memory pages (:mod:`mnemonia.inspection`,
``mnemonia ui``), the counts of ``stats``, and the doctor's consistency counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from mnemonia.models import KINDS
from mnemonia.scoring.reevaluation import STATES
from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import access_log, collections, memories, memory_vectors, relations
from mnemonia.store.statements import COMMITTED_SQL, MEMORY_COLUMNS, chunks, is_committed

__all__ = ["InspectReads"]


class InspectReads:
    """Pages, counts and consistency checks over every table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- the inspector (mnemonia.inspection; the ``mnemonia ui`` pages) ----------------
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
        return self.db.fetch(conn, f"SELECT {MEMORY_COLUMNS}, m.seq AS cursor_seq, m.id AS "
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
        return self.db.fetch(conn, f"SELECT {MEMORY_COLUMNS} FROM memories AS m WHERE "
                          f"m.tenant = ? AND {COMMITTED_SQL} "
                          "AND m.deleted_at IS NOT NULL "
                          "ORDER BY m.deleted_at DESC, m.id LIMIT ?", (tenant, limit), named=True)

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

    # -- consistency (doctor) ----------------------------------------------------------
    def row_counts(self, conn: Connection, tenants: Sequence[str] | None = None
                   ) -> dict[str, int]:
        """``{tenant: memory rows}`` in any state (after the crash repair at open, all are
        committed), of every tenant or of ``tenants`` only: a scan of the (tenant, seq)
        index (of those tenants' ranges), no table reads."""
        m = memories.c
        query = sa.select(m.tenant, sa.func.count()).group_by(m.tenant)
        if tenants is None:
            return {r[0]: int(r[1]) for r in conn.execute(query)}
        out: dict[str, int] = {}
        for chunk in chunks(list(tenants)):
            out.update({r[0]: int(r[1]) for r in conn.execute(
                query.where(m.tenant.in_(chunk)))})
        return out

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



def _like_escape(text: str) -> str:
    """``text`` for a ``LIKE`` pattern with ``\\`` as the escape character."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
