"""Chroma's kNN query on a big collection against an approximate index the process would keep
itself: what a recall past ``exact_search_limit`` spends finding its nearest neighbours.

    .venv/bin/python benchmarks/speed.py --sizes 100000 --vectors --enrich --keep
    .venv/bin/python benchmarks/ann_index.py /tmp/mnemonia-speed-100000-XXXX/mnemonia

Reads every vector of the store's largest collection and embeds ``--queries`` new speed-corpus
queries with the engine's embedder; then, query by query, times Chroma's ``query`` (what
recall asks today) at ``n_results`` 1 and ``--n``, and its recall@n against the exact
neighbours (the full product). Where ``hnswlib`` or ``faiss`` can be imported (neither is a
dependency of Mnemonia: install them beside it to compare), it builds their HNSW index on the
same vectors (M 16, ef_construction 100, two threads) and prints the build time, the query
p50 (one thread) and the recall@n at several ``ef``. Not a test: nothing here asserts a time.

``--again ROOT`` (a folder ``speed.py --keep`` kept, the store being ``ROOT/mnemonia``; needs
hnswlib): then ``speed.py --again ROOT`` twice in turns, the engine's kNN on that collection
answered once by Chroma and once by the hnswlib index (``--ef``): an estimate of what an
index of the process's own would change end to end. Only the query is swapped (the index
is not kept in step with writes: recall's touches write no vectors).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from speed_corpus import query_texts

EFS = (20, 40, 64, 100)
"""The search breadths tried (hnswlib and faiss search at least ``n`` wide anyway)."""


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # importable without metadata (a copied module)
        return "(version unknown)"


def _p50_ms(fn: Callable[[np.ndarray], list[int]], queries: np.ndarray
            ) -> tuple[float, list[list[int]]]:
    times, found = [], []
    for q in queries:
        t0 = time.perf_counter()
        got = fn(q)
        times.append(time.perf_counter() - t0)
        found.append(got)
    return 1000 * statistics.median(times), found


def _recall_at(found: Sequence[Sequence[int]], exact: np.ndarray) -> float:
    n = exact.shape[1]
    return float(np.mean([len(set(f) & set(e.tolist())) / n for f, e in zip(found, exact,
                                                                          strict=True)]))


def _all_vectors(col: object) -> tuple[list[str], np.ndarray]:
    ids: list[str] = []
    parts: list[np.ndarray] = []
    while True:
        got = col.get(limit=10_000, offset=len(ids), include=["embeddings"])  # type: ignore[attr-defined]
        if not got["ids"]:
            break
        ids += got["ids"]
        parts.append(np.asarray(got["embeddings"], dtype=np.float32))
    return ids, np.concatenate(parts)


def _end_to_end(root: Path, name: str, ids: list[str], index: Any, ef: int, rounds: int
                ) -> None:
    """``speed.py --again root`` in turns, the kNN on collection ``name`` answered by Chroma
    and by ``index`` (labels are positions in ``ids``)."""
    from speed_harness import recall_again

    index.set_ef(ef)

    def swap(engine: Any) -> None:
        vectors = engine.runtime.vectors
        chroma_query = vectors.query

        def query(col: Any, qs: np.ndarray, n: int) -> tuple[list[list[str]], list[list[float]]]:
            if col.name != name:
                return chroma_query(col, qs, n)
            labels, distances = index.knn_query(qs, k=n)
            return ([[ids[j] for j in row] for row in labels],
                    [[1.0 - float(d) for d in row] for row in distances])
        vectors.query = query

    print("| kNN by | ours p50 ms | bare p50 ms | p50 ratio | p95 ratio |")
    print("|---|---|---|---|---|")
    for r in range(rounds):
        for label in (("Chroma", "hnswlib") if r % 2 == 0 else ("hnswlib", "Chroma")):
            row = recall_again(root, adjust=swap if label == "hnswlib" else None)
            shown = f"hnswlib (ef {ef})" if label == "hnswlib" else label
            print(f"| {shown} | {row['ours_p50_ms']:.2f} | {row['bare_p50_ms']:.2f} "
                  f"| {row['bare_p50_ratio']:.3f} | {row['bare_p95_ratio']:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path, nargs="?",
                    help="a store folder (its chroma/ inside); with --again, ROOT/mnemonia")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--n", type=int, default=20, help="neighbours asked (recall asks 20)")
    ap.add_argument("--again", type=Path, metavar="ROOT",
                    help="also speed.py --again ROOT, Chroma's query against hnswlib's")
    ap.add_argument("--ef", type=int, default=64, help="hnswlib's ef for --again")
    ap.add_argument("--rounds", type=int, default=2, help="pairs of --again runs")
    args = ap.parse_args()
    if args.again is not None:
        args.store = args.again / "mnemonia"
    elif args.store is None:
        ap.error("give a store folder, or --again ROOT")
    import chromadb
    from chromadb.config import Settings
    from mnemonia.embeddings import default_embedder

    if not (args.store / "chroma").is_dir():
        sys.exit(f"{args.store}: no chroma/ folder (a Mnemonia store folder)")
    client = chromadb.PersistentClient(path=str(args.store / "chroma"),
                                       settings=Settings(anonymized_telemetry=False))
    cols = [client.get_collection(c.name, embedding_function=None)
            for c in client.list_collections()]
    if not cols:
        sys.exit(f"{args.store}: no collection")
    col = max(cols, key=lambda c: c.count())
    t0 = time.perf_counter()
    ids, vectors = _all_vectors(col)
    print(f"{col.name}: {len(ids):,} vectors read in {time.perf_counter() - t0:.1f} s")
    pos = {m: i for i, m in enumerate(ids)}
    embedder = default_embedder()
    queries = np.asarray(embedder.embed_documents(query_texts(args.queries + 2000)[2000:]),
                         dtype=np.float32)
    exact = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :args.n]
    for q in queries[:50]:  # warm
        col.query(query_embeddings=[q], n_results=args.n, include=["distances"])
    print("| index | build s | ef | query p50 ms | recall@n |")
    print("|---|---|---|---|---|")
    for n in (1, args.n):
        p50, found = _p50_ms(lambda q, n=n: [pos[m] for m in col.query(
            query_embeddings=[q], n_results=n, include=["distances"])["ids"][0]], queries)
        rec = f"{_recall_at(found, exact):.4f}" if n == args.n else "-"
        print(f"| Chroma query, n_results={n} | - | - | {p50:.3f} | {rec} |")
    try:
        import hnswlib
    except ImportError:
        print("| hnswlib | not installed | | | |")
        if args.again is not None:
            sys.exit("--again needs hnswlib")
    else:
        t0 = time.perf_counter()
        index = hnswlib.Index(space="ip", dim=vectors.shape[1])
        index.init_index(max_elements=len(ids), ef_construction=100, M=16)
        index.set_num_threads(2)
        index.add_items(vectors, np.arange(len(ids)))
        built = time.perf_counter() - t0
        index.set_num_threads(1)
        for ef in EFS:
            index.set_ef(ef)
            p50, found = _p50_ms(lambda q: index.knn_query(q, k=args.n)[0][0].tolist(),
                                 queries)
            print(f"| hnswlib {_version('hnswlib')} | {built:.1f} | {ef} | {p50:.3f} "
                  f"| {_recall_at(found, exact):.4f} |")
        if args.again is not None:
            client.close()
            _end_to_end(args.again, col.name, ids, index, args.ef, args.rounds)
    try:
        import faiss
    except ImportError:
        print("| faiss HNSW | not installed | | | |")
    else:
        faiss.omp_set_num_threads(2)
        t0 = time.perf_counter()
        hnsw = faiss.IndexHNSWFlat(vectors.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = 100
        hnsw.add(vectors)
        built = time.perf_counter() - t0
        faiss.omp_set_num_threads(1)
        for ef in EFS:
            hnsw.hnsw.efSearch = ef
            p50, found = _p50_ms(lambda q: hnsw.search(q[None, :], args.n)[1][0].tolist(),
                                 queries)
            print(f"| faiss {faiss.__version__} HNSWFlat | {built:.1f} | {ef} | {p50:.3f} "
                  f"| {_recall_at(found, exact):.4f} |")


if __name__ == "__main__":
    main()
