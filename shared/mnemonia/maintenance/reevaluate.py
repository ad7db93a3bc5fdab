"""Re-evaluation (DESIGN section 5): memories that get hot in recall are promoted
(``skipped`` -> ``batched`` -> ``immediate``), with a per-tenant cap, a cooldown and a
deferred queue so a cap delays a promotion instead of dropping it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mnemonia import ingest
from mnemonia.clock import from_ts, to_ts
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.reports import Promotion, ReevaluationReport
from mnemonia.runtime import Runtime
from mnemonia.scoring import reevaluation as reeval
from mnemonia.store.database import Connection
from mnemonia.store.repository import SideStore

__all__ = ["DEFERRED_KEY", "LAST_ROW_KEY", "LAST_TICK_KEY", "reevaluate", "window_inputs"]

log = logging.getLogger("mnemonia.maintenance")

LAST_TICK_KEY = "reevaluation.last_tick"
"""``kv`` key holding the time (epoch seconds) of the last successful re-evaluation tick."""
LAST_ROW_KEY = "reevaluation.last_row"
"""``kv`` key holding the largest ``access_log`` id the last successful tick read: the rows
above it are the ones added since (see :func:`reevaluate`)."""
DEFERRED_KEY = "reevaluation.deferred"
"""``kv`` key holding the candidates the last tick left out (per-tenant cap or cooldown):
``{memory_id: [tenant, heat, when the heat was computed]}``; they compete again in the next
tick (for at most one window), so a cap delays a promotion instead of dropping it."""
_COLUMNS = ("tenant", "state", "deleted_at", "last_reevaluated_at")


def _inputs(n: int, users: int, shares: float) -> reeval.HeatInputs:
    return reeval.HeatInputs(recalls=n, users=users,
                             mean_rank_share=min(1.0, max(0.0, shares / n)))


def window_inputs(repo: SideStore, conn: Connection, start: float, end: float,
                  disabled: Sequence[str]) -> tuple[int, dict[str, reeval.HeatInputs]]:
    """Access-log rows in ``(start, end]`` aggregated per memory: recalls, distinct users and
    the mean rank share ``min(1, (rank-1)/max(1, k-1))``.

    The same aggregation as :func:`mnemonia.scoring.reevaluation.aggregate` (a test holds them
    equal), done by the database in one grouped query. Returns the number of rows and
    ``{memory_id: HeatInputs}``.
    """
    rows = repo.events.access_window(conn, start, end, disabled)
    return sum(r[1] for r in rows), {r[0]: _inputs(*r[1:4]) for r in rows}


@dataclass
class _Tick:
    """What one tick has gathered so far."""

    now: datetime
    start: float
    scanned: int
    inputs: dict[str, reeval.HeatInputs]
    last_row: int | None
    candidates: list[reeval.Candidate] = field(default_factory=list)
    heats: dict[str, float] = field(default_factory=dict)
    heat_time: dict[str, float] = field(default_factory=dict)


def _heat(tick: _Tick, mid: str, r: Any, carried: dict[str, Any]) -> None:
    """This memory's heat (its exact last hour when it was recalled since the last tick, else
    the heat it waited with); a candidate when not ``immediate``."""
    nowts = to_ts(tick.now)
    h, when = (float(carried[mid][1]), float(carried[mid][2])) if mid in carried \
        else (-1.0, nowts)
    if mid in tick.inputs:
        tick.heats[mid] = reeval.heat(tick.inputs[mid])
        if tick.heats[mid] >= h:
            h, when = tick.heats[mid], nowts
    if r.state != reeval.IMMEDIATE:
        tick.heat_time[mid] = when
        tick.candidates.append(reeval.Candidate(
            memory_id=mid, tenant=r.tenant, state=r.state, heat=h,
            last_reevaluated_at=None if r.last_reevaluated_at is None
            else from_ts(r.last_reevaluated_at)))


def _gather(rt: Runtime, conn: Connection, now: datetime, disabled: tuple[str, ...]) -> _Tick:
    """The memories recalled since the last tick, each with its exact last hour.

    Which memories a tick looks at: those with an access-log row added since the last
    successful tick and stamped within the last hour (the scan stays bounded). "Added since"
    is by row id (:data:`LAST_ROW_KEY`), so a recall stamped at or before the last tick's time
    but written after that tick read the log still counts as new; until a tick has read a
    row, by time: stamped at or after the last tick. Each memory's heat then aggregates all its
    rows of ``(now - 1 h, now]``, whichever tick first saw them, on the engine's clock: no
    decayed counter, no undercount, and reading a memory twice counts nothing twice.
    """
    nowts = to_ts(now)
    window = reeval.DEFAULT_WINDOW
    last = rt.sql.kv.kv_get(conn, LAST_TICK_KEY)
    seen = rt.sql.kv.kv_get(conn, LAST_ROW_KEY)
    hour = nowts - window.total_seconds()
    since = hour if last is None else max(hour, float(last))
    rows = rt.sql.events.access_window(
        conn, hour, nowts, disabled, since=since if seen is None else None,
        after_id=None if seen is None else int(seen))
    marks = [r[5] for r in rows if r[5] is not None]
    if seen is not None:
        marks.append(int(seen))
    inputs = {r[0]: _inputs(*r[1:4]) for r in rows}
    tick = _Tick(now=now, start=since, scanned=sum(r[4] for r in rows), inputs=inputs,
                 last_row=max(marks) if marks else None)
    mids = sorted(inputs)
    # Candidates a previous tick had to leave out (cap or cooldown) wait here for their
    # turn, with the heat they had then, for at most one window.
    carried = {mid: e for mid, e in (rt.sql.kv.kv_get(conn, DEFERRED_KEY) or {}).items()
               if float(e[2]) > nowts - window.total_seconds() and e[0] not in disabled}
    mem = rt.sql.memories.columns_of(conn, sorted(set(mids) | set(carried)), _COLUMNS,
                                     committed=True)
    for mid in [*mids, *(i for i in sorted(carried) if i not in inputs)]:
        r = mem.get(mid)
        if r is None or r.deleted_at is not None or r.tenant in disabled:
            continue
        _heat(tick, mid, r, carried)
    return tick


def _promote(rt: Runtime, conn: Connection, tick: _Tick, chosen: list[reeval.Candidate]
             ) -> list[Promotion]:
    cfg = rt.config
    nowts = to_ts(tick.now)
    promotions: list[Promotion] = []
    events: list[dict[str, Any]] = []
    for c in chosen:
        new_state, event = reeval.promote(
            c.memory_id, c.state, c.heat, now=tick.now, batch_threshold=cfg.batch_threshold,
            immediate_threshold=cfg.immediate_threshold)
        if event is None:
            continue
        promotions.append(Promotion(memory_id=c.memory_id, tenant=c.tenant,
                                    old_state=c.state, new_state=new_state, heat=c.heat))
        events.append(rt.sql.events.event_row(c.tenant, c.memory_id, "reevaluation_promoted", nowts,
                                              {"state": c.state},
                                              {"state": new_state, "heat": round(c.heat, 6)}))
    for p in promotions:
        rt.sql.memories.update_memory(conn, p.memory_id, state=p.new_state)
    rt.sql.memories.update_ids(conn, [c.memory_id for c in chosen], last_reevaluated_at=nowts)
    rt.sql.events.insert_events(conn, events)
    return promotions


def _enrich_hot(rt: Runtime, promotions: list[Promotion]) -> int:
    """Enrich the memories promoted to ``immediate`` (not enriched yet) at once."""
    enriched = 0
    hot: dict[str, list[str]] = {}
    for p in promotions:
        if p.new_state == reeval.IMMEDIATE:
            hot.setdefault(p.tenant, []).append(p.memory_id)
    for tenant, ids in hot.items():
        with rt.reading() as conn:
            todo = rt.sql.memories.select_ids(conn, ids, enriched=False)
        ingest.enrich_ids(rt, tenant, todo)
        enriched += len(todo)
    return enriched


def reevaluate(rt: Runtime) -> ReevaluationReport:
    """One re-evaluation tick over every tenant (DESIGN section 5).

    Reads the access log added since the last successful tick (rows stamped within the last
    hour); each memory recalled there gets its heat from its exact last hour on the engine's
    clock (recalls, distinct users, mean rank share of its rows in ``(now - 1 h, now]``,
    whichever tick first saw them), so twenty recalls in an hour count twenty however they
    fall among the ticks.
    Candidates are active ``skipped``/``batched`` memories not re-evaluated in the last
    ``reevaluation_cooldown`` seconds, at most ``reevaluation_per_tenant_cap`` per tenant,
    hottest first; the ones left out wait for the next tick with their heat (for at most an
    hour), so a busy tenant's cap delays promotions rather than losing them. Heat alone
    decides promotion (never a demotion; skipped can reach immediate in one tick); each
    promotion writes a ``reevaluation_promoted`` event with the old and new state, and a memory
    promoted to ``immediate`` is enriched at once. Tenants in
    ``intelligence_disabled_tenants`` are left alone. Logs one structured line.
    """
    rt.check_open()
    cfg = rt.config
    now = rt.now()
    disabled = tuple(sorted(set(cfg.intelligence_disabled_tenants)))
    with rt.writing() as conn:
        tick = _gather(rt, conn, now, disabled)
        chosen = reeval.select_candidates(
            tick.candidates, now=now, cooldown=timedelta(seconds=cfg.reevaluation_cooldown),
            per_tenant_cap=cfg.reevaluation_per_tenant_cap)
        picked = {c.memory_id for c in chosen}
        waiting = {c.memory_id: [c.tenant, c.heat, tick.heat_time[c.memory_id]]
                   for c in tick.candidates if c.memory_id not in picked}
        rt.sql.kv.kv_set(conn, DEFERRED_KEY, waiting)
        promotions = _promote(rt, conn, tick, list(chosen))
        rt.sql.kv.kv_set(conn, LAST_TICK_KEY, to_ts(now))
        if tick.last_row is not None:
            rt.sql.kv.kv_set(conn, LAST_ROW_KEY, tick.last_row)
    enriched = _enrich_hot(rt, promotions)
    report = ReevaluationReport(
        window_start=from_ts(tick.start), window_end=now, scanned=tick.scanned,
        memories=len(tick.heats), candidates=len(tick.candidates), reevaluated=len(chosen),
        promoted=len(promotions), disabled_tenants=disabled, promotions=tuple(promotions),
        enriched=enriched, deferred=len(waiting))
    log.info("reevaluation tick scanned=%d candidates=%d reevaluated=%d promoted=%d",
             report.scanned, report.candidates, report.reevaluated, report.promoted,
             extra={"mnemonia": {"job": "reevaluate", "scanned": report.scanned,
                                 "memories": report.memories, "candidates": report.candidates,
                                 "reevaluated": report.reevaluated,
                                 "promoted": report.promoted,
                                 "window_start": report.window_start.isoformat(),
                                 "window_end": report.window_end.isoformat()}})
    remember(rt, "reevaluate", report)
    return report
