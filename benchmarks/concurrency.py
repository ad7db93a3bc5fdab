"""Mnemonia under concurrency: threads recalling and threads ingesting on one engine while its
background maintenance runs, beside the bare pair doing the same mix; then two processes on
one server store (Chroma server + PostgreSQL).

    .venv/bin/python benchmarks/concurrency.py --seconds 60
    .venv/bin/python benchmarks/concurrency.py --mode server --seconds 60 --processes 2

Each phase runs for ``--seconds``: ``--readers`` threads call ``recall(q, k=10)`` on a random
tenant (every query new, so embedded), ``--writers`` threads call ``add(text)`` one memory at
a time (embedded by the model: the ingest of a chat app). The engine is opened with the
background maintenance (``maintenance="background"``, the default), its cadences shortened so
every job runs inside the window (``enrich_interval`` 5 s, re-evaluation 10 s, review 15 s,
consolidation and eviction 20 s, TTL sweep 10 s; ``max_memories`` just above the store so
eviction has work). The bare pair does the same mix on bare Chroma collections (one per
tenant): ``embed_query`` + ``query`` and ``embed_documents`` + ``add``. The phases run one
after the other in one process: ``alone`` (one reader, nothing else) then the concurrent mix,
bare first, then ours.

The stores are filled first with ``--tenants`` x ``--per-tenant`` memories (precomputed
vectors, ``speed_corpus.SyntheticVectors``, sessions corpus). After the run: every add that
returned is in the store (by id), no recall returned another tenant's memory, the error count
(every exception of every call, by type) and the maintenance jobs that ran.

With ``--mode server --processes P`` the store is shared: this process starts the servers,
fills the store, then P worker processes (this script with ``--worker``) each run
``readers / P`` readers and ``writers / P`` writers with their own engine and background
maintenance (leases keep two processes from running one job at once); one process with the
whole mix is measured first, in the same run.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from servers import ChromaServer, PostgresCluster, loadavg
from speed_corpus import OBJECTS, SUBJECTS, Batch, SyntheticVectors, batches

K = 10
NAMESPACE = "conc"
CADENCES = {"enrich_interval": 5.0, "reevaluation_interval": 10.0, "review_interval": 15.0,
            "consolidate_interval": 20.0, "evict_interval": 20.0, "expire_interval": 10.0}


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def tenant_names(n: int) -> list[str]:
    return [f"u{t:03d}" for t in range(n)]


def query(i: int, rng: random.Random) -> str:
    return f"what did {rng.choice(SUBJECTS)} say about {rng.choice(OBJECTS)}? (q{i})"


def new_text(tag: str, i: int, rng: random.Random) -> str:
    return (f"{rng.choice(SUBJECTS)} told me about {rng.choice(OBJECTS)} on day {i} "
            f"({tag} note {rng.randrange(10**6)})")


# -- the mix --------------------------------------------------------------------------------------


class Side:
    """One side of the comparison: ``recall(q, tenant)`` returns the tenants of its hits;
    ``add(text, tenant, id)`` stores one memory."""

    name = "?"

    def recall(self, q: str, tenant: str) -> list[str]:
        raise NotImplementedError

    def add(self, text: str, tenant: str, mid: str) -> None:
        raise NotImplementedError


class Ours(Side):
    name = "ours"

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def recall(self, q: str, tenant: str) -> list[str]:
        return [h.memory.tenant for h in self.engine.recall(q, tenant=tenant, k=K).memories]

    def add(self, text: str, tenant: str, mid: str) -> None:
        self.engine.add(text, tenant=tenant, id=mid)


class Bare(Side):
    name = "bare"

    def __init__(self, client: Any, embedder: Any, tenants: list[str]) -> None:
        self.embedder = embedder
        self.cols = {t: client.get_collection(f"bare-{t}") for t in tenants}

    def recall(self, q: str, tenant: str) -> list[str]:
        got = self.cols[tenant].query(query_embeddings=self.embedder.embed_query(q)[None, :],
                                      n_results=K)
        return [tenant for _ in got["ids"][0]]

    def add(self, text: str, tenant: str, mid: str) -> None:
        self.cols[tenant].add(ids=[mid], embeddings=self.embedder.embed_documents([text]),
                              documents=[text])


def run_mix(side: Side, tenants: list[str], *, seconds: float, readers: int, writers: int,
            tag: str) -> dict[str, Any]:
    """``readers`` + ``writers`` threads on ``side`` for ``seconds``; latencies, counts,
    errors (by type, first tracebacks kept), acked adds, foreign hits."""
    stop = threading.Event()
    lock = threading.Lock()
    lat: dict[str, list[float]] = {"recall": [], "add": []}
    errors: collections.Counter[str] = collections.Counter()
    first_errors: list[str] = []
    acked: list[tuple[str, str]] = []
    foreign = [0]

    def call(kind: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as e:  # counted: the figure that must be zero
            with lock:
                errors[f"{kind}: {type(e).__name__}"] += 1
                if len(first_errors) < 5:
                    first_errors.append(traceback.format_exc())
            return None
        spent = time.perf_counter() - t0
        with lock:
            lat[kind].append(spent)
        return out

    def reader(r: int) -> None:
        rng = random.Random(f"{tag}-r{r}")
        i = 0
        while not stop.is_set():
            tenant = rng.choice(tenants)
            text = query(i, rng)
            got = call("recall", lambda t=tenant, q=text: side.recall(q, t))
            if got is not None:
                bad = sum(1 for t in got if t != tenant)
                if bad:
                    with lock:
                        foreign[0] += bad
            i += 1

    def writer(w: int) -> None:
        rng = random.Random(f"{tag}-w{w}")
        i = 0
        while not stop.is_set():
            tenant = rng.choice(tenants)
            mid = f"{tenant}-{tag}-w{w}-{i}"
            t0 = time.perf_counter()
            try:
                side.add(new_text(tag, i, rng), tenant, mid)
            except Exception as e:
                with lock:
                    errors[f"add: {type(e).__name__}"] += 1
                    if len(first_errors) < 5:
                        first_errors.append(traceback.format_exc())
            else:
                with lock:
                    lat["add"].append(time.perf_counter() - t0)
                    acked.append((tenant, mid))
            i += 1

    threads = [threading.Thread(target=reader, args=(r,), daemon=True) for r in range(readers)]
    threads += [threading.Thread(target=writer, args=(w,), daemon=True)
                for w in range(writers)]
    t_start = time.perf_counter()
    for th in threads:
        th.start()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t_start
    out: dict[str, Any] = {"side": side.name, "readers": readers, "writers": writers,
                           "wall_s": wall, "errors": dict(errors), "error_count":
                           sum(errors.values()), "first_errors": first_errors,
                           "foreign_hits": foreign[0], "acked": acked, "load": loadavg()}
    for kind, values in lat.items():
        out[f"{kind}s"] = len(values)
        out[f"{kind}_per_s"] = len(values) / wall
        if values:
            out[f"{kind}_p50_ms"] = 1000 * statistics.median(values)
            out[f"{kind}_p95_ms"] = 1000 * pct(values, 95)
    return out


def show(label: str, r: dict[str, Any]) -> None:
    parts = [f"{label} [{r['side']}] {r['readers']}r+{r['writers']}w {r['wall_s']:.0f} s:"]
    if r.get("recalls"):
        parts.append(f"recall {r['recall_per_s']:.1f}/s p50 {r['recall_p50_ms']:.1f} ms "
                     f"p95 {r['recall_p95_ms']:.1f} ms;")
    if r.get("adds"):
        parts.append(f"add {r['add_per_s']:.1f}/s p50 {r['add_p50_ms']:.1f} ms "
                     f"p95 {r['add_p95_ms']:.1f} ms;")
    parts.append(f"errors {r['error_count']} {r['errors'] or ''}, foreign hits "
                 f"{r['foreign_hits']}, load {r['load']}")
    log(" ".join(parts))
    for tb in r["first_errors"][:2]:
        log(tb)


# -- stores ---------------------------------------------------------------------------------------


def engine_config(n_memories: int, *, background: bool) -> Any:
    from mnemonia import MnemoniaConfig

    if not background:
        return MnemoniaConfig.load(env={}, maintenance="manual")
    return MnemoniaConfig.load(env={}, maintenance="background",
                               max_memories=int(n_memories * 1.01), **CADENCES)


def fill(engine: Any, client: Any, synth: SyntheticVectors, tenants: list[str],
         per_tenant: int) -> None:
    for t_i, tenant in enumerate(tenants):
        col = client.get_or_create_collection(f"bare-{tenant}", embedding_function=None,
                                              metadata={"hnsw:space": "cosine"})
        for b in batches(per_tenant, min(1000, per_tenant), kind="sessions", seed=t_i,
                         prefix=f"{tenant}-f"):
            vecs = synth(Batch(t_i * per_tenant + b.start, b.items, b.cores))
            col.add(ids=b.ids, embeddings=vecs, documents=b.texts)
            engine.add_many([{**it, "embedding": v} for it, v in zip(b.items, vecs,
                                                                      strict=True)],
                            tenant=tenant)
    log(f"filled {len(tenants)} tenants x {per_tenant:,} memories, load {loadavg()}")


def check_acked(engine: Any, acked: list[tuple[str, str]]) -> int:
    """Acked adds missing from the store (``get`` by id; soft-deleted counts as present: an
    eviction may have taken it)."""
    from mnemonia.errors import MemoryNotFoundError

    missing = 0
    for tenant, mid in acked:
        try:
            engine.get(mid, tenant=tenant)
        except MemoryNotFoundError:
            missing += 1
    return missing


def jobs_ran(engine: Any) -> dict[str, int]:
    """Maintenance job runs of this engine's scheduler so far (job: runs; ``errors``: the
    job runs that raised)."""
    sch = engine.scheduler
    if sch is None:
        return {}
    return {**{j: int(c) for j, c in sch.runs.items() if c}, "errors": len(sch.errors)}


def since(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def open_engine(args: argparse.Namespace, embedder: Any, cfg: Any, urls: dict[str, str]
                ) -> Any:
    from mnemonia import MemoryEngine

    if args.mode == "embedded":
        return MemoryEngine.open(args.workdir / "ours", embedder=embedder, config=cfg)
    return MemoryEngine.open(chroma_url=urls["chroma"], sql_url=urls["sql"], embedder=embedder,
                             config=cfg, namespace=NAMESPACE)


def open_bare(args: argparse.Namespace, urls: dict[str, str]) -> Any:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if args.mode == "embedded":
        return chromadb.PersistentClient(path=str(args.workdir / "bare"), settings=settings)
    host, port = urls["chroma"].rsplit(":", 1)
    return chromadb.HttpClient(host=host.split("//")[1], port=int(port), settings=settings)


def worker(args: argparse.Namespace) -> None:
    """One process of the shared-store phase: its own engine with background maintenance."""
    from mnemonia.embeddings import default_embedder

    urls = json.loads(args.urls)
    embedder = default_embedder()
    embedder.embed_query("warm up")
    tenants = tenant_names(args.tenants)
    engine = open_engine(args, embedder,
                         engine_config(args.tenants * args.per_tenant, background=True), urls)
    try:
        Path(args.ready).touch()
        while not Path(args.go).exists():
            time.sleep(0.05)
        before = jobs_ran(engine)
        r = run_mix(Ours(engine), tenants, seconds=args.seconds, readers=args.readers,
                    writers=args.writers, tag=args.tag)
        r["jobs_ran"] = since(jobs_ran(engine), before)
        r["missing_acked"] = check_acked(engine, r["acked"])
    finally:
        engine.close()
    r["acked"] = len(r["acked"])
    Path(args.out).write_text(json.dumps(r))


def two_processes(args: argparse.Namespace, urls: dict[str, str]) -> list[dict[str, Any]]:
    procs = []
    per_r, per_w = args.readers // args.processes, args.writers // args.processes
    for p in range(args.processes):
        files = {k: args.workdir / f"p{p}.{k}" for k in ("ready", "out", "log")}
        cmd = [sys.executable, __file__, "--worker", "--mode", "server", "--workdir",
               str(args.workdir), "--urls", json.dumps(urls), "--tenants", str(args.tenants),
               "--per-tenant", str(args.per_tenant), "--seconds", str(args.seconds),
               "--readers", str(per_r), "--writers", str(per_w), "--tag", f"p{p}",
               "--ready", str(files["ready"]), "--go", str(args.workdir / "go"),
               "--out", str(files["out"])]
        procs.append((subprocess.Popen(cmd, stdout=open(files["log"], "w"),  # noqa: SIM115
                                       stderr=subprocess.STDOUT), files))
    while not all(f["ready"].exists() for _, f in procs):
        if any(p.poll() is not None for p, _ in procs):
            raise RuntimeError("a worker died: " + "".join(
                f["log"].read_text()[-1500:] for _, f in procs))
        time.sleep(0.1)
    (args.workdir / "go").touch()
    results = []
    for p, f in procs:
        p.wait()
        if not f["out"].exists():
            raise RuntimeError(f"worker failed: {f['log'].read_text()[-3000:]}")
        results.append(json.loads(f["out"].read_text()))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mode", choices=("embedded", "server"), default="embedded")
    ap.add_argument("--tenants", type=int, default=20)
    ap.add_argument("--per-tenant", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--processes", type=int, default=2, help="server mode: the shared phase")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--urls", "--tag", "--ready", "--go", "--out"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    from mnemonia.embeddings import default_embedder

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop the servers
    args.workdir.mkdir(parents=True, exist_ok=True)
    embedder = default_embedder()
    embedder.embed_query("warm up")
    synth = SyntheticVectors(embedder, Path(__file__).with_name(".cache") / "cores.npy")
    tenants = tenant_names(args.tenants)
    n = args.tenants * args.per_tenant
    servers: list[Any] = []
    urls: dict[str, str] = {}
    results: dict[str, Any] = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
                               "mode": args.mode}
    with contextlib.ExitStack() as stack:
        if args.mode == "server":
            chroma = stack.enter_context(ChromaServer(args.workdir))
            pg = stack.enter_context(PostgresCluster(args.workdir))
            servers += [chroma, pg]
            urls = {"chroma": chroma.url, "sql": pg.new_database("conc")}
        client = open_bare(args, urls)
        engine = open_engine(args, embedder, engine_config(n, background=False), urls)
        fill(engine, client, synth, tenants, args.per_tenant)
        engine.close()
        engine = open_engine(args, embedder, engine_config(n, background=True), urls)
        bare = Bare(client, embedder, tenants)
        ours = Ours(engine)
        phases: list[tuple[str, Side, int, int]] = [
            ("alone", bare, 1, 0), ("alone", ours, 1, 0),
            ("mix", bare, args.readers, args.writers), ("mix", ours, args.readers, args.writers)]
        for label, side, r, w in phases:
            before = jobs_ran(engine)
            got = run_mix(side, tenants, seconds=args.seconds, readers=r, writers=w,
                          tag=f"{label}-{side.name}")
            if side is ours:
                got["jobs_ran"] = since(jobs_ran(engine), before)
                got["missing_acked"] = check_acked(engine, got["acked"])
            got["acked"] = len(got["acked"])
            results[f"{label}_{side.name}"] = got
            show(label, got)
            if side is ours and label == "mix":
                log(f"  acked adds missing: {got['missing_acked']}; jobs run in the window "
                    f"(this engine's scheduler): {got['jobs_ran']}")
        engine.close()
        if args.mode == "server" and args.processes > 1:
            shared = two_processes(args, urls)
            results["processes"] = shared
            for i, r in enumerate(shared):
                show(f"process {i}", r)
                log(f"  acked adds missing: {r['missing_acked']}; jobs run: {r['jobs_ran']}")
            wall = max(r["wall_s"] for r in shared)
            log(f"two processes together: recall {sum(r['recalls'] for r in shared) / wall:.1f}"
                f"/s, add {sum(r['adds'] for r in shared) / wall:.1f}/s, errors "
                f"{sum(r['error_count'] for r in shared)}, foreign hits "
                f"{sum(r['foreign_hits'] for r in shared)}")
        with contextlib.suppress(Exception):
            client.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
