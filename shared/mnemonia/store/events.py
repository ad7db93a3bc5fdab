"""The audit trail (``memory_events``) and the access log (one row per recall hit)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from mnemonia.clock import from_ts
from mnemonia.models import Event
from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import access_log, memory_events
from mnemonia.store.statements import chunks

__all__ = ["Events"]


class Events:
    """``memory_events`` (created, recalled, reviewed, ... with before and after values) and
    ``access_log`` (rank, k, score and user of every recall hit)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- events ------------------------------------------------------------------------
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

    def evidence_of(self, conn: Connection, tenant: str, ids: Sequence[str]
                    ) -> dict[str, dict[str, Any]]:
        """``{memory id: evidence}`` of the last ``superseded`` event of each of ``ids`` that
        holds one (a detected supersession; one by hand keeps none)."""
        out: dict[str, dict[str, Any]] = {}
        for chunk in chunks(list(ids)):
            # (driver SQL: recall asks for it whenever a hit has a supersession, and building
            # the statement with SQLAlchemy cost more than the read)
            for memory_id, stored in self.db.fetch(
                    conn, "SELECT memory_id, after FROM memory_events "
                    f"WHERE memory_id IN ({self.db.in_marks(len(chunk))}) AND tenant = ? "
                    "AND event = 'superseded' ORDER BY id", (*chunk, tenant)):
                after = json.loads(stored) if stored else {}
                if isinstance(after.get("evidence"), dict):
                    out[memory_id] = {"superseded_by": after.get("superseded_by"),
                                      **after["evidence"]}
                else:
                    out.pop(memory_id, None)
        return out

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

    def kept_apart(self, conn: Connection, tenant: str, ids: Sequence[str]
                   ) -> set[frozenset[str]]:
        """The pairs a user took apart (``unsupersede``) among the memories of ``ids``: one
        ``{old, new}`` per ``unsuperseded`` event of a memory of ``ids``, whichever of the two
        superseded the other then, so a pair is kept apart either way round. The event is on
        the memory that was superseded: ask with both memories of each pair in question.
        Read through the events' index by memory (``ix_memory_events_memory``): tenant and
        event are compared as ``column || ''``, which no index serves, so SQLite does not
        walk the tenant's events by kind (``ix_memory_events_kind``) instead."""
        e = memory_events.c
        out: set[frozenset[str]] = set()
        for chunk in chunks(list(dict.fromkeys(ids))):
            for mid, after in conn.execute(sa.select(e.memory_id, e.after).where(
                    e.memory_id.in_(chunk), e.tenant.concat("") == tenant,
                    e.event.concat("") == "unsuperseded")):
                other = (json.loads(after) if after else {}).get("kept_apart")
                if isinstance(other, str) and other != mid:
                    out.add(frozenset((mid, other)))
        return out

    # -- access log --------------------------------------------------------------------
    def record_access(self, conn: Connection, tenant: str, hits: Sequence[tuple[str, float]],
                      *, k: int, user_id: str | None, at: float, growth: float,
                      cap: float) -> None:
        """One recall's side effects for ``(memory_id, score)`` hits in rank order: access
        count + 1, ``accessed_at``, stability x ``growth`` (capped), one access-log row each.

        One statement for every hit (executemany); the stability update is the one of
        :func:`mnemonia.scoring.retention.access`, done in SQL so it cannot race."""
        conn.exec_driver_sql(self.db.sql(
            "UPDATE memories SET access_count = access_count + 1, accessed_at = ?, "
            "stability = CASE WHEN stability * ? > ? THEN ? ELSE stability * ? END "
            "WHERE id = ?"),
            [(at, growth, cap, cap, growth, mid) for mid, _ in hits])
        conn.exec_driver_sql(self.db.sql(
            "INSERT INTO access_log (tenant, memory_id, rank, k, score, user_id, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)"),
            [(tenant, mid, rank, k, score, user_id, at)
             for rank, (mid, score) in enumerate(hits, start=1)])

    def insert_access(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        """Insert ``access_log`` rows (``tenant, memory_id, rank, k, score, user_id, at``)."""
        for chunk in chunks(list(rows)):
            conn.execute(access_log.insert(), list(chunk))

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
                      disabled: Sequence[str], *, since: float | None = None,
                      after_id: int | None = None
                      ) -> list[tuple[str, int, int, float, int, int | None]]:
        """Access-log rows in ``(start, end]`` grouped per memory: ``(memory_id, recalls,
        distinct users, sum of min(1, (rank-1)/max(1, k-1)), fresh rows, largest fresh row
        id)``, tenants in ``disabled`` left out.

        A row is fresh when it is stamped at or after ``since`` and its id is above
        ``after_id`` (each when given; with neither, every row is). With ``since`` or
        ``after_id``, only the memories with a fresh row are returned, each aggregated over
        all its rows in ``(start, end]``. One grouped statement (one snapshot) over the rows of
        ``(start, end]``, read through the index on ``at``: the database aggregates, so a busy
        log costs no Python objects per row."""
        al = access_log
        share = sa.cast(al.c.rank - 1, sa.Float) / sa.cast(
            sa.case((al.c.k > 1, al.c.k - 1), else_=1), sa.Float)
        share = sa.case((share > 1.0, 1.0), (share < 0.0, 0.0), else_=share)
        fresh = sa.and_(al.c.at > start if since is None else al.c.at >= since,
                        *([] if after_id is None else [al.c.id > after_id]))
        new = sa.func.sum(sa.case((fresh, 1), else_=0))
        q = (sa.select(al.c.memory_id, sa.func.count().label("n"),
                       sa.func.count(sa.distinct(al.c.user_id)).label("users"),
                       sa.func.sum(share).label("shares"), new.label("fresh"),
                       sa.func.max(sa.case((fresh, al.c.id), else_=None)).label("last"))
             .where(al.c.at > start, al.c.at <= end).group_by(al.c.memory_id))
        if disabled:
            q = q.where(al.c.tenant.not_in(list(disabled)))
        if since is not None or after_id is not None:
            q = q.having(new > 0)
        return [(r[0], int(r[1]), int(r[2]), float(r[3]), int(r[4]),
                 None if r[5] is None else int(r[5])) for r in conn.execute(q)]
