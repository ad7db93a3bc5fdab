"""Recall's relevance, round two: rare query words weigh more (IDF), a query word also matches
related words (word vectors), a memory said by the speaker the query names gains, and a
memory is lifted by the best match among its session neighbours.

Scoring functions are tested directly; the recall behaviour through the public API on the
hashing embedder (real Chroma, real SQLite).
"""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia import keywords as kw
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidConfigError, InvalidInputError, InvalidWeightsError, StoreError
from mnemonia.scoring import activation as act

# -- pure scoring ------------------------------------------------------------------------------


def test_idf_weight_prefers_rare_words_and_checks_its_counts() -> None:
    assert act.idf_weight(1, 100) > act.idf_weight(50, 100) > act.idf_weight(100, 100) > 0
    assert act.idf_weight(0, 10) == pytest.approx(math.log(11 / 0.5))
    for docs, total in ((-1, 10), (11, 10), (1.5, 10)):
        with pytest.raises(InvalidInputError):
            act.idf_weight(docs, total)  # type: ignore[arg-type]


def test_expansion_credit_is_zero_under_the_threshold_and_one_at_identity() -> None:
    assert act.expansion_credit(0.49, 0.5) == 0.0
    assert act.expansion_credit(0.75, 0.5) == pytest.approx(0.5)
    assert act.expansion_credit(1.0, 0.5) == 1.0
    with pytest.raises(InvalidInputError, match="threshold"):
        act.expansion_credit(0.9, 1.0)
    with pytest.raises(InvalidInputError, match="similarity"):
        act.expansion_credit(float("nan"), 0.5)


def test_weighted_scorer_equals_overlap_with_equal_weights_and_credits_related_words() -> None:
    tokens = ["garden", "alice", "roses"]
    plain = act.weighted_keyword_scorer(dict.fromkeys(tokens, 1.0))
    for text in ("Alice said the garden is lovely", "roses", "nothing here"):
        assert plain(text) == pytest.approx(act.keyword_overlap(tokens, act.word_tokens(text)))
    weighted = act.weighted_keyword_scorer({"garden": 3.0, "alice": 1.0},
                                           {"garden": {"yard": 0.5}})
    assert weighted("Alice garden") == pytest.approx(1.0)
    assert weighted("alice in the yard") == pytest.approx((1.0 + 3.0 * 0.5) / 4.0)
    assert weighted("the garden yard") == pytest.approx(3.0 / 4.0)  # the word itself wins
    with pytest.raises(InvalidWeightsError):
        act.weighted_keyword_scorer({"garden": -1.0})
    with pytest.raises(InvalidWeightsError):
        act.weighted_keyword_scorer({"garden": 1.0}, {"garden": {"yard": 1.5}})


def test_names_speaker_and_context_lift() -> None:
    assert act.names_speaker({"what", "did", "mary", "jane", "say"}, "Mary Jane")
    assert not act.names_speaker({"mary"}, "Mary Jane")
    assert not act.names_speaker({"mary"}, "")
    assert act.context_lift(0.5, 0.8, weight=0.3) == pytest.approx(0.5 + 0.24 * 0.5)
    assert act.context_lift(0.5, 0.0, weight=0.3) == 0.5  # never lowered
    assert act.context_lift(0.5, 0.0, weight=0.0) == 0.5
    with pytest.raises(InvalidInputError, match="weight"):
        act.context_lift(0.5, 0.5, weight=-0.1)


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [
    ("keyword_expansion", 1.0), ("keyword_expansion", -0.1), ("speaker_weight", 1.5),
    ("keyword_stem_credit", 1.5), ("keyword_stem_credit", -0.1),
    ("context_weight", -0.2), ("context_window", -1), ("keyword_idf", "yes"),
    ("session_weight", 1.2), ("session_weight", -0.1)])
def test_new_recall_keys_are_checked(key: str, value: object) -> None:
    with pytest.raises(InvalidConfigError, match=key):
        MnemoniaConfig(**{key: value})


# -- through recall --------------------------------------------------------------------------


def _open(tmp_path: Path, clock: ManualClock, **over: object) -> MemoryEngine:
    config = MnemoniaConfig.load(env={}, maintenance="manual").replace(**over)
    return MemoryEngine.open(tmp_path / "store", config=config, clock=clock,
                             embedder=HashingEmbedder())


