"""Chroma's kNN query on a big collection against the HNSW index the engine keeps itself
(``own_index_limit``, :mod:`mnemonia.store.approximate`): what a recall past
``exact_search_limit`` spends finding its nearest neighbours.

    .venv/bin/python benchmarks/speed.py --sizes 100000 --vectors --enrich --keep
    .venv/bin/python benchmarks/ann_index.py /tmp/mnemonia-speed-100000-XXXX/mnemonia

Reads every vector of the store's largest collection and embeds ``--queries`` new speed-corpus
queries with the engine's embedder; then, query by query, times Chroma's ``query`` at
``n_results`` 1 and ``--n``, and its recall@n against the exact neighbours (the full
product); then builds the engine's own index (usearch) on the same vectors as the engine
builds it and prints its build time, saved size, load time, query p50 (one thread) and
recall@n at several ``ef`` (the engine's marked). Where ``hnswlib`` or ``faiss`` can be
imported (neither is a dependency of Mnemonia: install them beside it to compare), their HNSW
indexes too (M 16, ef_construction 100, two threads). Not a test: nothing here asserts a time.

``--again ROOT`` (a folder ``speed.py --keep`` kept, the store being ``ROOT/mnemonia``): then
``speed.py --again ROOT`` in turns, ``--rounds`` pairs, the engine's kNN answered by Chroma's
query (``own_index_limit=0``) and by its own index (the default).
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


def _end_to_end(root: Path, rounds: int) -> None:
    """``speed.py --again root`` in turns, the engine's kNN answered by Chroma's query
    (``own_index_limit=0``) and by its own index (the default)."""
    from speed_harness import recall_again

    print("| kNN by | ours p50 ms | bare p50 ms | p50 ratio | p95 ratio |")
    print("|---|---|---|---|---|")
    for r in range(rounds):
        for label in (("Chroma", "own index") if r % 2 == 0 else ("own index", "Chroma")):
            row = recall_again(root, **({"own_index_limit": 0} if label == "Chroma" else {}))
            print(f"| {label} | {row['ours_p50_ms']:.2f} | {row['bare_p50_ms']:.2f} "
                  f"| {row['bare_p50_ratio']:.3f} | {row['bare_p95_ratio']:.3f} |", flush=True)


def _own_index(ids: list[str], vectors: np.ndarray, queries: np.ndarray, exact: np.ndarray,
               n: int) -> None:
    """The engine's own index (mnemonia.store.approximate, usearch) on the same vectors: its
    build as the engine builds it, then its search at the engine's ``ef`` and others."""
    import tempfile

    from mnemonia.store.approximate import EXPANSION_SEARCH, Approximate

    t0 = time.perf_counter()
    own = Approximate()
    for start in range(0, len(ids), 8192):
        own.put(ids[start:start + 8192], vectors[start:start + 8192])
    built = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        own.save(Path(tmp), "c")
        saved = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        t0 = time.perf_counter()
        Approximate.load(Path(tmp), "c", len(ids))
        loaded = time.perf_counter() - t0
    pos = {m: i for i, m in enumerate(ids)}
    inner = own._index  # (a benchmark trying other breadths)
    for ef in sorted({*EFS, EXPANSION_SEARCH}):
        inner.expansion_search = ef
        p50, found = _p50_ms(lambda q: [pos[m] for m in own.nearest(q[None, :], n)[0][0]],
                             queries)
        mark = " (the engine's)" if ef == EXPANSION_SEARCH else ""
        print(f"| own index, usearch {_version('usearch')}{mark} | {built:.1f} | {ef} "
              f"| {p50:.3f} | {_recall_at(found, exact):.4f} |", flush=True)
    inner.expansion_search = EXPANSION_SEARCH
    print(f"(own index: saved {saved:.0f} MB, loaded in {loaded:.2f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path, nargs="?",
                    help="a store folder (its chroma/ inside); with --again, ROOT/mnemonia")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--n", type=int, default=20, help="neighbours asked (recall asks 20)")
    ap.add_argument("--again", type=Path, metavar="ROOT",
                    help="also speed.py --again ROOT, Chroma's query against the own index")
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
    _own_index(ids, vectors, queries, exact, args.n)
    if args.again is not None:
        client.close()
        _end_to_end(args.again, args.rounds)
        return
    try:
        import hnswlib
    except ImportError:
        print("| hnswlib | not installed | | | |")
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
