"""Speed harness: Mnemonia recall and ingest against the bare pair a user would otherwise
write (the bundled MiniLM + a Chroma collection), measured side by side in the same run and
printed as ratios (DESIGN section 8).

Used by ``benchmarks/speed.py`` and ``mnemonia bench``. Not a test: nothing here asserts a time.

Two bare sides run beside the engine, on one Chroma collection holding the same vectors:
``bare`` embeds through ``bare_backend`` (default: sentence-transformers, the pair issue 35
and DESIGN section 8 name), ``same`` through the engine's own embedder (so the ratio against it
is what the pipeline itself costs, whatever the embedder saves).

Per store size: both stores are filled batch by batch, the same batch going to bare Chroma and
then to Mnemonia (vectors given to both: ``fill/s``); an ingest sample of fresh texts is then
embedded and added on every side in turns of 250 (``ingest/s``: batch encode +
``collection.add`` against ``add_many``), then single texts one at a time (``encode([t])`` +
``collection.add`` against ``add``); both stores are reopened and queried, the sides taking
turns query by query (``recall``: query embedding + kNN on a bare side, ``recall()`` on ours).
With ``enrich=True`` the corpus is a session log (speakers, places, one-minute turns) and,
after the first recall round, Mnemonia's enrichment sweep gives the memories their
``follows`` / ``same_entity`` / ``related_to`` relations; recall is then measured again (row
``enriched``) against the same bare store.
"""

from __future__ import annotations

import contextlib
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
from servers import disk_mb
from speed_corpus import Batch, SyntheticVectors, batches, query_texts, synthetic_texts

__all__ = ["BARE_BACKENDS", "recall_again", "run_speed", "synthetic_texts",
           "wait_own_index"]

TENANT = "bench"
FILL_BATCH = 2000
INGEST_CHUNK = 250
SINGLE_ADDS = 100
TURNS = 50
"""Chat turns (add one memory, then recall) timed after the last recall round."""
BARE_BACKENDS = ("sentence-transformers", "onnx", "onnx-int8")
"""The bare side's embedder: sentence-transformers (torch) as a user would call it, or one of
the engine's ONNX backends."""


class BareSide:
    """A bare pair's embedder: ``encode(texts) -> (n, dim) float32`` normalised rows."""

    def __init__(self, name: str, encode: Callable[[list[str]], np.ndarray]) -> None:
        self.name, self.encode = name, encode

    def query(self, text: str) -> np.ndarray:
        return self.encode([text])


def bare_side(backend: str, threads: int = 1) -> BareSide:
    """The bare pair's embedder for ``backend``: sentence-transformers' own ``encode`` (as a
    user of the bundled model would call it) on ``threads`` torch threads, or the engine's
    ONNX embedder."""
    if backend == "sentence-transformers":
        import torch
        from mnemonia.embeddings import SentenceTransformerEmbedder

        torch.set_num_threads(max(1, threads))
        model = SentenceTransformerEmbedder().model

        def encode(texts: list[str]) -> np.ndarray:
            return np.asarray(model.encode(texts, normalize_embeddings=True,
                                           convert_to_numpy=True, show_progress_bar=False),
                              dtype=np.float32)
        return BareSide(backend, encode)
    from mnemonia.embeddings import default_embedder

    emb = default_embedder(backend)
    return BareSide(backend, lambda texts: np.asarray(emb.embed_documents(texts)))


def same_side(embedder: Any) -> BareSide:
    """The bare pair on the engine's own embedder."""
    return BareSide("same", lambda texts: np.asarray(embedder.embed_documents(texts)))


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


def _ingest_sample(n: int, kind: str, sample: int, sides: Sequence[BareSide], col: Any,
                   engine: Any) -> dict[str, float]:
    """Fresh texts, embedded as part of the measured work on every side; the sides take turns
    chunk by chunk (each bare side writes its own ids into the bare collection)."""
    items = next(batches(sample, sample, kind=kind, seed=1000 + n, prefix="s")).items
    spent = [0.0] * (len(sides) + 1)
    for c, i in enumerate(range(0, len(items), INGEST_CHUNK)):
        chunk = items[i:i + INGEST_CHUNK]
        texts = [it["text"] for it in chunk]
        order = list(range(len(sides) + 1))
        for j in order[c % len(order):] + order[:c % len(order)]:
            t0 = time.perf_counter()
            if j == len(sides):
                engine.add_many(chunk, tenant=TENANT)
            else:
                col.add(ids=[f"{sides[j].name}-{it['id']}" for it in chunk],
                        embeddings=sides[j].encode(texts), documents=texts)
            spent[j] += time.perf_counter() - t0
    row = {"ours_ingest_per_s": len(items) / spent[-1]}
    for side, t in zip(sides, spent, strict=False):
        row[f"{side.name}_ingest_per_s"] = len(items) / t
        row[f"{side.name}_ingest_ratio"] = t / spent[-1]
    return row


