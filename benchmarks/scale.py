"""Mnemonia at scale (up to 1M memories), embedded or server mode, one big tenant or many;
each figure beside the bare pair (the same vectors in a bare Chroma collection, queried by
``embed_query`` + ``collection.query``), measured in the same run.

    .venv/bin/python benchmarks/scale.py --mode embedded --tenants 1 \\
        --checkpoints 7000 9000 100000 1000000 --workdir /tmp/scale-e1
    .venv/bin/python benchmarks/scale.py --mode embedded --tenants 1000 --per-tenant 1000 \\
        --checkpoints 10000 100000 1000000 --workdir /tmp/scale-e1000
    .venv/bin/python benchmarks/scale.py --mode server --tenants 1 ...   (Chroma server +
        PostgreSQL started here on 127.0.0.1, one more Chroma server for the bare side)

The store grows batch by batch; at each checkpoint (a store size) both sides are closed and
reopened (``open``: the engine's open, counts verified; ``first``: its first recall), then
recall is measured at k=10, the two sides taking turns query by query, every query new
(embedded on both sides): once with the default config (``with relations``: context window
and spreading along the relations), once reopened with ``spread_depth=0, context_window=0``
(``without relations``: the same store, recall follows no relation). The fill rate is the
one since the previous checkpoint, vectors given to both sides (the model's time is not in
it). With ``--no-immediate --sweep`` the fill keeps the default thresholds (most memories
``batched``) and each checkpoint first runs the enrichment sweep the background maintenance
would (``engine.enrich``), timed apart: the default config's way to an enriched store. A
tenant of at most ``exact_search_limit`` memories (default 16,000) is searched exactly
from memory in embedded mode, a bigger one (up to ``own_index_limit``) by the HNSW index the
engine keeps itself: checkpoints either side of 16,000 show the switch. That index is loaded
(or built, on a thread of its own, while Chroma's query answers) at a tenant's first recall;
recall is timed once it is ready, as a serving process has it (``own_index_s``: the wait after
the first recall, the build or load; ``own_index_mb``: its saved files, written on close).

Vectors are precomputed (``speed_corpus.SyntheticVectors``: the real model's vectors of the
2,197 "subject verb object" cores plus seeded noise), so a million memories cost no model time;
queries go through the model on both sides. The corpus is ``sessions`` (speakers and places
as entities, one-minute turns) and, with ``--immediate`` (the default), the fill uses
``immediate_threshold=0.5`` so every memory is enriched as it is added (``follows``,
``same_entity``, ``related_to`` relations, as a LoCoMo store has them).

With many tenants, each query goes to a random tenant among those with a bare twin
(``--bare-tenants``: the first ones filled get one); the bare collections of the other
tenants are not built (a bare query reads only its own collection).

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from servers import ChromaServer, PostgresCluster, disk_mb, loadavg, process_rss_mb
from speed_corpus import Batch, SyntheticVectors, batches, query_texts
from speed_harness import wait_own_index

K = 10
FILL_BATCH = 1000
"""Memories per add_many (and per bare add): checkpoints are multiples of it."""
NAMESPACE = "scale"


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def rss_mb() -> tuple[float, float]:
    """(current VmRSS, peak VmHWM) of this process, MB."""
    now = peak = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            now = int(line.split()[1]) / 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return now, peak


def git_revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        return "?"


# -- the two sides ------------------------------------------------------------------------------


class Stores:
    """The engine and the bare Chroma client, opened and reopened the same way per mode."""

    def __init__(self, mode: str, root: Path, embedder: Any, immediate: bool,
                 existing: bool = False) -> None:
        self.mode, self.root, self.embedder = mode, root, embedder
        self.immediate = immediate
        self.servers: dict[str, Any] = {}
        self.sql_url: str | None = None
        if mode == "server":
            self.servers["chroma"] = ChromaServer(root / "ours").start()
            self.servers["bare"] = ChromaServer(root / "bare").start()
            self.servers["pg"] = PostgresCluster(root / "ours").start()
            self.sql_url = (f"{self.servers['pg'].url}/scale" if existing
                            else self.servers["pg"].new_database("scale"))
        self.engine: Any = None
        self.client: Any = None
        self._cols: dict[str, Any] = {}

    def config(self, *, fill: bool, relations: bool = True) -> Any:
        from mnemonia import MnemoniaConfig

        values: dict[str, Any] = {"maintenance": "manual"}
        if fill and self.immediate:
            values["immediate_threshold"] = 0.5
        if not relations:
            values.update(spread_depth=0, context_window=0)
        return MnemoniaConfig.load(env={}, **values)

    def open_engine(self, cfg: Any) -> float:
        from mnemonia import MemoryEngine

        t0 = time.perf_counter()
        if self.mode == "embedded":
            self.engine = MemoryEngine.open(self.root / "ours", embedder=self.embedder,
                                            config=cfg)
        else:
            self.engine = MemoryEngine.open(chroma_url=self.servers["chroma"].url,
                                            sql_url=self.sql_url, embedder=self.embedder,
                                            config=cfg, namespace=NAMESPACE)
        return time.perf_counter() - t0

    def open_bare(self) -> float:
        import chromadb
        from chromadb.config import Settings

        t0 = time.perf_counter()
        settings = Settings(anonymized_telemetry=False)
        if self.mode == "embedded":
            self.client = chromadb.PersistentClient(path=str(self.root / "bare"),
                                                    settings=settings)
        else:
            self.client = chromadb.HttpClient(host="127.0.0.1",
                                              port=self.servers["bare"].port, settings=settings)
        self._cols = {}
        return time.perf_counter() - t0

    def bare(self, tenant: str) -> Any:
        col = self._cols.get(tenant)
        if col is None:
            col = self.client.get_or_create_collection(
                f"bare-{tenant}", embedding_function=None, metadata={"hnsw:space": "cosine"})
            self._cols[tenant] = col
        return col

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None
        self._cols = {}

    def shutdown(self) -> None:
        self.close()
        for s in self.servers.values():
            s.stop()

    def sizes(self) -> dict[str, float]:
        """Disk (MB) and resident memory (MB) of each side and of the servers."""
        now, peak = rss_mb()
        out = {"rss_mb": now, "peak_rss_mb": peak}
        if self.mode == "embedded":
            out.update(ours_disk_mb=disk_mb(self.root / "ours"),
                       bare_disk_mb=disk_mb(self.root / "bare"))
        else:
            pg = self.servers["pg"]
            out.update(
                ours_disk_mb=disk_mb(self.servers["chroma"].data) + disk_mb(pg.data),
                ours_chroma_disk_mb=disk_mb(self.servers["chroma"].data),
                pg_disk_mb=disk_mb(pg.data), bare_disk_mb=disk_mb(self.servers["bare"].data),
                chroma_rss_mb=process_rss_mb(self.servers["chroma"].pids),
                pg_rss_mb=process_rss_mb(pg.pids),
                bare_chroma_rss_mb=process_rss_mb(self.servers["bare"].pids))
        return out


# -- fill -----------------------------------------------------------------------------------------


@dataclasses.dataclass
class Piece:
    tenant: str
    batch: Batch
    offset: int
    """Position of the batch in the whole fill (seeds its vectors' noise)."""
    bare: bool


def pieces(n: int, tenants: int, per_tenant: int, bare_tenants: int) -> Iterator[Piece]:
    if tenants == 1:
        for b in batches(n, FILL_BATCH, kind="sessions"):
            yield Piece("t0000", b, b.start, True)
        return
    for t in range(tenants):
        if t * per_tenant >= n:
            return
        for b in batches(per_tenant, min(FILL_BATCH, per_tenant), kind="sessions", seed=t,
                         prefix=f"t{t}-"):
            yield Piece(f"t{t:04d}", b, t * per_tenant + b.start, t < bare_tenants)


@dataclasses.dataclass
class Found:
    """What a kept store holds (``--measure``): its size, tenants and bare twins."""

    done: int
    filled_tenants: list[str]
    twinned: list[str]

    @classmethod
    def read(cls, stores: Stores) -> Found:
        import sqlalchemy as sa
        from mnemonia.store import sql as S

        with stores.engine._rt.sql.begin() as conn:
            done = int(conn.execute(sa.select(sa.func.count()).select_from(S.memories)
                                    ).scalar_one())
        bare = sorted(c.name[len("bare-"):] for c in stores.client.list_collections())
        return cls(done, sorted(stores.engine.tenants()), bare)


class Filler:
    def __init__(self, stores: Stores, synth: SyntheticVectors, n: int, tenants: int,
                 per_tenant: int, bare_tenants: int) -> None:
        self.stores, self.synth = stores, synth
        self.source = pieces(n, tenants, per_tenant, bare_tenants)
        self.done = 0
        self.filled_tenants: list[str] = []
        self.twinned: list[str] = []

    def fill_to(self, target: int) -> dict[str, float]:
        """Fill both sides up to ``target`` memories; the rates of this stretch."""
        spent = {"bare": 0.0, "ours": 0.0}
        n_bare = n_ours = 0
        t_start = time.perf_counter()
        last_log = t_start
        while self.done < target:
            piece = next(self.source)
            b = piece.batch
            vecs = self.synth(Batch(piece.offset, b.items, b.cores))
            if piece.bare:
                t = time.perf_counter()
                self.stores.bare(piece.tenant).add(ids=b.ids, embeddings=vecs,
                                                   documents=b.texts)
                spent["bare"] += time.perf_counter() - t
                n_bare += len(b.items)
            t = time.perf_counter()
            self.stores.engine.add_many(
                [{**it, "importance": 0.9, "embedding": v}
                 for it, v in zip(b.items, vecs, strict=True)], tenant=piece.tenant)
            spent["ours"] += time.perf_counter() - t
            n_ours += len(b.items)
            if not self.filled_tenants or self.filled_tenants[-1] != piece.tenant:
                self.filled_tenants.append(piece.tenant)
                if piece.bare:
                    self.twinned.append(piece.tenant)
            self.done += len(b.items)
            if time.perf_counter() - last_log > 60:
                last_log = time.perf_counter()
                wall = last_log - t_start
                log(f"  filled {self.done:,} ({n_ours / spent['ours']:.0f}/s ours, "
                    f"{n_bare / spent['bare'] if spent['bare'] else 0:.0f}/s bare, stretch "
                    f"wall {wall:.0f} s, rss {rss_mb()[0]:.0f} MB, load {loadavg()})")
        return {"ours_fill_per_s": n_ours / spent["ours"] if spent["ours"] else 0.0,
                "bare_fill_per_s": n_bare / spent["bare"] if spent["bare"] else 0.0,
                "stretch_wall_s": time.perf_counter() - t_start}


# -- recall ---------------------------------------------------------------------------------------


def measure_recall(stores: Stores, qtexts: Sequence[str], tenants: Sequence[str]
                   ) -> dict[str, float]:
    """Interleaved recall at k=10: ``engine.recall`` against ``embed_query`` +
    ``collection.query`` of the same tenant's bare twin."""
    emb, eng = stores.embedder, stores.engine
    rng = random.Random(len(qtexts))
    bare_t: list[float] = []
    ours_t: list[float] = []
    hits = 0
    for i, q in enumerate(qtexts):
        tenant = rng.choice(tenants)
        col = stores.bare(tenant)
        for side in ((0, 1) if i % 2 else (1, 0)):
            t0 = time.perf_counter()
            if side == 0:
                col.query(query_embeddings=emb.embed_query(q)[None, :], n_results=K)
                bare_t.append(time.perf_counter() - t0)
            else:
                got = eng.recall(q, tenant=tenant, k=K)
                ours_t.append(time.perf_counter() - t0)
                hits += len(got.memories)
    return {"bare_p50_ms": 1000 * statistics.median(bare_t),
            "ours_p50_ms": 1000 * statistics.median(ours_t),
            "bare_p95_ms": 1000 * pct(bare_t, 95), "ours_p95_ms": 1000 * pct(ours_t, 95),
            "p50_ratio": statistics.median(ours_t) / statistics.median(bare_t),
            "p95_ratio": pct(ours_t, 95) / pct(bare_t, 95),
            "hits_per_query": hits / len(qtexts)}


def relation_count(stores: Stores) -> int:
    import sqlalchemy as sa
    from mnemonia.store import sql as S

    with stores.engine._rt.sql.begin() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(S.relations)
                                ).scalar_one())


