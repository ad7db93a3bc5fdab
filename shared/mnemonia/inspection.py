"""Read-side views of a store for the memory inspector (``mnemonia ui``): what the memory
holds (tenants, a filtered memory list with keyset paging), why it recalls (a memory's
forgetting curve, SM-2 schedule, relations and history) and what it will forget (due reviews,
the next evictions).

Every function takes the store's :class:`~mnemonia.runtime.Runtime` (``engine.runtime``) and
only reads: the inspector's actions (pin, forget, restore, unsupersede) go through the
engine's public methods. SQL stays in :mod:`mnemonia.store.repository`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mnemonia import lifecycle
from mnemonia import validation as check
from mnemonia.clock import to_ts
from mnemonia.errors import InvalidInputError, shown
from mnemonia.maintenance import journal
from mnemonia.maintenance.evict import eviction_order
from mnemonia.maintenance.review import due_for_review
from mnemonia.models import KINDS, Event, Memory, Relation
from mnemonia.ranking import priority_of, use_record, weights
from mnemonia.runtime import Runtime
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import sm2
from mnemonia.scoring.retention import retention

__all__ = ["DELETED_CHOICES", "PAGE_SIZE", "STATE_CHOICES", "CurvePoint", "DueItem", "DueList",
           "FadingItem", "FadingList", "ForgettingCurve", "ListQuery", "MemoryDetail",
           "MemoryPage", "TenantSummary", "due", "fading", "forgetting_curve", "last_reports",
           "list_query", "memory_detail", "memory_page", "overview", "retention_now",
           "review_schedule", "supersession"]

PAGE_SIZE = 50
"""Memories per page of the memory list."""
MAX_PAGE_SIZE = 500
STATE_CHOICES: tuple[str, ...] = (*reeval.STATES, "pinned", "superseded", "consolidated")
"""``state=`` filters: a gatekeeper state, or pinned / superseded / consolidated."""
DELETED_CHOICES = ("no", "yes", "all")
"""``deleted=`` filters: active memories only (default), forgotten only, or both."""
CURVE_ACCESSES = 50
"""The forgetting curve draws at most this many past accesses (the latest)."""
CURVE_SAMPLES = 40
CURVE_FLOOR = 0.01
"""The projected curve runs until retention falls below this (or :data:`CURVE_HORIZON`)."""
CURVE_HORIZON = timedelta(days=365)


@dataclass(frozen=True, kw_only=True)
class TenantSummary:
    """One tenant on the inspector's first page: :meth:`MemoryEngine.stats` counts."""

    tenant: str
    stats: dict[str, Any]


def overview(rt: Runtime) -> list[TenantSummary]:
    """Every tenant with its counts (active, deleted, by state and by kind, ...)."""
    return [TenantSummary(tenant=t, stats=lifecycle.stats(rt, t)) for t in rt.tenants()]


def last_reports(rt: Runtime, tenant: str | None = None) -> list[dict[str, Any]]:
    """The last report of each maintenance job (see :mod:`mnemonia.maintenance.journal`)."""
    return journal.last_reports(rt, tenant)


# -- the memory list -------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ListQuery:
    """A checked memory-list request. ``page`` is the keyset cursor of the page to show
    (``None``: the first page, newest memories first)."""

    q: str = ""
    kind: str | None = None
    topic: str | None = None
    state: str | None = None
    deleted: str = "no"
    page: str | None = None
    limit: int = PAGE_SIZE

    def params(self, **change: Any) -> dict[str, str]:
        """The query-string parameters of this request (with ``change``), empty ones out."""
        values = {"q": self.q, "kind": self.kind, "topic": self.topic, "state": self.state,
                  "deleted": None if self.deleted == "no" else self.deleted,
                  "page": self.page, **change}
        return {k: str(v) for k, v in values.items() if v not in (None, "")}


def _choice(value: Any, name: str, allowed: Sequence[str], problems: list[str]) -> str | None:
    if value in (None, ""):
        return None
    if value not in allowed:
        problems.append(f"{name}={shown(value)}: must be one of {', '.join(allowed)}")
        return None
    return str(value)