def _single_adds(n: int, kind: str, count: int, sides: Sequence[BareSide], col: Any,
                 engine: Any) -> dict[str, float]:
    """``add`` of one memory against one bare ``encode([text])`` + ``collection.add``, the
    sides taking turns text by text; p50 of each."""
    return _adds(n, kind, count, sides, col, engine, what="add", seed=2000 + n, prefix="a")


def _turns(n: int, kind: str, count: int, sides: Sequence[BareSide], col: Any, engine: Any,
           qtexts: Sequence[str], k: int) -> dict[str, float]:
    """Chat turns: ``add`` of one memory then ``recall`` (a chatbot stores the user's turn
    and recalls for the reply), against one bare ``encode([text])`` + ``collection.add`` then
    query embedding + ``collection.query``; the sides taking turns; p50 of a whole turn."""
    return _adds(n, kind, count, sides, col, engine, what="turn", seed=3000 + n, prefix="t",
                 then=qtexts, k=k)


def _adds(n: int, kind: str, count: int, sides: Sequence[BareSide], col: Any, engine: Any, *,
          what: str, seed: int, prefix: str, then: Sequence[str] = (), k: int = 10
          ) -> dict[str, float]:
    """One memory added at a time, each followed by a recall of ``then``'s next query if
    given, the sides taking turns; ``{side}_{what}_ms`` (p50) and ratios."""
    items = next(batches(count, count, kind=kind, seed=seed, prefix=prefix)).items
    times: list[list[float]] = [[] for _ in range(len(sides) + 1)]
    for c, it in enumerate(items):
        q = then[c] if then else None
        order = list(range(len(sides) + 1))
        for j in order[c % len(order):] + order[:c % len(order)]:
            t0 = time.perf_counter()
            if j == len(sides):
                engine.add(it["text"], tenant=TENANT,
                           **{key: v for key, v in it.items() if key != "text"})
                if q is not None:
                    engine.recall(q, tenant=TENANT, k=k)
            else:
                col.add(ids=[f"{sides[j].name}-{it['id']}"], embeddings=sides[j].query(it["text"]),
                        documents=[it["text"]])
                if q is not None:
                    col.query(query_embeddings=sides[j].query(q), n_results=k)
            times[j].append(time.perf_counter() - t0)
    row = {f"ours_{what}_ms": 1000 * statistics.median(times[-1])}
    for side, t in zip(sides, times, strict=False):
        row[f"{side.name}_{what}_ms"] = 1000 * statistics.median(t)
        row[f"{side.name}_{what}_ratio"] = row[f"ours_{what}_ms"] / row[f"{side.name}_{what}_ms"]
    return row


def wait_own_index(engine: Any, tenant: str) -> tuple[bool, float]:
    """Wait until the engine's own HNSW index of ``tenant`` is loaded or built: whether it
    answers the tenant's kNN (not for a mirrored tenant, nor in server mode) and the seconds
    waited."""
    t0 = time.perf_counter()
    col = engine.vectors.collection(tenant, model=engine.embedder.name, dimension=0,
                                    create=False)
    own = col is not None and engine.vectors.own_index_ready(col, timeout=None)
    return bool(own), time.perf_counter() - t0


