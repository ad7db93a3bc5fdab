r"""LoCoMo retrieval quality of ``MemoryEngine.recall`` beside dense, BM25 and their fusion.

Usage::

    .venv/bin/python benchmarks/locomo.py --data /path/to/locomo10.json
    .venv/bin/python benchmarks/locomo.py --ablation --heldout   # + ablation, held-out check

Each conversation goes into its own tenant of one embedded store (a temporary folder, deleted
at the end) through ``MemoryEngine.add_many``, one call per session: the turn text with its
speaker (the engine embeds ``Speaker said, "text"``; a shared photo's caption is appended to
the text as `` and shared <caption>``), ``at`` = the session's time plus ``TURN_SPACING`` per
turn so the order is kept, ``session_id`` = ``<sample_id>-S<n>`` and the turn's ``dia_id`` in
``metadata``. The engine's clock (a ``ManualClock``) stands at each session's last turn while
that session is added. After the last session the tenant gets the enrichment sweep
(``engine.enrich``: entities and ``follows`` / ``related_to`` / ``same_entity`` relations for
the memories the gatekeeper batched; ``immediate`` ones are enriched at ingest); ``--sweep
maintain`` runs every maintenance job instead. Then the clock moves to the conversation's ask
time (one day after its last session) and every scored question (categories 1-4 with
evidence) goes through ``MemoryEngine.recall(question, k=20, touch=False, min_activation=0)``
with the shipped defaults: ``touch=False`` so questions do not change each other's results
(no access counts, stability or access-log rows), ``min_activation=0`` so the engine returns
exactly ``k`` memories as the baselines do (the floor decides what memory adapters inject into
a prompt; a row with the default floor is printed too).

The baselines (``baselines.py``) run in the same process over the same turns: dense MiniLM
cosine, BM25 and reciprocal rank fusion (k=60, top 100 of each). Latency is the wall time of
one ``recall`` call including its query embedding (each question is new to the engine's query
cache), beside a bare Chroma kNN plus query embedding on the same collection.

Nothing is written outside the temporary store and nothing is cached across runs, except
with ``--supersessions FILE``: after ingest every automatic supersession (a memory with
``superseded_by`` set) and contradiction (a ``contradicts`` relation) of every tenant is written
there, one JSON object per line, with both memories (id, text, speaker, time, dia_id) and the
evidence of the engine's event ("superseded" / "contradiction"). ``--no-detect`` ingests with
``detect_updates=False`` (issue 34: R@k with and without knowledge-update detection).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # allow `python benchmarks/locomo.py` and `import locomo`
    sys.path.insert(0, _HERE)

from baselines import RRF_DEPTH, BM25Baseline, DenseBaseline, rrf  # noqa: E402
from locomo_data import (  # noqa: E402
    DEFAULT_KS,
    DEFAULT_PATH,
    Conversation,
    Question,
    evaluate,
    format_table,
    load_locomo,
    scored_questions,
    summarise,
)
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig  # noqa: E402
from mnemonia.config import DEFAULT_EMBEDDER_BACKEND, EMBEDDER_BACKENDS  # noqa: E402
from mnemonia.embeddings import SentenceTransformerEmbedder, default_embedder  # noqa: E402

TURN_SPACING = timedelta(seconds=10)  # between consecutive turns of one session
RECALL_K = 20
Key = tuple[str, str]  # (sample_id, question)
PerQuestion = list[tuple[str, str, int, dict[int, float]]]

# The ablation: each row switches on one more part of the pipeline; the tenth row is the
# shipped configuration. Keys not named are the shipped defaults (MnemoniaConfig()).
_NO_KEYWORD = {"keyword_candidates": 0, "hybrid_keyword_weight": 0.0, "keyword_dates": False,
               "keyword_idf": False, "keyword_expansion": 0.0, "keyword_stem_credit": 0.0}
_NO_DATES = {"keyword_dates": False}
_NO_IDF = {"keyword_idf": False}
_NO_STEMS = {"keyword_stem_credit": 0.0}
_NO_EXPANSION = {"keyword_expansion": 0.0, **_NO_STEMS}
_NO_SPEAKER = {"speaker_weight": 0.0}
_NO_SESSION = {"session_weight": 0.0}
_NO_CONTEXT = {"context_weight": 0.0, **_NO_SESSION}
_NO_SPREAD = {"spread_depth": 0}
_NO_ENTITIES = {"entity_fanout": 0}
_LATER = {**_NO_SPREAD, **_NO_ENTITIES}
ABLATION: list[tuple[str, dict[str, Any]]] = [
    ("dense only", {**_NO_KEYWORD, **_NO_SPEAKER, **_NO_CONTEXT, **_LATER}),
    ("+ keyword (candidates, fusion)",
     {**_NO_DATES, **_NO_IDF, **_NO_EXPANSION, **_NO_SPEAKER, **_NO_CONTEXT, **_LATER}),
    ("+ dates in keyword text", {**_NO_IDF, **_NO_EXPANSION, **_NO_SPEAKER, **_NO_CONTEXT,
                                 **_LATER}),
    ("+ IDF weights", {**_NO_EXPANSION, **_NO_SPEAKER, **_NO_CONTEXT, **_LATER}),
    ("+ keyword expansion (word vectors)", {**_NO_STEMS, **_NO_SPEAKER, **_NO_CONTEXT,
                                            **_LATER}),
    ("+ same-stem words", {**_NO_SPEAKER, **_NO_CONTEXT, **_LATER}),
    ("+ named speaker", {**_NO_CONTEXT, **_LATER}),
    ("+ session context", {**_LATER}),
    ("+ spreading (follows, related_to, same_entity)", {**_NO_ENTITIES}),
    ("+ entities = shipped defaults", {}),
    ("previous defaults (2026-11-23)", {**_NO_IDF, **_NO_EXPANSION, **_NO_SPEAKER,
                                        **_NO_CONTEXT, "keyword_candidates": 20,
                                        "hybrid_keyword_weight": 0.45}),
    ("shipped + session's best match (session_weight 0.6)", {"session_weight": 0.6}),
    ("round two, first cut (2026-11-23)", {**_NO_SESSION, **_NO_STEMS,
                                           "keyword_candidates": 50,
                                           "keyword_expansion": 0.5, "speaker_weight": 0.1}),
    ("shipped before same-stem words (2026-11-23)", {**_NO_STEMS}),
]

# Held-out check: the grid a "tuning" run chooses from (by mean R@5+R@10+R@20).
HELDOUT_GRID: dict[str, Sequence[Any]] = {
    "keyword_expansion": (0.0, 0.45),
    "keyword_stem_credit": (0.0, 0.8),
    "speaker_weight": (0.1, 0.2),
    "session_weight": (0.0, 0.6),
}


class CachedEmbedder:
    """The engine's default embedder with an in-process cache of document vectors.

    Ingest embeds each turn once; the dense baseline reuses the vectors of identical texts.
    Queries are never served from here, so recall latency includes the query embedding; they
    are recorded in ``queries`` for the baseline.
    """

    def __init__(self, inner: Any | None = None) -> None:
        self.inner = inner if inner is not None else default_embedder()
        self.name = self.inner.name
        self.cache: dict[str, np.ndarray] = {}
        self.queries: dict[str, np.ndarray] = {}

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    @property
    def model(self) -> Any:
        """What the dense baseline encodes with: the SentenceTransformer itself, or (another
        backend) the embedder behind an ``encode`` of the same shape."""
        inner = self.inner
        if isinstance(inner, SentenceTransformerEmbedder):
            return inner.model
        return _Encoder(inner)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for t, v in zip(missing, self.inner.embed_documents(missing), strict=True):
                self.cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        vec = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        self.queries[text] = vec
        return vec


class _Encoder:
    """``encode(texts, ...)`` of an embedder (normalised rows), for the dense baseline."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def encode(self, texts: Sequence[str], **_: Any) -> np.ndarray:
        return np.asarray(self.embedder.embed_documents(list(texts)), dtype=np.float32)


