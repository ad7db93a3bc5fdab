"""Speed harness: Mnemonia recall and ingest against a bare Chroma kNN on the same embedder,
measured side by side in the same run and printed as ratios (DESIGN section 8).

Used by ``benchmarks/speed.py`` and ``mnemonia bench``. Not a test: nothing here asserts a time.

Per store size: both stores are filled batch by batch, the same batch going to bare Chroma and
then to Mnemonia (vectors given to both: ``fill/s``); an ingest sample of fresh texts is then
embedded and added on both sides (``ingest/s``, embedding included); both stores are reopened
and queried alternately (``recall``: query embedding + kNN on the bare side, ``recall()`` on
ours). With ``enrich=True`` the corpus is a session log (speakers, places, one-minute turns)
and, after the first recall round, Mnemonia's enrichment sweep gives the memories their
``follows`` / ``same_entity`` / ``related_to`` relations; recall is then measured again (row
``enriched``) against the same bare store.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from speed_corpus import Batch, SyntheticVectors, batches, query_texts, synthetic_texts

__all__ = ["run_speed", "synthetic_texts"]

TENANT = "bench"
FILL_BATCH = 2000


def _pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[idx]


def _reset_peak_rss() -> None:
    with contextlib.suppress(OSError):  # Linux: "5" resets the peak RSS (VmHWM)
        Path("/proc/self/clear_refs").write_text("5")


def _peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _disk_mb(path: Path) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, f)).st_blocks * 512
    return total / 2**20


class RealVectors:
    """Every text embedded by the model (cached per corpus and size)."""

    def __init__(self, embedder: Any, n: int, kind: str, cache_dir: Path | None,
                 console: Console) -> None:
        self.embedder, self.console = embedder, console
        self.cache = cache_dir / f"fill-{kind}-{n}.npy" if cache_dir else None
        self.stored = (np.load(self.cache, mmap_mode="r")
                       if self.cache is not None and self.cache.exists() else None)
        self.parts: list[np.ndarray] = []
        self.t0 = time.perf_counter()

    def __call__(self, batch: Batch) -> np.ndarray:
        if self.stored is not None:
            return np.asarray(self.stored[batch.start:batch.start + len(batch.items)])
        v = np.asarray(self.embedder.embed_documents(batch.texts), dtype=np.float32)
        self.parts.append(v)
        return v

    def finish(self) -> None:
        if self.stored is None and self.cache is not None and self.parts:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            np.save(self.cache, np.concatenate(self.parts))


def _open_bare(path: Path, create: bool) -> tuple[Any, Any]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path),
                                       settings=Settings(anonymized_telemetry=False))
    if create:
        return client, client.get_or_create_collection("bare", embedding_function=None,
                                                       metadata={"hnsw:space": "cosine"})
    return client, client.get_collection("bare", embedding_function=None)


def _fill(n: int, kind: str, col: Any, engine: Any, vectors: Callable[[Batch], np.ndarray],
          console: Console) -> dict[str, float]:
    """Fill both stores with the same batches; time each side's writes (vectors given)."""
    spent = {"bare": 0.0, "ours": 0.0, "vectors": 0.0}
    t_start = time.perf_counter()
    report_every = max(FILL_BATCH, (n // 20) // FILL_BATCH * FILL_BATCH)
    for batch in batches(n, FILL_BATCH, kind=kind):
        t = time.perf_counter()
        vecs = vectors(batch)
        spent["vectors"] += time.perf_counter() - t
        t = time.perf_counter()
        col.add(ids=batch.ids, embeddings=vecs, documents=batch.texts)
        spent["bare"] += time.perf_counter() - t
        t = time.perf_counter()
        engine.add_many([{**it, "embedding": v} for it, v in zip(batch.items, vecs, strict=True)],
                        tenant=TENANT)
        spent["ours"] += time.perf_counter() - t
        done = batch.start + len(batch.items)
        if done % report_every == 0 or done == n:
            wall = time.perf_counter() - t_start
            console.print(f"  [{n:,}] filled {done:,} ({done / spent['bare']:.0f}/s bare, "
                          f"{done / spent['ours']:.0f}/s ours, wall {wall:.0f} s, "
                          f"eta {wall / done * (n - done):.0f} s, rss peak "
                          f"{_peak_rss_mb():.0f} MB)", highlight=False)
    return {"bare_fill_per_s": n / spent["bare"], "ours_fill_per_s": n / spent["ours"],
            "vector_s": spent["vectors"], "fill_wall_s": time.perf_counter() - t_start}


def _ingest_sample(n: int, kind: str, sample: int, embedder: Any, col: Any, engine: Any
                   ) -> dict[str, float]:
    """Fresh texts, embedded as part of the measured work on both sides."""
    items = next(batches(sample, sample, kind=kind, seed=1000 + n, prefix="s")).items
    texts = [it["text"] for it in items]
    t0 = time.perf_counter()
    bvec = embedder.embed_documents(texts)
    col.add(ids=[it["id"] for it in items], embeddings=bvec, documents=texts)
    bare = len(items) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(0, len(items), 250):
        engine.add_many(items[i:i + 250], tenant=TENANT)
    ours = len(items) / (time.perf_counter() - t0)
    return {"bare_ingest_per_s": bare, "ours_ingest_per_s": ours, "ingest_ratio": ours / bare}


def _recall(embedder: Any, col: Any, engine: Any, qtexts: Sequence[str], k: int
            ) -> dict[str, float]:
    """Recall, interleaved so drift and noise hit both sides alike."""
    engine.recall("warm up", tenant=TENANT, k=k, touch=False)
    col.query(query_embeddings=embedder.embed_query("warm up")[None, :], n_results=k)
    bare_t: list[float] = []
    ours_t: list[float] = []
    for i, q in enumerate(qtexts):
        for side in ((0, 1) if i % 2 else (1, 0)):
            t0 = time.perf_counter()
            if side == 0:
                col.query(query_embeddings=embedder.embed_query(q)[None, :], n_results=k)
                bare_t.append(time.perf_counter() - t0)
            else:
                engine.recall(q, tenant=TENANT, k=k)
                ours_t.append(time.perf_counter() - t0)
    row = {"bare_p50_ms": 1000 * statistics.median(bare_t),
           "ours_p50_ms": 1000 * statistics.median(ours_t),
           "bare_p95_ms": 1000 * _pct(bare_t, 95), "ours_p95_ms": 1000 * _pct(ours_t, 95)}
    row["recall_p50_ratio"] = row["ours_p50_ms"] / row["bare_p50_ms"]
    row["recall_p95_ratio"] = row["ours_p95_ms"] / row["bare_p95_ms"]
    return row


def _relations(engine: Any) -> int:
    import sqlalchemy as sa
    from mnemonia.store import sql as S

    with engine.sql.begin() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(S.relations)
                                .where(S.relations.c.tenant == TENANT)).scalar_one())


