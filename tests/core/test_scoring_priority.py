"""Priority and eviction: exact values, properties and bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import (
    InvalidImportanceError,
    InvalidInputError,
    InvalidWeightsError,
    NaiveDatetimeError,
)
from mnemonia.scoring import priority as pr

NOW = datetime(2025, 3, 1, tzinfo=UTC)
PROPS = settings(max_examples=200, deadline=None)


def test_default_weights() -> None:
    w = pr.DEFAULT_WEIGHTS
    assert (w.importance, w.recency, w.access, w.retention) == (0.4, 0.3, 0.2, 0.1)
    assert pr.PriorityWeights() == w


def test_normalised_weights_sum_to_one() -> None:
    w = pr.PriorityWeights(importance=2.0, recency=1.0, access=1.0, retention=0.0).normalised()
    assert (w.importance, w.recency, w.access, w.retention) == (0.5, 0.25, 0.25, 0.0)


def test_hand_computed_priority() -> None:
    # .4*.8 + .3*(1/(1+1)) + .2*(10/100) + .1*exp(-3600/(86400*.8)) = .32+.15+.02+.09492498
    value = pr.priority(
        importance=0.8,
        created_at=NOW - timedelta(days=1),
        accessed_at=NOW - timedelta(hours=1),
        access_count=10,
        stability=1.0,
        now=NOW,
    )
    assert value == pytest.approx(0.5849249759, rel=1e-9)


def test_priority_uses_normalised_custom_weights() -> None:
    only_importance = pr.PriorityWeights(importance=5.0, recency=0.0, access=0.0, retention=0.0)
    value = pr.priority(importance=0.3, created_at=NOW, accessed_at=NOW, access_count=0,
                        stability=1.0, now=NOW, weights=only_importance)
    assert value == pytest.approx(0.3)


def test_recency() -> None:
    assert pr.recency(NOW, NOW) == 1.0
    assert pr.recency(NOW - timedelta(days=1), NOW) == 0.5
    assert pr.recency(NOW - timedelta(days=3), NOW) == 0.25
    assert pr.recency(NOW + timedelta(days=3), NOW) == 1.0


moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
weights = st.builds(
    pr.PriorityWeights,
    importance=st.floats(0, 10),
    recency=st.floats(0, 10),
    access=st.floats(0, 10),
    retention=st.floats(min_value=0.001, max_value=10),
)


@PROPS
@given(
    importance=st.floats(0, 1),
    created=moments,
    accessed=moments,
    count=st.integers(0, 10**9),
    stability=st.floats(min_value=1e-6, max_value=100),
    now=moments,
    w=weights,
)
def test_priority_is_in_unit_interval(
    importance: float, created: datetime, accessed: datetime, count: int, stability: float,
    now: datetime, w: pr.PriorityWeights,
) -> None:
    value = pr.priority(importance=importance, created_at=created, accessed_at=accessed,
                        access_count=count, stability=stability, now=now, weights=w)
    assert 0.0 <= value <= 1.0


@pytest.mark.parametrize(
    "fields",
    [
        {"importance": -0.1},
        {"recency": float("nan")},
        {"access": float("inf")},
        {"retention": True},
        {"importance": 0.0, "recency": 0.0, "access": 0.0, "retention": 0.0},
    ],
)
def test_bad_weights_are_rejected(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidWeightsError):
        pr.PriorityWeights(**fields)  # type: ignore[arg-type]


def test_weight_errors_list_every_violation() -> None:
    with pytest.raises(InvalidWeightsError) as info:
        pr.PriorityWeights(importance=-1.0, recency=float("nan"))
    message = str(info.value)
    assert "importance" in message and "-1.0" in message
    assert "recency" in message and "nan" in message
    assert "all be zero" not in message


def test_all_zero_weights_message() -> None:
    with pytest.raises(InvalidWeightsError, match="not all be zero"):
        pr.PriorityWeights(importance=0, recency=0, access=0, retention=0)


def test_priority_rejects_bad_input() -> None:
    base: dict[str, object] = {"importance": 0.5, "created_at": NOW, "accessed_at": NOW,
                               "access_count": 1, "stability": 1.0, "now": NOW}
    with pytest.raises(InvalidImportanceError):
        pr.priority(**{**base, "importance": float("nan")})  # type: ignore[arg-type]
    with pytest.raises(InvalidImportanceError):
        pr.priority(**{**base, "importance": -0.2})  # type: ignore[arg-type]
    with pytest.raises(NaiveDatetimeError):
        pr.priority(**{**base, "created_at": datetime(2025, 1, 1)})  # type: ignore[arg-type]
    with pytest.raises(NaiveDatetimeError):
        pr.priority(**{**base, "now": datetime(2025, 1, 1)})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        pr.priority(**{**base, "access_count": -3})  # type: ignore[arg-type]


# --- eviction -----------------------------------------------------------------------------


def cand(
    id: str, priority: float, *, age_h: float = 0.0, importance: float = 0.5,
    pinned: bool = False, state: str = "batched",
) -> pr.EvictionCandidate:
    return pr.EvictionCandidate(id=id, priority=priority, accessed_at=NOW - timedelta(hours=age_h),
                                importance=importance, pinned=pinned, state=state)


def test_protection_rules() -> None:
    assert pr.PROTECTED_IMPORTANCE == 0.9
    assert pr.is_protected(cand("a", 0.1, importance=0.95))
    assert not pr.is_protected(cand("a", 0.1, importance=0.9))
    assert pr.is_protected(cand("a", 0.1, pinned=True))
    assert pr.is_protected(cand("a", 0.1, state="immediate"))
    assert not pr.is_protected(cand("a", 0.1, state="skipped"))


@pytest.mark.parametrize(
    ("active", "budget", "expected"),
    [(0, 0.05, 0), (1, 0.05, 1), (19, 0.05, 1), (100, 0.05, 5), (1000, 0.05, 50),
     (100, 0.29, 29), (7, 1.0, 7)],
)
def test_eviction_count(active: int, budget: float, expected: int) -> None:
    assert pr.eviction_count(active, budget) == expected


@pytest.mark.parametrize("budget", [0.0, -0.1, 1.5, float("nan")])
def test_eviction_budget_must_be_in_unit_interval(budget: float) -> None:
    with pytest.raises(InvalidInputError, match="budget"):
        pr.eviction_count(10, budget)


def test_select_for_eviction_lowest_priority_ties_by_older_access_then_id() -> None:
    items = [
        cand("high", 0.9),
        cand("low-new", 0.1, age_h=1),
        cand("low-old", 0.1, age_h=5),
        cand("low-b", 0.1, age_h=3),
        cand("low-a", 0.1, age_h=3),
        cand("protected", 0.0, pinned=True),
    ]
    assert pr.select_for_eviction(items, count=4) == ["low-old", "low-a", "low-b", "low-new"]
    assert pr.select_for_eviction(items) == ["low-old"]  # max(1, int(6 * .05))


def test_select_for_eviction_returns_fewer_when_all_protected() -> None:
    items = [cand("a", 0.1, pinned=True), cand("b", 0.2, importance=0.95)]
    assert pr.select_for_eviction(items, count=2) == []


def test_select_for_eviction_rejects_duplicate_ids() -> None:
    with pytest.raises(InvalidInputError, match="unique"):
        pr.select_for_eviction([cand("a", 0.1), cand("a", 0.2)])


candidates_strategy = st.lists(
    st.builds(
        cand,
        id=st.text("abcdef", min_size=1, max_size=4),
        priority=st.floats(0, 1),
        age_h=st.floats(0, 100),
        importance=st.floats(0, 1),
        pinned=st.booleans(),
        state=st.sampled_from(["skipped", "batched", "immediate"]),
    ),
    max_size=40,
    unique_by=lambda c: c.id,
)


@PROPS
@given(candidates_strategy, st.none() | st.integers(0, 50))
def test_select_for_eviction_properties(
    items: list[pr.EvictionCandidate], count: int | None
) -> None:
    chosen = pr.select_for_eviction(items, count=count)
    by_id = {c.id: c for c in items}
    unprotected = [c for c in items if not pr.is_protected(c)]
    wanted = pr.eviction_count(len(items)) if count is None else count
    assert len(chosen) == min(wanted, len(unprotected))
    assert len(set(chosen)) == len(chosen)
    assert not any(pr.is_protected(by_id[i]) for i in chosen)
    kept = [c for c in unprotected if c.id not in chosen]
    if chosen and kept:
        assert max(by_id[i].priority for i in chosen) <= min(c.priority for c in kept)


def test_eviction_ties_go_to_the_older_access_then_the_first_stored() -> None:
    def stored(id: str, seq: int, age_h: float = 0.0) -> pr.EvictionCandidate:
        return pr.EvictionCandidate(id=id, priority=0.2, importance=0.5, seq=seq,
                                    accessed_at=NOW - timedelta(hours=age_h))

    assert pr.select_for_eviction([stored("a", 3), stored("b", 1), stored("c", 2)],
                                  count=2) == ["b", "c"]
    assert pr.select_for_eviction([stored("a", 3, age_h=1), stored("b", 1)],
                                  count=1) == ["a"]
    assert pr.select_for_eviction([stored("b", 0), stored("a", 0)], count=1) == ["a"]
    with pytest.raises(InvalidInputError, match="seq"):
        stored("a", -1)


def test_eviction_candidate_validation() -> None:
    with pytest.raises(NaiveDatetimeError):
        pr.EvictionCandidate(id="a", priority=0.1, accessed_at=datetime(2025, 1, 1),
                             importance=0.5)
    with pytest.raises(InvalidInputError, match="state"):
        cand("a", 0.1, state="frozen")
    with pytest.raises(InvalidImportanceError):
        cand("a", 0.1, importance=2.0)
