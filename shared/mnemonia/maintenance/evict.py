"""Eviction: soft-delete the lowest-priority active memories of a tenant (DESIGN section 5)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia import lifecycle
from mnemonia.caches import Changes
from mnemonia.clock import from_ts, to_ts
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.reports import EvictionReport
from mnemonia.ranking import (
    columns,
    information_array,
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


def _signals(c: prio.EvictionCandidate, policy: str) -> dict[str, Any]:
    """What the evicted event keeps of the signals its policy read (``before``)."""
    out: dict[str, Any] = {"deleted_at": None, "priority": round(c.priority, 6)}
    if policy != "composite":
        out["uses"] = c.uses
    if policy == "informative":
        out.update(state=c.state, content_words=c.content_words,
                   information=round(c.information, 6))
    return out


def _soft_delete(rt: Runtime, tenant: str, chosen: list[str],
                 by_id: dict[str, prio.EvictionCandidate], now: datetime, reason: str
                 ) -> list[str]:
    nowts = to_ts(now)
    policy = rt.config.eviction_policy
    with rt.narrowing(Changes(tenant=tenant, memories=True)) as (scope, conn):
        keep = set(rt.sql.memories.soft_delete(conn, chosen, nowts))
        chosen = [i for i in chosen if i in keep]
        rt.sql.events.insert_events(conn, [rt.sql.events.event_row(
            tenant, i, "evicted", nowts, _signals(by_id[i], policy),
            {"deleted_at": now.isoformat(), "reason": reason, "policy": policy})
            for i in chosen])
        # (the candidates are committed memories: their links leave the entity index)
        scope.narrow(lifecycle.soft_deleted(rt, conn, tenant, chosen))
    return chosen


def _read(rt: Runtime, tenant: str) -> tuple[list[Any], dict[str, tuple[Any, ...]]]:
    """The tenant's active rows with the columns the configured policy reads."""
    cols = _COLUMNS + (("text",) if rt.config.eviction_policy == "informative" else ())
    with rt.reading() as conn:
        rows = rt.sql.memories.active_rows(conn, tenant, cols)
    return rows, columns(rows)


def _candidate(rt: Runtime, r: Any, now: datetime, w: prio.PriorityWeights, uses: int,
               words: int) -> prio.EvictionCandidate:
    created = from_ts(r.created_at)
    info = (prio.information(importance=float(r.importance), content_words=words,
                             created_at=created, now=now)
            if rt.config.eviction_policy == "informative" else 0.0)
    return prio.EvictionCandidate(
        id=r.id, priority=priority_of(rt.config, r, now, w), accessed_at=from_ts(r.accessed_at),
        importance=float(r.importance), pinned=bool(r.pinned), state=r.state, seq=int(r.seq),
        uses=uses, content_words=words, information=info)


def _pools(rt: Runtime, rows: list[Any], data: dict[str, tuple[Any, ...]], uses: dict[str, int],
           protected: np.ndarray, now: datetime
           ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The configured policy's pools, in the order they are emptied (each a mask), the value
    that orders a pool (lowest first, vectorised to shortlist) and each row's content words
    (counted for the rows that may go: the text is the costly part of a pass)."""
    policy = rt.config.eviction_policy
    n = len(rows)
    used = np.asarray([uses.get(r.id, 0) > 0 for r in rows], dtype=bool)
    if policy == "informative":
        texts, open_rows = data["text"], np.nonzero(~protected)[0]
        words = np.zeros(n, dtype=np.int64)
        words[open_rows] = np.fromiter((prio.content_words(texts[i]) for i in open_rows),
                                       dtype=np.int64, count=open_rows.size)
        values = information_array(data, words, to_ts(now))
        skipped = np.asarray(data["state"], dtype=object) == reeval.SKIPPED
        pools = [~used & skipped, ~used & ~skipped, used & skipped, used & ~skipped]
    else:
        words = np.zeros(n, dtype=np.int64)
        values = priority_array(rt.config, data, to_ts(now), weights(rt.config))
        pools = [np.ones(n, dtype=bool)] if policy == "composite" else [~used, used]
    return pools, values, words


def _choose(rt: Runtime, tenant: str, rows: list[Any], data: dict[str, tuple[Any, ...]],
            protected: np.ndarray, allowed: int, now: datetime
            ) -> list[prio.EvictionCandidate]:
    """The first ``allowed`` unprotected memories in the order of ``eviction_policy``
    (:func:`mnemonia.scoring.priority.eviction_key`): pool by pool, each shortlisted on its
    vectorised value, then ordered exactly by the pure core."""
    policy = rt.config.eviction_policy
    uses: dict[str, int] = {}
    if policy != "composite":
        with rt.reading() as conn:
            uses = use_record(rt.sql, conn, tenant).uses
    pools, values, words = _pools(rt, rows, data, uses, protected, now)
    w = weights(rt.config)
    chosen: list[prio.EvictionCandidate] = []
    for pool in pools:
        need = allowed - len(chosen)
        if need <= 0:
            break
        candidates = {rows[i].id: _candidate(rt, rows[i], now, w, uses.get(rows[i].id, 0),
                                             int(words[i]))
                      for i in shortlist(values, pool & ~protected, need, lowest=True)}
        chosen += [candidates[i] for i in prio.select_for_eviction(
            candidates.values(), budget=rt.config.eviction_budget, count=need, policy=policy)]
    return chosen


def eviction_order(rt: Runtime, *, tenant: str, limit: int
                   ) -> tuple[list[prio.EvictionCandidate], int, int]:
    """What eviction would take next: the first ``limit`` memories in the order an explicit
    run picks them (``eviction_policy``'s order; protected ones never), each with the signals
    that order reads, the active count, and how many one explicit run (``engine.evict``)
    takes. Reads only."""
    rt.check_open()
    now = rt.now()
    rows, data = _read(rt, tenant)
    picked = _choose(rt, tenant, rows, data, _protected(rows, data), min(limit, len(rows)),
                     now) if rows and limit > 0 else []
    return picked, len(rows), prio.eviction_count(len(rows), rt.config.eviction_budget)


def evict(rt: Runtime, *, tenant: str, force: bool = True) -> EvictionReport:
    """Soft-delete the first active memories of ``tenant`` in ``eviction_policy``'s order.

    An explicit run (``force=True``, what ``engine.evict`` does) removes
    ``max(1, int(active * eviction_budget))`` memories; automatic maintenance
    (``force=False``) evicts only while the tenant is over ``max_memories`` (when set), at most
    the budget and never below the limit. Never evicted: importance > 0.9, pinned, state
    ``immediate``. Under ``informative`` (the default) memories never used (reported use,
    feedback 4-5) go first, then those the gatekeeper skipped, then the least information
    (:func:`mnemonia.scoring.priority.information`); ``unused_first`` orders the unused and
    then the used by priority; ``composite`` by priority alone. Ties go to the older access.
    Each eviction writes an ``evicted`` event with the policy and the signals it read;
    ``engine.restore(id)`` brings a memory back whole.
    """
    rt.check_open()
    boolean(force, "force")
    now = rt.now()
    rows, data = _read(rt, tenant)
    active = len(rows)
    allowed, reason = _allowed(rt, active, force)
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
