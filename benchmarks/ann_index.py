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

``--synthetic N`` (no store): the engine's own index alone on ``N`` vectors made as
``scale.py`` fills its stores (``speed_corpus.SyntheticVectors``, the ``sessions`` corpus):
its build, the process's resident memory before and after, saved size, load time, and its
search against the exact neighbours, where a store of that size cannot be filled in time
(1M memories take ~2.5 h to fill here).

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

from servers import process_rss_mb
from speed_corpus import query_texts

EFS = (20, 40, 64, 100, 160)
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


def _rss_mb() -> float:
    return process_rss_mb([os.getpid()])


def _synthetic(n: int, embedder: object) -> tuple[list[str], np.ndarray]:
    """``n`` ids and vectors as ``scale.py`` fills a store of one tenant."""
    from speed_corpus import SyntheticVectors, batches

    synth = SyntheticVectors(embedder, Path(__file__).with_name(".cache") / "cores.npy")
    vectors = np.empty((n, synth.base.shape[1]), dtype=np.float32)
    ids: list[str] = []
    for b in batches(n, 1000, kind="sessions"):
        vectors[b.start:b.start + len(b.items)] = synth(b)
        ids += b.ids
    return ids, vectors


def _exact(queries: np.ndarray, vectors: np.ndarray, n: int) -> np.ndarray:
    """Each query's ``n`` exact nearest neighbours (in blocks of queries: a million
    vectors' product with them all at once would not fit beside them)."""
    out = []
    for start in range(0, len(queries), 32):
        sims = queries[start:start + 32] @ vectors.T
        top = np.argpartition(-sims, n, axis=1)[:, :n]
        order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1, kind="stable")
        out.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(out)


def _chroma_synthetic(ids: list[str], vectors: np.ndarray, queries: np.ndarray,
                      exact: np.ndarray, n: int) -> None:
    """A persistent Chroma collection of the same vectors, made as the engine makes its
    collections (cosine space, Chroma's other HNSW defaults): its build and its query."""
    import tempfile

    import chromadb
    from chromadb.config import Settings

    with tempfile.TemporaryDirectory(dir=os.environ.get("ANN_INDEX_TMP")) as tmp:
        client = chromadb.PersistentClient(path=tmp,
                                           settings=Settings(anonymized_telemetry=False))
        col = client.create_collection("synthetic", embedding_function=None,
                                       metadata={"hnsw:space": "cosine"})
        t0 = time.perf_counter()
        step = client.get_max_batch_size()
        for start in range(0, len(ids), step):
            col.add(ids=ids[start:start + step], embeddings=vectors[start:start + step])
        built = time.perf_counter() - t0
        pos = {m: i for i, m in enumerate(ids)}
        for q in queries[:50]:  # warm
            col.query(query_embeddings=[q], n_results=n, include=["distances"])
        p50, found = _p50_ms(lambda q: [pos[m] for m in col.query(
            query_embeddings=[q], n_results=n, include=["distances"])["ids"][0]], queries)
        print(f"| Chroma {_version('chromadb')} query, n_results={n} | {built:.1f} | - "
              f"| {p50:.3f} | {_recall_at(found, exact):.4f} |", flush=True)
        client.close()


def _own_index(ids: list[str], vectors: np.ndarray, queries: np.ndarray, exact: np.ndarray,
               n: int) -> None:
    """The engine's own index (mnemonia.store.approximate, usearch) on the same vectors: its
    build as the engine builds it, then its search at the engine's ``ef`` and others."""
    import tempfile

    from mnemonia.store.approximate import EXPANSION_SEARCH, Approximate

    rss0 = _rss_mb()
    t0 = time.perf_counter()
    own = Approximate()
    for start in range(0, len(ids), 8192):
        own.put(ids[start:start + 8192], vectors[start:start + 8192])
    built = time.perf_counter() - t0
    rss1 = _rss_mb()
    with tempfile.TemporaryDirectory(dir=os.environ.get("ANN_INDEX_TMP")) as tmp:
        t0 = time.perf_counter()
        own.save(Path(tmp), "c")
        saving = time.perf_counter() - t0
        saved = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        t0 = time.perf_counter()
        again = Approximate.load(Path(tmp), "c", len(ids))
        loaded = time.perf_counter() - t0
        rss2 = _rss_mb()
        del again
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
    print(f"(own index of {len(ids):,} vectors: built in {built:.1f} s, resident memory "
          f"{rss0:.0f} -> {rss1:.0f} MB, saved in {saving:.1f} s as {saved:.0f} MB, loaded in "
          f"{loaded:.2f} s (resident {rss2:.0f} MB with both))")


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
    ap.add_argument("--synthetic", type=int, metavar="N",
                    help="no store: the own index alone on N vectors as scale.py fills")
    ap.add_argument("--chroma", action="store_true",
                    help="with --synthetic: a Chroma collection of the same vectors too "
                         "(its default HNSW settings, as the engine creates collections)")
    args = ap.parse_args()
    if args.synthetic is not None:
        from mnemonia.embeddings import default_embedder

        embedder = default_embedder()
        t0 = time.perf_counter()
        ids, vectors = _synthetic(args.synthetic, embedder)
        print(f"{len(ids):,} synthetic vectors made in {time.perf_counter() - t0:.1f} s "
              f"(resident {_rss_mb():.0f} MB)")
        queries = np.asarray(embedder.embed_documents(
            query_texts(args.queries + 2000)[2000:]), dtype=np.float32)
        exact = _exact(queries, vectors, args.n)
        print("| index | build s | ef | query p50 ms | recall@n |")
        print("|---|---|---|---|---|")
        if args.chroma:
            _chroma_synthetic(ids, vectors, queries, exact, args.n)
        _own_index(ids, vectors, queries, exact, args.n)
        return
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
    exact = _exact(queries, vectors, args.n)
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