def turn_text(turn: Any) -> str:
    """What is stored: the turn's text, plus `` and shared <caption>`` for a shared photo."""
    return f"{turn.text} and shared {turn.blip_caption}" if turn.blip_caption else turn.text


def ingest(engine: MemoryEngine, clock: ManualClock, conv: Conversation, *,
           sweep: str = "enrich") -> dict[str, Any]:
    """Add one conversation to tenant ``conv.sample_id``, session by session.

    ``sweep`` is what runs after the last session: ``"enrich"`` (the enrichment sweep),
    ``"maintain"`` (every maintenance job) or ``"none"``.
    """
    tenant = conv.sample_id
    by_session: dict[int, list[Any]] = {}
    for t in conv.turns:
        by_session.setdefault(t.session, []).append(t)
    added = 0
    for n in sorted(by_session):
        turns, start = by_session[n], conv.sessions[n]
        items = [{
            "text": turn_text(t), "speaker": t.speaker, "at": start + i * TURN_SPACING,
            "session_id": f"{conv.sample_id}-S{n}", "metadata": {"dia_id": t.dia_id},
        } for i, t in enumerate(turns)]
        clock.set(start + (len(turns) - 1) * TURN_SPACING)
        added += len(engine.add_many(items, tenant=tenant))
    if sweep == "enrich":
        engine.enrich(tenant=tenant)
    elif sweep == "maintain":
        engine.maintain(tenant)
    elif sweep != "none":
        raise ValueError(f"sweep must be 'enrich', 'maintain' or 'none', not {sweep!r}")
    stats = engine.stats(tenant)
    return {"added": added, "relations": stats["relations"], "by_state": stats["by_state"]}


