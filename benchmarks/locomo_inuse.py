r"""LoCoMo in use: recall after the memory has been used, at horizons up to half a year.

Usage::

    .venv/bin/python benchmarks/locomo_inuse.py                  # development split
    .venv/bin/python benchmarks/locomo_inuse.py --data locomo10.json --json out.json

Static LoCoMo (``locomo.py``) asks every question once, right after the conversation. A memory
in use is asked again and again, told what helped, and maintained while time passes. Per
conversation (one tenant of its own store, shipped defaults, ``maintenance="background"`` on a
``ManualClock``, so the scheduler runs each job on its cadence whenever the clock moves):

1. **Ingest.** Sessions in time order, one ``add_many`` per session at the session's time (as in
   ``locomo.py``); the background jobs run between sessions as the clock moves.
2. **Split.** The scored questions (categories 1-4 with evidence) are shuffled with a fixed seed
   and split, per category, into a practice half and a test half.
3. **Practice.** From one day after the last session, one practice question per hour:
   ``recall(q, k=10)`` with touches; the simulated assistant uses the returned memories among
   the top 5 that hold evidence and reports that use (``feedback(id, 5)``); the clock then
   moves one hour and maintenance runs on its cadence.
4. **Test.** Each test question with ``touch=False`` (and ``min_activation=0``, so exactly k
   come back, as in ``locomo.py``) at +1, +30 and +180 days after practice (the clock jumps,
   the background jobs run); R@5/10/20 over turns (a ``concept`` hit stands for its members).

Rows: ``default`` (the shipped default mode, with practice), ``default_no_practice`` (the
clock moves as long as practice would have lasted, no recall), ``relevance_no_practice``
(the same store asked in ``relevance`` mode) and each built-in mode with practice in that
mode.

Capacity: after practice (shipped default) each tenant is shrunk to half its turns by the
engine's eviction (``max_memories`` = half, the automatic eviction run until it stops; what
it cannot evict, pinned / important / ``immediate``, stays), beside the same number evicted
oldest-first, least-recently-accessed-first and at random (seeded); then the test questions
at +1 day; evidence evicted counts as missed.

``--json OUT`` writes ``{"rows": {NAME: {"h1": [r5, r10, r20], "h30": [...], "h180": [...]}},
"capacity": {"mnemonia" | "oldest" | "lru" | "random": [r5, r10, r20]}}`` (percent).
Everything lives in a temporary folder deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from locomo import TURN_SPACING, CachedEmbedder, turn_text  # noqa: E402
from locomo_data import (  # noqa: E402
    CATEGORY_NAMES,
    DEFAULT_KS,
    DEFAULT_PATH,
    Conversation,
    Question,
    load_locomo,
    recall_at_k,
    scored_questions,
)
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig  # noqa: E402
from mnemonia.scoring.modes import MODES  # noqa: E402

SEED = 20261123
PRACTICE_K = 10
USED_WITHIN = 5
PRACTICE_STEP = timedelta(hours=1)
HORIZONS_DAYS = (1, 30, 180)
TEST_K = max(DEFAULT_KS)
CAPACITY_SHARE = 0.5
STRATEGIES = ("mnemonia", "oldest", "lru", "random")
SEED_MODES = tuple(m for m in MODES if m != "lifecycle")


class CachingEmbedder(CachedEmbedder):
    """``locomo.CachedEmbedder`` that also serves repeated queries from its cache (this
    benchmark scores rankings, not latency, and asks each question many times)."""

    def embed_query(self, text: str) -> np.ndarray:
        vec = self.queries.get(text)
        return vec if vec is not None else super().embed_query(text)


def split(conv: Conversation, seed: int = SEED) -> tuple[list[Question], list[Question]]:
    """Practice and test halves, stratified by category, shuffled with ``seed``."""
    rng = random.Random(f"{seed}-{conv.sample_id}")
    practice: list[Question] = []
    test: list[Question] = []
    by_cat: dict[int, list[Question]] = {}
    for q in scored_questions(conv):
        by_cat.setdefault(q.category, []).append(q)
    for cat in sorted(by_cat):
        qs = by_cat[cat][:]
        rng.shuffle(qs)
        half = (len(qs) + rng.randrange(2)) // 2
        practice.extend(qs[:half])
        test.extend(qs[half:])
    rng.shuffle(practice)
    return practice, test


def shared_evidence(pairs: Sequence[tuple[list[Question], list[Question]]]) -> float:
    """Share of test questions with an evidence turn that some practice question shares."""
    n = hit = 0
    for practice, test in pairs:
        seen = {e for q in practice for e in q.evidence}
        n += len(test)
        hit += sum(1 for q in test if seen & set(q.evidence))
    return hit / max(1, n)


@dataclass
class Store:
    """One conversation's ingested store (closed), copied for every run."""

    conv: Conversation
    folder: Path
    embedder: CachingEmbedder
    config: MnemoniaConfig = field(default_factory=MnemoniaConfig)

    @contextmanager
    def open(self, name: str, start: datetime, *, source: Path | None = None,
             config: MnemoniaConfig | None = None, maintenance: str | None = None
             ) -> Iterator[tuple[MemoryEngine, ManualClock, Path]]:
        """A copy of the ingested store (or of ``source``), opened on a clock at ``start``."""
        path = self.folder.parent / f"{self.conv.sample_id}-{name}"
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(source or self.folder, path)
        clock = ManualClock(start)
        engine = MemoryEngine.open(path, config=config or self.config, clock=clock,
                                   embedder=self.embedder, maintenance=maintenance)
        try:
            yield engine, clock, path
        finally:
            engine.close()


