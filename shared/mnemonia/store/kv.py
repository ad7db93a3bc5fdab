"""Small keyed state (``kv``: JSON values by key) and leases (``maintenance_leases``): a
maintenance job's, and the writer lease of each process writing to a shared store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import kv, maintenance_leases
from mnemonia.store.statements import chunks

__all__ = ["WRITER_JOB", "WRITER_LEASE", "KeyValues"]


WRITER_JOB = "writer:"
"""Lease name prefix of a process writing to the store (``writer:<holder>``)."""
WRITER_LEASE = 30.0
"""Seconds a writer lease runs unless renewed; an open engine renews it every quarter of
this. A process stalled or cut off from the side-store for longer may see a write of its
taken over by another process's repair (:class:`~mnemonia.errors.StoreWriteTakenOverError`)."""


class KeyValues:
    """``kv`` values and ``maintenance_leases`` (the lease methods open transactions of
    their own, so that two processes cannot both win)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- kv ----------------------------------------------------------------------------
    def kv_get(self, conn: Connection, key: str) -> Any:
        row = conn.execute(sa.select(kv.c.value).where(kv.c.key == key)).first()
        return None if row is None else json.loads(row[0])

    def kv_set(self, conn: Connection, key: str, value: Any) -> None:
        payload = json.dumps(value)
        updated = conn.execute(kv.update().where(kv.c.key == key).values(value=payload)).rowcount
        if not updated:
            conn.execute(kv.insert().values(key=key, value=payload))

    def kv_items(self, conn: Connection, prefix: str) -> list[tuple[str, Any]]:
        """``(key, value)`` of every key starting with ``prefix``, sorted by key."""
        rows = conn.execute(sa.select(kv.c.key, kv.c.value).where(
            kv.c.key.startswith(prefix, autoescape=True)).order_by(kv.c.key))
        return [(r[0], json.loads(r[1])) for r in rows]

    def kv_delete(self, conn: Connection, keys: Sequence[str]) -> None:
        for chunk in chunks(list(keys)):
            conn.execute(kv.delete().where(kv.c.key.in_(chunk)))

    # -- maintenance leases ------------------------------------------------------------
    def acquire_lease(self, job: str, holder: str, *, now: float, seconds: float) -> bool:
        """Take (or renew) the lease of ``job`` for ``holder`` until ``now + seconds``, unless
        another holder's lease is still running; True when ``holder`` has it. One short
        transaction of its own, so two processes cannot both win."""
        lease = maintenance_leases.c
        with self.db.begin() as conn:
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
        with self.db.begin() as conn:
            conn.execute(maintenance_leases.update().where(
                lease.job == job, lease.holder == holder).values(expires_at=0.0))

    def lease_holder(self, job: str, *, now: float) -> str | None:
        """Who holds an unexpired lease of ``job`` (None: nobody)."""
        lease = maintenance_leases.c
        with self.db.connect() as conn:
            row = conn.execute(sa.select(lease.holder).where(
                lease.job == job, lease.expires_at > now)).first()
        return None if row is None else str(row[0])

    # -- writer leases -----------------------------------------------------------------
    def renew_writer(self, holder: str, *, now: float, seconds: float = WRITER_LEASE) -> None:
        """Take or renew the writer lease of ``holder`` (``writer:<holder>``) until
        ``now + seconds``: while it runs, no other process's repair touches the memories
        ``holder`` is writing."""
        self.acquire_lease(WRITER_JOB + holder, holder, now=now, seconds=seconds)

    def release_writer(self, holder: str) -> None:
        """Drop the writer lease of ``holder`` (it closes): its unfinished writes, if any,
        are repaired by the next open."""
        with self.db.begin() as conn:
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
