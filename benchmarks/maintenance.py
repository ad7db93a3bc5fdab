"""Maintenance ticks over a large tenant: eviction, consolidation and one re-evaluation tick
(DESIGN section 8 targets at 100k memories: evict < 2 s, consolidate < 60 s, tick < 1 s).

    .venv/bin/python benchmarks/maintenance.py --n 100000

The store is built once (synthetic texts over a 5,000-word vocabulary, 2% of them
near-duplicates of another memory, precomputed random unit embeddings so nothing is embedded,
creation times spread over 30 days) under ``--dir`` (default benchmarks/.cache/maintenance-N),
then copied afresh for each measured run and warmed up with one recall (a serving process has
its vector index loaded), so only the maintenance operations are timed. The
access log for the re-evaluation tick is written directly: ``--recalls`` rows over the ten
minutes before the tick (as ``recall`` would write them: rank, k, user), after a first tick
that sets the window. Figures are printed, and with ``--json`` written to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import sqlalchemy as sa

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.store import sql as S

TENANT = "bench"
START = datetime(2025, 3, 1, tzinfo=UTC)
TARGETS = {"evict": 2.0, "consolidate": 60.0, "reevaluate": 1.0}


def _texts(n: int, rng: np.random.Generator) -> list[str]:
    vocab = [f"w{i}" for i in range(5000)]
    lengths = rng.integers(8, 17, size=n)
    texts = [" ".join(vocab[j] for j in rng.choice(5000, size=int(k), replace=False))
             for k in lengths]
    # 2% near-duplicates: a copy of an earlier memory with one word swapped (Jaccard ~ .8)
    for i in rng.choice(np.arange(n // 2, n), size=n // 50, replace=False):
        base = texts[int(rng.integers(0, n // 2))].split()
        base[int(rng.integers(0, len(base)))] = vocab[int(rng.integers(0, 5000))]
        texts[int(i)] = " ".join(base)
    return texts


def build(folder: Path, n: int, seed: int = 0, batch: int = 500) -> None:
    """Create the store (not timed as part of the figures)."""
    rng = np.random.default_rng(seed)
    texts = _texts(n, rng)
    importance = np.round(rng.uniform(0, 1, size=n), 3)
    ages = rng.uniform(0, 30 * 86400, size=n)
    clock = ManualClock(START + timedelta(days=30))
    embedder = HashingEmbedder()
    t0 = time.perf_counter()
    with MemoryEngine.open(folder, embedder=embedder, clock=clock,
                           config=MnemoniaConfig.load(env={}, maintenance="manual")) as engine:
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            vecs = rng.normal(size=(stop - start, embedder.dimension)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            engine.add_many([{
                "id": f"m{i:07d}", "text": texts[i], "importance": float(importance[i]),
                "at": START + timedelta(seconds=float(ages[i])), "embedding": vecs[i - start],
            } for i in range(start, stop)], tenant=TENANT)
            if (stop // batch) % 20 == 0 or stop == n:
                print(f"  built {stop:>7,} / {n:,} memories ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
        # some memories have been used: access counts and later accesses
        used = rng.choice(n, size=n // 10, replace=False)
        with engine.sql.begin() as conn:
            conn.execute(S.memories.update().where(S.memories.c.id == sa.bindparam("b_id"))
                         .values(access_count=sa.bindparam("c"),
                                 accessed_at=sa.bindparam("a")),
                         [{"b_id": f"m{int(i):07d}", "c": int(rng.integers(1, 50)),
                           "a": (START + timedelta(days=29, seconds=float(rng.uniform(0, 86400)))
                                 ).timestamp()} for i in used])
    (folder / "built.json").write_text(json.dumps({"n": n, "seed": seed}))


def _fresh(base: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(base, work)
    (work / ".mnemonia.lock").unlink(missing_ok=True)


def _open(folder: Path, clock: ManualClock) -> MemoryEngine:
    engine = MemoryEngine.open(folder, embedder=HashingEmbedder(), clock=clock,
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    # A serving process has its vector index loaded: warm it up (not timed).
    engine.recall("w1 w2 w3", tenant=TENANT, touch=False)
    return engine


def measure(base: Path, work: Path, n: int, recalls: int, seed: int = 1) -> dict[str, float]:
    figures: dict[str, float] = {}
    now = START + timedelta(days=30, hours=1)

    _fresh(base, work)
    with _open(work, ManualClock(now)) as engine:
        t = time.perf_counter()
        report = engine.evict(tenant=TENANT)
        figures["evict"] = time.perf_counter() - t
        figures["evicted"] = report.evicted
        print(f"evict        {figures['evict']:8.2f} s   evicted {report.evicted:,} of "
              f"{report.active:,} active ({report.protected:,} protected)", flush=True)

    _fresh(base, work)
    with _open(work, ManualClock(now)) as engine:
        t = time.perf_counter()
        c = engine.consolidate(tenant=TENANT)
        figures["consolidate"] = time.perf_counter() - t
        figures.update(concepts=c.concepts_created, consolidated=c.members_consolidated,
                       candidate_pairs=c.candidate_pairs)
        print(f"consolidate  {figures['consolidate']:8.2f} s   scanned {c.scanned:,}, LSH pairs "
              f"{c.candidate_pairs:,}, groups {c.groups:,}, concepts {c.concepts_created:,}",
              flush=True)
        t = time.perf_counter()
        again = engine.consolidate(tenant=TENANT)
        figures["consolidate_again"] = time.perf_counter() - t
        print(f"  2nd run    {figures['consolidate_again']:8.2f} s   concepts "
              f"{again.concepts_created}", flush=True)

    _fresh(base, work)
    clock = ManualClock(now)
    with _open(work, clock) as engine:
        engine.reevaluate()  # sets the last successful tick
        clock.advance(timedelta(minutes=10))
        rng = np.random.default_rng(seed)
        hot = rng.choice(n, size=max(1, recalls // 10), replace=False)
        tick = clock.now().timestamp()
        rows = [dict(tenant=TENANT, memory_id=f"m{int(rng.choice(hot)):07d}",
                     rank=int(rng.integers(1, 6)), k=5, score=0.5,
                     user_id=f"user{int(rng.integers(0, 40))}",
                     at=tick - float(rng.uniform(0, 600))) for _ in range(recalls)]
        with engine.sql.begin() as conn:
            conn.execute(S.access_log.insert(), rows)
        t = time.perf_counter()
        r = engine.reevaluate()
        figures["reevaluate"] = time.perf_counter() - t
        figures["promoted"] = r.promoted
        print(f"reevaluate   {figures['reevaluate']:8.2f} s   scanned {r.scanned:,} rows, "
              f"{r.memories:,} memories, {r.candidates:,} candidates, "
              f"{r.reevaluated:,} re-evaluated, {r.promoted:,} promoted "
              f"({r.enriched} enriched at once)", flush=True)
        t = time.perf_counter()
        rv = engine.review(tenant=TENANT)
        figures["review"] = time.perf_counter() - t
        print(f"review       {figures['review']:8.2f} s   due {rv.due:,}, reviewed "
              f"{rv.reviewed}", flush=True)
        t = time.perf_counter()
        engine.snapshot(TENANT)
        figures["snapshot"] = time.perf_counter() - t
        print(f"snapshot     {figures['snapshot']:8.2f} s", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--recalls", type=int, default=20_000,
                    help="access-log rows in the ten minutes before the measured tick")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    root = args.dir or Path(__file__).with_name(".cache") / f"maintenance-{args.n}"
    base, work = root / "base", root / "work"
    if args.rebuild or not (base / "built.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        print(f"building a {args.n:,}-memory store in {base} (once; not timed)",
              file=sys.stderr, flush=True)
        build(base, args.n)
    print(f"\nMnemonia maintenance, one tenant of {args.n:,} memories "
          f"({os.cpu_count()} CPUs)", flush=True)
    figures = measure(base, work, args.n, args.recalls)
    print("\ntargets (DESIGN section 8):")
    for key, limit in TARGETS.items():
        verdict = "ok" if figures[key] < limit else "OVER"
        print(f"  {key:<12} {figures[key]:8.2f} s  < {limit:g} s  {verdict}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
