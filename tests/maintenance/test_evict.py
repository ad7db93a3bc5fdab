"""Eviction: budget, priority order, ties, protection, automatic mode, events, restore."""

from __future__ import annotations

from datetime import timedelta

import pytest
from maint_helpers import events, row, set_rows
from mnemonia import ManualClock, MemoryEngine
from mnemonia.errors import InvalidInputError
from mnemonia.scoring import priority as prio


def _add(engine: MemoryEngine, n: int, tenant: str = "t", **extra: object) -> list[str]:
    # distinct word sets, so that consolidation (run by maintain) finds nothing to merge
    items = [{"text": f"note{i} about subject{i} with detail{i} and remark{i}",
              "importance": round(0.05 + 0.8 * ((i * 37) % 100) / 100, 3), **extra}
             for i in range(n)]
    ids = [m.id for m in engine.add_many(items, tenant=tenant)]
    # one state everywhere, so that only priority decides (immediate is protected)
    set_rows(engine, ids, state="batched")
    return ids


def _priorities(engine: MemoryEngine, tenant: str) -> dict[str, float]:
    now = engine.clock.now()
    return {m.id: prio.priority(importance=m.importance, created_at=m.created_at,
                                accessed_at=m.accessed_at, access_count=m.access_count,
                                stability=m.stability, now=now)
            for m in engine.list(tenant=tenant)}


def test_evicts_the_budget_of_lowest_priority(engine: MemoryEngine, clock: ManualClock) -> None:
    _add(engine, 60)
    clock.advance(timedelta(hours=5))
    before = _priorities(engine, "t")
    report = engine.evict(tenant="t")
    expected = sorted(before, key=lambda i: (before[i], i))[:3]  # max(1, int(60 * 0.05)) = 3
    assert report.active == 60 and report.allowed == 3 and report.evicted == 3
    assert sorted(report.ids) == sorted(expected)
    assert engine.stats("t")["active"] == 57
    for mid in report.ids:
        assert engine.get(mid, tenant="t").deleted
        (ev,) = events(engine, "t", mid, "evicted")
        assert ev.before["deleted_at"] is None and ev.after["reason"] == "budget"


def test_evicts_at_least_one(engine: MemoryEngine) -> None:
    _add(engine, 3)
    assert engine.evict(tenant="t").evicted == 1  # int(3 * 0.05) = 0 -> max(1, 0)


def test_budget_is_configurable(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_budget=0.25)
    _add(eng, 20)
    assert eng.evict(tenant="t").evicted == 5


def test_empty_tenant_evicts_nothing(engine: MemoryEngine) -> None:
    report = engine.evict(tenant="nobody")
    assert (report.active, report.evicted) == (0, 0)


def test_evicted_memories_leave_recall(engine: MemoryEngine) -> None:
    low = engine.add("the blue heron nests by the river", tenant="t", importance=0.0)
    engine.add_many([{"text": f"an important fact number {i}", "importance": 0.8}
                     for i in range(5)], tenant="t")
    set_rows(engine, [low.id], state="batched")
    assert engine.evict(tenant="t").ids == (low.id,)
    res = engine.recall("blue heron river", tenant="t", min_activation=0, k=10)
    assert low.id not in res.ids


def test_ties_go_to_the_older_access(engine: MemoryEngine, clock: ManualClock) -> None:
    # importance 0: retention is 0 whatever accessed_at says, so the priorities tie exactly
    ids = [m.id for m in engine.add_many(
        [{"text": f"identical weight memory {i}", "importance": 0.0} for i in range(4)],
        tenant="t")]
    set_rows(engine, ids, state="batched")
    start = clock.now()
    for offset, mid in zip((3, 1, 2, 4), ids, strict=True):
        set_rows(engine, [mid], accessed_at=start - timedelta(hours=offset))
    assert len(set(_priorities(engine, "t").values())) == 1
    assert engine.evict(tenant="t").ids == (ids[3],)  # accessed 4 h ago: the oldest access