def ingest(conv: Conversation, root: Path, embedder: CachingEmbedder) -> Store:
    """Every session in time order, the background scheduler running as the clock moves."""
    folder = root / f"{conv.sample_id}-ingested"
    by_session: dict[int, list[Any]] = {}
    for t in conv.turns:
        by_session.setdefault(t.session, []).append(t)
    clock = ManualClock(conv.sessions[min(by_session)])
    with MemoryEngine.open(folder, clock=clock, embedder=embedder) as engine:
        for n in sorted(by_session):
            turns, start = by_session[n], conv.sessions[n]
            clock.set(start + (len(turns) - 1) * TURN_SPACING)  # maintenance runs here
            engine.add_many([{
                "text": turn_text(t), "speaker": t.speaker, "at": start + i * TURN_SPACING,
                "session_id": f"{conv.sample_id}-S{n}", "metadata": {"dia_id": t.dia_id},
            } for i, t in enumerate(turns)], tenant=conv.sample_id)
    return Store(conv=conv, folder=folder, embedder=embedder)


def dia_ids(engine: MemoryEngine, tenant: str) -> dict[str, list[str]]:
    """Memory id -> the turns it stands for (a concept: its members' turns)."""
    out: dict[str, list[str]] = {}
    members: dict[str, list[str]] = {}
    for m in engine.list(tenant=tenant, include_deleted=True):
        did = m.metadata.get("dia_id")
        if did:
            out[m.id] = [str(did)]
            if m.consolidated_into:
                members.setdefault(m.consolidated_into, []).append(str(did))
    for concept, turns in members.items():
        out.setdefault(concept, turns)
    return out


def ranking(engine: MemoryEngine, tenant: str, q: Question, turns: Mapping[str, list[str]],
            *, k: int, mode: str | None, touch: bool) -> tuple[list[str], list[Any]]:
    res = engine.recall(q.question, tenant=tenant, k=k, mode=mode, touch=touch,
                        min_activation=0.0)
    ranked: list[str] = []
    for h in res.memories:
        ranked.extend(d for d in turns.get(h.memory.id, []) if d not in ranked)
    return ranked, res.memories


def practise(engine: MemoryEngine, clock: ManualClock, conv: Conversation,
             questions: Sequence[Question], mode: str | None) -> int:
    """One question per hour with touches; evidence among the top 5 gets ``feedback(id, 5)``.
    Returns how many uses were reported."""
    tenant = conv.sample_id
    used = 0
    for q in questions:
        turns = dia_ids(engine, tenant)  # consolidation may have made concepts meanwhile
        _, hits = ranking(engine, tenant, q, turns, k=PRACTICE_K, mode=mode, touch=True)
        for h in hits[:USED_WITHIN]:
            if set(turns.get(h.memory.id, ())) & set(q.evidence):
                engine.feedback(h.memory.id, 5, tenant=tenant)
                used += 1
        clock.advance(PRACTICE_STEP)
    return used