def list_query(*, q: Any = "", kind: Any = None, topic: Any = None, state: Any = None,
               deleted: Any = None, page: Any = None, limit: Any = None) -> ListQuery:
    """Check memory-list parameters (strings from a URL); every bad one in one error."""
    problems: list[str] = []
    text = q if isinstance(q, str) else ""
    if not isinstance(q, str) or len(q) > 500:
        problems.append(f"q={shown(q)}: must be a text of at most 500 characters")
    size = PAGE_SIZE
    if limit not in (None, ""):
        try:
            size = int(limit)
        except (TypeError, ValueError):
            size = 0
        if not 1 <= size <= MAX_PAGE_SIZE:
            problems.append(f"limit={shown(limit)}: must be a whole number 1..{MAX_PAGE_SIZE}")
    if page not in (None, "") and _cursor(page) is None:
        problems.append(f"page={shown(page)}: not a page cursor of this list (follow the "
                        "'next page' link, or leave it out for the first page)")
    if topic not in (None, "") and (not isinstance(topic, str) or len(topic) > 128):
        problems.append(f"topic={shown(topic)}: must be a text of at most 128 characters")
    out = ListQuery(q=text.strip(), kind=_choice(kind, "kind", KINDS, problems),
                    topic=topic or None, state=_choice(state, "state", STATE_CHOICES, problems),
                    deleted=_choice(deleted, "deleted", DELETED_CHOICES, problems) or "no",
                    page=page or None, limit=size)
    if problems:
        raise InvalidInputError("; ".join(problems))
    return out


def _cursor(page: Any) -> tuple[str, int, str] | None:
    """``(mode, position, id)`` of a cursor ``<s|k><position>-<id>``, None if malformed."""
    if not isinstance(page, str) or len(page) < 4 or page[0] not in "sk" or "-" not in page:
        return None
    position, _, mid = page[1:].partition("-")
    if not position.isdigit() or not mid:
        return None
    return page[0], int(position), mid


@dataclass(frozen=True, kw_only=True)
class MemoryPage:
    """One page of the memory list and the cursor of the next one (``None``: the last)."""

    query: ListQuery
    items: list[Memory]
    next_page: str | None


