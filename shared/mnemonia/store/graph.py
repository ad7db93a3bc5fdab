"""The memory graph: relations between memories, and the links of memories to entities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from mnemonia.clock import from_ts
from mnemonia.errors import StoreError
from mnemonia.models import Relation
from mnemonia.store.changes import Changes
from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import memories, memory_entities, relations
from mnemonia.store.statements import chunks

__all__ = ["PREVIOUS_IN_SESSION", "Graph"]

PREVIOUS_IN_SESSION = (
    "SELECT id FROM memories WHERE tenant = ? AND session_id = ? AND id != ? "
    "AND created_at <= ? AND (created_at < ? "  # the same time: an earlier seq only
    "OR seq < (SELECT me.seq FROM memories AS me WHERE me.id = ?)) "
    "ORDER BY created_at DESC, seq DESC LIMIT 1")
"""The memory just before one in its session (``Graph.previous_in_session``), written so
that the ``(tenant, session_id, created_at, seq)`` index answers it from ``at`` backwards."""


INSERT_RELATION = (
    "INSERT INTO relations (tenant, src, dst, type, strength, created_at, src_seq, dst_seq) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
"""A new relation row (``Graph.insert_edges``), sent to the driver as it is."""


class Graph:
    """``relations`` (typed, weighted edges between memories of one tenant) and
    ``memory_entities`` (which memories name which entity). A write of relations reports the
    memories it touches before it writes (:meth:`Database.report`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- entities ----------------------------------------------------------------------
    def link_entities(self, conn: Connection, links: Sequence[dict[str, Any]], *,
                      ignore_existing: bool = False) -> None:
        """Insert ``(tenant, entity, memory_id)`` links (skipping existing ones if asked);
        each gets its memory's ``seq`` (the memories' rows are written first)."""
        if not links:
            return
        m = memories.c
        seqs: dict[str, int] = {}
        for chunk in chunks(list(dict.fromkeys(x["memory_id"] for x in links))):
            seqs.update((r[0], r[1]) for r in conn.execute(
                sa.select(m.id, m.seq).where(m.id.in_(chunk))))
        missing = [x["memory_id"] for x in links if x["memory_id"] not in seqs]
        if missing:
            raise StoreError(f"entity links of memories that are not stored: {missing[:5]}")
        stmt = memory_entities.insert()
        if ignore_existing:
            stmt = self.db.dialect.or_ignore(stmt)
        conn.execute(stmt, [{**x, "seq": seqs[x["memory_id"]]} for x in links])

    def unlink_entities(self, conn: Connection, memory_id: str) -> None:
        conn.execute(memory_entities.delete().where(memory_entities.c.memory_id == memory_id))

    def entity_first(self, conn: Connection, tenant: str, entity: str, limit: int) -> list[str]:
        """The first ``limit`` memories linked to ``entity`` (by ``seq``, one range of the
        ``(tenant, entity, seq)`` index; never by id, a random uuid, which chose other
        neighbours in every process). Read once per entity of a batch being enriched: a plain
        statement, not one built per call (building the SQLAlchemy select cost ~3 ms,
        several times the read)."""
        return [r[0] for r in self.db.fetch(
            conn, "SELECT memory_id FROM memory_entities WHERE tenant = ? AND entity = ? "
            "ORDER BY seq LIMIT ?", (tenant, entity, limit))]

    def entity_counts(self, conn: Connection, tenant: str) -> list[tuple[str, int]]:
        """``(entity, linked memories not deleted)`` of the tenant, as the database keeps them
        on every write (``entity_docs``, :mod:`mnemonia.store.kept_counts`): one row an
        entity, however many memories the tenant holds."""
        return [(r[0], int(r[1])) for r in self.db.fetch(
            conn, "SELECT entity, docs FROM entity_docs WHERE tenant = ?", (tenant,))]

    def entity_members(self, conn: Connection, tenant: str, entity: str) -> set[str]:
        me = memory_entities.c
        return {r[0] for r in conn.execute(sa.select(me.memory_id).where(
            me.tenant == tenant, me.entity == entity))}

    def entity_members_by_importance(self, conn: Connection, tenant: str, entity: str,
                                     least: float, limit: int) -> list[str]:
        """Up to ``limit`` memories linked to ``entity`` with importance >= ``least``, the
        first ones stored (by ``seq``)."""
        me, m = memory_entities.c, memories.c
        return [r[0] for r in conn.execute(
            sa.select(me.memory_id).select_from(
                memory_entities.join(memories, m.id == me.memory_id)).where(
                me.tenant == tenant, me.entity == entity, m.importance >= least)
            .order_by(me.seq).limit(limit))]

    def entity_links(self, conn: Connection, ids: Sequence[str]) -> dict[str, list[str]]:
        """``{memory_id: [entity, ...]}`` (sorted) of the ``memory_entities`` rows of ``ids``."""
        me = memory_entities.c
        out: dict[str, list[str]] = {}
        for chunk in chunks(list(ids)):
            for r in conn.execute(sa.select(me.memory_id, me.entity).where(
                    me.memory_id.in_(chunk)).order_by(me.memory_id, me.entity)):
                out.setdefault(r[0], []).append(r[1])
        return out

    # -- relations ---------------------------------------------------------------------
    def _end_seqs(self, conn: Connection, ends: Sequence[tuple[str, str]]
                  ) -> list[dict[str, int]]:
        """``{"src_seq": ..., "dst_seq": ...}`` of each ``(src, dst)`` of ``ends``: the
        columns of a new relation, its two memories' ``seq`` (0 for one not stored)."""
        m = memories.c
        seqs: dict[str, int] = {}
        for chunk in chunks(sorted({e for pair in ends for e in pair})):
            seqs.update((r[0], int(r[1])) for r in conn.execute(
                sa.select(m.id, m.seq).where(m.id.in_(chunk))))
        return [{"src_seq": seqs.get(src, 0), "dst_seq": seqs.get(dst, 0)}
                for src, dst in ends]

    def previous_in_session(self, conn: Connection, tenant: str, session_id: str,
                            memory_id: str, at: float) -> str | None:
        """The memory of the same session just before ``memory_id`` (by time, then seq): one
        step of ``ix_memories_session_time`` back from ``at``, however long the session.
        Called once per enriched memory: a plain statement (building the select with its
        aliased subquery cost ~10 ms, far more than the indexed read)."""
        rows = self.db.fetch(conn, PREVIOUS_IN_SESSION,
                             (tenant, session_id, memory_id, at, at, memory_id))
        return None if not rows else str(rows[0][0])

    def insert_edges(self, conn: Connection, tenant: str,
                     edges: Mapping[tuple[str, str, str], float], at: float) -> int:
        """Insert ``{(src, dst, type): strength}`` edges that do not exist yet; returns how
        many were inserted."""
        if not edges:
            return 0
        self.db.report(Changes(tenant=tenant, linked=frozenset(
            m for src, dst, _ in edges for m in (src, dst))))
        existing = set()
        srcs = list({k[0] for k in edges})
        for chunk in chunks(srcs):
            existing |= {(r.src, r.dst, r.type) for r in conn.execute(
                sa.select(relations.c.src, relations.c.dst, relations.c.type).where(
                    relations.c.tenant == tenant, relations.c.src.in_(chunk)))}
        new = [(k, w) for k, w in edges.items() if k not in existing and k[0] != k[1]]
        seqs = self._end_seqs(conn, [(s, d) for (s, d, _), _ in new]) if new else []
        rows = [(tenant, s, d, t, float(w), float(at), q["src_seq"], q["dst_seq"])
                for ((s, d, t), w), q in zip(new, seqs, strict=True)]
        self.db.execute_many(conn, INSERT_RELATION, rows)
        return len(rows)

    def upsert_relation(self, conn: Connection, tenant: str, src: str, dst: str, rel_type: str,
                        strength: float, at: float) -> None:
        """Add a relation, or set the strength of the one that exists."""
        self.db.report(Changes(tenant=tenant, linked=frozenset((src, dst))))
        r = relations.c
        key = sa.and_(r.tenant == tenant, r.src == src, r.dst == dst, r.type == rel_type)
        if conn.execute(sa.select(r.src).where(key)).first():
            conn.execute(relations.update().where(key).values(strength=strength))
        else:
            conn.execute(relations.insert().values(
                tenant=tenant, src=src, dst=dst, type=rel_type, strength=strength,
                created_at=at, **self._end_seqs(conn, [(src, dst)])[0]))

    def delete_relation(self, conn: Connection, tenant: str, src: str, dst: str,
                        rel_type: str) -> int:
        """Remove the relation ``src -> dst`` of ``rel_type``; returns how many rows went
        (0 or 1)."""
        self.db.report(Changes(tenant=tenant, linked=frozenset((src, dst))))
        r = relations.c
        return int(conn.execute(relations.delete().where(
            r.tenant == tenant, r.src == src, r.dst == dst, r.type == rel_type)).rowcount)

    def put_relations(self, conn: Connection, rows: Sequence[dict[str, Any]], *,
                      overwrite: bool) -> int:
        """Insert the ``relations`` rows not there yet; with ``overwrite`` the ones there get
        the row's strength and creation time. Returns the rows written."""
        r = relations.c
        written = 0
        linked: dict[str, set[str]] = {}
        for x in rows:
            linked.setdefault(x["tenant"], set()).update((x["src"], x["dst"]))
        for tenant, ids in linked.items():
            self.db.report(Changes(tenant=tenant, linked=frozenset(ids)))
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
                seqs = self._end_seqs(conn, [(x["src"], x["dst"]) for x in new])
                conn.execute(relations.insert(), [{**x, **q} for x, q in zip(new, seqs,
                                                                              strict=True)])
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
                     types: Sequence[str], symmetric: Sequence[str], per_target: int
                     ) -> list[Any]:
        """``(src, dst, type, strength, incoming, seq)``: the edges of the ``types`` leaving
        ``ids`` (``incoming`` 0), and the ``per_target`` strongest edges of the ``symmetric``
        types that point at each of them (``incoming`` 1), equal strengths the first stored
        sources first; ``seq`` is the other end's (the target's of an edge leaving, the
        source's of one pointing in: the relation's ``dst_seq`` / ``src_seq``), for an order
        of equal edges that is the same in every process (ids are random uuids). What is
        read for several ids is what is read for each.

        The edges leaving are read from ``ix_relations_outgoing`` alone (migration 18).

        The edges pointing in are read ``per_target`` at most per target and type, each one
        range of ``ix_relations_incoming`` (migration 14): a memory many others point at
        (the first memories of an entity) costs no more than any other."""
        out: list[Any] = []
        for chunk in chunks(sorted(ids)):
            marks = self.db.in_marks(len(chunk))
            out += self.db.fetch(conn, (
                "SELECT src, dst, type, strength, 0 AS incoming, dst_seq FROM relations "
                f"WHERE tenant = ? AND type IN ({self.db.in_marks(len(types))}) "
                f"AND src IN ({marks})"), (tenant, *types, *chunk))
        best: dict[str, list[Any]] = {}
        for src, dst, rtype, strength, seq in self.db.dialect.strongest_incoming(
                self.db, conn, tenant, [(d, t) for d in sorted(ids) for t in symmetric],
                per_target):
            best.setdefault(dst, []).append((-strength, seq, rtype, src))
        for dst, got in best.items():
            for nw, seq, rtype, src in sorted(got)[:per_target]:
                out.append((src, dst, rtype, -nw, 1, seq))
        return out

    def linked_ends(self, conn: Connection, tenant: str, ids: Sequence[str]) -> set[str]:
        """The memories at the other end of any relation touching ``ids`` (a purge's: whose
        kept links name one of them)."""
        out: set[str] = set()
        for chunk in chunks(list(ids)):
            marks = self.db.in_marks(len(chunk))
            # Two index searches, by source and by target (created_at is read so that no
            # index covers the query: SQLite would otherwise read the tenant's whole range of
            # ix_relations_incoming for the target side).
            for src, dst, _ in self.db.fetch(conn, (
                    f"SELECT src, dst, created_at FROM relations WHERE tenant = ? "
                    f"AND src IN ({marks}) UNION SELECT src, dst, created_at FROM relations "
                    f"WHERE tenant = ? AND dst IN ({marks})"), (tenant, *chunk, tenant, *chunk)):
                out.update((src, dst))
        return out - set(ids)

    def typed_links(self, conn: Connection, tenant: str, ids: Sequence[str],
                    types: Sequence[str]) -> list[Any]:
        """``(src, dst, type, strength)`` of the ``types`` relations touching ``ids``; one
        between two of ``ids`` (or from one to itself) comes twice."""
        out: list[Any] = []
        typed = self.db.in_marks(len(types))
        for chunk in chunks(list(ids)):
            marks = self.db.in_marks(len(chunk))
            # Two index searches (by source, by target); one OR of both would scan the tenant.
            # (strength is read so that no index covers the query: SQLite would otherwise
            # scan the tenant's primary-key range for the target side.) UNION ALL: sorting
            # out the duplicates took 112 us against 64.5 for 5 random ids' follows links
            # of the enriched 100k store (p50 of 600 in turns); the callers keep sets.
            out += self.db.fetch(conn, (
                "SELECT src, dst, type, strength FROM relations WHERE tenant = ? "
                f"AND src IN ({marks}) AND type IN ({typed}) UNION ALL SELECT src, dst, type, "
                f"strength FROM relations WHERE tenant = ? AND dst IN ({marks}) "
                f"AND type IN ({typed})"),
                (tenant, *chunk, *types, tenant, *chunk, *types))
        return out
