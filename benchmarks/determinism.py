r"""Same input, same store: ingest one LoCoMo conversation in several processes and diff.

Usage::

    .venv/bin/python benchmarks/determinism.py                     # conv-26, two processes
    .venv/bin/python benchmarks/determinism.py --conversation conv-41 --turns 300 \
        --embedder hashing --maintenance background --runs 3
    .venv/bin/python benchmarks/determinism.py --conversation all --parallel  # as locomo.py

Each run is a fresh process (its own ``PYTHONHASHSEED``, so set and dict order of strings
differ between runs) that ingests the conversation as ``benchmarks/locomo.py`` does (one
``add_many`` per session on a ``ManualClock`` standing at the session's last turn), then
asks every scored question with ``recall(k=20, touch=False, min_activation=0)`` at the
conversation's ask time. With ``--maintenance background`` the engine's background jobs run
on the clock's moves (as in an application on a ``ManualClock``); with ``manual`` the
enrichment sweep runs after the last session, as in the benchmark.

A run dumps what it made, keyed by the turns' ``dia_id`` (memory ids are random uuids, so
they are never compared): every memory (state, entities, consolidation, SM-2 state), every
relation (source, target, type, strength) and every ranking (the keys of the hits, best
first, and their scores). The first run is compared with each other one; the exit status is 1
when anything differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from locomo_data import DEFAULT_PATH, Conversation, load_locomo, scored_questions  # noqa: E402

TURN_KEY = "dia_id"
RECALL_K = 20


def _conversations(path: str, sample_ids: str, turns: int | None) -> list[Conversation]:
    """The conversations named (comma-separated, or ``all``), each cut to ``turns``."""
    convs = load_locomo(path)
    wanted = [c.sample_id for c in convs] if sample_ids == "all" else sample_ids.split(",")
    by_id = {c.sample_id: c for c in convs}
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise SystemExit(f"no conversation {missing} in {path}")
    out = [by_id[w] for w in wanted]
    if turns is not None:
        for conv in out:
            conv.turns = conv.turns[:turns]
    return out


def _embedder(kind: str) -> Any:
    from mnemonia.embeddings import HashingEmbedder, default_embedder

    return HashingEmbedder() if kind == "hashing" else default_embedder(kind)


def dump(convs: Sequence[Conversation], *, embedder: Any, maintenance: str, store: Path
         ) -> dict[str, Any]:
    """Ingest ``convs`` into a new store at ``store`` (each its own tenant, one after the
    other, as ``benchmarks/locomo.py`` does), ask their questions, and return what it made
    (see the module docstring), keyed by dia_id (and tenant, for several)."""
    import locomo
    from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig

    clock = ManualClock(min(c.sessions[min(c.sessions)] for c in convs))
    out: dict[str, Any] = {"memories": {}, "relations": [], "rankings": {}}
    with MemoryEngine.open(store, config=MnemoniaConfig(), clock=clock, embedder=embedder,
                           maintenance=maintenance) as engine:
        for conv in convs:
            locomo.ingest(engine, clock, conv,
                          sweep="enrich" if maintenance == "manual" else "none")
        for conv in convs:
            present = {t.dia_id for t in conv.turns}
            clock.set(conv.ask_time)  # (the background jobs run here too)
            rankings = {}
            for q in scored_questions(conv):
                if not set(q.evidence) & present:
                    continue
                res = engine.recall(q.question, tenant=conv.sample_id, k=RECALL_K,
                                    touch=False, min_activation=0)
                rankings[q.question] = [[h.memory.id, repr(h.score)] for h in res.memories]
            part = _keyed(engine, conv.sample_id, rankings)
            name = f"{conv.sample_id}/" if len(convs) > 1 else ""
            out["memories"].update({name + k: v for k, v in part["memories"].items()})
            out["relations"] += [[name + r[0], name + r[1], *r[2:]] for r in part["relations"]]
            out["rankings"].update({name + q: v for q, v in part["rankings"].items()})
    return out


def _keyed(engine: Any, tenant: str, rankings: dict[str, Any]) -> dict[str, Any]:
    rt = engine.runtime
    with rt.reading() as conn:
        rows = conn.exec_driver_sql(
            "SELECT id, seq, text, kind, state, entities, consolidated_into, deleted_at, "
            "superseded_by, enriched_at, easiness, interval_days, repetitions, next_review, "
            "utility, importance, metadata FROM memories WHERE tenant = ? ORDER BY seq",
            (tenant,)).fetchall()
        relations = rt.sql.graph.tenant_relations(conn, tenant)
    key: dict[str, str] = {}
    for r in rows:
        meta = json.loads(r.metadata)
        key[r.id] = meta.get(TURN_KEY) or f"{r.kind}:{r.text[:60]}"
    memories = {key[r.id]: {
        "seq": r.seq, "state": r.state, "entities": json.loads(r.entities),
        "consolidated_into": key.get(r.consolidated_into, r.consolidated_into),
        "deleted": r.deleted_at is not None, "superseded_by": key.get(r.superseded_by),
        "enriched": r.enriched_at is not None,
        "sm2": [r.easiness, r.interval_days, r.repetitions, r.next_review],
        "utility": r.utility, "importance": r.importance, "text": r.text}
        for r in rows}
    rels = sorted([key.get(x.src, x.src), key.get(x.dst, x.dst), x.type,
                   round(float(x.strength), 9)] for x in relations)
    ranks = {q: [[key.get(mid, mid), score] for mid, score in hits]
             for q, hits in rankings.items()}
    return {"memories": memories, "relations": rels, "rankings": ranks}


def compare(a: dict[str, Any], b: dict[str, Any], *, show: int = 5) -> list[str]:
    """Lines saying how ``b`` differs from ``a`` (empty: identical)."""
    out: list[str] = []
    ra = {tuple(x) for x in a["relations"]}
    rb = {tuple(x) for x in b["relations"]}
    if ra != rb:
        only_a, only_b = sorted(ra - rb), sorted(rb - ra)
        out.append(f"relations: {len(ra)} vs {len(rb)}; {len(only_a)} only in the first, "
                   f"{len(only_b)} only in the second")
        by_type: dict[str, list[int]] = {}
        for x in only_a:
            by_type.setdefault(x[2], [0, 0])[0] += 1
        for x in only_b:
            by_type.setdefault(x[2], [0, 0])[1] += 1
        out.append("  by type (first, second): " + ", ".join(
            f"{t} {n[0]}/{n[1]}" for t, n in sorted(by_type.items())))
        out += [f"  - {x}" for x in only_a[:show]] + [f"  + {x}" for x in only_b[:show]]
    ma, mb = a["memories"], b["memories"]
    diff_mem = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
    if diff_mem:
        out.append(f"memories: {len(diff_mem)} of {len(ma)} / {len(mb)} differ")
        for k in diff_mem[:show]:
            x, y = ma.get(k) or {}, mb.get(k) or {}
            fields = sorted(f for f in set(x) | set(y) if x.get(f) != y.get(f))
            out.append(f"  {k}: " + "; ".join(f"{f}: {x.get(f)!r} vs {y.get(f)!r}"
                                              for f in fields)[:300])
    qa, qb = a["rankings"], b["rankings"]
    order = [q for q in qa if [h[0] for h in qa[q]] != [h[0] for h in qb.get(q, [])]]
    scores = [q for q in qa if q not in order and qa[q] != qb.get(q)]
    if order or scores:
        out.append(f"rankings: {len(order)} of {len(qa)} differ in order, {len(scores)} more "
                   "in scores only")
        for q in (order + scores)[:show]:
            x, y = qa[q], qb.get(q, [])
            first = next((i for i, (h, g) in enumerate(zip(x, y, strict=False)) if h != g),
                         min(len(x), len(y)))
            out.append(f"  {q[:60]!r} from rank {first + 1}: {x[first:first + 3]} vs "
                       f"{y[first:first + 3]}")
    return out


def run_child(args: argparse.Namespace) -> None:
    convs = _conversations(args.data, args.conversation, args.turns)
    with tempfile.TemporaryDirectory(prefix="mnemonia-determinism-") as tmp:
        out = dump(convs, embedder=_embedder(args.embedder), maintenance=args.maintenance,
                   store=Path(tmp) / "store")
    Path(args.out).write_text(json.dumps(out))


def run(argv: Sequence[str], seeds: Sequence[int], workdir: Path, *, parallel: bool = False
        ) -> list[dict[str, Any]]:
    """Run this script as a child once per hash seed (one after the other, or all at once)
    and load what each dumped."""
    procs = []
    for seed in seeds:
        out = workdir / f"run-{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        procs.append((out, subprocess.Popen(
            [sys.executable, __file__, *argv, "--child", "--out", str(out)], env=env)))
        if not parallel:
            procs[-1][1].wait()
    for _, p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a run failed (exit {p.returncode})")
    return [json.loads(out.read_text()) for out, _ in procs]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_PATH))
    ap.add_argument("--conversation", default="conv-26",
                    help="a sample_id, several comma-separated (one store, a tenant each, as "
                         "benchmarks/locomo.py ingests them), or all")
    ap.add_argument("--turns", type=int, default=None, help="only the first N turns")
    ap.add_argument("--embedder", default="onnx",
                    help="hashing, or a backend of the bundled model (onnx, torch, onnx-int8)")
    ap.add_argument("--maintenance", choices=("manual", "background"), default="manual")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--parallel", action="store_true", help="run the processes at once")
    ap.add_argument("--keep", default=None, help="folder to keep the dumps in")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(args)
        return
    passed = [a for a in (sys.argv[1:] if argv is None else argv)
              if a not in ("--parallel",)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        dumps = run(passed, [1 + i for i in range(args.runs)], work, parallel=args.parallel)
    first = dumps[0]
    print(f"{args.conversation}: {len(first['memories'])} memories, "
          f"{len(first['relations'])} relations, {len(first['rankings'])} rankings")
    same = True
    for i, other in enumerate(dumps[1:], start=2):
        lines = compare(first, other)
        print(f"run 1 vs run {i}: " + ("identical" if not lines else "DIFFERENT"))
        for line in lines:
            print(line)
        same &= not lines
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
