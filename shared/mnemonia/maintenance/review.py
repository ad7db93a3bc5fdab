"""The SM-2 review worker (DESIGN section 5) and reported use: which recalled memories a
reply echoed, so the next review takes quality 5 for them."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mnemonia.caches import Changes
from mnemonia.clock import from_ts, to_ts
from mnemonia.errors import InvalidInputError, shown
from mnemonia.lifecycle import review_update
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.reports import ReviewReport
from mnemonia.models import RecallResult
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import sm2
from mnemonia.validation import memory_id

__all__ = ["ECHO_MIN_SHARE", "REACTIVE_USE_QUALITY", "due_for_review", "echoes",
           "estimate_quality", "quality_from_rank", "report_use", "review"]

log = logging.getLogger("mnemonia.maintenance")

REACTIVE_USE_QUALITY = 5
"""Quality of a memory the reply echoed (it was useful)."""
ECHO_MIN_SHARE = 0.5
"""Share of a memory's content words the reply must contain."""
QUALITY_BINS = (0.9, 0.7, 0.5, 0.3, 0.1)  # -> 5, 4, 3, 2, 1, else 0
ESTIMATE_DECAY_PER_HOUR = 0.05
_COLUMNS = ("id", "seq", "importance", "utility", "accessed_at", "created_at", "easiness",
            "interval_days", "repetitions", "next_review", "last_quality", "last_reviewed_at")


def quality_from_rank(best_rank: int) -> int:
    """SM-2 quality from recall use: rank 1 counts 5, top-3 4, returned at all 3."""
    if isinstance(best_rank, bool) or not isinstance(best_rank, int) or best_rank < 1:
        raise InvalidInputError(f"best_rank={shown(best_rank)}: must be an int >= 1")
    if best_rank == 1:
        return 5
    return 4 if best_rank <= 3 else 3


def estimate_quality(*, importance: float, utility: float, hours_since_access: float) -> int:
    """SM-2 quality when no signal exists:
    ``0.4*importance + 0.3*utility + 0.3*exp(-0.05*hours since accessed_at)`` binned at
    .9/.7/.5/.3/.1 -> 5..1, below .1 -> 0."""
    for name, value in (("importance", importance), ("utility", utility),
                        ("hours_since_access", hours_since_access)):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise InvalidInputError(f"{name}={shown(value)}: must be a finite number")
    score = 0.4 * importance + 0.3 * utility + 0.3 * math.exp(
        -ESTIMATE_DECAY_PER_HOUR * max(0.0, hours_since_access))
    for q, cut in zip((5, 4, 3, 2, 1), QUALITY_BINS, strict=True):
        if score >= cut - 1e-12:
            return q
    return 0


def due_for_review(rt: Runtime, tenant: str, now: datetime
         ) -> list[tuple[float, str, Any, sm2.SM2State]]:
    """``(SM-2 priority, id, row, state)`` of the enriched, not skipped, not superseded active
    memories due at ``now``, highest priority first, equal priorities (every memory never
    reviewed has the same) in the order they were stored: what :func:`review` takes in
    order, the same in every process (never by id, a random uuid)."""
    with rt.reading() as conn:
        rows = rt.sql.memories.active_rows(conn, tenant, _COLUMNS, enriched=True,
                                           not_state=reeval.SKIPPED, unsuperseded=True,
                                           due_by=to_ts(now))
    ranked: list[tuple[float, str, Any, sm2.SM2State]] = []
    for r in rows:
        state = sm2.SM2State(easiness=float(r.easiness), interval_days=int(r.interval_days),
                             repetitions=int(r.repetitions),
                             next_review=None if r.next_review is None else from_ts(r.next_review),
                             last_quality=int(r.last_quality))
        if sm2.is_due(state, now):
            ranked.append((sm2.priority(state, now), r.id, r, state))
    ranked.sort(key=lambda t: (-t[0], t[2].seq))
    return ranked


def _signals(rt: Runtime, tenant: str, batch: Sequence[tuple[float, str, Any, Any]],
             nowts: float) -> tuple[set[str], dict[str, int]]:
    """Since each memory's last review: reported use, and its best recall rank."""
    ids = [t[1] for t in batch]
    since = {t[1]: (t[2].last_reviewed_at if t[2].last_reviewed_at is not None
                    else float("-inf")) for t in batch}
    used: set[str] = set()
    best_rank: dict[str, int] = {}
    with rt.reading() as conn:
        for mid, at in rt.sql.events.events_since(conn, tenant, ids, "used"):
            if at > since[mid]:
                used.add(mid)
        for mid, rank, at in rt.sql.events.access_ranks(conn, tenant, ids, nowts):
            if at > since[mid]:
                best_rank[mid] = min(best_rank.get(mid, rank), int(rank))
    return used, best_rank


def _quality(r: Any, mid: str, used: set[str], best_rank: dict[str, int], nowts: float
             ) -> tuple[int, str]:
    if mid in used:
        return REACTIVE_USE_QUALITY, "use"
    if mid in best_rank:
        return quality_from_rank(best_rank[mid]), "recall"
    return estimate_quality(importance=float(r.importance), utility=float(r.utility),
                            hours_since_access=max(0.0, nowts - r.accessed_at) / 3600.0), \
        "estimate"


def _review_event(rt: Runtime, tenant: str, mid: str, r: Any, state: sm2.SM2State,
                  new_state: sm2.SM2State, utility: float, q: int, source: str,
                  nowts: float) -> dict[str, Any]:
    nxt = new_state.next_review
    return rt.sql.events.event_row(
        tenant, mid, "reviewed", nowts,
        {"utility": float(r.utility), "interval_days": state.interval_days,
         "repetitions": state.repetitions, "easiness": state.easiness,
         "next_review": state.next_review.isoformat() if state.next_review else None},
        {"quality": q, "source": source, "utility": utility,
         "interval_days": new_state.interval_days, "repetitions": new_state.repetitions,
         "easiness": new_state.easiness,
         "next_review": nxt.isoformat() if nxt else None})


