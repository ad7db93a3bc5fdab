"""The own HNSW index of a big collection (mnemonia.store.approximate): it answers like a
brute-force cosine over what Chroma holds through adds, replaces and deletes, misses no write
made while it is built, is saved on close and loaded on the next open, and a saved index that
a later write (or a crash after one) made stale is never loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.store import approximate
from mnemonia.store.approximate import Approximate
from mnemonia.store.chroma import ChromaIndex

from tests.integration.test_exact_search import FACTS

DIM = 16


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_normal((n, DIM)).astype(np.float32)


def _brute(held: dict[str, np.ndarray], q: np.ndarray, n: int) -> list[str]:
    qn = q / np.linalg.norm(q)
    sims = {i: float(v @ qn / np.linalg.norm(v)) for i, v in held.items()}
    return sorted(sims, key=lambda i: -sims[i])[:n]


def test_an_own_index_answers_like_a_brute_force_cosine_through_writes() -> None:
    rng = np.random.default_rng(5)
    held = {f"m{i}": v for i, v in enumerate(_vectors(rng, 400))}
    index = Approximate()
    index.put(list(held), np.stack(list(held.values())))
    for i in range(40):  # replaced
        held[f"m{i}"] = _vectors(rng, 1)[0]
    index.put([f"m{i}" for i in range(40)], np.stack([held[f"m{i}"] for i in range(40)]))
    gone = [f"m{i}" for i in range(100, 250)]
    index.drop([*gone, "never-held"])
    for i in gone:
        del held[i]
    assert index.size == len(held) == 250
    queries = _vectors(rng, 20)
    found, sims = index.nearest(queries, 10)
    hit = 0
    for q, ids, got in zip(queries, found, sims, strict=True):
        # HNSW is approximate (its build runs on threads): nearly every true neighbour is
        # found (measured 0.998-1.0 here), best first, each cosine exact, no deleted one
        hit += len(set(ids) & set(_brute(held, q, 10)))
        qn = q / np.linalg.norm(q)
        want = [float(held[i] @ qn / np.linalg.norm(held[i])) for i in ids]
        np.testing.assert_allclose(got, want, atol=1e-5)
        assert got == sorted(got, reverse=True) and set(ids) <= set(held)
    assert hit >= 0.95 * 10 * len(queries)
    # asking for more than it holds gives what it holds
    assert sorted(index.nearest(queries[:1], 10_000)[0][0]) == sorted(held)


def test_a_saved_index_loads_only_while_it_holds_what_chroma_holds(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    index = Approximate()
    ids = [f"m{i}" for i in range(50)]
    index.put(ids, _vectors(rng, 50))
    index.drop(["m3"])
    index.save(tmp_path, "c")
    loaded = Approximate.load(tmp_path, "c", 49)
    assert loaded is not None and loaded.size == 49 and "m3" not in loaded.holds(ids)
    q = _vectors(rng, 3)
    assert loaded.nearest(q, 5) == index.nearest(q, 5)
    assert Approximate.load(tmp_path, "c", 50) is None  # Chroma holds another count
    manifest = json.loads((tmp_path / "c.json").read_text())
    (tmp_path / "c.usearch").write_bytes(b"x" * manifest["index_bytes"])
    assert Approximate.load(tmp_path, "c", 49) is None  # damaged
    approximate.unlink(tmp_path, "c")
    assert not list(tmp_path.iterdir())
    assert Approximate.load(tmp_path, "c", 49) is None


def _open(path: Path, clock: ManualClock, **kw: object) -> MemoryEngine:
    cfg = MnemoniaConfig.load(env={}, maintenance="manual", **{"exact_search_limit": 0, **kw})
    return MemoryEngine.open(path, config=cfg, clock=clock, embedder=HashingEmbedder())




def _texts(engine: MemoryEngine, query: str) -> list[str]:
    res = engine.recall(query, tenant="t", k=10, min_activation=0, touch=False)
    return [h.memory.text for h in res.memories]


def test_recall_through_the_own_index_sees_every_write_and_survives_a_reopen(
        tmp_path: Path, clock: ManualClock) -> None:
    own = _open(tmp_path / "own", clock)
    chroma = _open(tmp_path / "chroma", clock, own_index_limit=0)
    try:
        for eng in (own, chroma):
            eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS)], tenant="t")
        col = own.vectors.collection("t", model=own.embedder.name, dimension=0, create=False)
        assert own.vectors.own_index_ready(col, timeout=0)
        other = chroma.vectors.collection("t", model=chroma.embedder.name, dimension=0,
                                          create=False)
        assert not chroma.vectors.own_index_ready(other, timeout=0)
        for eng in (own, chroma):
            eng.add("Backups of the mail server run weekly on Sundays", tenant="t")
            eng.add_many([{"id": "f2", "text": "The office dog is called Pepper"}],
                         tenant="t", replace=True)
            eng.forget("f7", tenant="t", hard=True)
        for q in ("when are backups?", "what is the dog called?", "who reviews the budget?"):
            assert _texts(own, q) == _texts(chroma, q)
        got = _texts(own, "when are backups?")
        assert "Backups of the mail server run weekly on Sundays" in got
        assert FACTS[7] not in got and FACTS[2] not in _texts(own, "what is the cat called?")
    finally:
        own.close()
        chroma.close()
    saved = tmp_path / "own" / "indexes"
    assert sorted(p.name for p in saved.iterdir()) == [
        "mnemonia-t.ids.json", "mnemonia-t.json", "mnemonia-t.usearch"]
    assert json.loads((saved / "mnemonia-t.json").read_text())["count"] == 8
    again = _open(tmp_path / "own", clock)
    try:
        col = again.vectors.collection("t", model=again.embedder.name, dimension=0,
                                       create=False)
        assert again.vectors.own_index_ready(col, timeout=0)
        assert "The office dog is called Pepper" in _texts(again, "what is the dog called?")
        assert (saved / "mnemonia-t.json").exists()  # loaded, not written: still true
        again.add("The printer on floor two is broken", tenant="t")
        assert not (saved / "mnemonia-t.json").exists()  # written: what was saved is stale
        assert _texts(again, "which printer is broken?")[0] == \
            "The printer on floor two is broken"
    finally:
        again.close()
    assert json.loads((saved / "mnemonia-t.json").read_text())["count"] == 9


_CRASH = """
import os, sys
from datetime import datetime, timezone
from pathlib import Path
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
cfg = MnemoniaConfig.load(env={}, maintenance="manual", exact_search_limit=0)
eng = MemoryEngine.open(Path(sys.argv[1]), config=cfg, embedder=HashingEmbedder(),
                        clock=ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc)))
