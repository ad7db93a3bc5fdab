"""SM-2: exact vectors, properties and bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import (
    InvalidInputError,
    InvalidQualityError,
    MnemoniaError,
    NaiveDatetimeError,
)
from mnemonia.scoring import sm2

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
PROPS = settings(max_examples=200, deadline=None)


def test_seed_vector_intervals_and_repetitions() -> None:
    state = sm2.SM2State()
    intervals, reps = [], []
    for q in (4, 5, 5, 1):
        state, _ = sm2.review(state, q, NOW)
        intervals.append(state.interval_days)
        reps.append(state.repetitions)
    assert intervals == [1, 6, 15, 1]
    assert reps == [1, 2, 3, 0]


def test_default_state_matches_the_spec() -> None:
    state = sm2.SM2State()
    assert (state.easiness, state.interval_days, state.repetitions) == (2.5, 0, 0)
    assert state.next_review is None
    assert state.last_quality == 0


@pytest.mark.parametrize(
    ("quality", "expected"),
    [(0, 1.7), (1, 1.96), (2, 2.18), (3, 2.36), (4, 2.5), (5, 2.5)],
)
def test_easiness_update_from_default(quality: int, expected: float) -> None:
    state, _ = sm2.review(sm2.SM2State(), quality, NOW)
    assert state.easiness == pytest.approx(expected)


def test_review_schedules_next_review_and_returns_event_without_mutating() -> None:
    before = sm2.SM2State()
    after, event = sm2.review(before, 5, NOW)
    assert after.next_review == NOW + timedelta(days=1)
    assert after.last_quality == 5
    assert event.quality == 5
    assert event.at == NOW
    assert event.before is before
    assert event.after == after
    assert before == sm2.SM2State()  # untouched
    with pytest.raises(AttributeError):
        after.easiness = 2.0  # type: ignore[misc]


def test_failed_review_resets_repetitions_and_interval_to_one_day() -> None:
    state = sm2.SM2State(easiness=2.0, interval_days=30, repetitions=5)
    after, _ = sm2.review(state, 2, NOW)
    assert (after.interval_days, after.repetitions) == (1, 0)
    assert after.next_review == NOW + timedelta(days=1)


def test_third_success_multiplies_previous_interval_by_new_easiness() -> None:
    state = sm2.SM2State(easiness=2.0, interval_days=10, repetitions=2)
    after, _ = sm2.review(state, 3, NOW)  # easiness' = 2.0 + 0.1 - 0.24 = 1.86
    assert after.easiness == pytest.approx(1.86)
    assert after.interval_days == round(10 * 1.86)


def test_review_in_another_timezone_schedules_the_same_instant() -> None:
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    after, _ = sm2.review(sm2.SM2State(), 4, plus_two)
    assert after.next_review == NOW + timedelta(days=1)
    assert after.next_review is not None and after.next_review.utcoffset() == timedelta(0)


def test_is_due() -> None:
    assert sm2.is_due(sm2.SM2State(), NOW)
    later = sm2.SM2State(next_review=NOW + timedelta(seconds=1))
    assert not sm2.is_due(later, NOW)
    assert sm2.is_due(sm2.SM2State(next_review=NOW), NOW)
    assert sm2.is_due(later, NOW + timedelta(seconds=1))


def test_priority_hand_computed_for_a_new_memory() -> None:
    # p = 1/30; p = .6/30 + .4*0 = 0.02; p = .7*0.02 + .3*1 = 0.314
    assert sm2.priority(sm2.SM2State(), NOW) == pytest.approx(0.314)


def test_priority_hand_computed_for_an_overdue_hard_memory() -> None:
    state = sm2.SM2State(easiness=1.3, repetitions=10, next_review=NOW - timedelta(days=29))
    # p = min(1, 30/30) = 1; .6 + .4 = 1; .7*1 + .3*0 = 0.7
    assert sm2.priority(state, NOW) == pytest.approx(0.7)


def test_priority_grows_with_overdue_days() -> None:
    state = sm2.SM2State(next_review=NOW)
    assert sm2.priority(state, NOW + timedelta(days=10)) > sm2.priority(state, NOW)


@pytest.mark.parametrize(
    ("utility", "quality", "expected"),
    [
        (0.5, 5, 0.55),
        (0.5, 3, 0.53),
        (0.5, 2, 0.48),
        (0.5, 0, 0.44),
        (0.99, 5, 1.0),
        (0.01, 0, 0.0),
    ],
)
def test_update_utility(utility: float, quality: int, expected: float) -> None:
    after, event = sm2.update_utility(utility, quality)
    assert after == pytest.approx(expected)
    assert (event.quality, event.before, event.after) == (quality, utility, after)


qualities = st.integers(min_value=0, max_value=5)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@PROPS
@given(st.lists(qualities, max_size=60))
def test_easiness_stays_within_bounds_over_any_quality_sequence(qs: list[int]) -> None:
    state = sm2.SM2State()
    now = NOW
    for q in qs:
        state, _ = sm2.review(state, q, now)
        now = state.next_review or now
        assert 1.3 <= state.easiness <= 2.5
        assert state.interval_days >= 1


@PROPS
@given(
    easiness=st.floats(min_value=1.3, max_value=2.5),
    repetitions=st.integers(min_value=0, max_value=1000),
    next_review=st.none() | moments,
    now=moments,
)
def test_priority_is_in_unit_interval(
    easiness: float, repetitions: int, next_review: datetime | None, now: datetime
) -> None:
    state = sm2.SM2State(easiness=easiness, repetitions=repetitions, next_review=next_review)
    assert 0.0 <= sm2.priority(state, now) <= 1.0


@PROPS
@given(st.floats(min_value=0.0, max_value=1.0), qualities)
def test_utility_stays_in_unit_interval(utility: float, quality: int) -> None:
    after, _ = sm2.update_utility(utility, quality)
    assert 0.0 <= after <= 1.0


@pytest.mark.parametrize("bad", [6, -1, 2.5, True, False, 4.0, "3", None, float("nan")])
def test_bad_quality_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidQualityError) as info:
        sm2.review(sm2.SM2State(), bad, NOW)  # type: ignore[arg-type]
    assert repr(bad) in str(info.value)
    assert "0, 5" in str(info.value)
    assert isinstance(info.value, MnemoniaError)
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidQualityError):
        sm2.update_utility(0.5, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidQualityError):
        sm2.validate_quality(bad)


def test_naive_datetimes_are_rejected() -> None:
    naive = datetime(2025, 1, 1, 12, 0)
    with pytest.raises(NaiveDatetimeError):
        sm2.review(sm2.SM2State(), 4, naive)
    with pytest.raises(NaiveDatetimeError):
        sm2.is_due(sm2.SM2State(), naive)
    with pytest.raises(NaiveDatetimeError):
        sm2.priority(sm2.SM2State(), naive)
    with pytest.raises(NaiveDatetimeError):
        sm2.SM2State(next_review=naive)


@pytest.mark.parametrize(
    "fields",
    [
        {"easiness": 1.0},
        {"easiness": float("nan")},
        {"interval_days": -1},
        {"repetitions": 1.5},
        {"last_quality": 9},
    ],
)
def test_state_fields_are_validated(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        sm2.SM2State(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), True])
def test_bad_utility_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        sm2.update_utility(bad, 4)  # type: ignore[arg-type]


def test_interval_is_capped_when_reviews_come_faster_than_scheduled() -> None:
    # feedback every day multiplies the interval by the easiness each time; uncapped, the
    # next review overflowed the calendar after some 180 reviews
    from datetime import UTC, datetime, timedelta

    state = sm2.SM2State()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(400):
        state, _ = sm2.review(state, 5, now)
        now += timedelta(days=1)
    assert state.interval_days == sm2.MAX_INTERVAL_DAYS
