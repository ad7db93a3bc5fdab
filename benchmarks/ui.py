"""The inspector's memory list at scale: milliseconds per page through the real HTTP app.

    .venv/bin/python benchmarks/ui.py --n 100000

Builds (once, cached under ``--dir``, default benchmarks/.cache/ui-N) a tenant of N memories
with ``add_many`` and precomputed random unit vectors (nothing is embedded; the hashing
embedder only gives the dimension): synthetic texts over a 5,000-word vocabulary, where the
word ``alpha`` occurs in ~10% of them and ``omega`` in ~0.1%; kinds, topics and importance
mixed (so the gatekeeper gives every state); 1% pinned and 1% soft-deleted (set in SQL after
the build). Then serves the inspector with uvicorn on 127.0.0.1 (a thread of this process)
and times GET requests with httpx over loopback: the memory list's first page, deep pages
(keyset cursors at the middle and the end of the tenant), filtered pages, searched pages,
both as HTML and as JSON, ``--repeat`` times each (median and worst). The baseline measured in
the same run is the round trip of a trivial request (``/api/session``); the target is 200 ms
per page (issue 18).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import sqlalchemy as sa
import uvicorn

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.store import sql as S
from mnemonia.ui import create_app

TENANT = "bench"
START = datetime(2025, 3, 1, tzinfo=UTC)
TARGET_MS = 200.0


def _texts(n: int, rng: np.random.Generator) -> list[str]:
    vocab = [f"w{i}" for i in range(5000)]
    lengths = rng.integers(8, 17, size=n)
    texts = [" ".join(vocab[j] for j in rng.choice(5000, size=int(k), replace=False))
             for k in lengths]
    for i in np.nonzero(rng.random(n) < 0.10)[0]:
        texts[int(i)] += " alpha"
    for i in np.nonzero(rng.random(n) < 0.001)[0]:
        texts[int(i)] += " omega"
    return texts


def build(folder: Path, n: int, seed: int = 0, batch: int = 1000) -> None:
    """Create the store (not part of the figures)."""
    rng = np.random.default_rng(seed)
    texts = _texts(n, rng)
    importance = np.round(rng.uniform(0, 1, size=n), 3)
    kinds = rng.choice(["episode", "fact", "concept"], size=n, p=[0.7, 0.25, 0.05])
    topics = rng.integers(0, 20, size=n)
    embedder = HashingEmbedder()
    t0 = time.perf_counter()
    with MemoryEngine.open(folder, embedder=embedder, clock=ManualClock(START),
                           config=MnemoniaConfig.load(env={}, maintenance="manual")) as engine:
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            vecs = rng.normal(size=(stop - start, embedder.dimension)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            engine.add_many([{
                "id": f"m{i:07d}", "text": texts[i], "importance": float(importance[i]),
                "kind": str(kinds[i]), "topic": f"t{int(topics[i])}",
                "pinned": i % 100 == 7, "embedding": vecs[i - start],
            } for i in range(start, stop)], tenant=TENANT)
            if (stop // batch) % 10 == 0 or stop == n:
                print(f"  built {stop:>7,} / {n:,} memories ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
        with engine.sql.begin() as conn:  # 1% forgotten
            conn.execute(S.memories.update().where(S.memories.c.id == sa.bindparam("b_id"))
                         .values(deleted_at=START.timestamp()),
                         [{"b_id": f"m{i:07d}"} for i in range(3, n, 100)])
    (folder / "built.json").write_text(json.dumps({"n": n, "seed": seed}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _time(client: httpx.Client, url: str, repeat: int) -> tuple[float, float, int]:
    """Median and worst milliseconds of ``repeat`` GETs, and the rows of the last one."""
    client.get(url).raise_for_status()  # warm
    times = []
    rows = 0
    for _ in range(repeat):
        t = time.perf_counter()
        r = client.get(url)
        times.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
        rows = len(r.json()["items"]) if "/api/" in url and "items" in r.text else \
            r.text.count('class="memory-row"')
    return statistics.median(times), max(times), rows


def cases(n: int) -> list[tuple[str, str]]:
    mid, end = n // 2, max(1, n - 60)
    return [
        ("first page", "?"),
        ("deep page (middle)", f"?page=s{mid}-m{mid:07d}"),
        ("deep page (end)", f"?page=s{end}-m{end:07d}"),
        ("kind=fact", "?kind=fact"),
        ("topic=t7", "?topic=t7"),
        ("state=skipped", "?state=skipped"),
        ("state=pinned (1%)", "?state=pinned"),
        ("deleted=yes (1%)", "?deleted=yes"),
        ("deleted=all, deep", f"?deleted=all&page=s{mid}-m{mid:07d}"),
        ("q=alpha (10%)", "?q=alpha"),
        ("q=omega (0.1%)", "?q=omega"),
        ("q=alpha kind=fact", "?q=alpha&kind=fact"),
        ("state=pinned kind=concept", "?state=pinned&kind=concept"),
    ]


def measure(folder: Path, n: int, repeat: int) -> list[dict[str, object]]:
    engine = MemoryEngine.open(folder, embedder=HashingEmbedder(), clock=ManualClock(START),
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(engine, read_only=True),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    out: list[dict[str, object]] = []
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            trivial, _, _ = _time(client, "/api/session", repeat)
            print(f"baseline: a trivial request (/api/session) {trivial:.2f} ms\n")
            print(f"{'page':28} {'HTML p50':>9} {'max':>7} {'JSON p50':>9} {'max':>7} "
                  f"{'rows':>5} {'x trivial':>9}")
            for name, query in cases(n):
                h50, hmax, rows = _time(client, f"/t/{TENANT}/memories{query}", repeat)
                j50, jmax, _ = _time(client, f"/api/t/{TENANT}/memories{query}", repeat)
                flag = "" if max(h50, j50) < TARGET_MS else "  over target"
                print(f"{name:28} {h50:9.1f} {hmax:7.1f} {j50:9.1f} {jmax:7.1f} {rows:5d} "
                      f"{h50 / trivial:9.1f}{flag}", flush=True)
                out.append({"page": name, "query": query, "html_p50_ms": round(h50, 2),
                            "html_max_ms": round(hmax, 2), "json_p50_ms": round(j50, 2),
                            "json_max_ms": round(jmax, 2), "rows": rows,
                            "trivial_ms": round(trivial, 3)})
    finally:
        server.should_exit = True
        thread.join(10)
        engine.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    folder = args.dir or Path(__file__).parent / ".cache" / f"ui-{args.n}"
    if not (folder / "built.json").exists():
        print(f"building {args.n:,} memories in {folder} (once)...", file=sys.stderr)
        build(folder, args.n)
    rows = measure(folder, args.n, args.repeat)
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "at": datetime.now(UTC).isoformat(),
                                         "rows": rows}, indent=2))
    worst = max(max(float(r["html_p50_ms"]), float(r["json_p50_ms"])) for r in rows)
    print(f"\nslowest median page {worst:.1f} ms (target {TARGET_MS:.0f} ms)")


if __name__ == "__main__":
    main()