def _mem_json(m: Any) -> dict[str, Any]:
    return {"id": m.id, "text": m.text, "speaker": m.metadata.get("speaker"),
            "at": m.created_at.isoformat(), "dia_id": m.metadata.get("dia_id"),
            "session_id": m.session_id}


def update_decisions(engine: MemoryEngine) -> tuple[list[dict[str, Any]], int]:
    """Every supersession (a memory with ``superseded_by``) and contradiction (a
    ``contradicts`` relation) of every tenant, with both memories and the evidence of the
    engine's event; and the number of memories read."""
    out: list[dict[str, Any]] = []
    total = 0
    for tenant in engine.tenants():
        mems = engine.list(tenant=tenant)
        by_id = {m.id: m for m in mems}
        total += sum(1 for m in mems if m.kind != "concept")
        for m in mems:
            if m.superseded_by:
                new = by_id.get(m.superseded_by) or engine.get(m.superseded_by, tenant=tenant)
                ev = _evidence(engine, tenant, m.id, "superseded", "superseded_by", new.id)
                out.append({"tenant": tenant, "kind": "supersedes", "old": _mem_json(m),
                            "new": _mem_json(new), "evidence": ev})
            for r in engine.relations(m.id, tenant=tenant):
                if r.type != "contradicts" or r.src != m.id:
                    continue
                old = by_id.get(r.dst) or engine.get(r.dst, tenant=tenant)
                ev = _evidence(engine, tenant, m.id, "contradiction", "contradicts", old.id)
                out.append({"tenant": tenant, "kind": "contradicts", "old": _mem_json(old),
                            "new": _mem_json(m), "evidence": ev})
    return out, total


def _evidence(engine: MemoryEngine, tenant: str, memory_id: str, event: str, key: str,
              other: str) -> Any:
    """The evidence of the last ``event`` of ``memory_id`` whose ``after[key]`` is ``other``."""
    found = [e.after for e in engine.history(memory_id, tenant=tenant)
             if e.event == event and e.after and e.after.get(key) == other]
    return found[-1].get("evidence") if found else None