def _hit(res, mid: str):  # type: ignore[no-untyped-def]
    return next(h for h in res.memories if h.memory.id == mid)


def test_a_rare_query_word_outweighs_a_common_one(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as engine:
        common = [engine.add(f"alice talked about topic number {i}", tenant="t").id
                  for i in range(12)]
        rare = engine.add("the greenhouse needs new glass", tenant="t").id
        query = "alice greenhouse"
        res = engine.recall(query, tenant="t", k=3, min_activation=0, touch=False)
        assert _hit(res, rare).explanation.keyword > _hit(res, res.ids[1]).explanation.keyword
        assert res.ids[0] == rare
    with _open(tmp_path, clock, keyword_idf=False) as engine:
        res = engine.recall(query, tenant="t", k=3, min_activation=0, touch=False)
        # without IDF both words count the same: each memory matches one of two
        assert _hit(res, rare).explanation.keyword == pytest.approx(0.5)
        assert {h.explanation.keyword for h in res.memories if h.memory.id in common} == {0.5}


def test_a_query_word_matches_related_words_after_enrichment(tmp_path: Path,
                                                             clock: ManualClock) -> None:
    # the hashing embedder's word vectors are far apart ("painting" / "paintings" 0.29):
    # a threshold on its scale
    with _open(tmp_path, clock, keyword_expansion=0.25, keyword_stem_credit=0.0) as engine:
        painted = engine.add("she showed me her watercolour paintings", tenant="t").id
        for i in range(5):
            engine.add(f"the weather report for day {i} says rain", tenant="t")
        engine.enrich(tenant="t")  # word vectors for the words memories use
        res = engine.recall("painting", tenant="t", k=3, min_activation=0, touch=False)
        assert res.ids[0] == painted
        by_vectors = _hit(res, painted).explanation.keyword
        assert 0 < by_vectors < 0.8  # credit, not a full match
    # the same stem ("paint") credits keyword_stem_credit, with or without the word vectors
    for expansion in (0.0, 0.25):
        with _open(tmp_path, clock, keyword_expansion=expansion,
                   keyword_stem_credit=0.8) as engine:
            res = engine.recall("painting", tenant="t", k=3, min_activation=0, touch=False)
            assert res.ids[0] == painted
            assert _hit(res, painted).explanation.keyword == pytest.approx(0.8)
    with _open(tmp_path, clock, keyword_expansion=0.0, keyword_stem_credit=0.0) as engine:
        res = engine.recall("painting", tenant="t", k=3, min_activation=0, touch=False)
        assert _hit(res, painted).explanation.keyword == 0.0


def test_the_named_speaker_gains(tmp_path: Path, clock: ManualClock) -> None:
    text = "I went to the lake for the weekend"
    query = "where did Bo go for the weekend"
    gaps = []
    for weight in (0.0, 0.1):
        with _open(tmp_path / str(weight), clock, speaker_weight=weight) as engine:
            a = engine.add(text, tenant="t", speaker="Ann").id
            b = engine.add(text, tenant="t", speaker="Bo").id
            res = engine.recall(query, tenant="t", k=2, min_activation=0, touch=False)
            assert res.ids[0] == b
            gaps.append(_hit(res, b).explanation.seed - _hit(res, a).explanation.seed)
    assert gaps[1] > gaps[0] + 0.05  # the bonus (0.1, through the session-context scale)


def _session(engine: MemoryEngine, clock: ManualClock) -> tuple[str, str]:
    turns = ["Hi, long time no see", "What is your favourite food these days?",
             "Definitely pizza, with extra olives", "Nice! See you soon"]
    ids = []
    for text in turns:
        clock.advance(timedelta(seconds=10))
        ids.append(engine.add(text, tenant="t", session_id="s1").id)
    for i in range(6):
        engine.add(f"unrelated note {i} about the car service", tenant="t", session_id="s2")
    engine.enrich(tenant="t")  # follows relations between the turns of a session
    return ids[1], ids[2]


def test_a_turn_is_lifted_by_its_session_neighbours(tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path, clock) as engine:
        _question, answer = _session(engine, clock)
        res = engine.recall("favourite food", tenant="t", k=10, min_activation=0, touch=False)
        hit = _hit(res, answer)
        w = engine.config.hybrid_keyword_weight
        fused = (1 - w) * max(0.0, hit.explanation.cosine) + w * hit.explanation.keyword
        assert hit.explanation.seed > fused  # lifted by the question right before it
    with _open(tmp_path, clock, context_weight=0.0, session_weight=0.0) as engine:
        res = engine.recall("favourite food", tenant="t", k=10, min_activation=0, touch=False)
        hit = _hit(res, answer)
        fused = (1 - w) * max(0.0, hit.explanation.cosine) + w * hit.explanation.keyword
        assert hit.explanation.seed == pytest.approx(fused)


def test_a_turn_is_lifted_by_the_best_match_of_its_session(tmp_path: Path,
                                                           clock: ManualClock) -> None:
    """With session_weight (off by default), a turn beyond the context window gains in
    proportion to its own relevance times the session's best relevance; a turn alone in its
    session only by its own."""
    w = MnemoniaConfig().hybrid_keyword_weight

    def fused(h):  # type: ignore[no-untyped-def]
        return (1 - w) * max(0.0, h.explanation.cosine) + w * h.explanation.keyword

    with _open(tmp_path, clock, context_weight=0.0, session_weight=0.6) as engine:
        far = engine.add("we spoke about the weather and food", tenant="t",
                         session_id="s1").id
        for i in range(4):
            engine.add(f"filler turn {i}", tenant="t", session_id="s1")
        best = engine.add("my favourite food is pizza", tenant="t", session_id="s1").id
        other = engine.add("we spoke about the weather and food again", tenant="t",
                           session_id="s2").id
        res = engine.recall("favourite food", tenant="t", k=10, min_activation=0, touch=False)
        hit, ref, top = _hit(res, far), _hit(res, other), _hit(res, best)
        assert hit.explanation.seed == pytest.approx(
            act.context_lift(fused(hit), fused(top) * fused(hit), weight=0.6))
        assert hit.explanation.seed > fused(hit)
        assert ref.explanation.seed == pytest.approx(
            act.context_lift(fused(ref), fused(ref) ** 2, weight=0.6))
    with _open(tmp_path, clock, context_weight=0.0) as engine:
        res = engine.recall("favourite food", tenant="t", k=10, min_activation=0, touch=False)
        hit = _hit(res, far)
        assert hit.explanation.seed == pytest.approx(fused(hit))


def test_kept_session_links_follow_a_new_follows_relation(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    """Recall keeps each memory's ``follows`` links once read; a relation added afterwards
    (here by hand, between two sessions) is seen by the next recall."""
    with _open(tmp_path, clock) as engine:
        _question, answer = _session(engine, clock)
        lone = engine.add("olives are on the shopping list", tenant="t").id
        query = "favourite food"
        before = _hit(engine.recall(query, tenant="t", k=20, min_activation=0, touch=False),
                      lone).explanation.seed
        assert engine.runtime.caches.kept_links("t", "follows")  # kept after the first recall
        engine.relate(answer, lone, "follows", tenant="t")
        after = _hit(engine.recall(query, tenant="t", k=20, min_activation=0, touch=False),
                     lone).explanation.seed
        assert after > before  # now lifted by the question two turns before it


def test_kept_links_follow_new_turns_and_survive_other_writes(tmp_path: Path,
                                                              clock: ManualClock) -> None:
    """A new turn's relations drop the kept links of the memories they touch (the turn it
    follows, its related memories), and only those: a chat that adds a turn between two
    recalls keeps the rest."""
    with _open(tmp_path, clock) as engine:
        _question, answer = _session(engine, clock)
        engine.recall("favourite food", tenant="t", k=20, min_activation=0, touch=False)
        kept = engine.runtime.caches.kept_links("t", "follows")
        last = next(m.id for m in engine.list(tenant="t", session_id="s1")
                    if m.text == "Nice! See you soon")
        assert answer in kept and last in kept
        others = set(kept) - {last}
        clock.advance(timedelta(seconds=10))
        new = engine.add("Oh, and olives on everything", tenant="t", session_id="s1").id
        engine.enrich(tenant="t")
        kept = engine.runtime.caches.kept_links("t", "follows")
        assert last not in kept  # it gained a follower
        assert others - set(kept) <= {m for r in engine.relations(new, tenant="t")
                                      for m in (r.src, r.dst)}
        assert answer in kept or answer in {r.dst for r in engine.relations(new, tenant="t")}
        engine.recall("favourite food", tenant="t", k=20, min_activation=0, touch=False)
        assert new in engine.runtime.caches.kept_links("t", "follows")[last]


def test_kept_keyword_words_follow_a_rewritten_item(tmp_path: Path, clock: ManualClock) -> None:
    """The words fusion matches are kept per memory, and read afresh once its text changes
    (a keyed item written again keeps its memory id)."""
    from mnemonia.items import ItemWrite
    from mnemonia.store.schema import DEFAULT_ITEM_SPACE, item_tenant

    ns = ("notes",)
    tenant = item_tenant(DEFAULT_ITEM_SPACE, ns)
    with _open(tmp_path, clock) as engine:
        engine.items.put([ItemWrite(namespace=ns, key="trip", value={},
                                    text="I went to the lake for the weekend"),
                          ItemWrite(namespace=ns, key="car", value={},
                                    text="the car needs a new tyre")])
        query = "greenhouse glass"
        first = engine.recall(query, tenant=tenant, k=2, min_activation=0, touch=False)
        mid = next(h.memory.id for h in first.memories if "lake" in h.memory.text)
        assert mid in engine.runtime.caches.keyword_words
        assert _hit(first, mid).explanation.keyword == 0.0
        engine.items.put([ItemWrite(namespace=ns, key="trip", value={},
                                    text="the greenhouse needs new glass")])
        again = engine.recall(query, tenant=tenant, k=2, min_activation=0, touch=False)
        assert again.ids[0] == mid
        assert _hit(again, mid).explanation.keyword == pytest.approx(1.0)


# -- the keyword side beside the query embedding -----------------------------------------------


class _SlowEmbedder(HashingEmbedder):
    """The hashing embedder, slowed and watched: a query embedding takes 50 ms (as a model's
    would take time), and the thread the keyword side ran on is noted."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        if self.fail:
            raise RuntimeError("the model is gone")
        time.sleep(0.05)
        return super().embed_query(text)


def test_the_keyword_side_runs_beside_the_query_embedding(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    """A query not embedded yet reads its keyword side on a helper thread while the query is
    embedded; the hits are the same as when the query vector is cached and both run in turn,
    and errors of either side reach the caller."""
    embedder = _SlowEmbedder()
    config = MnemoniaConfig.load(env={}, maintenance="manual")
    with MemoryEngine.open(tmp_path / "store", config=config, clock=clock,
                           embedder=embedder) as engine:
        _session(engine, clock)
        threads: list[str] = []
        search = engine.sql.keywords.keyword_search

        def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
            threads.append(threading.current_thread().name)
            return search(*args, **kwargs)

        engine.runtime.sql.keywords.keyword_search = watched  # type: ignore[method-assign]
        first = engine.recall("favourite food pizza", tenant="t", k=5, min_activation=0,
                              touch=False)
        again = engine.recall("favourite food pizza", tenant="t", k=5, min_activation=0,
                              touch=False)  # the query vector is cached now: in turn
        assert threads[0].startswith("mnemonia-recall")
        assert threads[1] == threading.current_thread().name
        assert [(h.memory.id, h.score) for h in first.memories] == \
            [(h.memory.id, h.score) for h in again.memories]
        assert {"What is your favourite food these days?",
                "Definitely pizza, with extra olives"} <= {h.memory.text for h in first.memories}

        embedder.fail = True
        with pytest.raises(RuntimeError, match="the model is gone"):
            engine.recall("a new question", tenant="t", touch=False)

        embedder.fail = False

        def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
            raise RuntimeError("the keyword index is gone")

        engine.runtime.sql.keywords.keyword_search = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="the keyword index is gone"):
            engine.recall("another new question", tenant="t", touch=False)
    with pytest.raises(StoreError, match="closed"):
        engine.runtime.aside(print)


@pytest.mark.parametrize(("words", "terms"), [(1, 3), (1, 5000), (4, 700), (12, 10000)])
def test_word_similarities_in_slices_equal_one_product(words: int, terms: int) -> None:
    """The related-word similarities are computed in slices (so OpenBLAS stays on the
    calling thread); they equal the single product, in shape and value."""
    rng = np.random.default_rng(words * terms)
    w = rng.normal(size=(words, 384)).astype(np.float32)
    m = rng.normal(size=(terms, 384)).astype(np.float32)
    got = kw._similarities(w, m)
    assert got.shape == (words, terms)
    assert np.allclose(got, w @ m.T, rtol=1e-5, atol=1e-4)