def review(rt: Runtime, *, tenant: str) -> ReviewReport:
    """One SM-2 review pass: enriched (not ``skipped``) active memories that are due, in SM-2
    priority order, at most ``review_batch``.

    Quality comes from real signals since the memory's last review first: reported use (a
    reply echoed it, see :func:`report_use`) counts 5; else recall use from the access log
    (rank 1 -> 5, top-3 -> 4, returned -> 3); only without any signal is it estimated
    (:func:`estimate_quality`). Then the SM-2 and utility updates
    (:func:`mnemonia.lifecycle.review_update`, shared with ``feedback``) and one
    ``reviewed`` event each.
    """
    rt.check_open()
    now = rt.now()
    nowts = to_ts(now)
    ranked = due_for_review(rt, tenant, now)
    batch = ranked[:rt.config.review_batch]
    used, best_rank = _signals(rt, tenant, batch, nowts)
    counts = {"use": 0, "recall": 0, "estimate": 0}
    updates: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for _, mid, r, state in batch:
        q, source = _quality(r, mid, used, best_rank, nowts)
        counts[source] += 1
        new_state, utility, values = review_update(state, float(r.utility), q, now)
        updates.append({"b_id": mid, **values})
        events.append(_review_event(rt, tenant, mid, r, state, new_state, utility, q, source,
                                    nowts))
    if updates:
        with rt.writing() as conn:
            rt.sql.memories.update_each(conn, updates, tuple(k for k in updates[0] if k != "b_id"))
            rt.sql.events.insert_events(conn, events)
    ids = [t[1] for t in batch]
    report = ReviewReport(tenant=tenant, due=len(ranked), reviewed=len(batch),
                          from_use=counts["use"], from_recall=counts["recall"],
                          estimated=counts["estimate"], ids=tuple(ids))
    log.info("review tenant=%s due=%d reviewed=%d from_use=%d from_recall=%d estimated=%d",
             tenant, report.due, report.reviewed, report.from_use, report.from_recall,
             report.estimated, extra={"mnemonia": {"job": "review", **{
                 k: v for k, v in report.as_dict().items() if k != "ids"}}})
    remember(rt, "review", report, tenant)
    return report


# -- reported use -------------------------------------------------------------------------
def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    """Lower-cased content words (stop words out, 3+ letters or any digit), lightly stemmed."""
    return {_stem(w) for w in act.words(text)
            if w not in act.STOP_WORDS and (len(w) >= 3 or any(c.isdigit() for c in w))}


def echoes(reply: str, memory_text: str) -> float:
    """Share of the memory's content words that the reply contains (0 when it has none)."""
    words = content_words(memory_text)
    if not words:
        return 0.0
    return len(words & content_words(reply)) / len(words)


def _check_use(rt: Runtime, tenant: str, reply: Any, recalled_ids: Any) -> list[str]:
    if not isinstance(reply, str):
        raise InvalidInputError(f"reply must be a string, got {type(reply).__name__}")
    if recalled_ids is None:
        return rt.caches.last_recalled(tenant)
    if isinstance(recalled_ids, RecallResult):
        return list(recalled_ids.ids)
    if isinstance(recalled_ids, str) or not isinstance(recalled_ids, Sequence | set | frozenset):
        raise InvalidInputError(
            f"recalled_ids={shown(recalled_ids)}: must be a list of memory ids, a RecallResult "
            "or None (the last recall)")
    ids = list(recalled_ids)
    for mid in ids:
        memory_id(mid, "recalled id")
    return list(dict.fromkeys(ids))


def report_use(rt: Runtime, reply: str, recalled_ids: Sequence[str] | RecallResult | None,
               *, tenant: str) -> list[str]:
    """Record which recalled memories a reply used: those whose content the reply echoes
    (at least half of the memory's content words, and two of them when it has two or more).

    Writes one ``used`` event per used memory with its use cue (the query of ``recalled_ids``
    when it is a RecallResult, else of the last recall in this process that returned the
    memory); the review worker then takes quality 5.
    Ids no longer in the tenant (forgotten meanwhile) are ignored. Returns the used ids.
    """
    rt.check_open()
    ids = _check_use(rt, tenant, reply, recalled_ids)
    reply_words = content_words(reply)
    nowts = to_ts(rt.now())
    used: list[str] = []
    events: list[dict[str, Any]] = []
    with rt.reading() as conn:
        rows = rt.sql.memories.rows(conn, tenant, ids)
    for mid in ids:
        r = rows.get(mid)
        words = content_words(r.text) if r is not None else set()
        if not words:
            continue
        shared = words & reply_words
        share = len(shared) / len(words)
        if share >= ECHO_MIN_SHARE and len(shared) >= min(2, len(words)):
            used.append(mid)
            cue = recalled_ids.query if isinstance(recalled_ids, RecallResult) \
                else rt.caches.query_of(tenant, mid)
            events.append(rt.sql.events.event_row(tenant, mid, "used", nowts, None,
                                                  {"quality": REACTIVE_USE_QUALITY,
                                                   "overlap": round(share, 3),
                                                   **({"query": cue} if cue else {})}))
    if events:
        with rt.writing(Changes(tenant=tenant, uses=True)) as conn:
            rt.sql.events.insert_events(conn, events)
    return used