def sweep(stores: Stores, tenants: Sequence[str]) -> dict[str, float]:
    """The enrichment sweep of each tenant's batched memories (``--sweep``): its time, the
    memories it enriched and the relations it added."""
    t0 = time.perf_counter()
    enriched = added = 0
    for tenant in tenants:
        rep = stores.engine.enrich(tenant=tenant)
        enriched += rep.enriched
        added += rep.relations_added
    spent = time.perf_counter() - t0
    log(f"  enrichment sweep: {enriched:,} memories, {added:,} relations in {spent:.1f} s "
        f"({enriched / spent if spent else 0:.0f}/s), rss {rss_mb()[0]:.0f} MB")
    return {"sweep_s": spent, "swept": enriched, "sweep_relations": added}


def checkpoint(stores: Stores, filler: Filler | Found, queries: int,
               qsource: Callable[[int], list[str]]) -> dict[str, Any]:
    """Reopen both sides and measure recall with and without relations."""
    row: dict[str, Any] = {"n": filler.done, "tenants": len(filler.filled_tenants)}
    row["relations"] = relation_count(stores)
    stores.close()
    row["bare_open_s"] = stores.open_bare()
    row["open_s"] = stores.open_engine(stores.config(fill=False))
    tenants = filler.twinned
    t0 = time.perf_counter()
    stores.engine.recall(qsource(1)[0], tenant=tenants[0], k=K)
    row["first_recall_ms"] = 1000 * (time.perf_counter() - t0)
    row["own_index"], row["own_index_s"] = wait_own_index(stores.engine, tenants[0])
    stores.bare(tenants[0]).query(
        query_embeddings=stores.embedder.embed_query("warm up")[None, :], n_results=K)
    row["with"] = measure_recall(stores, qsource(queries), tenants)
    stores.close()
    stores.open_bare()
    row["open_norel_s"] = stores.open_engine(stores.config(fill=False, relations=False))
    stores.engine.recall(qsource(1)[0], tenant=tenants[0], k=K)
    row["own_index_norel_s"] = wait_own_index(stores.engine, tenants[0])[1]
    row["without"] = measure_recall(stores, qsource(queries), tenants)
    row.update(stores.sizes())
    row["load"] = loadavg()
    stores.close()
    if stores.mode == "embedded":  # the own index's files are written on close
        row["own_index_mb"] = disk_mb(stores.root / "ours" / "indexes")
        row["ours_disk_mb"] = disk_mb(stores.root / "ours")
    stores.open_bare()
    stores.open_engine(stores.config(fill=True))
    return row


