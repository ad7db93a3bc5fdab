"""Consolidation: tokenising, Jaccard, deterministic grouping and merging."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import InvalidInputError
from mnemonia.scoring import consolidation as co

PROPS = settings(max_examples=200, deadline=None)


def item(id: str, text: str, priority: float) -> co.ConsolidationItem:
    return co.ConsolidationItem(id=id, tokens=co.tokenize(text), priority=priority)


def test_tokenize_lowercases_word_tokens() -> None:
    assert co.tokenize("Redis, redis! Runs on port_6379.") == frozenset(
        {"redis", "runs", "on", "port_6379"}
    )
    assert co.tokenize("") == frozenset()


def test_jaccard() -> None:
    assert co.jaccard(frozenset(), frozenset()) == 0.0
    assert co.jaccard({"a", "b"}, {"a", "b"}) == 1.0
    assert co.jaccard({"a", "b", "c"}, {"b", "c", "d"}) == 0.5
    assert co.jaccard({"a"}, frozenset()) == 0.0


def test_group_seeds_by_priority_and_keeps_groups_of_min_size() -> None:
    items = [
        item("low", "alice likes green tea in the morning", 0.2),
        item("top", "alice likes green tea in the morning", 0.9),
        item("mid", "alice likes green tea in the morning too", 0.5),
        item("alone", "bob repairs bicycles on weekends", 0.8),
    ]
    assert co.group(items) == [["top", "mid", "low"]]


def test_group_compares_with_the_seed_only() -> None:
    # b is close to both a and c, but a and c are not close to each other: a seeds {a, b}.
    a = item("a", "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10", 0.9)
    b = item("b", "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11", 0.5)
    c = item("c", "w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13", 0.4)
    assert co.jaccard(a.tokens, c.tokens) < 0.7 <= co.jaccard(b.tokens, c.tokens)
    assert co.group([a, b, c]) == [["a", "b"]]


def test_group_exact_threshold_joins() -> None:
    a = co.ConsolidationItem(id="a", tokens=frozenset("abcdefghij"), priority=1.0)
    b = co.ConsolidationItem(id="b", tokens=frozenset("abcdefgxyz"), priority=0.5)
    c = co.ConsolidationItem(id="c", tokens=frozenset("abcdefg"), priority=0.5)
    # b shares 7 of 13 words with the seed a (0.54): out; c shares 7 of 10 (exactly 0.7): in.
    assert co.jaccard(a.tokens, c.tokens) == 0.7
    assert co.group([a, b, c]) == [["a", "c"]]


def test_group_equal_priorities_seed_in_stored_order_then_by_id() -> None:
    def stored(id: str, seq: int) -> co.ConsolidationItem:
        return co.ConsolidationItem(id=id, tokens=co.tokenize("same words here"),
                                    priority=0.5, seq=seq)

    assert co.group([stored("a", 2), stored("b", 0), stored("c", 1)]) == [["b", "c", "a"]]
    assert co.group([stored("b", 0), stored("a", 0)]) == [["a", "b"]]
    with pytest.raises(InvalidInputError, match="seq"):
        stored("a", -1)


def test_group_min_group_and_threshold() -> None:
    items = [item("a", "x y z", 0.3), item("b", "x y z", 0.2), item("c", "x y q", 0.1)]
    assert co.group(items, min_group=3) == []
    assert co.group(items, threshold=0.5, min_group=3) == [["a", "b", "c"]]


def test_group_with_candidates_only_considers_listed_pairs() -> None:
    items = [item("a", "same words here", 0.9), item("b", "same words here", 0.5),
             item("c", "same words here", 0.4)]
    assert co.group(items, candidates={"a": ["c", "zzz"]}) == [["a", "c"]]
    assert co.group(items, candidates={}) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"threshold": 0.0}, "threshold"), ({"threshold": 1.5}, "threshold"),
     ({"min_group": 1}, "min_group"), ({"min_group": 2.0}, "min_group")],
)
def test_group_validates_parameters(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        co.group([], **kwargs)  # type: ignore[arg-type]


def test_group_rejects_duplicate_ids() -> None:
    with pytest.raises(InvalidInputError, match="unique"):
        co.group([item("a", "x", 0.1), item("a", "y", 0.2)])


vocab = st.sampled_from([f"w{i}" for i in range(8)])
items_strategy = st.lists(
    st.builds(
        co.ConsolidationItem,
        id=st.text("abcdefgh", min_size=1, max_size=3),
        tokens=st.frozensets(vocab, max_size=6),
        priority=st.sampled_from([0.1, 0.5, 0.9]),  # few values: many ties
    ),
    max_size=25,
    unique_by=lambda i: i.id,
)


@PROPS
@given(items_strategy, st.randoms(use_true_random=False), st.sampled_from([0.5, 0.7, 1.0]))
def test_grouping_is_deterministic_regardless_of_input_order(
    items: list[co.ConsolidationItem], rnd: random.Random, threshold: float
) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    groups = co.group(items, threshold=threshold)
    assert co.group(shuffled, threshold=threshold) == groups
    flat = [i for g in groups for i in g]
    assert len(flat) == len(set(flat))  # every memory in at most one group
    by_id = {i.id: i for i in items}
    for g in groups:
        assert len(g) >= 2
        seed = by_id[g[0]]
        assert all(co.jaccard(seed.tokens, by_id[m].tokens) >= threshold for m in g[1:])


def test_merge_texts_drops_repeated_sentences() -> None:
    merged = co.merge_texts(
        [
            "Alice likes tea. She drinks it at 8 am.",
            "alice  likes TEA!  She also likes biscuits.",
            "She drinks it at 8 am",
        ]
    )
    assert merged == "Alice likes tea. She drinks it at 8 am. She also likes biscuits."


def test_merge_texts_terminates_fragments_between_pieces() -> None:
    assert co.merge_texts(["User likes tea", "User likes coffee"]) == (
        "User likes tea. User likes coffee"
    )
    assert co.merge_texts(["Only one"]) == "Only one"
    assert co.merge_texts([]) == ""


def test_merge_texts_rejects_a_single_string() -> None:
    with pytest.raises(InvalidInputError):
        co.merge_texts("not a list")
