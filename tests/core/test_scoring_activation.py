"""Hybrid seeding and spreading activation."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import (
    InvalidInputError,
    InvalidStrengthError,
    InvalidWeightsError,
    UnknownRelationTypeError,
)
from mnemonia.scoring import activation as ac

PROPS = settings(max_examples=200, deadline=None)


def graph(edges: list[ac.Edge]) -> Callable[[Collection[str]], Iterable[ac.Edge]]:
    def neighbours(ids: Collection[str]) -> list[ac.Edge]:
        wanted = set(ids)
        return [e for e in edges if e.src in wanted or e.dst in wanted]

    return neighbours


def edge(src: str, dst: str, type: str = "implies", strength: float = 1.0) -> ac.Edge:
    return ac.Edge(src=src, dst=dst, type=type, strength=strength)


def test_stop_words_are_a_common_english_list() -> None:
    assert 100 <= len(ac.STOP_WORDS) <= 200
    assert {"the", "is", "what", "of", "and"} <= ac.STOP_WORDS
    assert all(w == w.lower() for w in ac.STOP_WORDS)


def test_query_tokens_drop_stop_words_short_tokens_and_duplicates() -> None:
    assert ac.query_tokens("What is the capital of France? France, a capital!") == [
        "capital",
        "france",
    ]
    assert ac.query_tokens("Did Caroline go to the LGBTQ support group?") == [
        "caroline", "go", "lgbtq", "support", "group",
    ]


def test_query_tokens_keep_stop_words_when_nothing_else_remains() -> None:
    assert ac.query_tokens("Who is it?") == ["who", "is", "it"]
    assert ac.query_tokens("a ? !") == []


def test_word_tokens() -> None:
    assert ac.word_tokens("Hello, hello WORLD") == frozenset({"hello", "world"})


def test_keyword_overlap() -> None:
    memory = ac.word_tokens("Caroline went to the support group on Friday")
    assert ac.keyword_overlap(["caroline", "support", "lgbtq"], memory) == pytest.approx(2 / 3)
    assert ac.keyword_overlap([], memory) == 0.0
    assert ac.keyword_overlap(["friday", "friday"], memory) == 1.0


_WORDS = st.sampled_from(["leo", "lisbon", "café", "x_y", "a", "Caps", "a-b", "İstanbul", "ß",
                          "leon", "42", "", " ", "said"])


@PROPS
@given(query=st.lists(_WORDS | st.text(max_size=6), max_size=6),
       text=st.lists(_WORDS | st.text(max_size=8), max_size=12).map(" ".join))
def test_keyword_scorer_equals_keyword_overlap_of_word_tokens(query: list[str], text: str) -> None:
    score = ac.keyword_scorer(query)
    assert score(text) == pytest.approx(ac.keyword_overlap(query, ac.word_tokens(text)))


def test_keyword_scorer_whole_words_only() -> None:
    score = ac.keyword_scorer(["leo", "lisbon"])
    assert score("Leonard flew to LISBON") == 0.5
    assert score("leo_x lisbonne") == 0.0
    assert score("Leo, in Lisbon.") == 1.0
    with pytest.raises(InvalidInputError):
        score(3)  # type: ignore[arg-type]


def test_fuse() -> None:
    assert ac.fuse(0.8, 0.5) == pytest.approx(0.7 * 0.8 + 0.3 * 0.5)
    assert ac.fuse(0.8, 0.5, keyword_weight=0.0) == pytest.approx(0.8)
    with pytest.raises(InvalidInputError):
        ac.fuse(0.8, 0.5, keyword_weight=1.5)
    with pytest.raises(InvalidInputError):
        ac.fuse(float("nan"), 0.5)


def test_relation_weights_and_symmetry() -> None:
    assert ac.RELATION_WEIGHTS == {
        "implies": 0.9, "generalizes": 0.85, "specializes": 0.85, "part_of": 0.8,
        "context_of": 0.7, "causes": 0.7, "follows": 0.7, "correlates": 0.6,
        "related_to": 0.6, "same_entity": 0.6, "contradicts": 0.3, "supersedes": 0.1,
    }
    assert {"related_to", "same_entity", "correlates"} == ac.SYMMETRIC_RELATIONS
    assert ac.DEFAULT_EXTRA_WEIGHT == 0.5
    assert ac.relation_weight("implies") == 0.9
    assert ac.relation_weight("mentions", {"mentions": 0.5}) == 0.5


def test_unknown_relation_type_lists_allowed_types() -> None:
    with pytest.raises(UnknownRelationTypeError) as info:
        ac.relation_weight("loves")
    message = str(info.value)
    assert "'loves'" in message and "implies" in message and "supersedes" in message
    with pytest.raises(InvalidWeightsError):
        ac.relation_weight("mentions", {"mentions": 1.5})


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.01, float("nan"), float("inf"), True, "0.5"])
def test_bad_strength_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidStrengthError):
        ac.validate_strength(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidStrengthError):
        ac.Edge(src="a", dst="b", type="implies", strength=bad)  # type: ignore[arg-type]


def test_spread_two_hops_with_decay_and_type_weights() -> None:
    edges = [edge("a", "b", "implies", 0.8), edge("b", "c", "part_of", 0.5), edge("c", "d")]
    result = ac.spread({"a": 1.0}, graph(edges))
    assert result["a"] == ac.Activation(value=1.0, source=None, relation=None, hops=0, seed=1.0)
    b = 1.0 * 0.8 * 0.9 * 0.5
    assert result["b"].value == pytest.approx(b)
    assert (result["b"].source, result["b"].relation, result["b"].hops) == ("a", "implies", 1)
    assert result["b"].seed == 0.0
    assert result["c"].value == pytest.approx(b * 0.5 * 0.8 * 0.5)
    assert (result["c"].source, result["c"].relation, result["c"].hops) == ("b", "part_of", 2)
    assert "d" not in result  # depth 2


def test_spread_follows_symmetric_types_backwards_only() -> None:
    edges = [edge("x", "a", "related_to"), edge("y", "a", "implies")]
    result = ac.spread({"a": 1.0}, graph(edges), depth=1)
    assert result["x"].value == pytest.approx(0.6 * 0.5)
    assert "y" not in result


def test_spread_max_aggregation_keeps_best_path() -> None:
    edges = [edge("a", "c", "supersedes"), edge("b", "c", "implies")]
    result = ac.spread({"a": 1.0, "b": 0.5}, graph(edges), depth=1)
    assert result["c"].value == pytest.approx(max(0.1 * 0.5, 0.5 * 0.9 * 0.5))
    assert result["c"].source == "b"


def test_spread_raises_a_seed_but_keeps_its_seed_value() -> None:
    result = ac.spread({"a": 1.0, "b": 0.1}, graph([edge("a", "b")]), depth=1)
    assert result["b"].value == pytest.approx(0.45)
    assert result["b"].seed == 0.1
    assert result["b"].source == "a"


def test_spread_cross_topic_penalty() -> None:
    edges = [edge("a", "b"), edge("a", "c"), edge("a", "d")]
    topics = {"b": "work", "c": "home", "d": None}
    result = ac.spread({"a": 1.0}, graph(edges), depth=1, topics=topics, query_topic="work")
    assert result["b"].value == pytest.approx(0.45)
    assert result["c"].value == pytest.approx(0.45 * 0.4)
    assert result["d"].value == pytest.approx(0.45)
    no_topic = ac.spread({"a": 1.0}, graph(edges), depth=1, topics=topics)
    assert no_topic["c"].value == pytest.approx(0.45)


def test_spread_depth_zero_returns_seeds_only() -> None:
    calls: list[Collection[str]] = []

    def neighbours(ids: Collection[str]) -> list[ac.Edge]:
        calls.append(ids)
        return [edge("a", "b")]

    assert set(ac.spread({"a": 0.7}, neighbours, depth=0)) == {"a"}
    assert calls == []


def test_spread_custom_type_and_unknown_type() -> None:
    edges = [edge("a", "b", "mentions")]
    result = ac.spread({"a": 1.0}, graph(edges), type_weights={"mentions": 0.5})
    assert result["b"].value == pytest.approx(0.25)
    with pytest.raises(UnknownRelationTypeError):
        ac.spread({"a": 1.0}, graph(edges))


def test_spread_max_frontier_lets_only_the_strongest_spread() -> None:
    edges = [edge("a", "x"), edge("b", "y"), edge("c", "z"), edge("x", "x2"), edge("y", "y2")]
    seeds = {"a": 0.9, "b": 0.6, "c": 0.3}
    full = ac.spread(seeds, graph(edges), depth=2)
    assert {"x", "y", "z", "x2", "y2"} <= set(full)
    bounded = ac.spread(seeds, graph(edges), depth=2, max_frontier=2)
    assert "z" not in bounded  # c is the third seed: it does not spread
    assert bounded["x"] == full["x"] and bounded["y"] == full["y"]
    assert bounded["x2"] == full["x2"] and bounded["y2"] == full["y2"]
    one = ac.spread(seeds, graph(edges), depth=2, max_frontier=1)
    assert set(one) == {"a", "b", "c", "x", "x2"}
    assert ac.spread(seeds, graph(edges), depth=2, max_frontier=10) == full


def test_spread_tells_neighbours_the_frontier_activations() -> None:
    seen: list[dict[str, float]] = []

    def neighbours(frontier: Collection[str]) -> list[ac.Edge]:
        assert isinstance(frontier, Mapping)
        seen.append(dict(frontier))
        return [e for e in (edge("a", "b"), edge("b", "c")) if e.src in frontier]

    ac.spread({"a": 0.8}, neighbours, depth=2)
    assert seen == [{"a": 0.8}, {"b": pytest.approx(0.8 * 0.9 * 0.5)}]


def test_spread_max_frontier_ties_are_broken_by_id() -> None:
    edges = [edge("b", "y"), edge("a", "x")]
    result = ac.spread({"b": 0.5, "a": 0.5}, graph(edges), depth=1, max_frontier=1)
    assert set(result) == {"a", "b", "x"}


def test_spread_ties_follow_the_order_given() -> None:
    # recall passes the order the memories were stored: ids (random uuids) decide nothing
    stored = {"b": 0, "a": 1, "x": 2, "y": 3, "z": 4}.__getitem__
    edges = [edge("b", "y"), edge("a", "x")]
    result = ac.spread({"b": 0.5, "a": 0.5}, graph(edges), depth=1, max_frontier=1,
                       order=stored)
    assert set(result) == {"a", "b", "y"}  # b is first among equals: it spreads
    both = [edge("a", "z"), edge("b", "z")]
    assert ac.spread({"a": 0.5, "b": 0.5}, graph(both), depth=1)["z"].source == "a"
    assert ac.spread({"a": 0.5, "b": 0.5}, graph(both), depth=1,
                     order=stored)["z"].source == "b"


@pytest.mark.parametrize(
    "kwargs",
    [{"depth": -1}, {"decay": 0.0}, {"decay": 1.5}, {"cross_topic_penalty": 2.0},
     {"max_frontier": 0}, {"max_frontier": 1.5}, {"max_frontier": True}],
)
def test_spread_validates_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        ac.spread({"a": 1.0}, graph([]), **kwargs)  # type: ignore[arg-type]


def test_spread_rejects_bad_seeds() -> None:
    with pytest.raises(InvalidInputError):
        ac.spread({"a": float("nan")}, graph([]))
    with pytest.raises(InvalidInputError):
        ac.spread({"a": -0.1}, graph([]))


nodes = st.sampled_from([f"m{i}" for i in range(10)])
edges_strategy = st.lists(
    st.builds(
        ac.Edge,
        src=nodes,
        dst=nodes,
        type=st.sampled_from(sorted(ac.RELATION_WEIGHTS)),
        strength=st.floats(min_value=0.01, max_value=1.0),
    ),
    max_size=40,
)
seeds_strategy = st.dictionaries(nodes, st.floats(min_value=0.0, max_value=1.0), min_size=1)


@PROPS
@given(
    seeds_strategy,
    edges_strategy,
    st.integers(0, 4),
    st.floats(min_value=0.05, max_value=1.0),
    st.dictionaries(nodes, st.none() | st.sampled_from(["t1", "t2"])),
    st.none() | st.sampled_from(["t1", "t2"]),
)
def test_spread_never_exceeds_the_max_seed(
    seeds: dict[str, float],
    edges: list[ac.Edge],
    depth: int,
    decay: float,
    topics: dict[str, str | None],
    query_topic: str | None,
) -> None:
    result = ac.spread(seeds, graph(edges), depth=depth, decay=decay, topics=topics,
                       query_topic=query_topic)
    top = max(seeds.values())
    assert set(seeds) <= set(result)
    for mid, act in result.items():
        assert 0.0 <= act.value <= top
        assert act.value >= seeds.get(mid, 0.0)  # max aggregation never lowers a seed
        assert act.seed == seeds.get(mid, 0.0)
        assert (act.source is None) == (act.hops == 0)


@PROPS
@given(seeds_strategy, edges_strategy, st.randoms(use_true_random=False))
def test_spread_does_not_depend_on_edge_order(
    seeds: dict[str, float], edges: list[ac.Edge], rnd: random.Random
) -> None:
    shuffled = list(edges)
    rnd.shuffle(shuffled)
    assert ac.spread(seeds, graph(shuffled)) == ac.spread(seeds, graph(edges))