def show(row: dict[str, Any]) -> None:
    w, wo = row["with"], row["without"]
    log(f"== {row['n']:,} memories in {row['tenants']:,} tenants, {row['relations']:,} "
        f"relations: fill {row.get('ours_fill_per_s', 0):.0f}/s ours vs "
        f"{row.get('bare_fill_per_s', 0):.0f}/s bare; open {row['open_s']:.2f} s, first recall "
        f"{row['first_recall_ms']:.0f} ms; own index {row['own_index']} (waited "
        f"{row['own_index_s']:.2f} s, then {row['own_index_norel_s']:.2f} s)")
    log(f"   with relations p50 {w['bare_p50_ms']:.1f} / {w['ours_p50_ms']:.1f} ms "
        f"({w['p50_ratio']:.2f}x), p95 {w['bare_p95_ms']:.1f} / {w['ours_p95_ms']:.1f} ms "
        f"({w['p95_ratio']:.2f}x); without p50 {wo['bare_p50_ms']:.1f} / "
        f"{wo['ours_p50_ms']:.1f} ms ({wo['p50_ratio']:.2f}x), p95 {wo['bare_p95_ms']:.1f} / "
        f"{wo['ours_p95_ms']:.1f} ms ({wo['p95_ratio']:.2f}x)")
    extra = "".join(f", {k} {v:.0f}" for k, v in row.items()
                    if k.endswith("_mb") and isinstance(v, float))
    log(f"   load {row['load']}{extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mode", choices=("embedded", "server"), default="embedded")
    ap.add_argument("--tenants", type=int, default=1)
    ap.add_argument("--per-tenant", type=int, default=1000)
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--bare-tenants", type=int, default=200,
                    help="many tenants: how many of the first ones get a bare twin")
    ap.add_argument("--no-immediate", dest="immediate", action="store_false",
                    help="default thresholds at fill (fewer memories enriched at ingest)")
    ap.add_argument("--sweep", action="store_true",
                    help="at each checkpoint, before measuring, enrich the memories the fill "
                         "left batched (engine.enrich per tenant, as the background "
                         "maintenance does); with --no-immediate: the default config's store")
    ap.add_argument("--workdir", type=Path, required=True, help="the stores go here (new)")
    ap.add_argument("--resume", action="store_true",
                    help="go on filling the stores an earlier run kept in --workdir (the same "
                         "corpus, from the memories the engine holds) up to --checkpoints")
    ap.add_argument("--measure", action="store_true",
                    help="no fill: measure the stores an earlier run kept in --workdir "
                         "(one stopped before its last checkpoint)")
    ap.add_argument("--keep", action="store_true", help="keep the stores")
    ap.add_argument("--json", type=Path, help="write the figures here (after each checkpoint)")
    args = ap.parse_args()
    from mnemonia.embeddings import default_embedder

    kept = args.measure or args.resume
    if args.workdir.exists() and any(args.workdir.iterdir()) and not kept:
        sys.exit(f"{args.workdir} is not empty")
    args.workdir.mkdir(parents=True, exist_ok=True)
    cache = Path(__file__).with_name(".cache")
    embedder = default_embedder()
    embedder.embed_query("warm up")
    synth = SyntheticVectors(embedder, cache / "cores.npy")
    head = {"mode": args.mode, "tenants_asked": args.tenants, "per_tenant": args.per_tenant,
            "revision": git_revision(), "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(sys.argv), "cores": os.cpu_count()}
    log(f"scale: {head}")
    # a kill (SIGTERM) unwinds like an error: the servers started here are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stores = Stores(args.mode, args.workdir, embedder, args.immediate, existing=kept)
    rows: list[dict[str, Any]] = []
    used = [0]

    def qsource(count: int) -> list[str]:
        got = query_texts(used[0] + count)[used[0]:]
        used[0] += count
        return got

    try:
        stores.open_bare()
        stores.open_engine(stores.config(fill=True))
        if args.measure:
            row = {**head, **checkpoint(stores, Found.read(stores), args.queries, qsource)}
            rows.append(row)
            show(row)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2))
            args.checkpoints = []
        filler = Filler(stores, synth, max(args.checkpoints, default=0), args.tenants,
                        args.per_tenant, args.bare_tenants)
        if args.resume:
            found = Found.read(stores)
            filler.done = found.done
            filler.filled_tenants, filler.twinned = found.filled_tenants, found.twinned
            filler.source = (p for p in filler.source if p.offset >= found.done)
            log(f"resuming at {found.done:,} memories in {len(found.filled_tenants):,} tenants")
        for target in sorted(args.checkpoints):  # (none with --measure)
            rates = filler.fill_to(target)
            if args.sweep:
                rates.update(sweep(stores, filler.filled_tenants))
            row = {**head, **rates, **checkpoint(stores, filler, args.queries, qsource)}
            rows.append(row)
            show(row)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2))
    finally:
        stores.shutdown()
        if not args.keep and not kept:
            shutil.rmtree(args.workdir, ignore_errors=True)
    log("done")


if __name__ == "__main__":
    main()
