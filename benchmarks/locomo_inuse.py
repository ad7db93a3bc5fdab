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

Capacity: after practice (shipped default) each tenant is shrunk to each share of
``--capacity`` (default 50% and 25%) of its turns by each engine ``eviction_policy`` of
``--evictions`` (``max_memories`` = the limit, the automatic eviction run until it stops; what
it may not evict, pinned / important / ``immediate``, stays) and by the baselines oldest-first,
least-recently-accessed-first and random (seeded), which evict exactly as many as the limit
asks; then the test questions at +1 day; evidence evicted counts as missed.

``--json OUT`` writes ``{"rows": {NAME: {"h1": [r5, r10, r20], "h30": [...], "h180": [...]}},
"split": {"shared" | "rest": {NAME: {...}}}, "questions": {"shared": n, "rest": n},
"capacity": {"<policy or baseline>@<share>": [r5, r10, r20]}, "evicted": {...: [evicted,
asked]}}`` (percent; ``shared``: the test questions that share an evidence turn with a
practice question). ``--embed-cache DIR`` keeps the vectors between runs; ``--stores DIR``
keeps the ingested and practised stores and reuses them (valid only while ingest and practice
are unchanged: for iterating on eviction). Otherwise everything lives in a temporary folder
deleted at the end.
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
from mnemonia.config import EVICTION_POLICIES  # noqa: E402
from mnemonia.scoring.modes import MODES  # noqa: E402

SEED = 20261123
PRACTICE_K = 10
USED_WITHIN = 5
PRACTICE_STEP = timedelta(hours=1)
HORIZONS_DAYS = (1, 30, 180)
TEST_K = max(DEFAULT_KS)
CAPACITY_SHARES = (0.5, 0.25)
BASELINES = ("oldest", "lru", "random")
SEED_MODES = tuple(m for m in MODES if m != "lifecycle")


class CachingEmbedder(CachedEmbedder):
    """``locomo.CachedEmbedder`` that also serves repeated queries from its cache (this
    benchmark scores rankings, not latency, and asks each question many times), and can keep
    its vectors in a file between runs (``--embed-cache``)."""

    def embed_query(self, text: str) -> np.ndarray:
        vec = self.queries.get(text)
        return vec if vec is not None else super().embed_query(text)

    def cache_file(self, folder: Path, sample_id: str) -> Path:
        """Where this conversation's vectors are kept (one file per embedder name)."""
        model = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name)
        return folder / f"{sample_id}-{model}.npz"

    def load(self, path: Path) -> int:
        """Read vectors saved by :meth:`save`; returns how many were read (0: no file)."""
        if not path.exists():
            return 0
        with np.load(path) as z:
            for texts, vecs, into in ((z["doc_texts"], z["doc_vecs"], self.cache),
                                      (z["query_texts"], z["query_vecs"], self.queries)):
                into.update({str(t): np.asarray(v, dtype=np.float32)
                             for t, v in zip(texts, vecs, strict=True)})
        return len(self.cache) + len(self.queries)

    def save(self, path: Path) -> None:
        """Write every document and query vector seen so far (atomically)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        dim = self.dimension
        arrays = {}
        for name, table in (("doc", self.cache), ("query", self.queries)):
            texts = list(table)
            arrays[f"{name}_texts"] = np.array(texts, dtype=str)
            arrays[f"{name}_vecs"] = (np.stack([table[t] for t in texts]) if texts
                                      else np.zeros((0, dim), dtype=np.float32))
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **arrays)
        tmp.replace(path)


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
    """The ``n`` memories a plain cache policy would drop (no protection of any kind)."""
    active = [m for m in engine.list(tenant=tenant) if m.consolidated_into is None]
    if strategy == "oldest":
        active.sort(key=lambda m: (m.created_at, m.id))
    elif strategy == "lru":
        active.sort(key=lambda m: (m.accessed_at, m.id))
    elif strategy == "random":
        random.Random(f"{SEED}-{tenant}").shuffle(active)
    else:
        raise ValueError(f"unknown baseline {strategy!r}; allowed: {', '.join(BASELINES)}")
    return [m.id for m in active[:n]]


def shrink(store: Store, practised: Path, start: datetime, strategy: str, share: float
           ) -> tuple[Path, int, int]:
    """Evict from a copy of the practised store down to ``share`` of the conversation's turns.

    ``strategy`` is an engine ``eviction_policy`` (``max_memories`` = the limit, the automatic
    eviction run until it stops: what it may not evict stays) or a baseline of
    :data:`BASELINES` (exactly as many as the limit asks, nothing protected). Returns the
    shrunk store's folder, how many were evicted and how many the limit asked for."""
    tenant = store.conv.sample_id
    limit = max(1, int(len(store.conv.turns) * share))
    engine_policy = strategy not in BASELINES
    cfg = store.config.replace(max_memories=limit, eviction_policy=strategy) if engine_policy \
        else store.config
    with store.open(f"shrink-{strategy}-{share}", start, source=practised, config=cfg,
                    maintenance="manual") as (engine, _, path):
        asked = max(0, int(engine.stats(tenant=tenant)["active"]) - limit)
        evicted = 0
        if engine_policy:
            while True:
                got = engine.evict(tenant=tenant, force=False).evicted
                evicted += got
                if not got:
                    break
        else:
            for mid in _victims(engine, tenant, strategy, asked):
                engine.forget(mid, tenant=tenant)
                evicted += 1
    return path, evicted, asked


