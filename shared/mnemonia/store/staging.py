"""Rows of a transfer: the pages an export reads (keyset paging, every column) and the rows
an import stages (status ``i:<import id>``) before they become visible at once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from mnemonia.store.database import Connection, Database
from mnemonia.store.keyword_index import KeywordIndex
from mnemonia.store.schema import (
    access_log,
    memories,
    memory_entities,
    memory_events,
    memory_vectors,
    relations,
)
from mnemonia.store.sql_vectors import SideVectors
from mnemonia.store.statements import chunks, is_committed

__all__ = ["Staging"]


class Staging:
    """Export pages and import staging over ``memories`` (a staged row's vector, entity
    links, events and access rows move with it when it takes a stored memory's place)."""

    def __init__(self, db: Database, vectors: SideVectors, keywords: KeywordIndex) -> None:
        self.db = db
        self.vectors = vectors
        self.keywords = keywords

    # -- export ------------------------------------------------------------------------
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

    # -- import ------------------------------------------------------------------------
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
        done = int(conn.execute(memories.update().where(memories.c.status == status)
                                .values(status="committed")).rowcount)
        self.db.grew(done)
        return done

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
        self.keywords.fts_delete(conn, real)  # first: PostgreSQL reads the rows' texts
        for chunk in chunks(real):
            for table in (access_log, memory_events, memory_entities):
                conn.execute(table.delete().where(table.c.memory_id.in_(chunk)))
            conn.execute(memories.delete().where(memories.c.id.in_(chunk)))
        self.vectors.vectors_delete(conn, real)
        conn.execute(memories.update().where(memories.c.id == sa.bindparam("b_tmp")).values(
            id=sa.bindparam("b_id"), seq=sa.bindparam("b_seq")),
            [{"b_tmp": a, "b_id": b, "b_seq": seqs[b]} for a, b in pairs])
        # the entity links follow the memory to its place (memory_entities.seq is its seq)
        conn.execute(memory_entities.update().where(
            memory_entities.c.memory_id == sa.bindparam("b_tmp")).values(
            memory_id=sa.bindparam("b_id"), seq=sa.bindparam("b_seq")),
            [{"b_tmp": a, "b_id": b, "b_seq": seqs[b]} for a, b in pairs])
        moves = [{"b_tmp": a, "b_id": b} for a, b in pairs]
        for table in (memory_vectors, memory_events, access_log):
            conn.execute(table.update().where(table.c.memory_id == sa.bindparam("b_tmp"))
                         .values(memory_id=sa.bindparam("b_id")), moves)
        self.db.dialect.move_keywords(conn, pairs)
