r"""Ingest cost of knowledge-update detection (issue 34 point 7): ``add_many`` throughput and
single ``add`` latency with ``detect_updates`` on and off.

Usage::

    .venv/bin/python benchmarks/updates_speed.py                    # 10,000 memories, 2 runs each
    .venv/bin/python benchmarks/updates_speed.py --n 2000 --runs 1  # a quick look

The corpus is realistic short texts with speakers: the LoCoMo turns of ``--data`` (default the
development split; ``--no-locomo`` leaves them out) in conversation order, then memories of the
synthetic update set (``updates_data.generate(seed)``: statements of slots, their new
values, retractions, hard negatives, small talk), as many tenants of it as it takes to reach
``--n``. Every memory goes into ONE tenant, ``at`` 10 s apart in corpus order, the session of
its source; the clock (a ``ManualClock``) stands at each batch's last memory.

Every text is embedded once, before any store is built (``Speaker said, "text"``, large
batches, kept in the embedder's cache), so the timings are the engine's work, not the
model's; both settings read the same vectors.

Each run is a fresh embedded store (temporary, deleted afterwards), opened with
``maintenance="manual"`` and the shipped defaults but ``detect_updates``: ``add_many`` in
batches of ``--batch`` (100) over the whole corpus (timed: memories/s), then ``--adds`` (200)
single ``engine.add`` calls of further texts of the update set (timed each: ms). The settings
alternate (on, off, on, off, ...), ``--runs`` each; the ratio is of the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import updates_data  # noqa: E402
from locomo import CachedEmbedder, turn_text  # noqa: E402
from locomo_data import DEFAULT_PATH, load_locomo  # noqa: E402
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig  # noqa: E402
from mnemonia.config import DEFAULT_EMBEDDER_BACKEND, EMBEDDER_BACKENDS  # noqa: E402
from mnemonia.embeddings import default_embedder  # noqa: E402
from mnemonia.validation import embed_text  # noqa: E402

TENANT = "bench"
START = datetime(2024, 1, 1, tzinfo=UTC)
STEP = timedelta(seconds=10)


def corpus(n: int, extra: int, *, data: str | None, seed: int) -> tuple[list[dict[str, Any]],
                                                                       list[dict[str, Any]]]:
    """``n`` items for ``add_many`` and ``extra`` more for single adds (text, speaker,
    session_id; ``at`` is set here, 10 s apart)."""
    rows: list[dict[str, Any]] = []
    if data:
        for conv in load_locomo(data):
            rows += [{"text": turn_text(t), "speaker": t.speaker,
                      "session_id": f"{conv.sample_id}-S{t.session}"} for t in conv.turns]
    per = updates_data.DEFAULT_MEMORIES_PER_TENANT
    want = max(0, n + extra - len(rows))
    if want:
        gen = updates_data.generate(seed, tenants=-(-want // per) + 1)
        for t in gen["tenants"]:
            rows += [{"text": m["text"], "speaker": m["speaker"],
                      "session_id": f"u-{m['session_id']}"} for m in t["memories"]]
    rows = rows[:n + extra]
    if len(rows) < n + extra:
        raise SystemExit(f"corpus has {len(rows)} texts, {n + extra} wanted")
    for i, r in enumerate(rows):
        r["at"] = START + i * STEP
    return rows[:n], rows[n:]


def one_run(items: Sequence[dict[str, Any]], extra: Sequence[dict[str, Any]],
            emb: CachedEmbedder, *, detect: bool, batch: int, workdir: str | None
            ) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="mnemonia-updspeed-", dir=workdir))
    try:
        clock = ManualClock(items[0]["at"])
        cfg = MnemoniaConfig(detect_updates=detect)
        with MemoryEngine.open(root / "store", config=cfg, clock=clock, embedder=emb,
                               maintenance="manual") as engine:
            t_fill = 0.0
            for i in range(0, len(items), batch):
                chunk = [dict(x) for x in items[i:i + batch]]
                clock.set(chunk[-1]["at"])
                t0 = time.perf_counter()
                engine.add_many(chunk, tenant=TENANT)
                t_fill += time.perf_counter() - t0
            adds: list[float] = []
            for x in extra:
                clock.set(x["at"])
                t0 = time.perf_counter()
                engine.add(x["text"], tenant=TENANT, speaker=x["speaker"],
                           session_id=x["session_id"], at=x["at"])
                adds.append(time.perf_counter() - t0)
            st = engine.stats(TENANT)
        return {"detect": detect, "n": len(items), "fill_s": t_fill,
                "rate": len(items) / t_fill, "add_ms": [1000 * a for a in adds],
                "superseded": st.get("superseded"), "relations": st.get("relations")}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="memories added with add_many")
    ap.add_argument("--batch", type=int, default=100, help="add_many batch size")
    ap.add_argument("--adds", type=int, default=200, help="single add calls after the fill")
    ap.add_argument("--runs", type=int, default=2, help="runs per setting (alternating)")
    ap.add_argument("--data", default=str(DEFAULT_PATH), help="LoCoMo JSON (%(default)s)")
    ap.add_argument("--no-locomo", action="store_true", help="only the synthetic update set")
    ap.add_argument("--seed", type=int, default=updates_data.DEFAULT_SEED)
    ap.add_argument("--backend", choices=EMBEDDER_BACKENDS, default=DEFAULT_EMBEDDER_BACKEND)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--workdir", help="where the temporary stores go")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(max(1, args.threads))
    items, extra = corpus(args.n, args.adds, data=None if args.no_locomo else args.data,
                          seed=args.seed)
    emb = CachedEmbedder(default_embedder(args.backend))
    t0 = time.perf_counter()
    texts = list(dict.fromkeys(embed_text(x["text"], x["speaker"]) for x in [*items, *extra]))
    for i in range(0, len(texts), 256):
        emb.embed_documents(texts[i:i + 256])
    n_loc = 0 if args.no_locomo else min(args.n, sum(len(c.turns) for c in load_locomo(args.data)))
    print(f"corpus: {len(items)} memories ({n_loc} LoCoMo turns, the rest update-set seed "
          f"{args.seed}) + {len(extra)} single adds, one tenant; {len(texts)} distinct texts "
          f"embedded beforehand in {time.perf_counter() - t0:.0f} s ({emb.inner!r})")
    runs: list[dict[str, Any]] = []
    for r in range(args.runs):
        for detect in (True, False):
            res = one_run(items, extra, emb, detect=detect, batch=args.batch,
                          workdir=args.workdir)
            runs.append(res)
            a = res["add_ms"]
            print(f"run {r + 1} detect_updates={'on ' if detect else 'off'}: add_many "
                  f"{res['rate']:.0f} memories/s ({res['fill_s']:.1f} s for {res['n']}, "
                  f"batches of {args.batch}); add mean {statistics.fmean(a):.2f} ms, "
                  f"p50 {statistics.median(a):.2f} ms, p95 "
                  f"{sorted(a)[int(0.95 * (len(a) - 1))]:.2f} ms over {len(a)}; "
                  f"superseded {res['superseded']}, relations {res['relations']}", flush=True)
    on = [x for x in runs if x["detect"]]
    off = [x for x in runs if not x["detect"]]
    rate_on = statistics.median(x["rate"] for x in on)
    rate_off = statistics.median(x["rate"] for x in off)
    add_on = statistics.median(m for x in on for m in x["add_ms"])
    add_off = statistics.median(m for x in off for m in x["add_ms"])
    mean_on = statistics.fmean(m for x in on for m in x["add_ms"])
    mean_off = statistics.fmean(m for x in off for m in x["add_ms"])
    print(f"add_many throughput: on {rate_on:.0f} / off {rate_off:.0f} memories/s = "
          f"{rate_on / rate_off:.3f} (change {100 * (rate_on / rate_off - 1):+.1f}%)")
    print(f"single add p50: on {add_on:.2f} / off {add_off:.2f} ms = {add_on / add_off:.3f}; "
          f"mean: on {mean_on:.2f} / off {mean_off:.2f} ms = {mean_on / mean_off:.3f}")


if __name__ == "__main__":
    main()
