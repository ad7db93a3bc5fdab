"""The LangGraph store at scale: ``MnemoniaStore`` beside LangGraph's ``InMemoryStore``, fed
the same items in the same run, and (with ``--before REV``) the ``MnemoniaStore`` of an
earlier revision reading the very same engine.

    .venv/bin/python benchmarks/store.py --sizes 1000 20000 --others 200 --before 4e39a6f

One namespace (``("users", "target")``) grows to each size in ``--sizes``, beside ``--others``
namespaces of ``--per-other`` items each. Every item is ``{"text": ..., "bucket": i % 10,
"n": i}`` with a synthetic text (8-16 words of a 5,000-word vocabulary); both stores embed
``text`` with the same deterministic ``HashingEmbedder`` (256 dimensions: the real model would
make building 20k items slow on 2 cores, and embedding a query costs both sides the same).
Timed, for each store, taking turns call by call (median and p95 of ``--reps`` calls; the
earlier revision gets ``--before-reps``):

- ``search(ns, limit=5)``, and with ``filter={"bucket": 3}`` (a tenth of the items);
- ``search(ns, query=q, limit=5)``, and with the filter (``q``: 4 random vocabulary words);
- ``list_namespaces(prefix=("users",), limit=10)``.

MnemoniaStore runs with ``touch=False`` (a search does not write access statistics, so every
call sees the same store) on an embedded engine (Chroma + SQLite) with manual maintenance.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np
from langchain_mnemonia import MnemoniaStore
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

TARGET = ("users", "target")
START = datetime(2025, 3, 1, tzinfo=UTC)
OPS = ("search", "search+filter", "query", "query+filter", "list_namespaces")
FILTER = {"bucket": 3}
ROOT = Path(__file__).resolve().parents[1]


def _texts(n: int, rng: np.random.Generator) -> list[str]:
    vocab = [f"w{i}" for i in range(5000)]
    return [" ".join(vocab[j] for j in rng.choice(5000, size=int(k), replace=False))
            for k in rng.integers(8, 17, size=n)]


def _put(stores: list[BaseStore], ns: tuple[str, ...], start: int, texts: list[str],
         batch: int = 500) -> None:
    for lo in range(0, len(texts), batch):
        ops = [PutOp(ns, f"k{start + i:06d}", {"text": t, "bucket": (start + i) % 10,
                                              "n": start + i})
               for i, t in enumerate(texts[lo:lo + batch], start=lo)]
        for store in stores:
            store.batch(ops)


def _load_before(rev: str) -> type[BaseStore]:
    """``MnemoniaStore`` as it was at ``rev`` (its private helpers too), as a module of its
    own: it reads the same engine, through ``engine.list`` and ``engine.recall``."""
    pkg = "store_before"
    files = {"store": "store.py", "filters": "_private/filters.py",
             "namespaces": "_private/namespaces.py"}
    mods: dict[str, types.ModuleType] = {}
    sys.modules[pkg] = types.ModuleType(pkg)
    for name in ("filters", "namespaces", "store"):
        src = subprocess.run(
            ["git", "show", f"{rev}:packages/langchain-mnemonia/langchain_mnemonia/"
             f"{files[name]}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        src = (src.replace("langchain_mnemonia._private.filters", f"{pkg}.filters")
               .replace("langchain_mnemonia._private.namespaces", f"{pkg}.namespaces"))
        spec = importlib.util.spec_from_loader(f"{pkg}.{name}", loader=None)
        assert spec is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"{pkg}.{name}"] = mod
        exec(compile(src, f"{rev}:{files[name]}", "exec"), mod.__dict__)
        mods[name] = mod
    return mods["store"].MnemoniaStore  # type: ignore[no-any-return]


def _calls(store: BaseStore, query: str) -> dict[str, Callable[[], Any]]:
    return {
        "search": lambda: store.search(TARGET, limit=5),
        "search+filter": lambda: store.search(TARGET, limit=5, filter=FILTER),
        "query": lambda: store.search(TARGET, query=query, limit=5),
        "query+filter": lambda: store.search(TARGET, query=query, limit=5, filter=FILTER),
        "list_namespaces": lambda: store.list_namespaces(prefix=("users",), limit=10),
    }


def _time(stores: dict[str, BaseStore], reps: dict[str, int], rng: np.random.Generator
          ) -> dict[str, dict[str, list[float]]]:
    """Milliseconds per call, ``{store: {op: [...]}}``; the stores take turns call by call,
    with the same query each turn."""
    out: dict[str, dict[str, list[float]]] = {s: {op: [] for op in OPS} for s in stores}
    vocab = [f"w{i}" for i in range(5000)]
    for rep in range(max(reps.values())):
        query = " ".join(vocab[j] for j in rng.choice(5000, size=4, replace=False))
        for op in OPS:
            for name, store in stores.items():
                if rep >= reps[name]:
                    continue
                call = _calls(store, query)[op]
                t0 = time.perf_counter()
                found = call()
                out[name][op].append((time.perf_counter() - t0) * 1000)
                if op.startswith("query") and not found:
                    raise SystemExit(f"{name} found nothing for {op}")
    return out


def _check_same(stores: dict[str, BaseStore]) -> None:
    """The stores hold the same items: the same keys in the filtered listing."""
    keys = {name: {i.key for i in s.search(TARGET, limit=10**6, filter=FILTER)}
            for name, s in stores.items() if name != "before"}
    assert len({frozenset(k) for k in keys.values()}) == 1, {k: len(v) for k, v in keys.items()}


def run(sizes: list[int], others: int, per_other: int, reps: int, before: str | None,
        before_reps: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    embedder = HashingEmbedder()
    folder = Path(tempfile.mkdtemp(prefix="store-bench-"))
    engine = MemoryEngine.open(folder, embedder=embedder, clock=ManualClock(START),
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    ours = MnemoniaStore(engine=engine, touch=False)
    theirs = InMemoryStore(index={"dims": embedder.dimension, "fields": ["text"],
                                  "embed": lambda t: embedder.embed_documents(t).tolist()})
    stores: dict[str, BaseStore] = {"MnemoniaStore": ours, "InMemoryStore": theirs}
    if before:
        stores["before"] = _load_before(before)(engine=engine, touch=False)
    t0 = time.perf_counter()
    for j in range(others):
        _put([ours, theirs], ("users", f"u{j:03d}"), 0, _texts(per_other, rng))
    print(f"  {others} other namespaces x {per_other} items ({time.perf_counter() - t0:.0f} s)",
          file=sys.stderr, flush=True)
    rows = []
    have = 0
    for size in sorted(sizes):
        t0 = time.perf_counter()
        _put([ours, theirs], TARGET, have, _texts(size - have, rng))
        have = size
        print(f"  target namespace at {size:,} items ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        _check_same(stores)
        for s in stores.values():  # warm up: caches, Chroma's index in memory
            for call in _calls(s, "w1 w2 w3 w4").values():
                call()
        counts = {"MnemoniaStore": reps, "InMemoryStore": reps, "before": before_reps}
        times = _time(stores, {n: counts[n] for n in stores}, rng)
        for op in OPS:
            row: dict[str, Any] = {"size": size, "others": others, "op": op}
            for name, ms in times.items():
                row[name] = {"p50": statistics.median(ms[op]),
                             "p95": float(np.percentile(ms[op], 95)), "n": len(ms[op])}
            rows.append(row)
            _print(row)
    engine.close()
    return rows


def _print(row: dict[str, Any]) -> None:
    ours, theirs = row["MnemoniaStore"]["p50"], row["InMemoryStore"]["p50"]
    before = f"  before {row['before']['p50']:9.2f}" if "before" in row else ""
    print(f"{row['size']:>7,} {row['op']:<16} MnemoniaStore {ours:8.2f} ms  InMemoryStore "
          f"{theirs:8.2f} ms  ratio {ours / theirs:6.2f}x{before}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 20_000])
    ap.add_argument("--others", type=int, default=200, help="other namespaces")
    ap.add_argument("--per-other", type=int, default=20, help="items in each other namespace")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--before", help="also time MnemoniaStore of this git revision")
    ap.add_argument("--before-reps", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    rows = run(args.sizes, args.others, args.per_other, args.reps, args.before,
               args.before_reps)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
