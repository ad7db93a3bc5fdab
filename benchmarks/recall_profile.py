"""Where recall's time goes, stage by stage, on a store kept by ``speed.py --keep``.

    .venv/bin/python benchmarks/speed.py --sizes 10000 --vectors --enrich --keep
    .venv/bin/python benchmarks/recall_profile.py /tmp/mnemonia-speed-10000-XXXX/mnemonia

Opens the store (maintenance manual), embeds the queries first (their time is the ``query
embed`` row: the model alone), then runs ``recall(k=10)`` on each with its vector already
in the query cache, so the rest of the pipeline runs on the calling thread, stage after stage,
and each stage's time is its own. Each row is a function of the pipeline (or a store read it
makes) timed inclusively: an indented row is part of the row above it, and a store read
(``rows``, ``vectors``, ``links``) counts in every stage that makes it, so the stages do not
add up to more than the total. Queries are new to the store (not asked by ``speed.py``).
Each recall's access write (``touch``, deferred to the writer thread) is waited for after
it, untimed, as ``speed.py``'s turns with the bare pair and a chat turn's pause give it time to
finish (``--no-settle``: back to back, each recall first waits for the previous one's write;
2026-12-01, 10k enriched: 8.1 against 5.3 ms a recall).
Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from speed_corpus import query_texts
from speed_harness import wait_own_index

TENANT = "bench"

STAGES: tuple[tuple[str, str, str], ...] = (
    # (label, module or runtime attribute path, function name)
    ("keyword side (words, keyword search, rows, session, vectors)",
     "mnemonia.recall.candidates", "keyword_side"),
    ("  keyword search (SQL)", "sql.keywords", "keyword_search"),
    ("kNN (Chroma or exact)", "mnemonia.recall.candidates", "nearest"),
    ("exact scores (mirrored collection)", "vectors", "scores"),
    ("gather: dense + keyword candidates through the gate", "mnemonia.recall.candidates",
     "gather"),
    ("context: session neighbours' lift", "mnemonia.recall.context", "lift"),
    ("session neighbours (follows)", "mnemonia.recall.candidates", "session_neighbours"),
    ("  (same, from the context step)", "mnemonia.recall.context", "session_neighbours"),
    ("use cues", "mnemonia.recall.score", "match_cues"),
    ("entity seeds", "mnemonia.recall.entities", "seed"),
    ("spreading", "mnemonia.recall.spread", "spread"),
    ("scoring (ranked)", "mnemonia.recall.score", "ranked"),
    ("hits (explanations, contradiction / supersession links)", "mnemonia.recall.hits",
     "hits"),
    ("touch (queued to the writer thread)", "mnemonia.recall.hits", "touch"),
    ("store: candidate rows", "sql.memories", "rows"),
    ("store: candidate vectors", "runtime", "candidate_vectors"),
    ("store: follows / hidden links", "sql.graph", "typed_links"),
    ("store: spreading edges", "sql.graph", "edges_around"),
    ("store: entity members", "sql.graph", "entity_members_by_importance"),
)


class Timers:
    """Each wrapped function's time per call, by label (``benchmarks/keyword_step.py`` too)."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = defaultdict(list)

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[label].append(time.perf_counter() - t0)
        return timed


def instrument(engine: Any, timers: Timers) -> None:
    import importlib

    rt = engine.runtime
    for label, where, name in STAGES:
        if where.startswith("mnemonia."):
            owner: Any = importlib.import_module(where)
        elif where == "runtime":
            owner = rt
        else:
            owner = rt
            for part in where.split("."):
                owner = getattr(owner, part)
        setattr(owner, name, timers.wrap(label, getattr(owner, name)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("store", type=Path, help="the Mnemonia store folder (…/mnemonia)")
    ap.add_argument("--tenant", default=TENANT,
                    help="the tenant to recall from (a scale.py store's is t0000)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--touch", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--settle", action=argparse.BooleanOptionalAction, default=True,
                    help="after each recall (untimed), wait for the access write it deferred "
                         "to the writer thread, as the next recall of a chat turn finds it "
                         "done (--no-settle: back to back, the next recall waits for it)")
    args = ap.parse_args()
    from mnemonia import MemoryEngine

    qtexts = query_texts(1000 + args.queries)[1000:]
    engine = MemoryEngine.open(args.store, maintenance="manual")
    rt = engine.runtime
    engine.recall("warm up", tenant=args.tenant, k=args.k, touch=False)
    # a tenant over exact_search_limit: its own HNSW index, loaded or built on a thread at
    # the first recall; profiled once it answers, as a serving process has it
    own, waited = wait_own_index(engine, args.tenant)
    embed: list[float] = []
    for q in qtexts:
        t0 = time.perf_counter()
        vec = rt.embedder.embed_query(q)
        embed.append(time.perf_counter() - t0)
        rt.caches.query_cache.put(q, vec)
    timers = Timers()
    instrument(engine, timers)
    total: list[float] = []
    for q in qtexts:
        t0 = time.perf_counter()
        engine.recall(q, tenant=args.tenant, k=args.k, touch=args.touch)
        total.append(time.perf_counter() - t0)
        if args.settle:  # untimed: the access write this recall deferred, finished
            with rt.reading():
                pass
    n = len(qtexts)
    print(f"{n} recalls, k={args.k}, store {args.store}, "
          f"{engine.stats(tenant=args.tenant).get('active', '?')} active memories"
          + (f", own index (ready after {waited:.1f} s)" if own else ""))
    print("| stage | ms per recall (mean) | calls per recall |\n|---|---|---|")
    print(f"| query embed (model alone, {type(rt.embedder).__name__}) | "
          f"{1000 * statistics.mean(embed):.2f} (p50 {1000 * statistics.median(embed):.2f}) |"
          f" 1 |")
    for label, _, _ in STAGES:
        if timers.spent[label]:
            print(f"| {label} | {1000 * sum(timers.spent[label]) / n:.2f} | "
                  f"{len(timers.spent[label]) / n:.1f} |")
    print(f"| **pipeline after the query embedding** | **{1000 * statistics.mean(total):.2f}** "
          f"(p50 {1000 * statistics.median(total):.2f}, "
          f"p95 {1000 * sorted(total)[int(0.95 * (n - 1))]:.2f}) | |")
    engine.close()


if __name__ == "__main__":
    main()