def _mean(rows: Sequence[Sequence[float]]) -> list[float]:
    return [round(100.0 * sum(r[i] for r in rows) / max(1, len(rows)), 1)
            for i in range(len(DEFAULT_KS))]


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What one run measures (the command line's choices)."""

    modes: Sequence[str] = SEED_MODES
    rows: bool = True
    shares: Sequence[float] = CAPACITY_SHARES
    evictions: Sequence[str] = ()
    stores: Path | None = None
    embed_cache: Path | None = None


def _reuse(plan: Plan, name: str, root: Path, build: Any) -> Path:
    """``root/name`` built by ``build(path)``, or copied from ``plan.stores`` when it holds
    one (``--stores``: stores kept between runs, valid while ingest and practice are
    unchanged)."""
    path = root / name
    kept = plan.stores / name if plan.stores is not None else None
    if kept is not None and kept.exists():
        shutil.copytree(kept, path)
        return path
    build(path)
    if kept is not None:
        shutil.copytree(path, kept)
    return path


def run_conversation(conv: Conversation, root: Path, emb: CachingEmbedder, plan: Plan,
                     log: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    sid = conv.sample_id
    store = Store(conv=conv, folder=root / f"{sid}-ingested", embedder=emb)
    _reuse(plan, store.folder.name, root, lambda _: ingest(conv, root, emb))
    practice, tests = split(conv)
    start = conv.ask_time
    end = start + len(practice) * PRACTICE_STEP
    log(f"{sid}: ingested {len(conv.turns)} turns ({time.perf_counter() - t0:.0f}s);"
        f" {len(practice)} practice, {len(tests)} test questions")
    rows: dict[str, dict[str, list[list[float]]]] = {}
    capacity: dict[str, list[list[float]]] = {}
    evicted: dict[str, list[int]] = {}
    if plan.rows:  # no practice: the clock moves as long as practice would last
        with store.open("no-practice", start) as (engine, clock, _):
            clock.set(end)
            rows.update(test(engine, clock, conv, tests, end,
                             {"default_no_practice": None,
                              "relevance_no_practice": "relevance"}))
    used: dict[str, int] = {}
    practised: dict[str, Path] = {}
    for row, mode in [("default", None), *((m, m) for m in plan.modes)]:
        t1 = time.perf_counter()

        def build(path: Path, row: str = row, mode: str | None = mode) -> None:
            with store.open(f"practice-{row}", start) as (engine, clock, opened):
                used[row] = practise(engine, clock, conv, practice, mode)
            shutil.move(str(opened), path)

        practised[row] = _reuse(plan, f"{sid}-practised-{row}", root, build)
        if plan.rows:
            with store.open(f"test-{row}", end, source=practised[row]) as (engine, clock, _):
                rows.update(test(engine, clock, conv, tests, end, {row: mode}))
        log(f"  {row}: {used.get(row, 'kept')} uses reported "
            f"({time.perf_counter() - t1:.0f}s)")
    for share in plan.shares:
        for strategy in plan.evictions:
            name = f"{strategy}@{share:g}"
            path, got, asked = shrink(store, practised["default"], end, strategy, share)
            cap = Store(conv=conv, folder=path, embedder=emb)
            with cap.open(f"cap-{strategy}-{share}-run", end) as (engine, clock, _):
                turns = dia_ids(engine, sid)
                clock.set(end + timedelta(days=HORIZONS_DAYS[0]))
                capacity[name] = []
                for q in tests:
                    ranked, _ = ranking(engine, sid, q, turns, k=TEST_K, mode=None,
                                        touch=False)
                    capacity[name].append([recall_at_k(ranked, q.evidence, k)
                                           for k in DEFAULT_KS])
            shutil.rmtree(path, ignore_errors=True)
            evicted[name] = [got, asked]
            log(f"  capacity {name}: {got} of {asked} evicted")
    for p in root.glob(f"{sid}-*"):
        shutil.rmtree(p, ignore_errors=True)
    log(f"{sid}: done ({time.perf_counter() - t0:.0f}s)")
    seen = {e for q in practice for e in q.evidence}
    return {"rows": rows, "capacity": capacity, "evicted": evicted, "tests": tests,
            "used": used, "shared": [bool(seen & set(q.evidence)) for q in tests]}


def summarise(per_conv: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean R@k per row and horizon (and, under ``"split"``, over the test questions that
    share an evidence turn with a practice question, ``"shared"``, and over the rest), and
    per capacity."""
    rows: dict[str, dict[str, list[list[float]]]] = {}
    split_rows: dict[str, dict[str, dict[str, list[list[float]]]]] = {"shared": {}, "rest": {}}
    capacity: dict[str, list[list[float]]] = {}
    evicted: dict[str, list[int]] = {}
    for pc in per_conv:
        for row, horizons in pc["rows"].items():
            for h, cells in horizons.items():
                rows.setdefault(row, {}).setdefault(h, []).extend(cells)
                for cell, shared in zip(cells, pc["shared"], strict=True):
                    part = split_rows["shared" if shared else "rest"]
                    part.setdefault(row, {}).setdefault(h, []).append(cell)
        for s, cells in pc["capacity"].items():
            capacity.setdefault(s, []).extend(cells)
        for s, (got, asked) in pc["evicted"].items():
            tally = evicted.setdefault(s, [0, 0])
            tally[0] += got
            tally[1] += asked
    return {"rows": {r: {h: _mean(c) for h, c in hs.items()} for r, hs in rows.items()},
            "split": {part: {r: {h: _mean(c) for h, c in hs.items()} for r, hs in rs.items()}
                      for part, rs in split_rows.items()},
            "questions": {part: sum(sum(pc["shared"]) if part == "shared" else
                                    len(pc["shared"]) - sum(pc["shared"]) for pc in per_conv)
                          for part in ("shared", "rest")},
            "capacity": {s: _mean(c) for s, c in capacity.items()},
            "evicted": evicted}


def format_rows(result: Mapping[str, Any]) -> str:
    hs = [f"h{d}" for d in HORIZONS_DAYS]
    head = f"{'row':<22}" + "".join(f"  {f'+{h[1:]} d R@5/10/20':>18}" for h in hs)
    lines = [head, "-" * len(head)]
    for row, cells in result["rows"].items():
        lines.append(f"{row:<22}" + "".join(
            f"  {'/'.join(f'{v:.1f}' for v in cells[h]):>18}" for h in hs))
    return "\n".join(lines)


def format_capacity(result: Mapping[str, Any]) -> str:
    head = f"{'eviction@share':<22}  {'R@5/10/20 at +1 d':>18}  {'evicted/asked':>14}"
    lines = [head, "-" * len(head)]
    for s, cells in result["capacity"].items():
        got, asked = result["evicted"].get(s, (0, 0))
        lines.append(f"{s:<22}  {'/'.join(f'{v:.1f}' for v in cells):>18}  "
                     f"{f'{got}/{asked}':>14}")
    return "\n".join(lines)


def _one(job: tuple[str, int, str, Plan, bool]) -> dict[str, Any]:
    """One conversation in a worker process (its own model and cache)."""
    data, i, root, plan, quiet = job
    import torch

    torch.set_num_threads(1)

    def log(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr, flush=True)

    conv = load_locomo(data)[i]
    emb = CachingEmbedder()
    cache = emb.cache_file(plan.embed_cache, conv.sample_id) if plan.embed_cache else None
    if cache is not None:
        emb.load(cache)
    out = run_conversation(conv, Path(root), emb, plan, log)
    if cache is not None:
        emb.save(cache)
    out.pop("tests")
    return out


def _shares(raw: str) -> tuple[float, ...]:
    try:
        shares = tuple(float(x) for x in raw.split(",") if x.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--capacity: numbers in (0, 1), got {raw!r}") from e
    if any(not 0.0 < x < 1.0 for x in shares):
        raise argparse.ArgumentTypeError(f"--capacity: numbers in (0, 1), got {raw!r}")
    return shares


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_PATH), help="LoCoMo JSON (%(default)s)")
    ap.add_argument("--json", dest="json_out", help="write the summary here")
    ap.add_argument("--conversations", type=int, default=None,
                    help="only the first N conversations (a quick look)")
    ap.add_argument("--modes", default=",".join(SEED_MODES),
                    help="seed modes to practise and test (default: %(default)s; '' for none)")
    ap.add_argument("--no-rows", action="store_true",
                    help="skip the horizon rows (capacity only)")
    ap.add_argument("--capacity", type=_shares, default=CAPACITY_SHARES,
                    help="capacities as shares of each conversation's turns (default "
                         f"{','.join(f'{x:g}' for x in CAPACITY_SHARES)}; '' for none)")
    ap.add_argument("--evictions", default=",".join((*EVICTION_POLICIES, *BASELINES)),
                    help="engine eviction policies and baselines compared at each capacity "
                         "(default: %(default)s)")
    ap.add_argument("--embed-cache", type=Path, default=None,
                    help="keep document and query vectors in this folder between runs")
    ap.add_argument("--stores", type=Path, default=None,
                    help="keep the ingested and practised stores in this folder and reuse "
                         "them (only while ingest and practice are unchanged: for iterating "
                         "on eviction)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="conversations run in parallel processes (default %(default)s)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    evictions = tuple(e for e in args.evictions.split(",") if e)
    unknown = [e for e in evictions if e not in (*EVICTION_POLICIES, *BASELINES)]
    if unknown:
        ap.error(f"--evictions: unknown {', '.join(map(repr, unknown))}; allowed: "
                 f"{', '.join((*EVICTION_POLICIES, *BASELINES))}")
    plan = Plan(modes=tuple(m for m in args.modes.split(",") if m), rows=not args.no_rows,
                shares=args.capacity, evictions=evictions, stores=args.stores,
                embed_cache=args.embed_cache)
    if plan.stores is not None:
        plan.stores.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    convs = load_locomo(args.data)[:args.conversations]
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
            per_conv = list(pool.map(_one, [(args.data, i, str(root), plan, args.quiet)
                                            for i in range(len(convs))]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = summarise(per_conv)
    if plan.rows:
        print()
        print(f"shipped default mode: {MnemoniaConfig().default_mode}; test questions with "
              "touch=False at +1/+30/+180 days after practice")
        print(format_rows(result))
        for part, what in (("shared", "sharing an evidence turn with a practice question"),
                           ("rest", "sharing none")):
            print(f"\n{result['questions'][part]} test questions {what}:")
            print(format_rows({"rows": result["split"][part]}))
    if plan.shares and plan.evictions:
        print()
        print(f"capacity: each tenant shrunk to a share of its turns after practice (default "
              f"mode; shipped eviction_policy: {MnemoniaConfig().eviction_policy}); engine "
              "policies evict until the limit or protection stops them, baselines exactly "
              "as many as the limit asks; test at +1 d")
        print(format_capacity(result))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
