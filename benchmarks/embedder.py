r"""The bundled all-MiniLM-L6-v2 on its three backends side by side, in one run: ``torch``
(sentence-transformers), ``onnx`` and ``onnx-int8`` (``mnemonia.embeddings.onnx``), each with 1
and 2 threads.

    .venv/bin/python benchmarks/embedder.py                 # everything (~10 min on 2 cores)
    .venv/bin/python benchmarks/embedder.py --no-recall --no-cold

Per backend and thread count:

* agreement with the torch vectors (at torch's default thread count): lowest and mean cosine
  over every LoCoMo turn as the engine embeds it (``Speaker said, "text"``, a shared photo's
  caption appended) and over the sampled questions;
* single-query latency p50 / p95 (``embed_query``) over ``--queries`` LoCoMo questions, the
  backends taking turns in blocks so drift hits all alike;
* batch ingest: ``embed_documents`` of all turns in six calls of ~460 (texts/s; every backend
  sorts by length inside a call: sentence-transformers by characters, the ONNX embedder by
  tokens), the backends taking turns per call;
* export seconds into an empty cache (in this process, torch already imported) and the load
  seconds of a second embedder from the cache.

``--cold`` (default on): first vector in a fresh interpreter per backend (imports included),
with the ONNX cache warm, and once with an empty cache (the export a first user waits for).

``--recall`` (default on): one embedded store per backend with every conversation ingested as
``benchmarks/locomo.py`` does (document vectors reused from the ingest measurement), then each
sampled question through ``engine.recall(k=20, touch=False, min_activation=0)`` beside the bare
pair a user would write: sentence-transformers ``encode`` + ``collection.query`` on a Chroma
collection of the same turns (torch vectors). Interleaved per question.

Nothing is asserted; timings on a shared 2-core machine are noisy, so run it twice.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from locomo import RECALL_K, CachedEmbedder, ingest, turn_text  # noqa: E402
from locomo_data import DEFAULT_PATH, Conversation, load_locomo, scored_questions  # noqa: E402
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig  # noqa: E402
from mnemonia.embeddings import SentenceTransformerEmbedder  # noqa: E402
from mnemonia.embeddings.onnx import OnnxEmbedder  # noqa: E402
from mnemonia.validation import embed_text  # noqa: E402


@dataclass
class Row:
    """One backend at one thread count, and what was measured of it."""

    backend: str
    threads: int
    emb: Any
    export_s: float | None = None
    load_s: float | None = None
    docs: np.ndarray | None = None
    queries: np.ndarray | None = None
    query_s: list[float] = field(default_factory=list)
    ingest_per_s: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.backend} t={self.threads}"


def corpus(path: str, n_queries: int, n_convs: int | None = None
           ) -> tuple[list[Conversation], list[str], list[tuple[str, str]]]:
    """Conversations (the first ``n_convs``), every turn as the engine embeds it, and
    ``n_queries`` scored questions ``(sample_id, question)`` spread evenly over them."""
    convs = load_locomo(path)[:n_convs]
    texts = [embed_text(turn_text(t), t.speaker) for c in convs for t in c.turns]
    every = [(c.sample_id, q.question) for c in convs for q in scored_questions(c)]
    step = max(1, len(every) // n_queries)
    return convs, texts, every[::step][:n_queries]


def set_threads(row: Row) -> None:
    if row.backend == "torch":
        import torch

        torch.set_num_threads(row.threads)


def make_rows(cache: Path, threads: Sequence[int]) -> list[Row]:
    """Torch (one model, its thread count set per row) and the two ONNX files, exported into
    the empty ``cache`` by the first embedder of each and loaded from it by the next."""
    torch_emb = SentenceTransformerEmbedder()
    torch_emb.embed_query("warm up")
    rows = [Row("torch", t, torch_emb) for t in threads]
    for backend in ("onnx", "onnx-int8"):
        for t in threads:
            emb = OnnxEmbedder(quantized=backend == "onnx-int8", cache_dir=cache, threads=t)
            t0 = time.perf_counter()
            emb.embed_query("warm up")
            took = time.perf_counter() - t0
            row = Row(backend, t, emb)
            if emb.exported:
                row.export_s = emb.export_seconds
            else:
                row.load_s = took
            rows.append(row)
    return rows


def measure_ingest(rows: Sequence[Row], texts: Sequence[str], blocks: int = 6) -> None:
    """``embed_documents`` of every text on every row, the texts cut into ``blocks`` calls
    (each sorted by length inside the embedder) whose row order rotates, so load from other
    processes on the machine hits every row alike."""
    size = max(1, -(-len(texts) // blocks))
    parts: dict[str, list[np.ndarray]] = {r.label: [] for r in rows}
    spent = dict.fromkeys(parts, 0.0)
    for b in range(blocks):
        chunk = list(texts[b * size:(b + 1) * size])
        if not chunk:
            break
        for j in range(len(rows)):
            row = rows[(j + b) % len(rows)]
            set_threads(row)
            t0 = time.perf_counter()
            parts[row.label].append(np.asarray(row.emb.embed_documents(chunk), np.float32))
            spent[row.label] += time.perf_counter() - t0
    for row in rows:
        row.docs = np.concatenate(parts[row.label])
        row.ingest_per_s = len(texts) / spent[row.label]


def measure_queries(rows: Sequence[Row], questions: Sequence[str], blocks: int = 6) -> None:
    """``embed_query`` of every question on every row, in ``blocks`` rounds whose row order
    rotates (a row's thread setting is made once per block, outside the timing)."""
    vecs: dict[str, dict[int, np.ndarray]] = {r.label: {} for r in rows}
    size = max(1, -(-len(questions) // blocks))
    for b in range(blocks):
        part = range(b * size, min(len(questions), (b + 1) * size))
        for j in range(len(rows)):
            row = rows[(j + b) % len(rows)]
            set_threads(row)
            row.emb.embed_query("warm up")
            for i in part:
                t0 = time.perf_counter()
                v = row.emb.embed_query(questions[i])
                row.query_s.append(time.perf_counter() - t0)
                vecs[row.label][i] = np.asarray(v, dtype=np.float32)
    for row in rows:
        row.queries = np.stack([vecs[row.label][i] for i in range(len(questions))])


def _pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def _cos(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    if a is None or b is None:
        raise ValueError("vectors missing")
    return np.asarray(np.sum(a * b, axis=1), dtype=np.float64)


def print_table(rows: Sequence[Row], ref: Row) -> None:
    """One line per row; speed ratios against the reference (torch at its default thread
    count) and against torch at the row's own thread count."""
    head = (f"{'backend':<14} {'export s':>8} {'load s':>6} {'docs min cos':>12} "
            f"{'docs mean':>9} {'q min cos':>9} {'q p50 ms':>8} {'q p95 ms':>8} "
            f"{'x p50':>6} {'x p50 =t':>8} {'ingest/s':>8} {'x ingest':>8} {'x ingest =t':>11}")
    print(head)
    print("-" * len(head))
    torch_rows = {r.threads: r for r in rows if r.backend == "torch"}
    for r in rows:
        docs, qs = _cos(r.docs, ref.docs), _cos(r.queries, ref.queries)
        p50 = statistics.median(r.query_s)
        same = torch_rows.get(r.threads, ref)
        export = f"{r.export_s:.1f}" if r.export_s is not None else "-"
        load = f"{r.load_s:.2f}" if r.load_s is not None else "-"
        print(f"{r.label:<14} {export:>8} {load:>6} {docs.min():>12.7f} {docs.mean():>9.7f} "
              f"{qs.min():>9.7f} {1000 * p50:>8.2f} {1000 * _pct(r.query_s, 95):>8.2f} "
              f"{statistics.median(ref.query_s) / p50:>5.2f}x "
              f"{statistics.median(same.query_s) / p50:>7.2f}x {r.ingest_per_s:>8.0f} "
              f"{r.ingest_per_s / ref.ingest_per_s:>7.2f}x "
              f"{r.ingest_per_s / same.ingest_per_s:>10.2f}x")
    print(f"cosines against {ref.label} (torch's default thread count); x p50: its p50 / the "
          "row's (above 1: faster); x ingest: the row's texts/s / its; '=t': the same against "
          "torch at the row's thread count")


_COLD = """
import os, sys, time
t0 = time.perf_counter()
from mnemonia.embeddings import default_embedder
emb = default_embedder(sys.argv[1], onnx_cache_dir=sys.argv[2])
emb.embed_query("a first query")
print(f"{time.perf_counter() - t0:.2f}")
"""


def cold_starts(cache: Path) -> list[tuple[str, float]]:
    """Seconds to a first vector in a fresh interpreter: each backend with the cache as it is
    (warm), then ``onnx`` with an empty cache (export included)."""
    out = []
    empty = Path(tempfile.mkdtemp(prefix="mnemonia-onnx-cold-"))
    try:
        for label, backend, folder in (("torch", "torch", cache), ("onnx (cache warm)", "onnx",
                                       cache), ("onnx-int8 (cache warm)", "onnx-int8", cache),
                                      ("onnx (empty cache: export)", "onnx", empty)):
            res = subprocess.run([sys.executable, "-c", _COLD, backend, str(folder)],
                                 capture_output=True, text=True, check=True)
            out.append((label, float(res.stdout.strip().splitlines()[-1])))
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    return out


@dataclass
class Store:
    """One embedded store with every conversation, opened on one backend."""

    label: str
    engine: Any
    clock: ManualClock
    times: list[float] = field(default_factory=list)


def build_store(root: Path, row: Row, convs: Sequence[Conversation],
                texts: Sequence[str]) -> Store:
    """Every conversation ingested as ``benchmarks/locomo.py`` does (enrichment sweep), the
    turn vectors reused from the ingest measurement; then reopened for the questions."""
    cached = CachedEmbedder(row.emb)
    if row.docs is not None:
        cached.cache.update(zip(texts, row.docs, strict=True))
    first = min(c.sessions[min(c.sessions)] for c in convs)
    clock = ManualClock(first)
    path = root / row.backend
    with MemoryEngine.open(path, config=MnemoniaConfig(), clock=clock, embedder=cached,
                           maintenance="manual") as engine:
        for conv in convs:
            ingest(engine, clock, conv)
    engine = MemoryEngine.open(path, config=MnemoniaConfig(), clock=clock, embedder=row.emb,
                               maintenance="manual")
    return Store(row.backend, engine, clock)


def bare_pair(root: Path, ref: Row, convs: Sequence[Conversation],
              texts: Sequence[str]) -> Callable[[str, str], Any]:
    """A user's own sentence-transformers + Chroma: one collection per conversation holding
    its turns' torch vectors; ``(sample_id, question) -> kNN result``."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(root / "bare"),
                                       settings=Settings(anonymized_telemetry=False))
    cols, i = {}, 0
    for conv in convs:
        n = len(conv.turns)
        col = client.get_or_create_collection(f"bare-{conv.sample_id}", embedding_function=None,
                                              metadata={"hnsw:space": "cosine"})
        col.add(ids=[t.dia_id for t in conv.turns], embeddings=ref.docs[i:i + n],
                documents=list(texts[i:i + n]))
        cols[conv.sample_id], i = col, i + n
    model = ref.emb.model

    def query(sample_id: str, question: str) -> Any:
        vec = model.encode([question], normalize_embeddings=True, convert_to_numpy=True,
                           show_progress_bar=False)
        return cols[sample_id].query(query_embeddings=vec, n_results=RECALL_K)
    query.client = client  # type: ignore[attr-defined]  # kept open until the end
    return query


def recall_section(rows: Sequence[Row], ref: Row, convs: Sequence[Conversation],
                   texts: Sequence[str], questions: Sequence[tuple[str, str]],
                   torch_threads: int) -> None:
    """``engine.recall`` p50 per backend beside the bare pair, interleaved per question."""
    root = Path(tempfile.mkdtemp(prefix="mnemonia-embedder-bench-"))
    try:
        chosen = {r.backend: r for r in rows if r.threads == 1}
        set_threads(Row("torch", torch_threads, None))
        bare = bare_pair(root, ref, convs, texts)
        stores = []
        for backend, row in chosen.items():
            t0 = time.perf_counter()
            stores.append(build_store(root, row, convs, texts))
            print(f"  store {backend}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                  flush=True)
        asked = {c.sample_id: c.ask_time for c in convs}
        bare_s: list[float] = []
        for n, (sid, q) in enumerate(questions):
            sides: list[Any] = [None, *stores]
            for side in sides[n % len(sides):] + sides[:n % len(sides)]:
                t0 = time.perf_counter()
                if side is None:
                    bare(sid, q)
                    bare_s.append(time.perf_counter() - t0)
                    continue
                side.clock.set(asked[sid])
                t0 = time.perf_counter()
                side.engine.recall(q, tenant=sid, k=RECALL_K, touch=False, min_activation=0.0)
                side.times.append(time.perf_counter() - t0)
        print_recall(bare_s, stores, len(questions), torch_threads)
        for s in stores:
            s.engine.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_recall(bare_s: Sequence[float], stores: Sequence[Store], n: int,
                 torch_threads: int) -> None:
    bare50 = statistics.median(bare_s)
    print(f"engine.recall (k={RECALL_K}, touch=False, min_activation=0; torch at "
          f"{torch_threads} thread(s), ONNX at 1) vs bare sentence-transformers encode + "
          f"Chroma query, {n} LoCoMo questions, interleaved:")
    print(f"  {'bare ST + Chroma':<22} p50 {1000 * bare50:7.2f} ms  p95 "
          f"{1000 * _pct(bare_s, 95):7.2f} ms")
    for s in stores:
        p50 = statistics.median(s.times)
        print(f"  {'recall, ' + s.label:<22} p50 {1000 * p50:7.2f} ms  p95 "
              f"{1000 * _pct(s.times, 95):7.2f} ms  recall/bare p50 x{p50 / bare50:.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_PATH))
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--conversations", type=int, default=None,
                    help="only the first N conversations (a quick check)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--recall-torch-threads", type=int, default=1,
                    help="torch threads for the bare pair and the torch store (default 1, as "
                         "benchmarks/locomo.py)")
    ap.add_argument("--no-recall", dest="recall", action="store_false")
    ap.add_argument("--no-cold", dest="cold", action="store_false")
    args = ap.parse_args(argv)
    import torch

    default_threads = torch.get_num_threads()
    convs, texts, questions = corpus(args.data, args.queries, args.conversations)
    print(f"LoCoMo {args.data}: {len(texts)} turns, {len(questions)} questions; "
          f"{os.cpu_count()} CPUs, torch default threads {default_threads}")
    cache = Path(tempfile.mkdtemp(prefix="mnemonia-onnx-cache-"))
    try:
        rows = make_rows(cache, sorted(set(args.threads) | {default_threads}))
        ref = next(r for r in rows if r.backend == "torch" and r.threads == default_threads)
        measure_ingest(rows, texts)
        measure_queries(rows, [q for _, q in questions])
        print()
        print_table(rows, ref)
        if args.cold:
            print()
            print("first vector in a fresh interpreter (imports included):")
            for label, secs in cold_starts(cache):
                print(f"  {label:<28} {secs:6.2f} s")
        if args.recall:
            print()
            recall_section(rows, ref, convs, texts, questions, args.recall_torch_threads)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