def test_protected_memories_are_never_evicted(engine: MemoryEngine) -> None:
    ids = _add(engine, 12)
    vip, pinned, hot = ids[0], ids[1], ids[2]
    set_rows(engine, ids, importance=0.0)  # all equally unimportant...
    set_rows(engine, [vip], importance=0.95)
    set_rows(engine, [pinned], pinned=True)
    set_rows(engine, [hot], state="immediate")
    for _ in range(20):
        engine.evict(tenant="t")
    survivors = {m.id for m in engine.list(tenant="t")}
    assert survivors == {vip, pinned, hot}
    report = engine.evict(tenant="t")
    assert report.evicted == 0 and report.protected == 3 and report.allowed == 1


def test_importance_exactly_090_is_not_protected(engine: MemoryEngine) -> None:
    ids = _add(engine, 2)
    set_rows(engine, ids, importance=0.9)
    assert engine.evict(tenant="t").evicted == 1


def test_automatic_eviction_only_over_max_memories(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(max_memories=30)
    _add(eng, 40)
    sizes = []
    for _ in range(12):
        report = eng.maintain(tenant="t").tenants[0].eviction
        sizes.append((report.active, report.evicted, report.reason))
    # at most the budget per run (max(1, int(active * 0.05))), never below the limit
    for active, evicted, reason in sizes:
        if active > 30:
            assert reason == "over_max_memories"
            assert evicted == min(max(1, int(active * 0.05)), active - 30)
        else:
            assert (evicted, reason) == (0, "not_over_max_memories")
    assert sizes[0] == (40, 2, "over_max_memories")
    assert [s[0] for s in sizes] == [40, 38, 37, 36, 35, 34, 33, 32, 31, 30, 30, 30]
    assert eng.stats("t")["active"] == 30


def test_automatic_eviction_stops_exactly_at_the_limit(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(max_memories=39, eviction_budget=0.1)
    _add(eng, 40)
    report = eng.evict(tenant="t", force=False)
    assert (report.allowed, report.evicted) == (1, 1)  # budget 4, but only 1 over


def test_without_max_memories_automatic_maintenance_never_evicts(engine: MemoryEngine) -> None:
    _add(engine, 40)
    report = engine.maintain(tenant="t")
    assert report.tenants[0].eviction.evicted == 0
    assert engine.stats("t")["active"] == 40
    assert engine.evict(tenant="t").evicted == 2  # an explicit run still evicts the budget


def test_restore_brings_a_memory_back_whole(engine: MemoryEngine, clock: ManualClock) -> None:
    a = engine.add("Caroline adopted a grey cat named Pixel", tenant="t", importance=0.3,
                   entities=["person:caroline"], metadata={"source": "chat"}, topic="pets")
    b = engine.add("Pixel the cat likes tuna", tenant="t", importance=0.8)
    engine.relate(a.id, b.id, "related_to", tenant="t", strength=0.7)
    engine.feedback(a.id, 4, tenant="t")
    engine.recall("grey cat", tenant="t", min_activation=0)
    set_rows(engine, [a.id, b.id], state="batched")
    set_rows(engine, [b.id], pinned=True)
    before = engine.get(a.id, tenant="t")
    rels_before = engine.relations(a.id, tenant="t")
    clock.advance(timedelta(hours=2))
    assert engine.evict(tenant="t").ids == (a.id,)
    assert engine.get(a.id, tenant="t").deleted
    restored = engine.restore(a.id, tenant="t")
    assert restored == before
    assert engine.relations(a.id, tenant="t") == rels_before
    assert [e.event for e in engine.history(a.id, tenant="t")][-2:] == ["evicted", "restored"]
    assert a.id in engine.recall("grey cat Pixel", tenant="t", min_activation=0, k=5).ids
    assert row(engine, a.id).deleted_at is None


def test_bad_force_is_refused(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInputError, match="force"):
        engine.evict(tenant="t", force="yes")  # type: ignore[arg-type]
