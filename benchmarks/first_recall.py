"""The first recalls of small tenants in one process, on an embedded store kept by
``scale.py --tenants N --per-tenant M --keep``: each of the first ``--tenants`` tenants is
asked ``--per`` new queries in a row, and the p50 / mean latency is printed per position in
that row (the 1st recall of a tenant reads its exact-search mirror whole; the links recall
keeps are read as recall reaches them). The hits are written (``--out``) so that two
revisions compare on one store (``--compare``); ``--profile`` prints where the first recalls
spend their time (cProfile, cumulative: inflates the Python-heavy steps).

    .venv/bin/python benchmarks/scale.py --mode embedded --tenants 40 --per-tenant 1000 \
        --bare-tenants 40 --checkpoints 40000 --workdir /tmp/e40 --keep
    .venv/bin/python benchmarks/first_recall.py /tmp/e40 --tenants 30 --per 10 --out /tmp/a.json

The query vectors are embedded first (the model's time is not in the figures); recall runs
with ``touch=False``, so nothing is written. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from servers import loadavg
from speed_corpus import query_texts

FIRST_QUERY = 9000
"""Queries are taken from here on in ``query_texts`` (``scale.py`` asks the first ones)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("store", type=Path, nargs="?", help="a scale.py --mode embedded workdir")
    ap.add_argument("--tenants", type=int, default=30)
    ap.add_argument("--per", type=int, default=10, help="recalls per tenant, in a row")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--profile", action="store_true", help="profile the first recalls")
    ap.add_argument("--out", type=Path, help="write the figures and hits here (JSON)")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(p.read_text())["hits"] for p in args.compare)
        print(f"{sum(x == y for x, y in zip(a, b, strict=True))} of {len(a)} recalls "
              "identical (ids and scores to 9 decimals)")
        return
    if args.store is None:
        ap.error("a store folder is needed (or --compare A B)")
    from mnemonia import MemoryEngine, MnemoniaConfig
    from mnemonia.embeddings import default_embedder

    emb = default_embedder()
    eng = MemoryEngine.open(args.store / "ours", embedder=emb,
                            config=MnemoniaConfig.load(env={}, maintenance="manual"))
    rt = eng.runtime
    everyone = sorted(eng.tenants())
    tenants = everyone[:args.tenants]
    qs = query_texts(FIRST_QUERY + len(tenants) * args.per)[FIRST_QUERY:]
    for q in qs:
        rt.caches.query_cache.put(q, emb.embed_query(q))
    eng.recall("warm up", tenant=everyone[-1], k=args.k, touch=False)  # not one measured
    prof = cProfile.Profile() if args.profile else None
    times: list[list[float]] = [[] for _ in range(args.per)]
    hits = []
    for i, tenant in enumerate(tenants):
        for j in range(args.per):
            if prof is not None and j == 0:
                prof.enable()
            t0 = time.perf_counter()
            got = eng.recall(qs[i * args.per + j], tenant=tenant, k=args.k, touch=False)
            times[j].append(time.perf_counter() - t0)
            if prof is not None and j == 0:
                prof.disable()
            hits.append([(h.memory.id, round(h.score, 9)) for h in got.memories])
    eng.close()
    row = {"tenants": len(tenants), "per": args.per, "load": loadavg(),
           "p50_ms": [round(1000 * statistics.median(x), 2) for x in times],
           "mean_ms": [round(1000 * statistics.mean(x), 2) for x in times],
           "total_s": round(sum(map(sum, times)), 3)}
    print(row)
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
        print(out.getvalue())
    if args.out:
        args.out.write_text(json.dumps({**row, "hits": hits}))


if __name__ == "__main__":
    main()
