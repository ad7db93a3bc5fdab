"""Speed harness: Mnemonia recall and ingest against a bare Chroma kNN on the same embedder,
measured side by side in the same run and printed as ratios (DESIGN section 8).

Used by ``benchmarks/speed.py`` and ``mnemonia bench``. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

__all__ = ["run_speed", "synthetic_texts"]

_SUBJECTS = ["Maya", "the team", "our client", "Leo", "the backend", "my sister", "the cache",
             "the release", "Priya", "the router", "grandma", "the garden", "the API"]
_VERBS = ["needs", "prefers", "broke", "moved", "reviewed", "ordered", "planned", "fixed",
          "mentioned", "postponed", "painted", "bought", "tested"]
_OBJECTS = ["a new laptop", "the Friday deploy", "green tea", "a trip to Lisbon", "the invoice",
            "piano lessons", "the database migration", "a birthday cake", "the login page",
            "hiking boots", "the budget review", "a rescue dog", "the conference talk"]
_TAILS = ["last week", "before the launch", "after lunch", "in March", "for the third time",
          "without telling anyone", "on a rainy morning", "at the office", "near the station",
          "because of the outage", "with great care", "in a hurry", "at midnight"]


def synthetic_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct short memory-like sentences, deterministic for a seed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
                   f"{rng.choice(_TAILS)} (note {i}, ref {rng.randrange(10**6)})")
    return out


def _embed_all(embedder: Any, texts: Sequence[str], cache: Path | None,
               console: Console) -> np.ndarray:
    if cache is not None and cache.exists():
        arr = np.load(cache)
        if arr.shape[0] >= len(texts):
            return arr[: len(texts)]
    console.print(f"embedding {len(texts)} fill texts once (shared by both sides)...")
    chunks = []
    t0 = time.perf_counter()
    for i in range(0, len(texts), 2048):
        chunks.append(embedder.embed_documents(list(texts[i:i + 2048])))
        done = min(len(texts), i + 2048)
        rate = done / (time.perf_counter() - t0)
        console.print(f"  {done}/{len(texts)} ({rate:.0f}/s)", end="\r")
    console.print()
    arr = np.concatenate(chunks).astype(np.float32)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, arr)
    return arr


def _pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[idx]


def run_speed(sizes: Sequence[int], *, queries: int = 200, ingest_sample: int = 1000,
              k: int = 3, console: Console | None = None, workdir: Path | None = None,
              cache_dir: Path | None = None) -> list[dict[str, Any]]:
    """Measure, for each store size, recall p50/p95 and ingest throughput of Mnemonia and of a
    bare Chroma collection (same embedder, same vectors), and print the ratios."""
    import chromadb
    from chromadb.config import Settings
    from mnemonia import MemoryEngine
    from mnemonia.embeddings import default_embedder

    console = console or Console()
    embedder = default_embedder()
    embedder.embed_query("warm up")
    results = []
    for n in sizes:
        root = Path(tempfile.mkdtemp(prefix=f"mnemonia-speed-{n}-", dir=workdir))
        fill = synthetic_texts(n)
        cache = cache_dir / f"fill-{n}.npy" if cache_dir else None
        vecs = _embed_all(embedder, fill, cache, console)
        sample = synthetic_texts(ingest_sample, seed=1000 + n)
        qtexts = [f"what did {s} say about {o}? ({i})" for i, (s, o) in enumerate(zip(
            random.Random(3).choices(_SUBJECTS, k=queries),
            random.Random(4).choices(_OBJECTS, k=queries), strict=True))]

        # bare baseline: one collection, our vectors, embed + add / embed + kNN
        client = chromadb.PersistentClient(path=str(root / "bare"),
                                           settings=Settings(anonymized_telemetry=False))
        col = client.get_or_create_collection("bare", embedding_function=None,
                                              metadata={"hnsw:space": "cosine"})
        console.print(f"[{n}] filling bare Chroma...")
        for i in range(0, n, 4000):
            col.add(ids=[f"f{j}" for j in range(i, min(n, i + 4000))],
                    embeddings=vecs[i:i + 4000], documents=fill[i:i + 4000])

        console.print(f"[{n}] filling Mnemonia...")
        engine = MemoryEngine.open(root / "mnemonia", embedder=embedder, maintenance="manual")
        for i in range(0, n, 4000):
            engine.add_many([{"text": t, "embedding": v} for t, v in
                             zip(fill[i:i + 4000], vecs[i:i + 4000], strict=True)],
                            tenant="bench")

        # ingest: the same sample texts, embedded as part of the measured work on both sides
        t0 = time.perf_counter()
        bvec = embedder.embed_documents(sample)
        col.add(ids=[f"s{j}" for j in range(len(sample))], embeddings=bvec, documents=sample)
        bare_ingest = len(sample) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in range(0, len(sample), 250):
            engine.add_many([{"text": t} for t in sample[i:i + 250]], tenant="bench")
        ours_ingest = len(sample) / (time.perf_counter() - t0)

        # Reopen both stores: right after a bulk load Chroma still answers from its
        # un-compacted log (hundreds of ms at 100k); a serving process sees the settled index.
        engine.close()
        client.close()
        client = chromadb.PersistentClient(path=str(root / "bare"),
                                           settings=Settings(anonymized_telemetry=False))
        col = client.get_collection("bare", embedding_function=None)
        engine = MemoryEngine.open(root / "mnemonia", embedder=embedder, maintenance="manual")
        engine.recall("warm up", tenant="bench", k=k, touch=False)
        col.query(query_embeddings=embedder.embed_query("warm up")[None, :], n_results=k)

        # recall, interleaved so drift and noise hit both sides alike
        bare_t: list[float] = []
        ours_t: list[float] = []
        for i, q in enumerate(qtexts):
            order = (0, 1) if i % 2 else (1, 0)
            for side in order:
                t0 = time.perf_counter()
                if side == 0:
                    qv = embedder.embed_query(q)
                    col.query(query_embeddings=qv[None, :], n_results=k)
                    bare_t.append(time.perf_counter() - t0)
                else:
                    engine.recall(q, tenant="bench", k=k)
                    ours_t.append(time.perf_counter() - t0)
        engine.close()
        client.close()
        del col, client
        shutil.rmtree(root, ignore_errors=True)  # both stores are temporary
        row = {
            "n": n,
            "bare_p50_ms": 1000 * statistics.median(bare_t),
            "ours_p50_ms": 1000 * statistics.median(ours_t),
            "bare_p95_ms": 1000 * _pct(bare_t, 95),
            "ours_p95_ms": 1000 * _pct(ours_t, 95),
            "bare_ingest_per_s": bare_ingest,
            "ours_ingest_per_s": ours_ingest,
        }
        row["recall_p50_ratio"] = row["ours_p50_ms"] / row["bare_p50_ms"]
        row["recall_p95_ratio"] = row["ours_p95_ms"] / row["bare_p95_ms"]
        row["ingest_ratio"] = ours_ingest / bare_ingest
        results.append(row)

    table = Table(title="Mnemonia vs bare Chroma kNN (same embedder, same run)")
    for c in ("memories", "recall p50 ms (bare / ours)", "ratio", "recall p95 ms (bare / ours)",
              "ratio", "ingest /s (bare / ours)", "ratio"):
        table.add_column(c, justify="right")
    for r in results:
        table.add_row(f"{r['n']:,}", f"{r['bare_p50_ms']:.1f} / {r['ours_p50_ms']:.1f}",
                      f"{r['recall_p50_ratio']:.2f}x (target <= 1.25)",
                      f"{r['bare_p95_ms']:.1f} / {r['ours_p95_ms']:.1f}",
                      f"{r['recall_p95_ratio']:.2f}x",
                      f"{r['bare_ingest_per_s']:.0f} / {r['ours_ingest_per_s']:.0f}",
                      f"{r['ingest_ratio']:.2f}x (target >= 0.8)")
    console.print(table)
    return results
