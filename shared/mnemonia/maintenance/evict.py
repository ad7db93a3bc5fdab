"""Eviction: soft-delete the lowest-priority active memories of a tenant (DESIGN section 5)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia.caches import Changes
from mnemonia.clock import from_ts, to_ts
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.reports import EvictionReport
from mnemonia.ranking import (
    columns,
    priority_array,
    priority_of,
    shortlist,
    use_record,
    weights,
)
from mnemonia.runtime import Runtime
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval
from mnemonia.validation import boolean

__all__ = ["evict", "eviction_order"]

log = logging.getLogger("mnemonia.maintenance")

_COLUMNS = ("id", "seq", "importance", "created_at", "accessed_at", "access_count",
            "stability", "pinned", "state")


def _allowed(rt: Runtime, active: int, force: bool) -> tuple[int, str]:
    """How many the run may evict, and why."""
    cfg = rt.config
    budget = prio.eviction_count(active, cfg.eviction_budget)
    if force:
        return budget, "budget"
    if cfg.max_memories is not None and active > cfg.max_memories:
        return min(budget, active - cfg.max_memories), "over_max_memories"
    return 0, "not_over_max_memories"


def _protected(rows: list[Any], data: dict[str, tuple[Any, ...]]) -> np.ndarray:
    """Never evicted: importance > 0.9, pinned, state ``immediate``."""
    if not rows:
        return np.zeros(0, dtype=bool)
    mask: np.ndarray = ((np.asarray(data["importance"], dtype=float) > prio.PROTECTED_IMPORTANCE)
                        | np.asarray(data["pinned"], dtype=bool)
                        | (np.asarray(data["state"], dtype=object) == reeval.IMMEDIATE))
    return mask


def _soft_delete(rt: Runtime, tenant: str, chosen: list[str],
                 by_id: dict[str, prio.EvictionCandidate], now: datetime, reason: str
                 ) -> list[str]:
    nowts = to_ts(now)
    with rt.writing(Changes(tenant=tenant, memories=True)) as conn:
        keep = set(rt.sql.memories.soft_delete(conn, chosen, nowts))
        chosen = [i for i in chosen if i in keep]
        rt.sql.events.insert_events(conn, [rt.sql.events.event_row(
            tenant, i, "evicted", nowts,
            {"deleted_at": None, "priority": round(by_id[i].priority, 6)},
            {"deleted_at": now.isoformat(), "reason": reason}) for i in chosen])
    return chosen


def _choose(rt: Runtime, tenant: str, rows: list[Any], data: dict[str, tuple[Any, ...]],
            protected: np.ndarray, allowed: int, now: datetime
            ) -> list[prio.EvictionCandidate]:
    """The ``allowed`` lowest-priority unprotected memories, those never used first: a
    memory reported used (or rated 4-5) goes only when no unused one is left."""
    if rt.config.eviction_policy == "composite":
        used = np.zeros(len(rows), dtype=bool)
    else:
        with rt.reading() as conn:
            used_ids = use_record(rt.sql, conn, tenant).uses
        used = np.asarray([r.id in used_ids for r in rows], dtype=bool)
    w = weights(rt.config)
    values = priority_array(rt.config, data, to_ts(now), w)
    chosen: list[prio.EvictionCandidate] = []
    for pool in (~protected & ~used, ~protected & used):
        need = allowed - len(chosen)
        if need <= 0:
            break
        candidates = {rows[i].id: prio.EvictionCandidate(
            id=rows[i].id, priority=priority_of(rt.config, rows[i], now, w),
            accessed_at=from_ts(rows[i].accessed_at), importance=float(rows[i].importance),
            pinned=bool(rows[i].pinned), state=rows[i].state, seq=int(rows[i].seq))
            for i in shortlist(values, pool, need, lowest=True)}
        chosen += [candidates[i] for i in prio.select_for_eviction(
            candidates.values(), budget=rt.config.eviction_budget, count=need)]
    return chosen


def eviction_order(rt: Runtime, *, tenant: str, limit: int
                   ) -> tuple[list[prio.EvictionCandidate], int, int]:
    """What eviction would take next: the first ``limit`` memories in the order an explicit
    run picks them (never-used lowest priority first, then used ones; protected ones never),
    the active count, and how many one explicit run (``engine.evict``) takes."""
    rt.check_open()
    now = rt.now()
    with rt.reading() as conn:
        rows = rt.sql.memories.active_rows(conn, tenant, _COLUMNS)
    data = columns(rows)
    picked = _choose(rt, tenant, rows, data, _protected(rows, data), min(limit, len(rows)),
                     now) if rows and limit > 0 else []
    return picked, len(rows), prio.eviction_count(len(rows), rt.config.eviction_budget)


def evict(rt: Runtime, *, tenant: str, force: bool = True) -> EvictionReport:
    """Soft-delete the lowest-priority active memories of ``tenant``.

    An explicit run (``force=True``, what ``engine.evict`` does) removes
    ``max(1, int(active * eviction_budget))`` memories; automatic maintenance
    (``force=False``) evicts only while the tenant is over ``max_memories`` (when set), at most
    the budget and never below the limit. Never evicted: importance > 0.9, pinned, state
    ``immediate``. Memories never used go first (by priority), used ones (reported use,
    feedback 4-5) only when no unused one is left. Ties go to the older access. Each
    eviction writes an ``evicted`` event;
    ``engine.restore(id)`` brings a memory back whole.
    """
    rt.check_open()
    boolean(force, "force")
    now = rt.now()
    with rt.reading() as conn:
        rows = rt.sql.memories.active_rows(conn, tenant, _COLUMNS)
    active = len(rows)
    allowed, reason = _allowed(rt, active, force)
    data = columns(rows)
    protected = _protected(rows, data)
    chosen: list[str] = []
    if allowed:
        picked = _choose(rt, tenant, rows, data, protected, allowed, now)
        chosen = _soft_delete(rt, tenant, [c.id for c in picked], {c.id: c for c in picked},
                              now, reason)
    report = EvictionReport(tenant=tenant, active=active, protected=int(protected.sum()),
                            allowed=allowed, evicted=len(chosen), ids=tuple(chosen),
                            reason=reason)
    log.info("evict tenant=%s active=%d allowed=%d evicted=%d reason=%s", tenant, active,
             allowed, len(chosen), reason, extra={"mnemonia": {"job": "evict", **report.as_dict()}})
    remember(rt, "evict", report, tenant)
    return report