def _one_size(n: int, *, enrich: bool, vectors_mode: str, queries: int, ingest_sample: int,
              k: int, embedder: Any, console: Console, workdir: Path | None,
              cache_dir: Path | None, synth: SyntheticVectors | None,
              keep: bool) -> list[dict[str, Any]]:
    from mnemonia import MemoryEngine

    kind = "sessions" if enrich else "plain"
    root = Path(tempfile.mkdtemp(prefix=f"mnemonia-speed-{n}-", dir=workdir))
    console.print(f"[{n:,}] {kind} corpus, {vectors_mode} vectors, stores in {root}",
                  highlight=False)
    _reset_peak_rss()
    source: Any = synth if synth is not None else RealVectors(embedder, n, kind, cache_dir,
                                                              console)
    client, col = _open_bare(root / "bare", create=True)
    engine = MemoryEngine.open(root / "mnemonia", embedder=embedder, maintenance="manual")
    base: dict[str, Any] = {"n": n, "vectors": vectors_mode}
    base.update(_fill(n, kind, col, engine, source, console))
    if isinstance(source, RealVectors):
        source.finish()
    base.update(_ingest_sample(n, kind, ingest_sample, embedder, col, engine))

    def reopen() -> tuple[Any, Any, Any]:
        # Right after a bulk load Chroma still answers from its un-compacted log (hundreds of
        # ms at 100k); a serving process sees the settled index.
        engine.close()
        client.close()
        c, cl = _open_bare(root / "bare", create=False)
        return c, cl, MemoryEngine.open(root / "mnemonia", embedder=embedder,
                                        maintenance="manual")

    client, col, engine = reopen()
    qtexts = query_texts(queries)
    rows = [{**base, "corpus": kind, "relations": _relations(engine),
             **_recall(embedder, col, engine, qtexts, k)}]
    if enrich:
        t0 = time.perf_counter()
        rep = engine.enrich(tenant=TENANT)
        spent = time.perf_counter() - t0
        console.print(f"  [{n:,}] enrichment sweep: {rep.enriched:,} of {rep.pending:,} "
                      f"memories, {rep.relations_added:,} relations in {spent:.1f} s",
                      highlight=False)
        client, col, engine = reopen()
        rows.append({**base, "corpus": "enriched", "relations": _relations(engine),
                     "enrich_s": spent, "enriched": rep.enriched,
                     **_recall(embedder, col, engine, qtexts, k)})
    engine.close()
    client.close()
    disk = {"bare_disk_mb": _disk_mb(root / "bare"), "ours_disk_mb": _disk_mb(root / "mnemonia"),
            "peak_rss_mb": _peak_rss_mb()}
    total = n + ingest_sample
    for r in rows:
        r.update(disk, relations_per_memory=r["relations"] / total)
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def run_speed(sizes: Sequence[int], *, queries: int = 200, ingest_sample: int = 1000,
              k: int = 3, console: Console | None = None, workdir: Path | None = None,
              cache_dir: Path | None = None, enrich: bool = False, vectors: bool = False,
              keep: bool = False, backend: str | None = None) -> list[dict[str, Any]]:
    """Measure, for each store size, recall p50/p95 and ingest throughput of Mnemonia and of a
    bare Chroma collection (same embedder, same vectors), and print the ratios.

    ``vectors=True``: the fill vectors are synthetic (core embeddings plus noise, see
    ``speed_corpus``), so no fill text is embedded; queries and the ingest sample still go
    through the model on both sides. ``enrich=True``: session corpus, and a second recall
    round after the enrichment sweep."""
    from mnemonia.embeddings import default_embedder

    console = console or Console()
    embedder = default_embedder() if backend is None else default_embedder(backend)
    embedder.embed_query("warm up")
    synth = None
    if vectors:
        synth = SyntheticVectors(embedder, cache_dir / "cores.npy" if cache_dir else None)
    results: list[dict[str, Any]] = []
    for n in sizes:
        results += _one_size(n, enrich=enrich, vectors_mode="synthetic" if vectors else "model",
                             queries=queries, ingest_sample=ingest_sample, k=k,
                             embedder=embedder, console=console, workdir=workdir,
                             cache_dir=cache_dir, synth=synth, keep=keep)
        print_table(results, console)
    return results