def memory_page(rt: Runtime, tenant: str, query: ListQuery) -> MemoryPage:
    """A page of ``tenant``'s memories matching ``query``, newest first (keyset paging: every
    page costs about the same, however deep). With ``q``, every word must occur in the text
    (case and accents ignored on SQLite)."""
    words = check.text(query.q, "q").split() if query.q else []
    mode = "k" if words and rt.sql.keywords.table else "s"
    cursor = _cursor(query.page) if query.page else None
    if cursor is not None and cursor[0] != mode:
        raise InvalidInputError(f"page={shown(query.page)}: a cursor of another listing (with "
                                "or without q); start from the first page")
    after = None if cursor is None else (cursor[1], cursor[2])
    filters = {"kind": query.kind, "topic": query.topic, "state": query.state,
               "deleted": query.deleted}
    with rt.reading() as conn:
        rows = rt.sql.inspect.inspect_page(conn, tenant, words=words, filters=filters, after=after,
                                           limit=query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[:query.limit]
    last = rows[-1] if rows else None
    nxt = f"{mode}{last.cursor_seq}-{last.cursor_id}" if more and last is not None else None
    return MemoryPage(query=query, items=[rt.sql.memories.to_memory(r) for r in rows],
                      next_page=nxt)


# -- one memory --------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CurvePoint:
    at: datetime
    retention: float


@dataclass(frozen=True, kw_only=True)
class ForgettingCurve:
    """A memory's retention over time: ``past`` from its creation through each recorded
    access (where stability grew), ``projected`` from now on with its stored state.

    ``exact`` is False when the stability rebuilt from the access log differs from the stored
    one (imported memories, pruned logs): the last segment then uses the stored values.
    """

    created_at: datetime
    accesses: list[datetime]
    accesses_total: int
    past: list[CurvePoint]
    projected: list[CurvePoint]
    now: datetime
    next_review: datetime | None
    retention_now: float
    exact: bool


def _segment(start: datetime, end: datetime, imp: float, stab: float, half_life: float,
             samples: int = CURVE_SAMPLES) -> list[CurvePoint]:
    span = max(0.0, (end - start).total_seconds())
    out = []
    for i in range(samples + 1):
        at = start + timedelta(seconds=span * i / samples)
        out.append(CurvePoint(at=at, retention=retention(
            accessed_at=start, now=at, importance=imp, stability=stab, half_life=half_life)))
    return out


def forgetting_curve(rt: Runtime, memory: Memory, access_times: Sequence[datetime],
                     now: datetime) -> ForgettingCurve:
    """The forgetting curve of ``memory`` (DESIGN section 5 retention) given its recorded
    access times: stability starts at 1 and grows by ``stability_growth`` (up to
    ``stability_cap``) at each access, which resets the time since the last access."""
    cfg = rt.config
    imp, hl = memory.importance, cfg.retention_half_life
    times = sorted(t for t in access_times if memory.created_at <= t <= now)
    starts, stabilities = [memory.created_at, *times], [1.0]
    for _ in times:
        stabilities.append(min(cfg.stability_cap, stabilities[-1] * cfg.stability_growth))
    exact = math.isclose(stabilities[-1], memory.stability, rel_tol=1e-6) and (
        not times or abs((times[-1] - memory.accessed_at).total_seconds()) < 1e-3)
    # the last segment is what the engine uses now: the stored access time and stability
    starts[-1], stabilities[-1] = memory.accessed_at, memory.stability
    starts, stabilities = starts[-CURVE_ACCESSES - 1:], stabilities[-CURVE_ACCESSES - 1:]
    past: list[CurvePoint] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else now
        past += _segment(start, max(start, end), imp, stabilities[i], hl)
    tau = hl * imp * memory.stability
    ahead = timedelta(seconds=min(CURVE_HORIZON.total_seconds(),
                                  max(3600.0, -math.log(CURVE_FLOOR) * tau)))
    projected = [CurvePoint(at=t, retention=retention(
        accessed_at=min(memory.accessed_at, t), now=t, importance=imp,
        stability=memory.stability, half_life=hl))
        for t in (now + ahead * (i / CURVE_SAMPLES) for i in range(CURVE_SAMPLES + 1))]
    return ForgettingCurve(created_at=memory.created_at, accesses=times[-CURVE_ACCESSES:],
                           accesses_total=len(times), past=past, projected=projected, now=now,
                           next_review=memory.sm2.next_review,
                           retention_now=projected[0].retention, exact=exact)


@dataclass(frozen=True, kw_only=True)
class MemoryDetail:
    """Everything the memory page shows."""

    memory: Memory
    history: list[Event]
    relations: list[Relation]
    neighbours: dict[str, Memory]
    curve: ForgettingCurve
    priority: float
    due: bool
    review_priority: float
    uses: int = 0
    fails: int = 0
    superseded_by: Memory | None = None
    supersession: Event | None = None  # the event that made the current supersession
    concept: Memory | None = None
    members: list[str] = field(default_factory=list)


def memory_detail(rt: Runtime, tenant: str, memory_id: str) -> MemoryDetail:
    """One memory of ``tenant`` (deleted ones too) with its history, relations (and the
    memories at their other ends), forgetting curve, priority and review state.
    MemoryNotFoundError for an id of no memory of ``tenant`` (another tenant's included)."""
    check.memory_id(memory_id)
    now = rt.now()
    mem = lifecycle.get(rt, tenant, memory_id)
    history = lifecycle.history(rt, tenant, memory_id)
    rels = lifecycle.relations(rt, tenant, memory_id)
    others = {r.dst if r.src == memory_id else r.src for r in rels}
    others |= {x for x in (mem.superseded_by, mem.consolidated_into) if x}
    with rt.reading() as conn:
        rows = rt.sql.memories.rows(conn, tenant, sorted(others))
        used = use_record(rt.sql, conn, tenant)
        row = rt.sql.memories.row(conn, tenant, memory_id)
    neighbours = {i: rt.sql.memories.to_memory(r) for i, r in rows.items()}
    accesses = [e.at for e in history if e.event == "recalled"]
    members = sorted(r.src for r in rels if r.type == "part_of" and r.dst == memory_id)
    return MemoryDetail(
        memory=mem, history=history, relations=rels, neighbours=neighbours,
        curve=forgetting_curve(rt, mem, accesses, now),
        priority=priority_of(rt.config, row, now, weights(rt.config)),
        due=sm2.is_due(mem.sm2, now), review_priority=sm2.priority(mem.sm2, now),
        uses=used.uses.get(memory_id, 0), fails=used.fails.get(memory_id, 0),
        superseded_by=neighbours.get(mem.superseded_by or ""),
        supersession=supersession(history, mem.superseded_by),
        concept=neighbours.get(mem.consolidated_into or ""), members=members)


def supersession(history: Sequence[Event], superseded_by: str | None) -> Event | None:
    """The ``superseded`` event of ``history`` that made the memory superseded by
    ``superseded_by`` (its ``after`` holds the ``evidence`` of a detected one), or ``None``."""
    if superseded_by is None:
        return None
    return next((e for e in reversed(history) if e.event == "superseded"
                 and (e.after or {}).get("superseded_by") == superseded_by), None)


# -- what it will review and forget -------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class DueItem:
    memory: Memory
    review_priority: float
    overdue_days: float


@dataclass(frozen=True, kw_only=True)
class DueList:
    """Memories due for SM-2 review, in the order the review job takes them."""

    total: int
    batch: int
    items: list[DueItem]


def due(rt: Runtime, tenant: str, *, limit: int = 100) -> DueList:
    """The first ``limit`` memories the review job would review now (of ``total`` due);
    the job reviews ``batch`` (``review_batch``) per run."""
    now = rt.now()
    ranked = due_for_review(rt, tenant, now)
    top = ranked[:limit]
    with rt.reading() as conn:
        rows = rt.sql.memories.rows(conn, tenant, [t[1] for t in top])
    items = []
    for prio_value, mid, _row, state in top:
        if mid not in rows:
            continue
        late = 0.0 if state.next_review is None else (now - state.next_review).total_seconds()
        items.append(DueItem(memory=rt.sql.memories.to_memory(rows[mid]),
                             review_priority=prio_value,
                             overdue_days=max(0.0, late) / 86400.0))
    return DueList(total=len(ranked), batch=rt.config.review_batch, items=items)


def review_schedule(rt: Runtime, tenant: str, *, days: int = 30) -> list[tuple[str, int]]:
    """Reviews per day: ``("due", n)`` for those due now, then one ``(YYYY-MM-DD, n)`` per day
    of the next ``days`` days (the SM-2 ``next_review`` of enriched, reviewable memories)."""
    now = rt.now()
    with rt.reading() as conn:
        rows = rt.sql.memories.active_rows(conn, tenant, ("next_review",), enriched=True,
                                           not_state=reeval.SKIPPED, unsuperseded=True)
    nowts = to_ts(now)
    counts = [0] * (days + 1)
    for (nxt,) in rows:
        if nxt is None or nxt <= nowts:
            counts[0] += 1
            continue
        day = int((nxt - nowts) // 86400.0) + 1
        if day <= days:
            counts[day] += 1
    labels = ["due"] + [(now + timedelta(days=d)).date().isoformat() for d in range(days)]
    return list(zip(labels, counts, strict=True))


@dataclass(frozen=True, kw_only=True)
class FadingItem:
    """A memory eviction would take, with the signals its policy reads and ``reason``: why
    it goes before the next one in the order (the first term of their sort keys that
    differs; empty when nothing follows it)."""

    memory: Memory
    priority: float
    retention: float
    used: bool
    next_run: bool
    uses: int = 0
    content_words: int = 0
    information: float = 0.0
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class FadingList:
    """What eviction takes next, in the order of ``policy`` (``eviction_policy``), and the
    memories forgotten most recently (restorable)."""

    active: int
    next_run: int
    items: list[FadingItem]
    forgotten: list[Memory]
    policy: str = prio.DEFAULT_EVICTION_POLICY


def fading(rt: Runtime, tenant: str, *, limit: int = 100) -> FadingList:
    """The next ``limit`` memories eviction would take, in its order, each with its signals
    and why it goes before the next; the first ``next_run`` go in the next explicit run;
    plus the ``limit`` forgotten most recently."""
    now = rt.now()
    policy = rt.config.eviction_policy
    picked, active, per_run = eviction_order(rt, tenant=tenant, limit=limit + 1)
    with rt.reading() as conn:
        rows = rt.sql.memories.rows(conn, tenant, [c.id for c in picked])
        gone = rt.sql.inspect.recently_deleted(conn, tenant, limit)
    items = []
    for i, c in enumerate(picked[:limit]):
        if c.id not in rows:
            continue
        mem = rt.sql.memories.to_memory(rows[c.id])
        after = picked[i + 1] if i + 1 < len(picked) else None
        items.append(FadingItem(
            memory=mem, priority=c.priority, used=c.uses > 0, next_run=i < per_run,
            retention=retention(accessed_at=mem.accessed_at, now=now,
                                importance=mem.importance, stability=mem.stability,
                                half_life=rt.config.retention_half_life),
            uses=c.uses, content_words=c.content_words, information=c.information,
            reason="" if after is None else prio.eviction_reason(c, after, policy)))
    return FadingList(active=active, next_run=per_run, items=items, policy=policy,
                      forgotten=[rt.sql.memories.to_memory(r) for r in gone])


def retention_now(rt: Runtime, memory: Memory, now: datetime) -> float:
    """A memory's retention at ``now`` (for the list pages)."""
    return retention(accessed_at=min(memory.accessed_at, now), now=now,
                     importance=memory.importance, stability=memory.stability,
                     half_life=rt.config.retention_half_life)

