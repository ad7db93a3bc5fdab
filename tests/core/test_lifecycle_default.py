"""The shipped default (``lifecycle`` mode): use lifts a memory, time alone buries nothing.

Through the public API only, on the hashing embedder and a ManualClock.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidInputError
from mnemonia.scoring.modes import LifecyclePrior

KEY = "The spare key is kept under the blue flower pot by the door"


def _twins(engine: MemoryEngine) -> tuple[str, str]:
    a = engine.add(KEY, tenant="home", metadata={"copy": 1}).id
    b = engine.add(KEY, tenant="home", metadata={"copy": 2}).id
    return a, b


def _order(engine: MemoryEngine, query: str) -> list[str]:
    res = engine.recall(query, tenant="home", k=2, min_activation=0, touch=False)
    return res.ids


def test_shipped_default_is_the_lifecycle_mode() -> None:
    assert MnemoniaConfig().default_mode == "lifecycle"


def test_good_feedback_lifts_a_memory_above_its_equal(engine: MemoryEngine) -> None:
    a, b = _twins(engine)
    query = "where is the spare key"
    first, second = _order(engine, query)
    assert {first, second} == {a, b}
    res = engine.recall(query, tenant="home", k=2, min_activation=0)  # touches both
    assert res.memories[0].score == pytest.approx(res.memories[1].score, abs=1e-9)
    engine.feedback(second, 5, tenant="home")
    assert _order(engine, query) == [second, first]
    hit = engine.recall(query, tenant="home", k=1, min_activation=0, touch=False).memories[0]
    assert hit.explanation.uses == 1
    assert hit.score > res.memories[0].score


def test_reported_use_lifts_the_memory_the_reply_echoed(engine: MemoryEngine) -> None:
    a, b = _twins(engine)
    query = "where do we keep the spare key"
    res = engine.recall(query, tenant="home", k=2, min_activation=0)
    second = res.ids[1]
    # the reply echoes the memory: both copies are echoed, so report only the second
    used = engine.report_use("It is under the blue flower pot by the door.", [second],
                             tenant="home")
    assert used == [second]
    assert _order(engine, query)[0] == second
    # None reports against the last recall: both echoed, both used once -> tie by id again
    engine.recall(query, tenant="home", k=2, min_activation=0)
    assert sorted(engine.report_use("the spare key is under the blue flower pot", None,
                                    tenant="home")) == sorted([a, b])


def test_bad_feedback_lowers_a_memory_below_its_equal(engine: MemoryEngine) -> None:
    _twins(engine)
    query = "where is the spare key"
    first, second = _order(engine, query)
    engine.feedback(first, 1, tenant="home")
    assert _order(engine, query) == [second, first]


def test_a_use_counts_for_questions_like_the_one_it_answered_and_only_there(
        engine: MemoryEngine) -> None:
    # a lift for use everywhere moved used memories above the evidence of questions they did
    # not answer (LoCoMo in use, issue 37): the shipped prior lifts where the cue matches
    _, b = _twins(engine)
    asked = "where is the spare key kept"
    engine.recall(asked, tenant="home", k=2, min_activation=0)
    engine.feedback(b, 5, tenant="home")  # the cue is the recall that returned it
    same = engine.recall(asked, tenant="home", k=2, min_activation=0, touch=False).memories
    other = engine.recall("blue flower pot", tenant="home", k=2, min_activation=0,
                          touch=False).memories
    lift_same = same[0].score / same[1].score
    lift_other = max(other[0].score, other[1].score) / min(other[0].score, other[1].score)
    assert same[0].memory.id == b
    assert lift_same == pytest.approx(1.3, rel=1e-3)  # cue cosine 1: the full cue gain
    assert lift_other == pytest.approx(1.0, abs=1e-9)
    events = [e for e in engine.history(b, tenant="home") if e.event == "feedback"]
    assert events[-1].after is not None and events[-1].after["query"] == asked


def test_half_a_year_of_other_use_does_not_bury_the_only_match(tmp_path: Path) -> None:
    clock = ManualClock()
    with MemoryEngine.open(tmp_path / "m", embedder=HashingEmbedder(), clock=clock,
                           maintenance="background") as engine:
        only = engine.add("Dana's passport number ends in 7731", tenant="t",
                          importance=0.3).id
        chores = [engine.add(f"Chore {i}: water the {plant} plants on the balcony",
                             tenant="t").id
                  for i, plant in enumerate(["tomato", "basil", "mint", "chili", "fern"])]
        for day in range(180):
            clock.advance(timedelta(days=1))  # the background jobs run as the clock moves
            res = engine.recall("which plants need water on the balcony", tenant="t", k=3)
            for mid in res.ids:
                engine.feedback(mid, 5, tenant="t")
            if day % 30 == 0:
                assert engine.scheduler is not None
        assert engine.scheduler is not None and engine.scheduler.runs["review"] > 0
        hits = engine.recall("what does Dana's passport number end in", tenant="t", k=3)
        assert hits.ids[0] == only
        assert set(hits.ids[1:]) <= set(chores)


def test_lifecycle_prior_is_bounded_and_checked() -> None:
    p = LifecyclePrior()
    assert (p.use_gain, p.cue_gain, p.cue_threshold, p.fail_loss) == (0.0, 0.3, 0.7, 0.3)
    assert p.prior() == 1.0
    assert p.prior(uses=100) == 1.0  # use without a matching cue lifts nothing
    assert p.prior(uses=1, cue=0.85) == pytest.approx(1.15)
    assert p.prior(uses=100, cue=1.0) == pytest.approx(p.ceiling, rel=1e-6) == 1.3
    assert 1.0 < LifecyclePrior(use_gain=0.1).prior(uses=100) <= 1.1
    assert 1.0 - p.fail_loss <= p.prior(fails=100) < 1.0
    with pytest.raises(InvalidInputError, match="use_gain=-1"):
        LifecyclePrior(use_gain=-1)
    with pytest.raises(InvalidInputError, match="fail_loss=1"):
        LifecyclePrior(fail_loss=1.0)
    with pytest.raises(InvalidInputError, match="uses"):
        p.prior(uses=-1)


def test_eviction_takes_unused_memories_before_used_ones(engine: MemoryEngine) -> None:
    used = engine.add("The wifi password is kiwi-42", tenant="home", importance=0.1).id
    low = engine.add("The bins go out on Tuesday", tenant="home", importance=0.4).id
    engine.add("The boiler was serviced in October", tenant="home", importance=0.6)
    engine.feedback(used, 5, tenant="home")
    report = engine.evict(tenant="home")
    assert report.ids == (low,)  # the used one has the lowest priority but stays
    assert engine.get(used, tenant="home").deleted_at is None


def test_reported_use_keeps_the_query_of_the_recall_it_answers(engine: MemoryEngine) -> None:
    a, _ = _twins(engine)
    first = engine.recall("where is the spare key", tenant="home", k=2, min_activation=0)
    engine.recall("blue flower pot by the door", tenant="home", k=2, min_activation=0)
    engine.report_use("under the blue flower pot by the door", first, tenant="home")
    used = [e for e in engine.history(a, tenant="home") if e.event == "used"]
    assert used and used[-1].after is not None
    assert used[-1].after["query"] == "where is the spare key"
