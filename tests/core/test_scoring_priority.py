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


# --- eviction policies (issue 37) -------------------------------------------------------------


def info_cand(id: str, *, uses: int = 0, state: str = "batched", words: int = 5,
              importance: float = 0.5, age_d: float = 10.0, access_h: float = 0.0,
              seq: int = 0, priority: float = 0.3) -> pr.EvictionCandidate:
    info = pr.information(importance=importance, content_words=words,
                          created_at=NOW - timedelta(days=age_d), now=NOW)
    return pr.EvictionCandidate(id=id, priority=priority, importance=importance, state=state,
                                accessed_at=NOW - timedelta(hours=access_h), seq=seq,
                                uses=uses, content_words=words, information=info)


@pytest.mark.parametrize(("text", "expected"), [
    ("haha nice!", 2),
    ("ok, see you then", 2),  # "you", "then" are stop words
    ("I moved to Lisbon in May to work for Atlas", 4),  # moved lisbon work atlas ("may": stop)
    ("Lisbon, lisbon and LISBON", 1),  # distinct, lower-cased
    ("a I x", 0),  # one-character tokens and stop words only
    ("", 0),
])
def test_content_words(text: str, expected: int) -> None:
    assert pr.content_words(text) == expected


def test_information_exact_values() -> None:
    # .5 * 4 * (1 + 1/(1+1)) = 3.0 a day after creation; .5 * 4 * 2 = 4.0 when new
    assert pr.information(importance=0.5, content_words=4, created_at=NOW - timedelta(days=1),
                          now=NOW) == pytest.approx(3.0)
    assert pr.information(importance=0.5, content_words=4, created_at=NOW, now=NOW) == 4.0
    assert pr.information(importance=0.8, content_words=10,
                          created_at=NOW - timedelta(days=3), now=NOW) == pytest.approx(10.0)
    assert pr.information(importance=0.0, content_words=30, created_at=NOW, now=NOW) == 0.0


def test_information_rejects_bad_input() -> None:
    with pytest.raises(InvalidImportanceError):
        pr.information(importance=1.5, content_words=3, created_at=NOW, now=NOW)
    with pytest.raises(InvalidInputError, match="content_words"):
        pr.information(importance=0.5, content_words=-1, created_at=NOW, now=NOW)
    with pytest.raises(NaiveDatetimeError):
        pr.information(importance=0.5, content_words=3, created_at=datetime(2025, 1, 1),
                       now=NOW)


def test_informative_order_use_then_state_then_information_then_access() -> None:
    used_short = info_cand("used_short", uses=1, words=1)
    skipped_long = info_cand("skipped_long", state="skipped", words=30)
    short = info_cand("short", words=2)
    long_old_access = info_cand("long_old_access", words=9, access_h=5)
    long_new_access = info_cand("long_new_access", words=9, access_h=1)
    cands = [used_short, long_new_access, short, skipped_long, long_old_access]
    order = pr.select_for_eviction(cands, count=5, policy="informative")
    assert order == ["skipped_long", "short", "long_old_access", "long_new_access", "used_short"]


def test_unused_first_and_composite_orders() -> None:
    a = info_cand("a", uses=2, priority=0.1)
    b = info_cand("b", priority=0.4)
    c = info_cand("c", priority=0.2)
    assert pr.select_for_eviction([a, b, c], count=3, policy="unused_first") == ["c", "b", "a"]
    assert pr.select_for_eviction([a, b, c], count=3, policy="composite") == ["a", "c", "b"]
    # the seed's default: composite, whatever the use and information fields say
    assert pr.select_for_eviction([a, b, c], count=3) == ["a", "c", "b"]


def test_new_memories_count_up_to_double() -> None:
    # 6 content words stored today (6 * .5 * 2 = 6) outlast 10 stored 30 days ago (5.16)
    fresh = info_cand("fresh", words=6, age_d=0.0)
    old = info_cand("old", words=10, age_d=30.0)
    assert pr.select_for_eviction([fresh, old], count=1, policy="informative") == ["old"]


def test_protected_stay_under_every_policy() -> None:
    keep = [info_cand("vip", importance=0.95, words=0),
            pr.EvictionCandidate(id="pin", priority=0.0, accessed_at=NOW, importance=0.1,
                                 pinned=True),
            info_cand("hot", state="immediate", words=0)]
    for policy in pr.EVICTION_POLICIES:
        assert pr.select_for_eviction([*keep, info_cand("x", words=40)], count=4,
                                      policy=policy) == ["x"]


