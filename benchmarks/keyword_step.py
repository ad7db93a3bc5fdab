"""Recall's keyword step on a server-mode store kept by ``scale.py --mode server --keep``:
how long the tenant's document counts (``term_docs``, the idf weights), the keyword search
and the whole keyword side take per recall, with the recall's hits written out so that two
revisions can be compared on the same store.

    .venv/bin/python benchmarks/keyword_step.py /tmp/scale-s1 --out /tmp/new.json
    PYTHONPATH=/tmp/old/shared .venv/bin/python benchmarks/keyword_step.py /tmp/scale-s1 \
        --out /tmp/old.json
    .venv/bin/python benchmarks/keyword_step.py --compare /tmp/old.json /tmp/new.json

Starts the store's PostgreSQL cluster and Chroma server (``<store>/ours``), opens the engine
(its open time includes any migration the code on ``PYTHONPATH`` applies), embeds the
queries first (new ones: not asked by ``scale.py``), then runs ``recall(k, touch=False)`` on
each, so nothing is written and each revision sees the same store; the steps are timed
inclusively around the calls. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from recall_profile import Timers
from servers import ChromaServer, PostgresCluster, loadavg
from speed_corpus import query_texts

TENANT = "t0000"
NAMESPACE = "scale"
FIRST_QUERY = 5000
"""Queries are taken from here on in ``query_texts`` (``scale.py`` asks the first ones)."""


def measure(store: Path, queries: int, k: int) -> dict[str, Any]:
    from mnemonia import MemoryEngine, MnemoniaConfig
    from mnemonia.embeddings import default_embedder
    from mnemonia.recall import candidates

    embedder = default_embedder()
    qtexts = query_texts(FIRST_QUERY + queries)[FIRST_QUERY:]
    chroma = ChromaServer(store / "ours").start()
    pg = PostgresCluster(store / "ours").start()
    try:
        t0 = time.perf_counter()
        engine = MemoryEngine.open(chroma_url=chroma.url, sql_url=f"{pg.url}/scale",
                                   embedder=embedder, namespace=NAMESPACE,
                                   config=MnemoniaConfig.load(env={}, maintenance="manual"))
        open_s = time.perf_counter() - t0
        rt = engine.runtime
        size = engine.stats(tenant=TENANT).get("memories")
        engine.recall("warm up", tenant=TENANT, k=k, touch=False)
        for q in qtexts:
            rt.caches.query_cache.put(q, rt.embedder.embed_query(q))
        timers = Timers()
        kw = rt.sql.keywords
        kw.term_docs = timers.wrap("term_docs", kw.term_docs)  # type: ignore[method-assign]
        kw.keyword_search = timers.wrap("keyword_search",  # type: ignore[method-assign]
                                        kw.keyword_search)
        candidates.keyword_side = timers.wrap("keyword_side", candidates.keyword_side)
        total: list[float] = []
        hits: list[list[tuple[str, float]]] = []
        for q in qtexts:
            t0 = time.perf_counter()
            got = engine.recall(q, tenant=TENANT, k=k, touch=False)
            total.append(time.perf_counter() - t0)
            hits.append([(h.memory.id, round(h.score, 9)) for h in got.memories])
        engine.close()
    finally:
        chroma.stop()
        pg.stop()

    def ms(values: list[float]) -> dict[str, float]:
        per = [1000 * v for v in values]
        return {"p50": statistics.median(per), "mean": statistics.mean(per),
                "p95": sorted(per)[int(0.95 * (len(per) - 1))], "calls": len(per) / queries}

    return {"store": str(store), "memories": size, "queries": queries, "k": k,
            "open_s": open_s, "load": loadavg(), "mnemonia": sys.modules["mnemonia"].__file__,
            "recall_ms": ms(total), **{f"{n}_ms": ms(v) for n, v in timers.spent.items()},
            "hits": hits}


def compare(a: Path, b: Path) -> None:
    old, new = json.loads(a.read_text()), json.loads(b.read_text())
    same = sum(x == y for x, y in zip(old["hits"], new["hits"], strict=True))
    ids = sum([i for i, _ in x] == [i for i, _ in y]
              for x, y in zip(old["hits"], new["hits"], strict=True))
    print(f"{same} of {len(old['hits'])} recalls identical (ids and scores to 9 decimals), "
          f"{ids} with the same ids in the same order")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("store", type=Path, nargs="?", help="a scale.py --mode server --keep workdir")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--out", type=Path, help="write the figures and hits here (JSON)")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("OLD", "NEW"),
                    help="compare the hits of two --out files")
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    if args.store is None:
        ap.error("a store folder is needed (or --compare OLD NEW)")
    row = measure(args.store, args.queries, args.k)
    for name in ("recall", "keyword_side", "term_docs", "keyword_search"):
        r = row.get(f"{name}_ms")
        if r:
            print(f"{name:15s} p50 {r['p50']:7.2f} ms  mean {r['mean']:7.2f}  "
                  f"p95 {r['p95']:7.2f}  calls/recall {r['calls']:.1f}")
    print(f"{row['memories']:,} memories, open {row['open_s']:.2f} s, load {row['load']}, "
          f"{row['mnemonia']}")
    if args.out:
        args.out.write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