eng.add_many([{"id": "f0", "text": "The office dog is called Pepper"}], tenant="t",
             replace=True)
os._exit(0)  # no close: the process dies
"""


def test_a_process_that_dies_after_a_write_leaves_no_stale_index(
        tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock)
    try:
        eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS)], tenant="t")
        assert FACTS[2] in _texts(eng, "what is the cat called?")
    finally:
        eng.close()
    manifest = tmp_path / "s" / "indexes" / "mnemonia-t.json"
    assert manifest.exists()
    # f0 replaced (same count: only the write's deleting the manifest tells it is stale)
    subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path / "s")], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert not manifest.exists()
    eng = _open(tmp_path / "s", clock)
    try:
        assert _texts(eng, "what is the dog called?")[0] == "The office dog is called Pepper"
        assert FACTS[0] not in _texts(eng, "where does the staging cluster run?")
    finally:
        eng.close()


class _Paused(ChromaIndex):
    """A real embedded Chroma whose reading of every vector for a build waits for ``go``."""

    go = threading.Event()

    def all_vectors(self, col: object) -> tuple[list[str], np.ndarray]:
        self.go.wait(60)
        return super().all_vectors(col)


def test_writes_made_while_an_index_is_built_are_in_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approximate, "SYNC_BUILD", 0)  # every build on its thread
    rng = np.random.default_rng(7)
    idx = _Paused(path=str(tmp_path / "chroma"), own_index_limit=10_000,
                  own_index_folder=tmp_path / "indexes")
    try:
        col = idx.collection("t", model="m", dimension=DIM)
        held = {f"m{i}": v for i, v in enumerate(_vectors(rng, 300))}

        def upsert(ids: list[str]) -> None:
            idx.upsert(col, ids, np.stack([held[i] for i in ids]), ids, [{"k": 1}] * len(ids))

        upsert(list(held))
        q = _vectors(rng, 1)
        # not built yet: Chroma's query answers meanwhile
        ids, _ = idx.query(col, q, 5)
        assert len(ids[0]) == 5 and not idx.own_index_ready(col, timeout=0)
        for i in range(300, 340):  # added while the build reads
            held[f"m{i}"] = _vectors(rng, 1)[0]
        upsert([f"m{i}" for i in range(300, 340)])
        for i in range(10):  # replaced
            held[f"m{i}"] = _vectors(rng, 1)[0]
        upsert([f"m{i}" for i in range(10)])
        gone = [f"m{i}" for i in range(50, 90)]
        idx.delete(col, gone)
        for i in gone:
            del held[i]
        _Paused.go.set()
        assert idx.own_index_ready(col, timeout=60)
        everything = idx.query(col, q, 10_000)[0][0]
        assert sorted(everything) == sorted(held) == sorted(idx.all_ids(col))
        hit = sum(len(set(idx.query(col, qv[None, :], 10)[0][0]) & set(_brute(held, qv, 10)))
                  for qv in _vectors(rng, 10))
        assert hit >= 95
    finally:
        _Paused.go.set()
        idx.close()


def test_a_tenant_past_the_budget_is_searched_by_chroma(
        tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock, own_index_limit=3)
    try:
        eng.add_many([{"text": t} for t in FACTS], tenant="t")
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        assert FACTS[2] in _texts(eng, "what is the cat called?")
        assert not eng.vectors.own_index_ready(col, timeout=0)
    finally:
        eng.close()
    assert not (tmp_path / "s" / "indexes").exists()


def test_recalls_and_writes_on_threads_keep_the_index_whole(
        tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock)
    errors: list[BaseException] = []
    try:
        eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS)], tenant="t")

        def recalls() -> None:
            try:
                for _ in range(30):
                    eng.recall("when are backups?", tenant="t", k=5, touch=False)
            except BaseException as e:
                errors.append(e)

        def writes() -> None:
            try:
                for i in range(30):
                    eng.add(f"Backup job {i} runs at {i} past midnight", tenant="t")
                    if i % 5 == 0:
                        eng.forget(f"f{i // 5}", tenant="t", hard=True)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=recalls) for _ in range(3)]
        threads.append(threading.Thread(target=writes))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        assert sorted(eng.vectors.query(col, np.ones((1, 256), np.float32), 1000)[0][0]) == \
            sorted(eng.vectors.all_ids(col))
    finally:
        eng.close()
