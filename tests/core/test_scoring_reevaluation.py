"""Gatekeeper, heat and promotion."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import InvalidImportanceError, InvalidInputError, NaiveDatetimeError
from mnemonia.scoring import reevaluation as rv

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
PROPS = settings(max_examples=200, deadline=None)


def test_states_are_ordered() -> None:
    assert rv.STATES == ("skipped", "batched", "immediate")
    assert [rv.state_rank(s) for s in rv.STATES] == [0, 1, 2]
    with pytest.raises(InvalidInputError, match="skipped, batched, immediate"):
        rv.state_rank("hot")


def test_gatekeeper_score_and_state() -> None:
    g = rv.gatekeeper_score(importance=0.8, novelty=0.5, distinct_tokens=10)
    assert g == pytest.approx(0.4 + 0.15 + 0.1)
    assert rv.gatekeeper_state(g) == "batched"
    assert rv.gatekeeper_score(importance=1.0, novelty=1.7, distinct_tokens=50) == 1.0
    assert rv.gatekeeper_score(importance=0.0, novelty=-0.3, distinct_tokens=0) == 0.0
    assert rv.gatekeeper_state(0.7) == "immediate"
    assert rv.gatekeeper_state(0.35) == "batched"
    assert rv.gatekeeper_state(0.3499) == "skipped"


def test_gatekeeper_rejects_bad_input() -> None:
    with pytest.raises(InvalidImportanceError):
        rv.gatekeeper_score(importance=float("nan"), novelty=0.5, distinct_tokens=3)
    with pytest.raises(InvalidInputError):
        rv.gatekeeper_score(importance=0.5, novelty=0.5, distinct_tokens=-1)
    with pytest.raises(InvalidInputError, match="batch_threshold"):
        rv.gatekeeper_state(0.5, immediate_threshold=0.3, batch_threshold=0.6)


def row(mid: str, *, user: str | None = "u1", rank: int = 1, k: int = 3,
        minutes_ago: float = 1, tenant: str = "t") -> rv.AccessRow:
    return rv.AccessRow(memory_id=mid, tenant=tenant, user_id=user, rank=rank, k=k,
                        at=NOW - timedelta(minutes=minutes_ago))


def test_aggregate_window_users_and_rank_share() -> None:
    rows = [
        row("a", user="u1", rank=1, k=3),
        row("a", user="u2", rank=3, k=3),
        row("a", user=None, rank=2, k=5),
        row("a", user="u1", rank=1, k=1),
        row("a", minutes_ago=60),  # exactly one window ago: outside (now - window, now]
        row("a", minutes_ago=-1),  # in the future: outside
        row("b", user="u9", rank=1, k=10, minutes_ago=0),  # exactly now: inside
    ]
    result = rv.aggregate(rows, now=NOW)
    assert result["a"] == rv.HeatInputs(recalls=4, users=2,
                                        mean_rank_share=(0 + 1 + 0.25 + 0) / 4)
    assert result["b"] == rv.HeatInputs(recalls=1, users=1, mean_rank_share=0.0)
    assert rv.aggregate(rows, now=NOW, window=timedelta(seconds=30))["b"].recalls == 1
    assert "a" not in rv.aggregate(rows, now=NOW, window=timedelta(seconds=30))


def test_heat_hand_computed() -> None:
    assert rv.heat(rv.HeatInputs(recalls=0, users=0, mean_rank_share=0.0)) == 0.0
    hottest = rv.heat(rv.HeatInputs(recalls=20, users=5, mean_rank_share=0.0))
    assert hottest == pytest.approx(1.0)
    h = rv.heat(rv.HeatInputs(recalls=1, users=1, mean_rank_share=0.5))
    assert h == pytest.approx(0.5 * math.log(2) / math.log(21) + 0.3 * 0.2 + 0.2 * 0.5)


def test_the_seeds_example_twenty_recalls_in_an_hour() -> None:
    """Twenty recalls in an hour, always first, no user: exactly the immediate threshold;
    nineteen stay below it."""
    twenty = rv.heat(rv.HeatInputs(recalls=20, users=0, mean_rank_share=0.0))
    nineteen = rv.heat(rv.HeatInputs(recalls=19, users=0, mean_rank_share=0.0))
    assert twenty == 0.7 and nineteen == pytest.approx(0.691987222)
    assert rv.promote("m", "batched", twenty, now=NOW)[0] == "immediate"
    assert rv.promote("m", "batched", nineteen, now=NOW)[0] == "batched"


@pytest.mark.parametrize(
    ("state", "h", "expected"),
    [
        ("skipped", 0.2, "skipped"),
        ("skipped", 0.35, "batched"),
        ("skipped", 0.7, "immediate"),
        ("batched", 0.5, "batched"),
        ("batched", 0.7, "immediate"),
        ("batched", 0.0, "batched"),
        ("immediate", 0.0, "immediate"),
        ("immediate", 1.0, "immediate"),
    ],
)
def test_promote(state: str, h: float, expected: str) -> None:
    new, event = rv.promote("m1", state, h, now=NOW)
    assert new == expected
    if expected == state:
        assert event is None
    else:
        assert event == rv.PromotionEvent(memory_id="m1", old_state=state, new_state=expected,
                                          heat=h, at=NOW)


@PROPS
@given(st.sampled_from(rv.STATES), st.lists(st.floats(0, 1), max_size=30))
def test_no_sequence_of_promote_ticks_demotes(start: str, heats: list[float]) -> None:
    state = start
    for h in heats:
        new, event = rv.promote("m", state, h, now=NOW)
        assert rv.state_rank(new) >= rv.state_rank(state)
        assert (event is None) == (new == state)
        state = new


def cand(mid: str, tenant: str, heat: float, *, state: str = "skipped",
         last_min: float | None = None) -> rv.Candidate:
    last = None if last_min is None else NOW - timedelta(minutes=last_min)
    return rv.Candidate(memory_id=mid, tenant=tenant, state=state, heat=heat,
                        last_reevaluated_at=last)


def test_select_candidates_filters_state_and_cooldown() -> None:
    items = [
        cand("a", "t", 0.9, state="immediate"),
        cand("b", "t", 0.8, last_min=2),  # within the 5 min cooldown
        cand("c", "t", 0.7, last_min=5),  # exactly 5 min ago: eligible again
        cand("d", "t", 0.7, state="batched"),
        cand("e", "t", 0.1),
    ]
    chosen = rv.select_candidates(items, now=NOW)
    assert [c.memory_id for c in chosen] == ["c", "d", "e"]


def test_select_candidates_is_fair_across_tenants() -> None:
    noisy = [cand(f"n{i:04d}", "noisy", 0.99) for i in range(1000)]
    quiet = [cand("q1", "quiet", 0.1), cand("q2", "quiet", 0.2)]
    chosen = rv.select_candidates([*noisy, *quiet], now=NOW)
    per_tenant: dict[str, list[str]] = {}
    for c in chosen:
        per_tenant.setdefault(c.tenant, []).append(c.memory_id)
    assert per_tenant["quiet"] == ["q2", "q1"]
    assert len(per_tenant["noisy"]) == 100
    assert per_tenant["noisy"] == [f"n{i:04d}" for i in range(100)]  # ties by memory id
    assert len(rv.select_candidates(noisy, now=NOW, per_tenant_cap=7)) == 7


def test_bad_rows_and_candidates_are_rejected() -> None:
    with pytest.raises(InvalidInputError):
        row("a", rank=0)
    with pytest.raises(NaiveDatetimeError):
        rv.AccessRow(memory_id="a", tenant="t", user_id=None, rank=1, k=1,
                     at=datetime(2025, 1, 1))
    with pytest.raises(InvalidInputError):
        cand("a", "t", float("nan"))
    with pytest.raises(InvalidInputError):
        rv.select_candidates([], now=NOW, per_tenant_cap=-1)
    with pytest.raises(InvalidInputError):
        rv.promote("m", "frozen", 0.5, now=NOW)