def test(engine: MemoryEngine, clock: ManualClock, conv: Conversation,
         questions: Sequence[Question], end: datetime, modes: Mapping[str, str | None]
         ) -> dict[str, dict[str, list[list[float]]]]:
    """``{row: {"h1": [[r5, r10, r20] per question], ...}}`` for each ``row -> mode``."""
    out: dict[str, dict[str, list[list[float]]]] = {row: {} for row in modes}
    for days in HORIZONS_DAYS:
        clock.set(end + timedelta(days=days))
        turns = dia_ids(engine, conv.sample_id)
        for row, mode in modes.items():
            cells = out[row].setdefault(f"h{days}", [])
            for q in questions:
                ranked, _ = ranking(engine, conv.sample_id, q, turns, k=TEST_K, mode=mode,
                                    touch=False)
                cells.append([recall_at_k(ranked, q.evidence, k) for k in DEFAULT_KS])
    return out


def _victims(engine: MemoryEngine, tenant: str, strategy: str, n: int) -> list[str]:
    active = [m for m in engine.list(tenant=tenant) if m.consolidated_into is None]
    if strategy == "oldest":
        active.sort(key=lambda m: (m.created_at, m.id))
    elif strategy == "lru":
        active.sort(key=lambda m: (m.accessed_at, m.id))
    else:
        random.Random(f"{SEED}-{tenant}").shuffle(active)
    return [m.id for m in active[:n]]


def shrink(store: Store, practised: Path, start: datetime, strategy: str, budget: int | None
           ) -> int:
    """Evict from a copy of the practised store; returns how many were evicted."""
    tenant = store.conv.sample_id
    cfg = store.config
    if strategy == "mnemonia":
        limit = max(1, int(len(store.conv.turns) * CAPACITY_SHARE))
        cfg = cfg.replace(max_memories=limit)
    with store.open(f"shrink-{strategy}", start, source=practised, config=cfg,
                    maintenance="manual") as (engine, _, path):
        evicted = 0
        if strategy == "mnemonia":
            while True:
                got = engine.evict(tenant=tenant, force=False).evicted
                evicted += got
                if not got:
                    break
        else:
            for mid in _victims(engine, tenant, strategy, budget or 0):
                engine.forget(mid, tenant=tenant)
                evicted += 1
        target = store.folder.parent / f"{tenant}-capacity-{strategy}"
        shutil.rmtree(target, ignore_errors=True)
    shutil.move(str(path), target)
    return evicted


def _mean(rows: Sequence[Sequence[float]]) -> list[float]:
    return [round(100.0 * sum(r[i] for r in rows) / max(1, len(rows)), 1)
            for i in range(len(DEFAULT_KS))]


def run_conversation(conv: Conversation, root: Path, emb: CachingEmbedder,
                     modes: Sequence[str], log: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    store = ingest(conv, root, emb)
    practice, tests = split(conv)
    start = conv.ask_time
    end = start + len(practice) * PRACTICE_STEP
    log(f"{conv.sample_id}: ingested {len(conv.turns)} turns ({time.perf_counter() - t0:.0f}s);"
        f" {len(practice)} practice, {len(tests)} test questions")
    rows: dict[str, dict[str, list[list[float]]]] = {}
    capacity: dict[str, list[list[float]]] = {}
    # no practice: the clock moves as long as practice would last
    with store.open("no-practice", start) as (engine, clock, _):
        clock.set(end)
        rows.update(test(engine, clock, conv, tests, end,
                         {"default_no_practice": None, "relevance_no_practice": "relevance"}))
    used: dict[str, int] = {}
    practised: dict[str, Path] = {}
    for row, mode in [("default", None), *((m, m) for m in modes)]:
        t1 = time.perf_counter()
        with store.open(f"practice-{row}", start) as (engine, clock, path):
            used[row] = practise(engine, clock, conv, practice, mode)
        practised[row] = path  # kept for the capacity runs (a copy is tested)
        with store.open(f"test-{row}", end, source=path) as (engine, clock, _):
            rows.update(test(engine, clock, conv, tests, end, {row: mode}))
        log(f"  {row}: {used[row]} uses reported ({time.perf_counter() - t1:.0f}s)")
    budget = None
    for strategy in STRATEGIES:
        evicted = shrink(store, practised["default"], end, strategy, budget)
        budget = evicted if budget is None else budget
        cap = Store(conv=conv, folder=root / f"{conv.sample_id}-capacity-{strategy}",
                    embedder=emb)
        with cap.open(f"cap-{strategy}-run", end) as (engine, clock, _):
            turns = dia_ids(engine, conv.sample_id)
            clock.set(end + timedelta(days=HORIZONS_DAYS[0]))
            capacity[strategy] = []
            for q in tests:
                ranked, _ = ranking(engine, conv.sample_id, q, turns, k=TEST_K, mode=None,
                                    touch=False)
                capacity[strategy].append([recall_at_k(ranked, q.evidence, k)
                                           for k in DEFAULT_KS])
        log(f"  capacity {strategy}: {evicted} evicted")
    for p in root.glob(f"{conv.sample_id}-*"):
        shutil.rmtree(p, ignore_errors=True)
    log(f"{conv.sample_id}: done ({time.perf_counter() - t0:.0f}s)")
    return {"rows": rows, "capacity": capacity, "tests": tests, "used": used}


def summarise(per_conv: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, list[list[float]]]] = {}
    capacity: dict[str, list[list[float]]] = {}
    for pc in per_conv:
        for row, horizons in pc["rows"].items():
            for h, cells in horizons.items():
                rows.setdefault(row, {}).setdefault(h, []).extend(cells)
        for s, cells in pc["capacity"].items():
            capacity.setdefault(s, []).extend(cells)
    return {"rows": {r: {h: _mean(c) for h, c in hs.items()} for r, hs in rows.items()},
            "capacity": {s: _mean(c) for s, c in capacity.items()}}