def print_table(results: Sequence[dict[str, Any]], console: Console) -> None:
    table = Table(title="Mnemonia vs bare Chroma kNN (same embedder, same run; bare / ours)")
    for c in ("memories", "corpus", "rel/mem", "fill/s (vectors given)", "ingest/s (embedded)",
              "ratio", "recall p50 ms", "ratio", "p95 ms", "ratio", "disk MB", "peak RSS MB"):
        table.add_column(c, justify="right")
    for r in results:
        table.add_row(
            f"{r['n']:,}", r["corpus"], f"{r['relations_per_memory']:.1f}",
            f"{r['bare_fill_per_s']:.0f} / {r['ours_fill_per_s']:.0f}",
            f"{r['bare_ingest_per_s']:.0f} / {r['ours_ingest_per_s']:.0f}",
            f"{r['ingest_ratio']:.2f}x",
            f"{r['bare_p50_ms']:.1f} / {r['ours_p50_ms']:.1f}", f"{r['recall_p50_ratio']:.2f}x",
            f"{r['bare_p95_ms']:.1f} / {r['ours_p95_ms']:.1f}", f"{r['recall_p95_ratio']:.2f}x",
            f"{r['bare_disk_mb']:.0f} / {r['ours_disk_mb']:.0f}", f"{r['peak_rss_mb']:.0f}")
    console.print(table)
