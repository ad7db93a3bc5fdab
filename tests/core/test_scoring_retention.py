"""Retention (Ebbinghaus): exact vectors, monotonicity and bad input."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import InvalidImportanceError, InvalidInputError, NaiveDatetimeError
from mnemonia.scoring import retention as ret

NOW = datetime(2025, 1, 8, tzinfo=UTC)
PROPS = settings(max_examples=200, deadline=None)


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    # A week is exp(-8.75) = 0.00015846: the spec prints 0.000158 (3 significant digits),
    # so it is pinned here to 4 significant digits, 0.0001585, and checked against the print.
    [(timedelta(hours=1), 0.9492), (timedelta(days=1), 0.2865), (timedelta(weeks=1), 0.0001585)],
)
def test_seed_vectors(elapsed: timedelta, expected: float) -> None:
    r = ret.retention(accessed_at=NOW - elapsed, now=NOW, importance=0.8, stability=1.0)
    assert r == pytest.approx(expected, rel=1e-3)


def test_week_vector_matches_the_printed_value_not_the_seed_page_slip() -> None:
    r = ret.retention(accessed_at=NOW - timedelta(weeks=1), now=NOW, importance=0.8, stability=1.0)
    assert float(f"{r:.3g}") == 0.000158
    assert r != pytest.approx(0.000125, rel=0.1)


def test_defaults() -> None:
    assert ret.DEFAULT_HALF_LIFE == 86400.0
    assert ret.STABILITY_GROWTH == 1.5
    assert ret.STABILITY_CAP == 100.0


def test_importance_zero_retains_nothing_even_at_once() -> None:
    assert ret.retention(accessed_at=NOW, now=NOW, importance=0.0, stability=1.0) == 0.0


def test_just_accessed_and_future_access_retain_everything() -> None:
    assert ret.retention(accessed_at=NOW, now=NOW, importance=0.5, stability=1.0) == 1.0
    future = NOW + timedelta(hours=3)
    assert ret.retention(accessed_at=future, now=NOW, importance=0.5, stability=1.0) == 1.0


def test_half_life_scales_time() -> None:
    r = ret.retention(
        accessed_at=NOW - timedelta(hours=1), now=NOW, importance=1.0, stability=2.0,
        half_life=1800.0,
    )
    assert r == pytest.approx(math.exp(-1.0))


def test_reinforce_multiplies_and_caps() -> None:
    assert ret.reinforce(1.0) == 1.5
    assert ret.reinforce(80.0) == 100.0
    assert ret.reinforce(100.0) == 100.0
    assert ret.reinforce(2.0, growth=2.0, cap=3.0) == 3.0


def test_access_returns_new_state_and_event() -> None:
    state, event = ret.access(stability=2.0, access_count=4, now=NOW)
    assert state == ret.AccessState(stability=3.0, access_count=5)
    stability, count = state  # also unpacks as a pair
    assert (stability, count) == (3.0, 5)
    assert event == ret.AccessEvent(
        at=NOW, stability_before=2.0, stability_after=3.0,
        access_count_before=4, access_count_after=5,
    )


moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
importances = st.floats(min_value=0.01, max_value=1.0)
stabilities = st.floats(min_value=0.01, max_value=100.0)
seconds = st.floats(min_value=0.0, max_value=1e8)


@PROPS
@given(moments, importances, stabilities, seconds, seconds)
def test_retention_decreases_with_time(
    accessed: datetime, importance: float, stability: float, t1: float, t2: float
) -> None:
    early, late = sorted((t1, t2))
    r_early = ret.retention(accessed_at=accessed, now=accessed + timedelta(seconds=early),
                            importance=importance, stability=stability)
    r_late = ret.retention(accessed_at=accessed, now=accessed + timedelta(seconds=late),
                           importance=importance, stability=stability)
    assert 0.0 <= r_late <= r_early <= 1.0


@PROPS
@given(importances, stabilities, stabilities, st.floats(min_value=1.0, max_value=1e6))
def test_retention_increases_with_stability(
    importance: float, s1: float, s2: float, t: float
) -> None:
    low, high = sorted((s1, s2))
    accessed = NOW - timedelta(seconds=t)
    weak = ret.retention(accessed_at=accessed, now=NOW, importance=importance, stability=low)
    strong = ret.retention(accessed_at=accessed, now=NOW, importance=importance, stability=high)
    assert weak <= strong


@PROPS
@given(stabilities)
def test_reinforce_never_exceeds_cap_and_never_weakens_below_cap(stability: float) -> None:
    after = ret.reinforce(stability)
    assert after <= ret.STABILITY_CAP
    assert after >= min(stability, ret.STABILITY_CAP)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, 1.01, True, "0.5", None])
def test_bad_importance_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidImportanceError) as info:
        ret.retention(accessed_at=NOW, now=NOW, importance=bad, stability=1.0)  # type: ignore[arg-type]
    assert "[0, 1]" in str(info.value) or "finite" in str(info.value)


@pytest.mark.parametrize(("name", "bad"), [("stability", 0.0), ("stability", -1.0),
                                           ("half_life", 0.0), ("half_life", float("inf"))])
def test_bad_stability_or_half_life_is_rejected(name: str, bad: float) -> None:
    kwargs: dict[str, object] = {"accessed_at": NOW, "now": NOW, "importance": 0.5,
                                 "stability": 1.0, name: bad}
    with pytest.raises(InvalidInputError, match=name):
        ret.retention(**kwargs)  # type: ignore[arg-type]


def test_naive_datetimes_are_rejected() -> None:
    naive = datetime(2025, 1, 1)
    with pytest.raises(NaiveDatetimeError, match="accessed_at"):
        ret.retention(accessed_at=naive, now=NOW, importance=0.5, stability=1.0)
    with pytest.raises(NaiveDatetimeError, match="now"):
        ret.retention(accessed_at=NOW, now=naive, importance=0.5, stability=1.0)
    with pytest.raises(NaiveDatetimeError):
        ret.access(stability=1.0, access_count=0, now=naive)


def test_bad_access_inputs_are_rejected() -> None:
    with pytest.raises(InvalidInputError):
        ret.access(stability=1.0, access_count=-1, now=NOW)
    with pytest.raises(InvalidInputError):
        ret.reinforce(1.0, growth=0.5)


def test_underflowing_strength_does_not_divide_by_zero() -> None:
    from datetime import datetime, timedelta

    from mnemonia.scoring.retention import retention

    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    assert retention(accessed_at=t0, now=t0 + timedelta(seconds=1), importance=5e-324,
                     stability=1e-6) == 0.0