def format_rows(result: Mapping[str, Any]) -> str:
    hs = [f"h{d}" for d in HORIZONS_DAYS]
    head = f"{'row':<22}" + "".join(f"  {f'+{h[1:]} d R@5/10/20':>18}" for h in hs)
    lines = [head, "-" * len(head)]
    for row, cells in result["rows"].items():
        lines.append(f"{row:<22}" + "".join(
            f"  {'/'.join(f'{v:.1f}' for v in cells[h]):>18}" for h in hs))
    return "\n".join(lines)


def format_capacity(result: Mapping[str, Any]) -> str:
    head = f"{'eviction':<10}  {'R@5/10/20 at +1 d':>18}"
    lines = [head, "-" * len(head)]
    for s, cells in result["capacity"].items():
        lines.append(f"{s:<10}  {'/'.join(f'{v:.1f}' for v in cells):>18}")
    return "\n".join(lines)


def _one(job: tuple[str, int, str, Sequence[str], bool]) -> dict[str, Any]:
    """One conversation in a worker process (its own model and cache)."""
    data, i, root, modes, quiet = job
    import torch

    torch.set_num_threads(1)

    def log(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr, flush=True)

    out = run_conversation(load_locomo(data)[i], Path(root), CachingEmbedder(), modes, log)
    out.pop("tests")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_PATH), help="LoCoMo JSON (%(default)s)")
    ap.add_argument("--json", dest="json_out", help="write the summary here")
    ap.add_argument("--conversations", type=int, default=None,
                    help="only the first N conversations (a quick look)")
    ap.add_argument("--modes", default=",".join(SEED_MODES),
                    help="seed modes to practise and test (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="conversations run in parallel processes (default %(default)s)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    convs = load_locomo(args.data)[:args.conversations]
    modes = [m for m in args.modes.split(",") if m]
    pairs = [split(c) for c in convs]
    n_test = sum(len(t) for _, t in pairs)
    print(f"LoCoMo in use, {args.data}: {len(convs)} conversations, "
          f"{sum(len(p) for p, _ in pairs)} practice / {n_test} test questions "
          f"({', '.join(f'{CATEGORY_NAMES[c]} {sum(q.category == c for _, t in pairs for q in t)}' for c in (1, 2, 3, 4))}); "  # noqa: E501
          f"{100 * shared_evidence(pairs):.0f}% of test questions share an evidence turn "
          "with a practice question")

    root = Path(tempfile.mkdtemp(prefix="mnemonia-inuse-"))
    try:
        with ProcessPoolExecutor(max(1, args.jobs)) as pool:
            per_conv = list(pool.map(_one, [(args.data, i, str(root), modes, args.quiet)
                                            for i in range(len(convs))]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = summarise(per_conv)
    print()
    print(f"shipped default mode: {MnemoniaConfig().default_mode}; test questions with "
          "touch=False at +1/+30/+180 days after practice")
    print(format_rows(result))
    print()
    print("capacity: each tenant shrunk to half its turns after practice (the same number "
          "evicted by each strategy), test at +1 d")
    print(format_capacity(result))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