def write_decisions(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """One JSON object per line (``.jsonl``), or a markdown list (``.md``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".md":
        lines = []
        for i, r in enumerate(rows, start=1):
            o, n, ev = r["old"], r["new"], r["evidence"] or {}
            lines += [f"{i}. **{r['kind']}** ({r['tenant']}; slot `{ev.get('slot')}`: "
                      f"{ev.get('old_value')!r} -> {ev.get('new_value')!r}, cue "
                      f"{ev.get('cue')!r}, conf {ev.get('confidence')}, {ev.get('reason')})",
                      f"   - old {o['dia_id']} {o['at']} {o['speaker']}: {o['text']}",
                      f"   - new {n['dia_id']} {n['at']} {n['speaker']}: {n['text']}"]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


@dataclass
class EngineRun:
    """Rankings (dia_ids, best first) per (sample_id, question) and recall latencies (s)."""

    rankings: dict[Key, list[str]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    knn_latencies: list[float] = field(default_factory=list)

    def rank_fn(self) -> Callable[[Conversation, Question], list[str]]:
        return lambda conv, q: self.rankings[(conv.sample_id, q.question)]


def ask(engine: MemoryEngine, clock: ManualClock, conversations: Sequence[Conversation], *,
        k: int = RECALL_K, min_activation: float | None = 0.0, bare_knn: bool = False
        ) -> EngineRun:
    """Every scored question through ``engine.recall(..., touch=False)``, timed."""
    run = EngineRun()
    for conv in conversations:
        clock.set(conv.ask_time)
        col = engine.vectors.collection(conv.sample_id, model=engine.embedder.name,
                                        dimension=0, create=False) if bare_knn else None
        for q in scored_questions(conv):
            t0 = time.perf_counter()
            res = engine.recall(q.question, tenant=conv.sample_id, k=k, touch=False,
                                min_activation=min_activation)
            run.latencies.append(time.perf_counter() - t0)
            run.rankings[(conv.sample_id, q.question)] = [
                str(h.memory.metadata.get("dia_id", "")) for h in res.memories]
            if col is not None:
                t0 = time.perf_counter()
                qv = engine.embedder.embed_query(q.question)
                col.query(query_embeddings=qv[None, :], n_results=k, include=["distances"])
                run.knn_latencies.append(time.perf_counter() - t0)
    return run


class Bench:
    """One temporary embedded store with every conversation ingested (shipped defaults);
    ``run(config)`` re-opens it with another recall configuration and asks everything."""

    def __init__(self, conversations: Sequence[Conversation], *, sweep: str = "enrich",
                 embedder: CachedEmbedder | None = None, progress: bool = True,
                 config: MnemoniaConfig | None = None) -> None:
        self.conversations = list(conversations)
        self.config = config if config is not None else MnemoniaConfig()
        self.embedder = embedder if embedder is not None else CachedEmbedder()
        self.progress = progress
        self._root = Path(tempfile.mkdtemp(prefix="mnemonia-locomo-"))
        self.path = self._root / "store"
        first = min(c.sessions[min(c.sessions)] for c in self.conversations)
        self.clock = ManualClock(first)
        t_all = time.perf_counter()
        # maintenance="manual": the --sweep option decides what maintenance runs (the
        # background jobs would otherwise run whenever the clock moves to a session)
        with MemoryEngine.open(self.path, config=self.config, clock=self.clock,
                               embedder=self.embedder, maintenance="manual") as engine:
            for conv in self.conversations:
                t0 = time.perf_counter()
                info = ingest(engine, self.clock, conv, sweep=sweep)
                self.log(f"  {conv.sample_id}: {info['added']} turns, {info['relations']} "
                         f"relations, states {info['by_state']} ({time.perf_counter() - t0:.0f}s)")
        self.ingest_seconds = time.perf_counter() - t_all

    def log(self, msg: str) -> None:
        if self.progress:
            print(msg, file=sys.stderr, flush=True)

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, config: MnemoniaConfig | None = None, **ask_kwargs: Any) -> EngineRun:
        with MemoryEngine.open(self.path, config=config or self.config, clock=self.clock,
                               embedder=self.embedder, maintenance="manual") as engine:
            return ask(engine, self.clock, self.conversations, **ask_kwargs)

    def supersessions(self) -> tuple[list[dict[str, Any]], int]:
        """Every automatic supersession and contradiction in the store (see
        :func:`update_decisions`) and the number of memories."""
        with MemoryEngine.open(self.path, config=self.config, clock=self.clock,
                               embedder=self.embedder, maintenance="manual") as engine:
            return update_decisions(engine)

    def evaluate(self, run: EngineRun) -> dict[str, Any]:
        return evaluate(self.conversations, run.rank_fn(), DEFAULT_KS)


def baseline_rankings(conversations: Sequence[Conversation], emb: CachedEmbedder
                      ) -> dict[str, dict[Key, list[str]]]:
    """Dense, BM25 and RRF rankings of every scored question (as ``baselines.run_baselines``,
    reusing the vectors the engine already computed for identical texts)."""
    cache = {**emb.cache, **emb.queries}
    dense, bm25 = DenseBaseline(emb.model, cache=cache), BM25Baseline()
    fused = f"RRF k=60 top{RRF_DEPTH}"
    out: dict[str, dict[Key, list[str]]] = {
        "dense MiniLM cosine": {}, "BM25 (Okapi)": {}, fused: {}}
    for conv in conversations:
        dense.index(conv)
        bm25.index(conv)
        for q in scored_questions(conv):
            key = (conv.sample_id, q.question)
            d, b = dense.rank(q.question), bm25.rank(q.question)
            out["dense MiniLM cosine"][key], out["BM25 (Okapi)"][key] = d, b
            out[fused][key] = rrf([d, b], k=60, depth=RRF_DEPTH)
    return out


def _table_fn(table: Mapping[Key, list[str]]) -> Callable[[Conversation, Question], list[str]]:
    return lambda conv, q: table[(conv.sample_id, q.question)]


def per_conversation_table(results: Mapping[str, Mapping[str, Any]],
                           ks: Sequence[int] = DEFAULT_KS) -> str:
    """Overall R@k of each method on each conversation (rows) and method (columns)."""
    by_method = {name: _by_conversation(res) for name, res in results.items()}
    ids = list(next(iter(by_method.values())))
    names = list(results)
    cell_w = max(len("/".join("00.0" for _ in ks)), *(len(n) for n in names))
    lines = [f"{'conversation':<16}" + "".join(f"  {n:>{cell_w}}" for n in names)]
    lines.append("-" * len(lines[0]))
    for cid in ids:
        cells = []
        for name in names:
            rows = by_method[name][cid]
            cells.append("/".join(f"{100 * sum(r[3][k] for r in rows) / len(rows):.1f}"
                                  for k in ks))
        lines.append(f"{f'{cid} (n={len(by_method[names[0]][cid])})':<16}"
                     + "".join(f"  {c:>{cell_w}}" for c in cells))
    return "\n".join(lines)


def latency_ms(run: EngineRun) -> tuple[float, float]:
    return 1000 * statistics.fmean(run.latencies), 1000 * statistics.median(run.latencies)


def latency_line(run: EngineRun) -> str:
    mean, p50 = latency_ms(run)
    out = f"recall latency: mean {mean:.1f} ms, p50 {p50:.1f} ms over {len(run.latencies)} calls"
    if run.knn_latencies:
        knn = 1000 * statistics.median(run.knn_latencies)
        out += f"; bare Chroma kNN + query embedding p50 {knn:.1f} ms (x{p50 / knn:.2f})"
    return out


def ablation(bench: Bench, rows: Sequence[tuple[str, dict[str, Any]]] = ABLATION
             ) -> dict[str, tuple[dict[str, Any], EngineRun]]:
    out = {}
    for name, over in rows:
        run = bench.run(MnemoniaConfig().replace(**over))
        out[name] = (bench.evaluate(run), run)
        bench.log(f"  {name}: {_cells(out[name][0])}")
    return out


def _cells(res: Mapping[str, Any], ks: Sequence[int] = DEFAULT_KS) -> str:
    return " / ".join(f"{100 * res['overall'][k]:.1f}" for k in ks)


def ablation_table(rows: Mapping[str, tuple[dict[str, Any], EngineRun]],
                   ks: Sequence[int] = DEFAULT_KS) -> str:
    name_w = max(len(n) for n in rows)
    head = f"{'configuration':<{name_w}}  " + "  ".join(f"{f'R@{k}':>5}" for k in ks) + \
        "  mean ms  p50 ms"
    lines = [head, "-" * len(head)]
    for name, (res, run) in rows.items():
        mean, p50 = latency_ms(run)
        cells = "  ".join(f"{100 * res['overall'][k]:5.1f}" for k in ks)
        lines.append(f"{name:<{name_w}}  {cells}  {mean:7.1f}  {p50:6.1f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# held-out check: tune on some conversations, score the others
# --------------------------------------------------------------------------------------------
def grid_configs(grid: Mapping[str, Sequence[Any]]) -> list[tuple[dict[str, Any], MnemoniaConfig]]:
    keys = list(grid)
    out = []
    for values in itertools.product(*(grid[k] for k in keys)):
        over = dict(zip(keys, values, strict=True))
        out.append((over, MnemoniaConfig().replace(**over)))
    return out


def _by_conversation(res: Mapping[str, Any]) -> dict[str, PerQuestion]:
    out: dict[str, PerQuestion] = {}
    for row in res["per_question"]:
        out.setdefault(row[0], []).append(row)
    return out


def heldout(bench: Bench, defaults: Mapping[str, Any],
            baselines: Mapping[str, Mapping[str, Any]], *, n_tune: int = 3,
            grid: Mapping[str, Sequence[Any]] | None = None) -> dict[str, Any]:
    """Every split of the conversations into ``n_tune`` tuning ones and the rest held out.

    For each split the grid point with the best mean R@5+R@10+R@20 on the tuning side is
    scored on the held-out side, beside the shipped defaults and the baselines there. Scores
    are pooled over the held-out sides of all splits (each conversation is held out equally
    often, so every question has the same weight).
    """
    ks = list(DEFAULT_KS)
    points = grid_configs(HELDOUT_GRID if grid is None else grid)
    grid_pq = []
    for i, (over, cfg) in enumerate(points, start=1):
        grid_pq.append(_by_conversation(bench.evaluate(bench.run(cfg))))
        bench.log(f"  grid {i}/{len(points)}: {over}")
    others = {"shipped defaults": _by_conversation(defaults)}
    others.update({name: _by_conversation(res) for name, res in baselines.items()})

    def mean(pq: Mapping[str, PerQuestion], which: Sequence[str]) -> float:
        rows = [r for c in which for r in pq.get(c, [])]
        return sum(sum(r[3][k] for k in ks) for r in rows) / max(1, len(rows))

    ids = [c.sample_id for c in bench.conversations]
    pooled: dict[str, PerQuestion] = {}
    chosen = []
    for tune in itertools.combinations(ids, n_tune):
        held = [c for c in ids if c not in tune]
        best = max(range(len(points)), key=lambda j: (mean(grid_pq[j], tune), -j))
        chosen.append((tune, points[best][0]))
        pooled.setdefault(f"tuned on the other {n_tune} (grid)", []).extend(
            r for c in held for r in grid_pq[best][c])
        for name, pq in others.items():
            pooled.setdefault(name, []).extend(r for c in held for r in pq[c])
    return {"table": {name: summarise(rows, ks) for name, rows in pooled.items()},
            "chosen": chosen, "n_tune": n_tune}


# --------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_PATH),
                    help="LoCoMo JSON, e.g. locomo10.json (default: %(default)s)")
    ap.add_argument("--sweep", choices=("enrich", "maintain", "none"), default="enrich",
                    help="maintenance after ingest (default: the enrichment sweep)")
    ap.add_argument("--ablation", action="store_true", help="also print the ablation table")
    ap.add_argument("--heldout", action="store_true",
                    help="also run the leave-one-conversation-out check (tune on the others)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for the model (default 1: on a busy machine more "
                         "threads wait on each other and query embedding gets 10-20x slower)")
    ap.add_argument("--backend", choices=EMBEDDER_BACKENDS, default=DEFAULT_EMBEDDER_BACKEND,
                    help="how the bundled model runs (the engine's embedder_backend; the dense "
                         "baseline uses the same; default %(default)s)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--vary", metavar="KEY=V1,V2,...",
                    help="ask the same stores again with KEY at each value (a recall key)")
    ap.add_argument("--no-detect", action="store_true",
                    help="ingest with detect_updates=False (no automatic supersessions)")
    ap.add_argument("--supersessions", type=Path, metavar="FILE",
                    help="write every automatic supersession / contradiction after ingest "
                         "(JSONL; a .md name gives a markdown list)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(max(1, args.threads))

    convs = load_locomo(args.data)
    n_q = sum(len(scored_questions(c)) for c in convs)
    print(f"LoCoMo {args.data}: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} "
          f"turns, {n_q} scored questions (categories 1-4 with evidence)")
    emb = CachedEmbedder(default_embedder(args.backend))
    print(f"embedder: {emb.inner!r} ({args.backend})")
    config = MnemoniaConfig(detect_updates=not args.no_detect)
    print(f"detect_updates={config.detect_updates} update_threshold={config.update_threshold}")
    with Bench(convs, sweep=args.sweep, embedder=emb, progress=not args.quiet,
               config=config) as bench:
        print(f"ingest ({args.sweep} sweep): {bench.ingest_seconds:.0f} s")
        decisions, n_mem = bench.supersessions()
        n_sup = sum(1 for d in decisions if d["kind"] == "supersedes")
        n_con = len(decisions) - n_sup
        print(f"automatic supersessions: {n_sup} of {n_mem} memories "
              f"({100 * n_sup / max(1, n_mem):.2f}%); contradictions: {n_con}")
        if args.supersessions:
            write_decisions(args.supersessions, decisions)
            print(f"written to {args.supersessions}")
        run = bench.run(bare_knn=True)
        ours = bench.evaluate(run)
        floor_run = bench.run(min_activation=None)
        bench.log("baselines ...")
        tables = baseline_rankings(convs, emb)
        base = {name: evaluate(convs, _table_fn(t), DEFAULT_KS) for name, t in tables.items()}
        rows = {f"Mnemonia recall k={RECALL_K}": ours,
                "  same, default floor": bench.evaluate(floor_run), **base}
        print()
        print(format_table(rows))
        print(latency_line(run))
        print()
        print("per conversation, R@5/R@10/R@20:")
        print(per_conversation_table({"Mnemonia": ours, **base}))
        if args.vary:
            key, _, values = args.vary.partition("=")
            rows_v = {}
            for v in values.split(","):
                cfg = config.replace(**{key: getattr(MnemoniaConfig.from_env(
                    {f"MNEMONIA_{key.upper()}": v}), key)})
                run_v = bench.run(cfg)
                rows_v[f"{key}={v}"] = (bench.evaluate(run_v), run_v)
                bench.log(f"  {key}={v}: {_cells(rows_v[f'{key}={v}'][0])}")
                base_q = {(r[0], r[1]): r[3] for r in ours["per_question"]}
                moved = [(r[0], r[1], base_q[(r[0], r[1])][5], r[3][5])
                         for r in rows_v[f"{key}={v}"][0]["per_question"]
                         if r[3][5] != base_q[(r[0], r[1])][5]]
                for sample, question, before, after in moved:
                    bench.log(f"    R@5 {before:.2f} -> {after:.2f}  {sample}: {question}")
            print()
            print(ablation_table(rows_v))
        if args.ablation:
            bench.log("ablation ...")
            print()
            print(ablation_table(ablation(bench)))
        if args.heldout:
            bench.log("held-out check ...")
            # leave one conversation out: tune on the others, score the one left out
            out = heldout(bench, ours, base, n_tune=max(1, len(convs) - 1))
            print()
            n = out["n_tune"]
            print(f"held-out: each of the {len(out['chosen'])} splits of the {len(convs)} "
                  f"conversations into {n} to tune on and {len(convs) - n} held out; "
                  "scores pooled over the held-out sides")
            print(format_table(out["table"]))
            for tune, over in out["chosen"]:
                print(f"  tuned on {', '.join(tune)}: {over}")


if __name__ == "__main__":
    main()