def _recall(sides: Sequence[BareSide], col: Any, engine: Any, qtexts: Sequence[str], k: int
            ) -> dict[str, float]:
    """Recall, the sides taking turns query by query (the first of each turn rotates) so
    drift and noise hit all alike. A tenant past ``exact_search_limit`` is timed once the
    engine's own HNSW index of it is loaded or built (``own_index_s``: the wait, the build
    running on its own thread while Chroma's query answers), as a serving process has it."""
    own, waited = wait_own_index(engine, TENANT)
    engine.recall("warm up", tenant=TENANT, k=k, touch=False)
    for side in sides:
        col.query(query_embeddings=side.query("warm up"), n_results=k)
    times: list[list[float]] = [[] for _ in range(len(sides) + 1)]
    order = list(range(len(sides) + 1))
    for i, q in enumerate(qtexts):
        for j in order[i % len(order):] + order[:i % len(order)]:
            t0 = time.perf_counter()
            if j == len(sides):
                engine.recall(q, tenant=TENANT, k=k)
            else:
                col.query(query_embeddings=sides[j].query(q), n_results=k)
            times[j].append(time.perf_counter() - t0)
    ours = times[-1]
    row = {"k": k, "own_index": own, "own_index_s": waited,
           "ours_p50_ms": 1000 * statistics.median(ours),
           "ours_p95_ms": 1000 * _pct(ours, 95)}
    for side, t in zip(sides, times, strict=False):
        p = side.name
        row[f"{p}_p50_ms"] = 1000 * statistics.median(t)
        row[f"{p}_p95_ms"] = 1000 * _pct(t, 95)
        row[f"{p}_p50_ratio"] = row["ours_p50_ms"] / row[f"{p}_p50_ms"]
        row[f"{p}_p95_ratio"] = row["ours_p95_ms"] / row[f"{p}_p95_ms"]
    return row


def _relations(engine: Any) -> int:
    import sqlalchemy as sa
    from mnemonia.store import sql as S

    with engine.sql.begin() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(S.relations)
                                .where(S.relations.c.tenant == TENANT)).scalar_one())


def _one_size(n: int, *, enrich: bool, vectors_mode: str, queries: int, ingest_sample: int,
              k: int, embedder: Any, sides: Sequence[BareSide], console: Console,
              workdir: Path | None,
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
    base.update(_ingest_sample(n, kind, ingest_sample, sides, col, engine))
    base.update(_single_adds(n, kind, SINGLE_ADDS, sides, col, engine))

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
             **_recall(sides, col, engine, qtexts, k)}]
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
                     **_recall(sides, col, engine, qtexts, k)})
    turn_queries = query_texts(queries + TURNS)[queries:]
    rows[-1].update(_turns(n, kind, TURNS, sides, col, engine, turn_queries, k))
    engine.close()
    client.close()
    disk = {"bare_disk_mb": disk_mb(root / "bare"), "ours_disk_mb": disk_mb(root / "mnemonia"),
            "peak_rss_mb": _peak_rss_mb()}
    total = n + ingest_sample + SINGLE_ADDS + TURNS
    for r in rows:
        r.update(disk, relations_per_memory=r["relations"] / total)
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def _sides(backend: str | None, bare_backend: str, bare_threads: int
           ) -> tuple[Any, list[BareSide]]:
    """The engine's embedder (``backend``, else the default) and the two bare sides (the
    pair on ``bare_backend``, the pair on the engine's embedder), each warmed up."""
    from mnemonia.embeddings import default_embedder

    if bare_backend not in BARE_BACKENDS:
        raise ValueError(f"bare_backend={bare_backend!r}: one of {BARE_BACKENDS}")
    embedder = default_embedder() if backend is None else default_embedder(backend)
    embedder.embed_query("warm up")
    bare = bare_side(bare_backend, bare_threads)
    bare.query("warm up")
    return embedder, [BareSide("bare", bare.encode), same_side(embedder)]


def run_speed(sizes: Sequence[int], *, queries: int = 200, ingest_sample: int = 1000,
              k: int = 10, console: Console | None = None, workdir: Path | None = None,
              cache_dir: Path | None = None, enrich: bool = False, vectors: bool = False,
              keep: bool = False, backend: str | None = None,
              bare_backend: str = "sentence-transformers", bare_threads: int = 1
              ) -> list[dict[str, Any]]:
    """Measure, for each store size, recall p50/p95 and ingest throughput of Mnemonia and of
    the bare pair (``bare_backend``'s embedder + a Chroma collection, same vectors) and the
    bare pair on the engine's embedder, and print the ratios against each.
    ``bare_threads``: torch threads of a sentence-transformers bare side (default 1, as
    ``embedder.py`` and ``locomo.py``: on the shared 2-core machine two threads made the bare
    side slower and erratic whenever anything else ran).

    ``vectors=True``: the fill vectors are synthetic (core embeddings plus noise, see
    ``speed_corpus``), so no fill text is embedded; queries and the ingest sample still go
    through the model on both sides. ``enrich=True``: session corpus, and a second recall
    round after the enrichment sweep."""
    console = console or Console()
    embedder, sides = _sides(backend, bare_backend, bare_threads)
    synth = None
    if vectors:
        synth = SyntheticVectors(embedder, cache_dir / "cores.npy" if cache_dir else None)
    results: list[dict[str, Any]] = []
    for n in sizes:
        results += _one_size(n, enrich=enrich, vectors_mode="synthetic" if vectors else "model",
                             queries=queries, ingest_sample=ingest_sample, k=k,
                             embedder=embedder, sides=sides, console=console,
                             workdir=workdir,
                             cache_dir=cache_dir, synth=synth, keep=keep)
        print_table(results, console, bare_backend, getattr(embedder, "name", "?"))
    return results


