"""The SM-2 review worker: who is due, in what order, how many, and where quality comes from
(reported use, recall ranks, the estimate); plus reporting use from a reply."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from maint_helpers import events, set_rows
from mnemonia import ManualClock, MemoryEngine
from mnemonia import maintenance as mt
from mnemonia.errors import InvalidInputError
from mnemonia.scoring import sm2

TEXTS = [
    "Caroline moved to Lisbon in May for a new design job",
    "Melanie paints sunsets over the lake on weekends",
    "The quarterly budget review is due on the third Friday",
    "Jon keeps his climbing gear in the blue locker at the gym",
    "Our wifi password changes every month on the first",
    "The cat refuses any food except salmon pate",
]


def _enriched(engine: MemoryEngine, texts: list[str] = TEXTS, tenant: str = "t",
              **extra: object) -> list[str]:
    ids = [m.id for m in engine.add_many([{"text": t, **extra} for t in texts], tenant=tenant)]
    set_rows(engine, ids, state="batched", enriched_at=None)
    assert engine.enrich(tenant=tenant).enriched == len(ids)
    return ids


def _reviewed(engine: MemoryEngine, tenant: str, mid: str) -> dict[str, object]:
    (ev,) = events(engine, tenant, mid, "reviewed")[-1:]
    assert ev.after is not None
    return ev.after


def test_due_memories_in_sm2_priority_order_at_most_review_batch(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(review_batch=3)
    ids = _enriched(eng, TEXTS[:5])
    now = eng.clock.now()
    set_rows(eng, ids[1], easiness=1.3)
    set_rows(eng, ids[2], next_review=now - timedelta(days=10), repetitions=2, interval_days=6)
    set_rows(eng, ids[3], next_review=now + timedelta(days=1), repetitions=1, interval_days=1)
    set_rows(eng, ids[4], next_review=now - timedelta(days=1), repetitions=10, interval_days=30)
    due = [m for m in (eng.get(i, tenant="t") for i in ids) if sm2.is_due(m.sm2, now)]
    expected = [m.id for m in sorted(due, key=lambda m: (-sm2.priority(m.sm2, now), m.id))][:3]
    report = eng.review(tenant="t")
    assert (report.due, report.reviewed) == (4, 3)
    assert list(report.ids) == expected == [ids[1], ids[2], ids[0]]
    assert not events(eng, "t", ids[3], "reviewed")  # not due
    assert not events(eng, "t", ids[4], "reviewed")  # due, but over the batch


def test_only_enriched_active_memories_are_reviewed(engine: MemoryEngine) -> None:
    ids = [m.id for m in engine.add_many([{"text": t} for t in TEXTS], tenant="t")]
    set_rows(engine, ids, state="batched", enriched_at=None)
    set_rows(engine, ids[0], state="skipped")
    engine.enrich(tenant="t")
    set_rows(engine, ids[1], enriched_at=None)  # batched, waiting for the sweep
    engine.forget(ids[2], tenant="t")
    engine.supersede(ids[3], ids[4], tenant="t")
    report = engine.review(tenant="t")
    assert set(report.ids) == {ids[4], ids[5]}
    assert engine.review(tenant="other").reviewed == 0


def test_a_review_is_one_sm2_and_utility_update(engine: MemoryEngine) -> None:
    (mid,) = _enriched(engine, TEXTS[:1], importance=1.0)
    set_rows(engine, mid, utility=1.0)
    now = engine.clock.now()
    engine.review(tenant="t")  # estimate: .4 + .3 + .3*exp(0) = 1.0 -> quality 5
    mem = engine.get(mid, tenant="t")
    assert (mem.sm2.interval_days, mem.sm2.repetitions, mem.sm2.last_quality) == (1, 1, 5)
    assert mem.sm2.easiness == 2.5 and mem.sm2.next_review == now + timedelta(days=1)
    assert mem.utility == 1.0  # clamped
    after = _reviewed(engine, "t", mid)
    assert after["quality"] == 5 and after["source"] == "estimate"
    assert after["interval_days"] == 1
    assert engine.review(tenant="t").reviewed == 0  # not due again for a day


def test_quality_from_recall_ranks(engine: MemoryEngine, clock: ManualClock) -> None:
    ids = _enriched(engine)
    set_rows(engine, ids, importance=0.0, utility=0.0)  # the estimate would say 0..1
    clock.advance(timedelta(days=30))
    res = engine.recall("Caroline Lisbon design job, Melanie paints, budget review", tenant="t",
                        k=5, min_activation=0)
    assert len(res.ids) == 5
    rank = {mid: i + 1 for i, mid in enumerate(res.ids)}
    report = engine.review(tenant="t")
    assert report.from_recall == 5 and report.estimated == 1
    for mid in ids:
        after = _reviewed(engine, "t", mid)
        if mid in rank:
            expected = 5 if rank[mid] == 1 else 4 if rank[mid] <= 3 else 3
            assert (after["quality"], after["source"]) == (expected, "recall")
        else:
            assert (after["quality"], after["source"]) == (0, "estimate")


def test_only_use_since_the_last_review_counts(engine: MemoryEngine, clock: ManualClock) -> None:
    (mid,) = _enriched(engine, TEXTS[:1])
    set_rows(engine, mid, importance=0.0, utility=0.0)
    engine.recall("Caroline Lisbon", tenant="t", k=1, min_activation=0)
    engine.review(tenant="t")
    assert _reviewed(engine, "t", mid)["source"] == "recall"
    clock.advance(timedelta(days=2))  # due again, no recall since
    engine.review(tenant="t")
    assert _reviewed(engine, "t", mid)["source"] == "estimate"


def test_reported_use_comes_first(engine: MemoryEngine) -> None:
    ids = _enriched(engine, TEXTS[:3])
    set_rows(engine, ids, importance=0.0, utility=0.0)
    res = engine.recall("Where does Caroline work?", tenant="t", k=3, min_activation=0)
    used = engine.report_use("Caroline moved to Lisbon in May; the design job is new.",
                             res.ids, tenant="t")
    assert used == [ids[0]]
    engine.review(tenant="t")
    after = _reviewed(engine, "t", ids[0])
    assert (after["quality"], after["source"]) == (5, "use")
    assert _reviewed(engine, "t", ids[1])["source"] == "recall"


def test_feedback_is_itself_a_review(engine: MemoryEngine) -> None:
    ids = _enriched(engine, TEXTS[:2])
    engine.feedback(ids[0], 4, tenant="t")
    assert engine.review(tenant="t").ids == (ids[1],)


@pytest.mark.parametrize(("importance", "utility", "hours", "quality"), [
    (1.0, 1.0, 0.0, 5),     # 1.0
    (0.75, 1.0, 0.0, 5),    # 0.9 exactly
    (0.5, 0.5, 0.0, 3),     # 0.65
    (1.0, 0.0, 0.0, 4),     # 0.7
    (0.0, 0.0, 0.0, 2),     # 0.3
    (0.0, 0.0, 24.0, 0),    # 0.3 * exp(-1.2) = 0.0904
    (0.0, 0.0, 2.0, 1),     # 0.3 * exp(-0.1) = 0.2715
    (0.0, 0.0, 1000.0, 0),  # ~0
])
def test_estimated_quality(importance: float, utility: float, hours: float,
                           quality: int) -> None:
    score = 0.4 * importance + 0.3 * utility + 0.3 * math.exp(-0.05 * hours)
    expected = next((q for q, cut in zip((5, 4, 3, 2, 1), (.9, .7, .5, .3, .1), strict=True)
                     if score >= cut - 1e-12), 0)
    got = mt.estimate_quality(importance=importance, utility=utility, hours_since_access=hours)
    assert got == expected == quality


def test_estimate_uses_hours_since_access(engine: MemoryEngine, clock: ManualClock) -> None:
    (mid,) = _enriched(engine, TEXTS[:1])
    set_rows(engine, mid, importance=0.5, utility=0.5)  # .2 + .15 + .3*exp(-.05h)
    clock.advance(timedelta(hours=10))  # .35 + .3*0.6065 = .532 -> 3
    engine.review(tenant="t")
    assert _reviewed(engine, "t", mid)["quality"] == 3


@pytest.mark.parametrize(("rank", "quality"), [(1, 5), (2, 4), (3, 4), (4, 3), (20, 3)])
def test_quality_from_rank(rank: int, quality: int) -> None:
    assert mt.quality_from_rank(rank) == quality


def test_bad_rank_and_estimate_inputs() -> None:
    with pytest.raises(InvalidInputError):
        mt.quality_from_rank(0)
    with pytest.raises(InvalidInputError):
        mt.estimate_quality(importance=float("nan"), utility=0.5, hours_since_access=1)


# -- reported use ------------------------------------------------------------------------
def test_a_reply_that_echoes_a_memory_uses_it(engine: MemoryEngine) -> None:
    ids = _enriched(engine, TEXTS[:4])
    reply = ("Since Melanie paints sunsets at the lake on weekends, maybe gift her brushes. "
             "Also, Jon's gear is in the blue locker.")
    used = engine.report_use(reply, ids, tenant="t")
    assert used == [ids[1], ids[3]]
    (ev,) = events(engine, "t", ids[1], "used")
    assert ev.after is not None and ev.after["quality"] == 5
    assert not events(engine, "t", ids[0], "used")


def test_an_unrelated_reply_uses_nothing(engine: MemoryEngine) -> None:
    ids = _enriched(engine, TEXTS[:3])
    assert engine.report_use("Sure, here is a haiku about autumn leaves.", ids, tenant="t") == []
    assert engine.report_use("", ids, tenant="t") == []


def test_report_use_ignores_unknown_ids_and_checks_input(engine: MemoryEngine) -> None:
    ids = _enriched(engine, TEXTS[:1])
    other = engine.add("Caroline moved to Lisbon in May for a new design job", tenant="u")
    reply = "Caroline moved to Lisbon for the design job."
    assert engine.report_use(reply, [*ids, "missing", other.id], tenant="t") == ids
    with pytest.raises(InvalidInputError):
        engine.report_use(reply, ids[0], tenant="t")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        engine.report_use(None, ids, tenant="t")  # type: ignore[arg-type]


def test_echo_share() -> None:
    assert mt.echoes("I made tea because you prefer tea over coffee",
                     "Alice prefers tea over coffee") == pytest.approx(3 / 4)
    assert mt.echoes("anything", "the and of") == 0.0
