"""Re-evaluation ticks (DESIGN section 5): the window since the last successful tick, the heat
formula, candidates, cooldown, per-tenant cap and fairness, promotion (never down), events,
the exact last hour across ticks, the log line, and tenants with intelligence disabled."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

import pytest
from maint_helpers import events, log_access, row, set_rows
from mnemonia import ManualClock, MemoryEngine
from mnemonia import maintenance as mt
from mnemonia.clock import from_ts
from mnemonia.scoring import reevaluation as reeval

LN21 = math.log(21)


def _mems(engine: MemoryEngine, n: int, *, tenant: str = "t", state: str = "skipped",
          prefix: str = "m") -> list[str]:
    items = [{"text": f"{prefix}{i} remembers item{i} in place{i}",
              "id": f"{tenant}-{prefix}{i:04d}"} for i in range(n)]
    ids = [m.id for m in engine.add_many(items, tenant=tenant)]
    set_rows(engine, ids, state=state, enriched_at=None)
    return ids


def _heat(recalls: float, users: int, shares: list[float]) -> float:
    m = sum(shares) / len(shares)
    return 0.5 * min(1.0, math.log1p(recalls) / LN21) + 0.3 * min(1.0, users / 5) + 0.2 * (1 - m)


def test_a_hot_skipped_memory_reaches_immediate_in_one_tick(engine: MemoryEngine,
                                                           clock: ManualClock) -> None:
    (mid,) = _mems(engine, 1)
    for u in range(5):
        log_access(engine, "t", mid, at=clock.now() - timedelta(minutes=5), user=f"u{u}",
                   times=4)
    clock.advance(timedelta(minutes=1))
    report = engine.reevaluate()
    assert (report.scanned, report.memories, report.candidates, report.reevaluated,
            report.promoted) == (20, 1, 1, 1, 1)
    assert row(engine, mid).state == "immediate"
    (ev,) = events(engine, "t", mid, "reevaluation_promoted")
    assert ev.before == {"state": "skipped"}
    assert ev.after == {"state": "immediate", "heat": pytest.approx(1.0)}
    assert row(engine, mid).enriched_at is not None  # immediate: enriched at once
    assert report.promotions[0].old_state == "skipped" and report.enriched == 1


def test_heat_formula_and_the_batched_threshold(engine: MemoryEngine, clock: ManualClock) -> None:
    a, b = _mems(engine, 2)
    now = clock.now()
    log_access(engine, "t", a, at=now, rank=1, k=3, user="u1")
    log_access(engine, "t", a, at=now, rank=3, k=3, user="u2")
    log_access(engine, "t", a, at=now, rank=2, k=5, user="u1")
    log_access(engine, "t", b, at=now, rank=3, k=3)
    engine.reevaluate()
    expected = _heat(3, 2, [0.0, 1.0, 0.25])
    assert 0.35 <= expected < 0.7
    (ev,) = events(engine, "t", a, "reevaluation_promoted")
    assert ev.after == {"state": "batched", "heat": pytest.approx(expected, abs=1e-6)}
    assert row(engine, a).state == "batched" and row(engine, a).enriched_at is None
    assert _heat(1, 0, [1.0]) < 0.35 and row(engine, b).state == "skipped"
    assert engine.enrich(tenant="t").enriched == 1  # batched: enriched at the next sweep
    assert row(engine, a).enriched_at is not None


def test_rank_share_uses_the_k_each_recall_asked_for(engine: MemoryEngine,
                                                     clock: ManualClock) -> None:
    a, b = _mems(engine, 2)
    log_access(engine, "t", a, at=clock.now(), rank=3, k=3, user="x", times=3)  # last of 3
    log_access(engine, "t", b, at=clock.now(), rank=3, k=10, user="x", times=3)  # 3rd of 10
    engine.reevaluate()
    assert _heat(3, 1, [1.0]) < 0.35 <= _heat(3, 1, [2 / 9])
    assert (row(engine, a).state, row(engine, b).state) == ("skipped", "batched")


def test_heat_alone_decides(engine: MemoryEngine, clock: ManualClock) -> None:
    low, high = _mems(engine, 2)
    set_rows(engine, low, importance=0.0)
    set_rows(engine, high, importance=1.0, pinned=True, topic="vip")
    for mid in (low, high):
        log_access(engine, "t", mid, at=clock.now(), user="u", times=2)
    engine.reevaluate()
    e_low = events(engine, "t", low, "reevaluation_promoted")[0].after
    e_high = events(engine, "t", high, "reevaluation_promoted")[0].after
    assert e_low == e_high


def test_never_demoted_and_immediate_is_not_a_candidate(engine: MemoryEngine,
                                                        clock: ManualClock) -> None:
    cold_batched, = _mems(engine, 1, state="batched", prefix="b")
    cold_immediate, = _mems(engine, 1, state="immediate", prefix="i")
    for mid in (cold_batched, cold_immediate):
        log_access(engine, "t", mid, at=clock.now(), rank=5, k=5)  # heat 0.11
    report = engine.reevaluate()
    assert (report.memories, report.candidates, report.promoted) == (2, 1, 0)
    assert row(engine, cold_batched).state == "batched"
    assert row(engine, cold_immediate).state == "immediate"
    assert not events(engine, "t", cold_batched, "reevaluation_promoted")


def test_window_is_since_the_last_successful_tick(engine: MemoryEngine,
                                                  clock: ManualClock) -> None:
    a, b = _mems(engine, 2)
    t0 = clock.now()
    log_access(engine, "t", a, at=t0 - timedelta(hours=2), rank=5, k=5)  # older than an hour
    log_access(engine, "t", a, at=t0 - timedelta(minutes=30), rank=5, k=5)
    first = engine.reevaluate()
    assert first.scanned == 1 and first.window_start == t0 - timedelta(hours=1)
    clock.advance(timedelta(minutes=10))
    log_access(engine, "t", b, at=clock.now() - timedelta(minutes=1), rank=5, k=5)
    second = engine.reevaluate()
    assert second.scanned == 1 and second.window_start == t0
    assert second.memories == 1
    clock.advance(timedelta(minutes=10))
    assert engine.reevaluate().scanned == 0


def test_a_failed_tick_is_read_again(engine: MemoryEngine, clock: ManualClock,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (mid,) = _mems(engine, 1)
    log_access(engine, "t", mid, at=clock.now(), user="u", times=3)

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(reeval, "promote", boom)
    with pytest.raises(RuntimeError):
        engine.reevaluate()
    r = row(engine, mid)
    assert r.last_reevaluated_at is None and r.state == "skipped"
    monkeypatch.undo()
    clock.advance(timedelta(minutes=1))
    report = engine.reevaluate()
    assert report.scanned == 3 and report.promoted == 1


def test_cooldown_of_five_minutes(engine: MemoryEngine, clock: ManualClock) -> None:
    (mid,) = _mems(engine, 1)
    log_access(engine, "t", mid, at=clock.now(), user="u1")
    engine.reevaluate()
    assert row(engine, mid).state == "batched"  # heat 0.374
    clock.advance(timedelta(minutes=2))
    for u in range(5):
        log_access(engine, "t", mid, at=clock.now(), user=f"u{u}", times=4)
    report = engine.reevaluate()
    assert (report.candidates, report.reevaluated, report.promoted) == (1, 0, 0)
    clock.advance(timedelta(minutes=4))  # 6 minutes after its re-evaluation
    log_access(engine, "t", mid, at=clock.now(), user="u1")
    report = engine.reevaluate()
    assert (report.reevaluated, report.promoted) == (1, 1)
    assert row(engine, mid).state == "immediate"  # the 20 recalls still count (the counter)
    assert [e.after["state"] for e in events(engine, "t", mid, "reevaluation_promoted")] == \
        ["batched", "immediate"]  # type: ignore[index]


def test_a_candidate_left_out_by_the_cooldown_waits_for_the_next_tick(
        engine: MemoryEngine, clock: ManualClock) -> None:
    (mid,) = _mems(engine, 1)
    log_access(engine, "t", mid, at=clock.now(), user="u1")
    engine.reevaluate()  # -> batched
    clock.advance(timedelta(minutes=2))
    for u in range(5):
        log_access(engine, "t", mid, at=clock.now(), user=f"u{u}", times=4)
    assert engine.reevaluate().deferred == 1  # hot, but in its cooldown
    clock.advance(timedelta(minutes=10))  # no recall since
    report = engine.reevaluate()
    assert (report.scanned, report.reevaluated, report.promoted) == (0, 1, 1)
    assert row(engine, mid).state == "immediate"
    assert report.deferred == 0


def test_a_waiting_candidate_expires_after_an_hour(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(reevaluation_per_tenant_cap=1)
    a, b = _mems(eng, 2)
    log_access(eng, "t", a, at=clock.now(), user="u", times=3)
    log_access(eng, "t", b, at=clock.now(), user="u", times=2)
    assert eng.reevaluate().deferred == 1
    clock.advance(timedelta(minutes=61))
    report = eng.reevaluate()
    assert (report.candidates, report.promoted) == (0, 0)
    assert row(eng, b).state == "skipped"


def test_the_last_hour_counts_exactly_across_ticks(engine: MemoryEngine,
                                                   clock: ManualClock) -> None:
    """Each tick aggregates a memory's whole last hour (recalls, distinct users, mean rank),
    whichever tick first read the rows; rows older than an hour drop out."""
    (mid,) = _mems(engine, 1)
    t0 = clock.now()
    log_access(engine, "t", mid, at=t0, rank=3, k=3, times=5)  # no users, last place
    assert engine.reevaluate().scanned == 5
    assert row(engine, mid).state == "skipped"  # .5*ln(6)/ln(21) = 0.29
    clock.advance(timedelta(minutes=10))
    log_access(engine, "t", mid, at=clock.now(), rank=3, k=3, user="u1", times=5)
    report = engine.reevaluate()
    assert report.scanned == 5
    ten = reeval.heat(reeval.HeatInputs(recalls=10, users=1, mean_rank_share=1.0))
    assert ten == pytest.approx(_heat(10, 1, [1.0])) and 0.35 <= ten < 0.7
    (ev,) = events(engine, "t", mid, "reevaluation_promoted")
    assert ev.after == {"state": "batched", "heat": pytest.approx(ten, abs=1e-6)}
    clock.advance(timedelta(minutes=55))  # t0 + 65 min: the first five are out of the hour
    log_access(engine, "t", mid, at=clock.now(), rank=1, k=3, user="u2", times=10)
    report = engine.reevaluate()
    assert report.scanned == 10
    last_hour = reeval.HeatInputs(recalls=15, users=2, mean_rank_share=5 / 15)
    assert reeval.heat(last_hour) == pytest.approx(_heat(15, 2, [1.0] * 5 + [0.0] * 10))
    assert row(engine, mid).state == "immediate"
    ev = events(engine, "t", mid, "reevaluation_promoted")[-1]
    assert ev.after == {"state": "immediate",
                        "heat": pytest.approx(reeval.heat(last_hour), abs=1e-6)}


def test_a_recall_written_after_a_tick_of_the_same_instant_is_read_by_the_next(
        engine: MemoryEngine, clock: ManualClock) -> None:
    """The log since the last tick is the rows added since it read the log, whatever their
    time stamps: a recall stamped with the tick's own time (or earlier, written late) is new
    to the next tick."""
    (mid,) = _mems(engine, 1)
    assert engine.reevaluate().scanned == 0  # an idle tick: no row read yet
    log_access(engine, "t", mid, at=clock.now(), times=19)  # heat 0.692
    clock.advance(timedelta(minutes=10))
    assert engine.reevaluate().scanned == 19
    assert row(engine, mid).state == "batched"
    log_access(engine, "t", mid, at=clock.now())  # the same instant, after the tick
    clock.advance(timedelta(minutes=10))
    report = engine.reevaluate()
    assert (report.scanned, report.memories, report.promoted) == (1, 1, 1)
    assert row(engine, mid).state == "immediate"  # twenty in the last hour
    clock.advance(timedelta(minutes=10))
    assert engine.reevaluate().scanned == 0


def test_fairness_one_tenants_thousand_hot_memories(engine: MemoryEngine,
                                                   clock: ManualClock) -> None:
    big = _mems(engine, 1000, tenant="big")
    (small,) = _mems(engine, 1, tenant="small")
    now = clock.now()
    from mnemonia.store import sql as S
    rows = [dict(tenant="big", memory_id=mid, rank=1, k=3, score=0.5, user_id=None,
                 at=now.timestamp())
            for i, mid in enumerate(big) for _ in range(20 if i < 150 else 2)]
    rows += [dict(tenant="small", memory_id=small, rank=1, k=3, score=0.5, user_id="s",
                  at=now.timestamp())] * 20
    with engine.sql.begin() as conn:
        conn.execute(S.access_log.insert(), rows)
    report = engine.reevaluate()
    assert report.memories == 1001 and report.candidates == 1001
    assert report.reevaluated == 100 + 1
    assert row(engine, small).state == "immediate"
    by_tenant: dict[str, list[str]] = {}
    for p in report.promotions:
        by_tenant.setdefault(p.tenant, []).append(p.memory_id)
    assert by_tenant["small"] == [small]
    assert by_tenant["big"] == big[:100]  # hottest first (ties by id), capped at 100
    assert {row(engine, m).state for m in big[:100]} == {"immediate"}
    assert {row(engine, m).state for m in big[100:]} == {"skipped"}
    assert report.deferred == 900
    # the ones the cap left out compete again in the next tick, hottest first
    clock.advance(timedelta(minutes=10))
    nxt = engine.reevaluate()
    assert (nxt.scanned, nxt.candidates, nxt.reevaluated) == (0, 900, 100)
    assert {row(engine, m).state for m in big[100:150]} == {"immediate"}
    assert [p.memory_id for p in nxt.promotions][:50] == big[100:150]
    assert sum(row(engine, m).state == "batched" for m in big[150:]) == 50


def test_per_tenant_cap_is_configurable(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(reevaluation_per_tenant_cap=2)
    ids = _mems(eng, 5)
    for i, mid in enumerate(ids):
        log_access(eng, "t", mid, at=clock.now(), user="u", times=1 + i)
    report = eng.reevaluate()
    assert report.reevaluated == 2
    assert [p.memory_id for p in report.promotions] == [ids[4], ids[3]]  # hottest first


def test_intelligence_disabled_tenants_are_a_noop(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(intelligence_disabled_tenants=("bob",))
    (alice,) = _mems(eng, 1, tenant="alice")
    (bob,) = _mems(eng, 1, tenant="bob")
    for mid, tenant in ((alice, "alice"), (bob, "bob")):
        log_access(eng, tenant, mid, at=clock.now(), user="u", times=10)
    report = eng.reevaluate()
    assert report.disabled_tenants == ("bob",)
    assert (report.scanned, report.promoted) == (10, 1)
    assert row(eng, alice).state == "batched"
    r = row(eng, bob)
    assert (r.state, r.last_reevaluated_at) == ("skipped", None)
    assert not events(eng, "bob", bob, "reevaluation_promoted")


def test_deleted_memories_are_not_promoted(engine: MemoryEngine, clock: ManualClock) -> None:
    (mid,) = _mems(engine, 1)
    engine.forget(mid, tenant="t")
    log_access(engine, "t", mid, at=clock.now(), user="u", times=10)
    report = engine.reevaluate()
    assert (report.scanned, report.candidates, report.promoted) == (10, 0, 0)
    assert row(engine, mid).state == "skipped"


def test_one_structured_log_line(engine: MemoryEngine, clock: ManualClock,
                                 caplog: pytest.LogCaptureFixture) -> None:
    (mid,) = _mems(engine, 1)
    log_access(engine, "t", mid, at=clock.now(), user="u", times=10)
    with caplog.at_level(logging.INFO, logger="mnemonia.maintenance"):
        engine.reevaluate()
    lines = [r for r in caplog.records if r.name == "mnemonia.maintenance"]
    assert len(lines) == 1
    msg = lines[0].getMessage()
    assert msg == "reevaluation tick scanned=10 candidates=1 reevaluated=1 promoted=1"
    data = lines[0].mnemonia  # type: ignore[attr-defined]
    assert {k: data[k] for k in ("scanned", "candidates", "reevaluated", "promoted")} == \
        {"scanned": 10, "candidates": 1, "reevaluated": 1, "promoted": 1}


def test_recall_feeds_reevaluation(engine: MemoryEngine, clock: ManualClock) -> None:
    """End to end: real recalls by several users make a skipped memory immediate."""
    (mid,) = _mems(engine, 1)
    others = _mems(engine, 3, prefix="other")
    for u in range(5):
        for _ in range(4):
            res = engine.recall("m0 remembers item0 in place0", tenant="t", user_id=f"user{u}",
                                k=3, min_activation=0)
            assert res.ids[0] == mid
    report = engine.reevaluate()
    assert row(engine, mid).state == "immediate"
    assert report.scanned == 20 * min(3, 1 + len(others))


def test_an_idle_tick_changes_nothing(engine: MemoryEngine) -> None:
    _mems(engine, 3)
    report = engine.reevaluate()
    assert (report.scanned, report.memories, report.candidates, report.promoted) == (0, 0, 0, 0)


def test_heat_matches_the_scoring_core(engine: MemoryEngine, clock: ManualClock) -> None:
    (mid,) = _mems(engine, 1)
    log_access(engine, "t", mid, at=clock.now(), rank=2, k=4, user="a", times=2)
    log_access(engine, "t", mid, at=clock.now(), rank=1, k=4, user="b")
    engine.reevaluate()
    inputs = reeval.HeatInputs(recalls=3, users=2, mean_rank_share=(1 / 3 + 1 / 3 + 0) / 3)
    (ev,) = events(engine, "t", mid, "reevaluation_promoted")
    assert ev.after["heat"] == pytest.approx(reeval.heat(inputs), abs=1e-6)  # type: ignore[index]


@pytest.mark.parametrize("seed", range(5))
def test_window_aggregation_equals_the_scoring_core(engine: MemoryEngine, clock: ManualClock,
                                                    seed: int) -> None:
    """The tick aggregates in SQL; it must agree with reevaluation.aggregate row for row."""
    import random

    from mnemonia.store import sql as S

    rnd = random.Random(seed)
    now = clock.now()
    rows = []
    for _ in range(400):
        k = rnd.randint(1, 8)
        rows.append(dict(tenant=rnd.choice(["a", "b"]), memory_id=f"m{rnd.randint(0, 30)}",
                         rank=rnd.randint(1, k + 2), k=k, score=0.5,
                         user_id=rnd.choice([None, "u1", "u2", "u3", "u4", "u5", "u6"]),
                         at=(now - timedelta(seconds=rnd.uniform(0, 7200))).timestamp()))
    with engine.sql.begin() as conn:
        conn.execute(S.access_log.insert(), rows)
    start = (now - timedelta(hours=1)).timestamp()
    with engine.sql.connect() as conn:
        scanned, got = mt.window_inputs(engine.sql, conn, start, now.timestamp(), ("b",))
    expected = reeval.aggregate(
        [reeval.AccessRow(memory_id=r["memory_id"], tenant=r["tenant"], user_id=r["user_id"],
                          rank=r["rank"], k=r["k"], at=from_ts(r["at"]))
         for r in rows if r["tenant"] != "b"], now=now)
    assert scanned == sum(v.recalls for v in expected.values())
    assert set(got) == set(expected)
    for mid, inputs in expected.items():
        assert (got[mid].recalls, got[mid].users) == (inputs.recalls, inputs.users)
        assert got[mid].mean_rank_share == pytest.approx(inputs.mean_rank_share, abs=1e-12)


# -- the seed's example under the default background maintenance (issue 33 point 2) --------
OLD_FACT = "Locker code 4512"
"""An old fact the gatekeeper skips (importance 0: g = .3 novelty + .2 * 3/20 tokens = .33)."""


def _old_fact(eng: MemoryEngine) -> str:
    fact = eng.add(OLD_FACT, tenant="t", importance=0.0)
    assert fact.state == "skipped"
    eng.add_many([{"text": "We fly to Lisbon on the ninth of June with the kids"},
                  {"text": "The hotel in Lisbon is close to the old tram line"}], tenant="t")
    return fact.id


def _recall_it(eng: MemoryEngine, clock: ManualClock, mid: str, *, times: int,
               every: timedelta) -> None:
    """``times`` recalls ``every`` apart, the clock advanced between them (so the background
    scheduler ticks when it comes due, as it would); each returns the fact first."""
    for i in range(times):
        if i:
            clock.advance(every)
        assert eng.recall(OLD_FACT, tenant="t").ids[0] == mid


def _next_tick(eng: MemoryEngine, clock: ManualClock) -> None:
    assert eng.scheduler is not None
    ticks = eng.scheduler.runs["reevaluate"]
    while eng.scheduler.runs["reevaluate"] == ticks:
        clock.advance(timedelta(minutes=2))


@pytest.mark.parametrize("offset", [0, 1, 3, 7, 9])
def test_twenty_recalls_in_an_hour_promote_under_the_default_scheduler(
        make_engine, clock: ManualClock, offset: int) -> None:  # type: ignore[no-untyped-def]
    """The seed's headline example: an old fact recalled twenty times in an hour (every two
    minutes, no user, always first: heat exactly .5 + .2 = 0.7) ends ``immediate`` with the
    default background maintenance (a tick every 10 minutes on the engine's clock), wherever
    the ticks fall among the recalls (the first tick comes 10 minutes after open; the recalls
    start ``offset`` minutes after open)."""
    eng = make_engine(maintenance="background")
    assert eng.scheduler is not None and eng.scheduler.running
    mid = _old_fact(eng)
    clock.advance(timedelta(minutes=offset))
    _recall_it(eng, clock, mid, times=20, every=timedelta(minutes=2))
    last_recall = clock.now()
    _next_tick(eng, clock)  # the first tick after the twentieth recall
    assert clock.now() - last_recall <= timedelta(minutes=10)
    assert row(eng, mid).state == "immediate"
    assert row(eng, mid).enriched_at is not None  # immediate: enriched at once
    promoted = events(eng, "t", mid, "reevaluation_promoted")
    assert [(e.before, e.after["state"]) for e in promoted] == [  # type: ignore[index]
        ({"state": "skipped"}, "batched"), ({"state": "batched"}, "immediate")]
    assert promoted[-1].at == clock.now()
    assert promoted[-1].after["heat"] == pytest.approx(0.7)  # type: ignore[index]
    clock.advance(timedelta(hours=3))  # cold again: never demoted
    assert row(eng, mid).state == "immediate"
    assert not eng.scheduler.errors


def test_recalls_spread_over_two_hours_do_not_reach_immediate(
        make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    """The window is the last hour: thirty recalls every four minutes (never more than 15 in
    an hour, heat at most .5*ln(16)/ln(21) + .2 = 0.655) promote to ``batched`` only."""
    eng = make_engine(maintenance="background")
    mid = _old_fact(eng)
    _recall_it(eng, clock, mid, times=30, every=timedelta(minutes=4))
    _next_tick(eng, clock)
    assert row(eng, mid).state == "batched"
    promoted = events(eng, "t", mid, "reevaluation_promoted")
    assert [e.after["state"] for e in promoted] == ["batched"]  # type: ignore[index]
    assert not eng.scheduler.errors


def test_a_manual_tick_in_the_cooldown_delays_the_promotion_to_the_next_tick(
        make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    """The cooldown stays: a manual tick four minutes after a background one leaves the
    memory out (deferred), and the next background tick promotes it on its exact count."""
    eng = make_engine(maintenance="background")
    mid = _old_fact(eng)
    clock.advance(timedelta(minutes=7))  # recalls at 7, 9, ..., 45; ticks at 11, 21, 31, 41
    _recall_it(eng, clock, mid, times=20, every=timedelta(minutes=2))
    report = eng.reevaluate()  # at 45: the memory was re-evaluated at 41
    assert (report.reevaluated, report.deferred) == (0, 1)
    assert row(eng, mid).state == "batched"
    _next_tick(eng, clock)  # at 51: still twenty recalls in the last hour
    assert row(eng, mid).state == "immediate"
    assert events(eng, "t", mid, "reevaluation_promoted")[-1].at == clock.now()


@pytest.mark.parametrize("seed", range(3))
def test_a_tick_aggregates_the_whole_hour_of_the_memories_logged_since_the_last(
        engine: MemoryEngine, clock: ManualClock, seed: int) -> None:
    """What a tick reads (the memories with rows above the last row id it saw) equals the
    scoring core's aggregate of those memories' whole last hour."""
    import random

    import sqlalchemy as sa
    from mnemonia.store import sql as S

    rnd = random.Random(seed)
    now = clock.now()
    with engine.sql.begin() as conn:
        conn.execute(S.access_log.insert(), [dict(
            tenant=rnd.choice(["a", "b"]), memory_id=f"m{rnd.randint(0, 30)}",
            rank=rnd.randint(1, 5), k=rnd.randint(1, 5), score=0.5,
            user_id=rnd.choice([None, "u1", "u2", "u3"]),
            at=(now - timedelta(seconds=rnd.uniform(-600, 7200))).timestamp())
            for _ in range(400)])
    with engine.sql.connect() as conn:
        stored = conn.execute(sa.select(S.access_log)).fetchall()
        after = rnd.randint(0, 300)  # some rows above it (400 inserted)
        got = engine.sql.events.access_window(conn, (now - timedelta(hours=1)).timestamp(),
                                              now.timestamp(), ("b",), after_id=after)
    hour = [r for r in stored if r.tenant != "b"
            and now - timedelta(hours=1) < from_ts(r.at) <= now]
    fresh = [r for r in hour if r.id > after]
    expected = reeval.aggregate(
        [reeval.AccessRow(memory_id=r.memory_id, tenant=r.tenant, user_id=r.user_id,
                          rank=r.rank, k=r.k, at=from_ts(r.at))
         for r in hour if r.memory_id in {f.memory_id for f in fresh}], now=now)
    assert fresh and {g[0] for g in got} == set(expected)
    assert sum(g[4] for g in got) == len(fresh)
    assert max(g[5] or 0 for g in got) == max(r.id for r in fresh)
    for mid, n, users, shares, _, _ in got:
        assert (n, users) == (expected[mid].recalls, expected[mid].users)
        assert shares / n == pytest.approx(expected[mid].mean_rank_share, abs=1e-12)