def recall_again(root: Path, *, queries: int = 200, k: int = 10, backend: str | None = None,
                 bare_backend: str = "sentence-transformers", bare_threads: int = 1,
                 adjust: Callable[[Any], None] | None = None, **config: Any
                 ) -> dict[str, Any]:
    """Recall measured again as :func:`run_speed` measures it (the three sides in turns, the
    same query texts), on a store ``--keep`` kept: ``root`` holds its ``bare`` and
    ``mnemonia`` folders: ~16 s at 100k, where a new fill takes ~10 minutes. The engine
    touches as it recalls, so each run changes the store a little (access counts), as a
    serving process would.
    ``adjust(engine)``, when given, runs once the engine is open (an experiment's change);
    ``config``: keys the engine opens with (``own_index_limit=0``, say)."""
    from mnemonia import MemoryEngine, MnemoniaConfig

    for part in ("bare", "mnemonia"):
        if not (root / part).is_dir():
            raise SystemExit(f"{root}: no {part}/ folder (a store kept by speed.py --keep)")
    embedder, sides = _sides(backend, bare_backend, bare_threads)
    client, col = _open_bare(root / "bare", create=False)
    engine = MemoryEngine.open(root / "mnemonia", embedder=embedder, config=MnemoniaConfig.load(
        maintenance="manual", **config))
    try:
        if adjust is not None:
            adjust(engine)
        memories = engine.stats(tenant=TENANT)["active"]
        return {"root": str(root), "memories": memories,
                **_recall(sides, col, engine, query_texts(queries), k)}
    finally:
        engine.close()
        client.close()


def print_table(results: Sequence[dict[str, Any]], console: Console,
                bare_backend: str = "sentence-transformers", ours: str = "") -> None:
    """Two tables: each figure as bare / ours with the ratio, ``bare`` the pair on
    ``bare_backend``, ``same`` the pair on the engine's own embedder."""
    for side, what in (("bare", f"bare pair on {bare_backend}"),
                       ("same", "bare pair on the engine's embedder")):
        table = Table(title=f"Mnemonia vs the {what} (same run; bare / ours; "
                            f"k={results[0].get('k', '?') if results else '?'})")
        for c in ("memories", "corpus", "rel/mem", "fill/s (vectors given)",
                  "add_many/s (embedded)", "ratio", "add ms", "ratio", "recall p50 ms", "ratio",
                  "p95 ms", "ratio", "turn ms (add + recall)", "ratio", "disk MB",
                  "peak RSS MB"):
            table.add_column(c, justify="right")
        for r in results:
            table.add_row(
                f"{r['n']:,}", r["corpus"], f"{r['relations_per_memory']:.1f}",
                f"{r['bare_fill_per_s']:.0f} / {r['ours_fill_per_s']:.0f}",
                f"{r[side + '_ingest_per_s']:.0f} / {r['ours_ingest_per_s']:.0f}",
                f"{r[side + '_ingest_ratio']:.2f}x",
                f"{r[side + '_add_ms']:.1f} / {r['ours_add_ms']:.1f}",
                f"{r[side + '_add_ratio']:.2f}x",
                f"{r[side + '_p50_ms']:.1f} / {r['ours_p50_ms']:.1f}",
                f"{r[side + '_p50_ratio']:.2f}x",
                f"{r[side + '_p95_ms']:.1f} / {r['ours_p95_ms']:.1f}",
                f"{r[side + '_p95_ratio']:.2f}x",
                f"{r[side + '_turn_ms']:.1f} / {r['ours_turn_ms']:.1f}"
                if "ours_turn_ms" in r else "-",
                f"{r[side + '_turn_ratio']:.2f}x" if "ours_turn_ms" in r else "-",
                f"{r['bare_disk_mb']:.0f} / {r['ours_disk_mb']:.0f}", f"{r['peak_rss_mb']:.0f}")
        console.print(table)
