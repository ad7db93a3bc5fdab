"""Helpers for the maintenance tests: direct arrangement of stored state (lifecycle state,
times, access-log rows) in the real SQLite side-store, and reading it back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from mnemonia import MemoryEngine
from mnemonia.store import sql as S


def set_rows(engine: MemoryEngine, ids: list[str] | str, **values: Any) -> None:
    """Arrange stored columns directly (datetimes are stored as epoch seconds)."""
    if isinstance(ids, str):
        ids = [ids]
    vals = {k: (v.timestamp() if isinstance(v, datetime) else v) for k, v in values.items()}
    with engine.sql.begin() as conn:
        conn.execute(S.memories.update().where(S.memories.c.id.in_(ids)).values(**vals))


def row(engine: MemoryEngine, memory_id: str) -> Any:
    with engine.sql.connect() as conn:
        return conn.execute(sa.select(S.memories).where(S.memories.c.id == memory_id)).one()


def log_access(engine: MemoryEngine, tenant: str, memory_id: str, *, at: datetime,
               rank: int = 1, k: int = 3, user: str | None = None, times: int = 1) -> None:
    """Access-log rows as recall writes them (one per hit)."""
    with engine.sql.begin() as conn:
        conn.execute(S.access_log.insert(), [dict(
            tenant=tenant, memory_id=memory_id, rank=rank, k=k, score=0.5, user_id=user,
            at=at.timestamp()) for _ in range(times)])


def events(engine: MemoryEngine, tenant: str, memory_id: str, kind: str | None = None
           ) -> list[Any]:
    evs = engine.history(memory_id, tenant=tenant)
    return [e for e in evs if kind is None or e.event == kind]
