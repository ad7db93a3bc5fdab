"""Cost of one eviction pass over a large tenant, per eviction policy (issue 37 point 4;
DESIGN section 8: evict < 2 s at 100k memories).

    .venv/bin/python benchmarks/eviction_speed.py --n 100000

The store is the one ``benchmarks/maintenance.py`` builds (synthetic texts of 8-16 words
over a 5,000-word vocabulary, importances uniform in [0, 1], 10% of the memories accessed,
creation times over 30 days; built once under ``--dir``, default
``benchmarks/.cache/maintenance-N``), plus ``--used`` memories with a reported use (a
``used`` event each, written directly), so the policies that read use have some to read.
For each policy the store is copied afresh and opened (warmed with one recall, as a serving
process is), then timed: one explicit ``engine.evict`` (the full budget, 5% of the tenant),
and the order the inspector's fading page and ``mnemonia maintain evict --dry-run`` read
(``inspection.fading``, 20 rows, writes nothing). Figures are printed, and with ``--json``
written to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from maintenance import START, TENANT, build  # noqa: E402
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig  # noqa: E402
from mnemonia.config import EVICTION_POLICIES  # noqa: E402
from mnemonia.embeddings import HashingEmbedder  # noqa: E402
from mnemonia.inspection import fading  # noqa: E402
from mnemonia.store import sql as S  # noqa: E402

TARGET = 2.0


def _fresh(base: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(base, work)
    (work / ".mnemonia.lock").unlink(missing_ok=True)


def add_uses(base: Path, n: int, used: int, seed: int = 2) -> None:
    """``used`` distinct memories get one ``used`` event each (once per store)."""
    marker = base / f"uses-{used}.json"
    if marker.exists():
        return
    rng = np.random.default_rng(seed)
    at = (START + timedelta(days=29, hours=12)).timestamp()
    rows = [{"tenant": TENANT, "memory_id": f"m{int(i):07d}", "event": "used", "at": at,
             "before": None, "after": json.dumps({"query": "a question it answered"})}
            for i in rng.choice(n, size=used, replace=False)]
    cfg = MnemoniaConfig.load(env={}, maintenance="manual")
    with (MemoryEngine.open(base, embedder=HashingEmbedder(), clock=ManualClock(START),
                            config=cfg) as engine, engine.sql.begin() as conn):
        conn.execute(S.memory_events.insert(), rows)
    marker.write_text(json.dumps({"used": used}))


def measure(base: Path, work: Path, policy: str) -> dict[str, float]:
    now = START + timedelta(days=30, hours=1)
    _fresh(base, work)
    cfg = MnemoniaConfig.load(env={}, maintenance="manual", eviction_policy=policy)
    with MemoryEngine.open(work, embedder=HashingEmbedder(), clock=ManualClock(now),
                           config=cfg) as engine:
        engine.recall("w1 w2 w3", tenant=TENANT, touch=False)  # warm up (not timed)
        t = time.perf_counter()
        listed = fading(engine.runtime, TENANT, limit=20)
        order = time.perf_counter() - t
        t = time.perf_counter()
        report = engine.evict(tenant=TENANT)
        took = time.perf_counter() - t
    shutil.rmtree(work, ignore_errors=True)
    return {"evict": took, "evicted": report.evicted, "active": report.active,
            "protected": report.protected, "dry_run": order, "listed": len(listed.items)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--used", type=int, default=5_000,
                    help="memories with a reported use (default %(default)s)")
    ap.add_argument("--policies", default=",".join(EVICTION_POLICIES))
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in policies if p not in EVICTION_POLICIES]
    if unknown:
        ap.error(f"--policies: unknown {', '.join(map(repr, unknown))}; allowed: "
                 f"{', '.join(EVICTION_POLICIES)}")
    root = args.dir or Path(__file__).with_name(".cache") / f"maintenance-{args.n}"
    base, work = root / "base", root / "work-evict"
    if not (base / "built.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        print(f"building a {args.n:,}-memory store in {base} (once; not timed)",
              file=sys.stderr, flush=True)
        build(base, args.n)
    add_uses(base, args.n, args.used)
    print(f"\nMnemonia eviction, one tenant of {args.n:,} memories, {args.used:,} used "
          f"({os.cpu_count()} CPUs)", flush=True)
    figures: dict[str, dict[str, float]] = {}
    for policy in policies:
        f = figures[policy] = measure(base, work, policy)
        verdict = "ok" if f["evict"] < TARGET else "OVER"
        print(f"{policy:<13} evict {f['evict']:6.2f} s ({int(f['evicted']):,} of "
              f"{int(f['active']):,} active, {int(f['protected']):,} protected; < {TARGET:g} s "
              f"{verdict})   dry-run order {f['dry_run']:5.2f} s ({int(f['listed'])} rows)",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