def test_eviction_reason_names_the_first_differing_term() -> None:
    unused = info_cand("u", words=12)
    used = info_cand("v", uses=2, words=1)
    assert pr.eviction_reason(unused, used, "informative") == (
        "never used (the other was used 2 times)")
    skipped = info_cand("s", state="skipped", words=40)
    assert pr.eviction_reason(skipped, unused, "informative") == (
        "skipped by the gatekeeper (the other is batched)")
    short = info_cand("x", words=3, age_d=1.0)  # .5 * 3 * 1.5 = 2.25
    long = info_cand("y", words=8, age_d=1.0)  # .5 * 8 * 1.5 = 6
    assert pr.eviction_reason(short, long, "informative") == (
        "less information: 2.25 (3 content words, importance 0.5) < 6 (8 content words, "
        "importance 0.5)")
    older = info_cand("o", words=8, age_d=1.0, access_h=3)
    assert pr.eviction_reason(older, long, "informative").startswith("last accessed earlier")
    low, high = info_cand("p", priority=0.1), info_cand("q", priority=0.25)
    assert pr.eviction_reason(low, high, "composite") == "lower priority: 0.1000 < 0.2500"
    first, second = info_cand("f", seq=1), info_cand("g", seq=2)
    assert pr.eviction_reason(first, second, "composite") == "stored earlier (#1 < #2)"


def test_eviction_reason_refuses_the_wrong_order() -> None:
    with pytest.raises(InvalidInputError, match="does not go before"):
        pr.eviction_reason(info_cand("y", words=8), info_cand("x", words=3), "informative")


@pytest.mark.parametrize("policy", ["lru", "", None, "Informative"])
def test_unknown_policy_is_refused_with_the_allowed_names(policy: object) -> None:
    with pytest.raises(InvalidInputError,
                       match="must be one of informative, unused_first, composite, got"):
        pr.select_for_eviction([info_cand("a")], policy=policy)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="must be one of"):
        pr.eviction_key(info_cand("a"), policy)  # type: ignore[arg-type]


def test_candidate_signal_fields_are_validated() -> None:
    with pytest.raises(InvalidInputError, match="uses"):
        info_cand("a", uses=-1)
    with pytest.raises(InvalidInputError, match="information"):
        pr.EvictionCandidate(id="a", priority=0.1, accessed_at=NOW, importance=0.5,
                             information=-1.0)
    with pytest.raises(InvalidInputError, match="content_words"):
        pr.EvictionCandidate(id="a", priority=0.1, accessed_at=NOW, importance=0.5,
                             content_words=1.5)  # type: ignore[arg-type]


@PROPS
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["skipped", "batched"]),
                          st.integers(0, 40), st.floats(0, 0.9), st.floats(0, 400)),
                min_size=1, max_size=30),
       st.integers(0, 30))
def test_informative_never_takes_a_used_memory_while_an_unused_one_is_left(
        specs: list[tuple[int, str, int, float, float]], count: int) -> None:
    cands = [info_cand(f"m{i}", uses=u, state=s, words=w, importance=imp, age_d=age, seq=i)
             for i, (u, s, w, imp, age) in enumerate(specs)]
    chosen = pr.select_for_eviction(cands, count=count, policy="informative")
    by_id = {c.id: c for c in cands}
    assert len(chosen) == min(count, len(cands))
    left = [c for c in cands if c.id not in chosen]
    for cid in chosen:
        c = by_id[cid]
        for other in left:  # everything that stays sorts after everything that goes
            assert pr.eviction_key(c, "informative") < pr.eviction_key(other, "informative")
    if any(by_id[i].uses for i in chosen):
        assert all(c.uses for c in left)


def test_eviction_reason_counts_one_word_in_the_singular() -> None:
    one, two = info_cand("a", words=1, age_d=1.0), info_cand("b", words=2, age_d=1.0)
    assert pr.eviction_reason(one, two, "informative") == (
        "less information: 0.75 (1 content word, importance 0.5) < 1.5 (2 content words, "
        "importance 0.5)")
