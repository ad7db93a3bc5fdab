"""Eviction orders (issue 37): ``informative`` (never used first, then skipped, then the least
information), ``unused_first`` and the seed's ``composite``, selected by ``eviction_policy``."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from maint_helpers import events, set_rows
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.clock import to_ts
from mnemonia.errors import InvalidConfigError
from mnemonia.maintenance.evict import eviction_order
from mnemonia.ranking import information_array
from mnemonia.scoring import priority as prio

CHAT = ["haha nice!", "ok, see you then", "lol yes", "good morning to you"]
FACTS = ["Caroline adopted a grey cat named Pixel from the Lisbon shelter last spring",
         "Melanie signed up for a pottery class at the community centre on Thursdays",
         "The quarterly budget review moved to the second week of March in Berlin",
         "Jon opened a dance studio downtown after losing his banking job"]


def _store(engine: MemoryEngine) -> dict[str, str]:
    ids = {m.text: m.id for m in engine.add_many(
        [{"text": t} for t in [*FACTS, *CHAT]], tenant="t")}
    set_rows(engine, list(ids.values()), state="batched")  # only the policy decides
    return ids


def test_informative_takes_chit_chat_before_facts(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="informative", eviction_budget=0.5)
    ids = _store(eng)
    clock.advance(timedelta(days=2))
    report = eng.evict(tenant="t")
    assert report.evicted == 4
    assert sorted(report.ids) == sorted(ids[t] for t in CHAT)
    assert {m.text for m in eng.list(tenant="t")} == set(FACTS)


def test_informative_keeps_what_was_used_and_drops_what_was_skipped(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="informative")
    ids = _store(eng)
    eng.feedback(ids["lol yes"], 5, tenant="t")  # a use: goes only when no unused one is left
    set_rows(eng, ids[FACTS[0]], state="skipped")  # the gatekeeper judged it of little worth
    order = [c.id for c in eviction_order(eng.runtime, tenant="t", limit=8)[0]]
    assert order[0] == ids[FACTS[0]]
    assert order[-1] == ids["lol yes"]
    assert set(order[1:4]) == {ids[t] for t in CHAT if t != "lol yes"}


def test_importance_weighs_information(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="informative")
    ids = _store(eng)
    set_rows(eng, list(ids.values()), importance=0.8)
    set_rows(eng, ids[FACTS[1]], importance=0.05)  # 7 content words * .05 < 2 * .8
    (first,) = eng.evict(tenant="t").ids
    assert first == ids[FACTS[1]]


def test_composite_is_the_seed_priority_whatever_the_use(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="composite")
    ids = _store(eng)
    set_rows(eng, list(ids.values()), importance=0.6)
    set_rows(eng, ids[FACTS[2]], importance=0.1)
    eng.feedback(ids[FACTS[2]], 5, tenant="t")
    clock.advance(timedelta(hours=3))
    now = clock.now()
    prios = {m.id: prio.priority(importance=m.importance, created_at=m.created_at,
                                 accessed_at=m.accessed_at, access_count=m.access_count,
                                 stability=m.stability, now=now)
             for m in eng.list(tenant="t")}
    assert eng.evict(tenant="t").ids == (min(prios, key=prios.__getitem__),) == (ids[FACTS[2]],)
    # unused_first would have kept the used memory
    other = make_engine("other", eviction_policy="unused_first")
    ids2 = _store(other)
    set_rows(other, list(ids2.values()), importance=0.6)
    set_rows(other, ids2[FACTS[2]], importance=0.1)
    other.feedback(ids2[FACTS[2]], 5, tenant="t")
    assert other.evict(tenant="t").ids != (ids2[FACTS[2]],)


def test_the_evicted_event_keeps_the_policy_and_its_signals(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="informative")
    ids = _store(eng)
    (gone,) = eng.evict(tenant="t").ids
    (ev,) = events(eng, "t", gone, "evicted")
    assert ev.after["policy"] == "informative"
    assert ev.before["uses"] == 0 and ev.before["state"] == "batched"
    assert ev.before["content_words"] == prio.content_words(
        next(t for t, i in ids.items() if i == gone))
    assert ev.before["information"] == pytest.approx(0.5 * ev.before["content_words"] * 2.0)


def test_automatic_eviction_follows_the_policy_down_to_the_limit(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="informative", max_memories=4, eviction_budget=0.25)
    _store(eng)
    while eng.evict(tenant="t", force=False).evicted:
        pass
    assert {m.text for m in eng.list(tenant="t")} == set(FACTS)


def test_information_array_agrees_with_the_pure_function(engine: MemoryEngine,
                                                         clock: ManualClock) -> None:
    rng = np.random.default_rng(3)
    now = clock.now()
    created = [now - timedelta(days=float(d)) for d in rng.uniform(0, 400, 50)]
    imp = [float(x) for x in rng.uniform(0, 1, 50)]
    words = np.asarray(rng.integers(0, 60, 50))
    cols = {"importance": tuple(imp), "created_at": tuple(to_ts(c) for c in created)}
    got = information_array(cols, words, to_ts(now))
    want = [prio.information(importance=i, content_words=int(w), created_at=c, now=now)
            for i, w, c in zip(imp, words, created, strict=True)]
    assert np.allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("bad", ["lru", "Informative", ""])
def test_a_bad_policy_is_refused_naming_the_value_and_the_allowed_ones(bad: str) -> None:
    for make in (lambda: MnemoniaConfig(eviction_policy=bad),
                 lambda: MnemoniaConfig.load(env={"MNEMONIA_EVICTION_POLICY": bad})):
        with pytest.raises(InvalidConfigError) as err:
            make()
        assert f"eviction_policy={bad!r}" in str(err.value) or "MNEMONIA_EVICTION_POLICY" in str(
            err.value)
        assert "one of informative, unused_first, composite" in str(err.value)


def test_every_policy_is_selectable(make_engine) -> None:  # type: ignore[no-untyped-def]
    for policy in prio.EVICTION_POLICIES:
        eng = make_engine(f"s-{policy}", eviction_policy=policy)
        _store(eng)
        assert eng.config.eviction_policy == policy
        assert eng.evict(tenant="t").evicted == 1
