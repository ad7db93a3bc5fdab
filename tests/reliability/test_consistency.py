"""The two halves of a store kept in agreement (real Chroma, real SQLite, hashing embedder):
a lost or emptied Chroma collection is rebuilt at open, vectors of no memory stop the open
until ``doctor --repair``, the keyword index is checked and rebuilt, and a SQLite file deleted
or replaced under an open engine is noticed before anything more is acknowledged."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig, consistency
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import (
    StoreError,
    StoreFileChangedError,
    StoreInconsistentError,
    StoreUnavailableError,
)
from mnemonia.store.chroma import ChromaIndex
from mnemonia.store.closing import MARK

CATS = [f"Alice's cat number {i} is called {name}" for i, name in enumerate(
    ["Miso", "Tofu", "Ramen", "Udon", "Soba", "Nori", "Mochi", "Dango", "Yuzu", "Kiwi"])]
FACTS = [f"The {thing} is kept in the {place}" for thing, place in [
    ("passport", "blue drawer"), ("spare key", "garden shed"), ("umbrella", "car boot"),
    ("wifi password", "fridge door"), ("bike pump", "cellar"), ("tax papers", "attic box"),
    ("first aid kit", "bathroom cabinet"), ("torch", "kitchen drawer")]]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def open_store(store: Path, clock: ManualClock, config: MnemoniaConfig
               ) -> Iterator[Callable[..., MemoryEngine]]:
    opened: list[MemoryEngine] = []

    def _open(folder: Path = store, **kwargs: Any) -> MemoryEngine:
        e = MemoryEngine.open(folder, clock=clock, config=config, embedder=HashingEmbedder(),
                              **kwargs)
        opened.append(e)
        return e

    yield _open
    for e in opened:
        e.close()


def _fill(engine: MemoryEngine) -> dict[str, str]:
    """Two tenants; a soft-deleted memory, a relation and a speaker. Returns text -> id."""
    ids = {m.text: m.id for m in engine.add_many([{"text": t} for t in CATS], tenant="alice")}
    ids.update({m.text: m.id for m in engine.add_many(
        [{"text": t, "speaker": "Bob"} for t in FACTS], tenant="bob")})
    engine.forget(ids[CATS[9]], tenant="alice")
    engine.relate(ids[CATS[0]], ids[CATS[1]], "related_to", tenant="alice")
    return ids


def _chroma(store: Path) -> Any:
    """A chromadb client of its own on the store's Chroma folder (the store is closed)."""
    return chromadb.PersistentClient(path=str(store / "chroma"),
                                     settings=Settings(anonymized_telemetry=False))


def _export_lines(engine: MemoryEngine, path: Path) -> list[dict[str, Any]]:
    engine.export(path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_healthy(engine: MemoryEngine, expected: dict[str, tuple[int, int]]) -> None:
    """doctor finds nothing out of step, and its counts are ``{tenant: (memories, active)}``."""
    report = engine.doctor()
    assert report.consistent and report.problems == 0, report.as_dict()
    assert {t.tenant: (t.memories, t.active) for t in report.tenants} == expected
    for t in report.tenants:
        assert t.chroma_vectors == t.side_vectors == t.keyword_rows == t.memories
        assert engine.stats(t.tenant)["active"] == t.active


def _top(engine: MemoryEngine, query: str, tenant: str) -> str:
    res = engine.recall(query, tenant=tenant, k=1, touch=False)
    assert res.memories, f"nothing recalled for {query!r}"
    return res.memories[0].memory.text


EXPECTED = {"alice": (10, 9), "bob": (8, 8)}


def test_a_deleted_chroma_folder_is_rebuilt_at_open(
        store: Path, tmp_path: Path, open_store: Callable[..., MemoryEngine],
        caplog: pytest.LogCaptureFixture) -> None:
    engine = open_store()
    _fill(engine)
    before = _export_lines(engine, tmp_path / "before.jsonl")
    engine.close()
    shutil.rmtree(store / "chroma")

    with caplog.at_level(logging.WARNING, logger="mnemonia"):
        engine = open_store()
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "opening the store repaired tenant alice: 10 memories; Chroma held 0 vectors " \
           "(10 missing: 10 rebuilt" in logged
    assert "tenant bob: 8 memories; Chroma held 0 vectors (8 missing: 8 rebuilt" in logged
    assert _top(engine, "what is the cat number 3 called?", "alice") == CATS[3]
    assert _top(engine, "where is the spare key kept?", "bob") == FACTS[1]
    _assert_healthy(engine, EXPECTED)
    # the export is what it was, vectors included
    assert _export_lines(engine, tmp_path / "after.jsonl") == before
    # and new adds land in both halves
    new = engine.add("Alice's new cat is called Pixel", tenant="alice")
    assert _top(engine, "which cat is called Pixel?", "alice") == new.text
    _assert_healthy(engine, {"alice": (11, 10), "bob": (8, 8)})


@pytest.mark.parametrize("how", ["collection deleted", "every vector deleted"])
def test_an_emptied_collection_is_rebuilt_at_open(
        store: Path, open_store: Callable[..., MemoryEngine], how: str) -> None:
    engine = open_store()
    ids = _fill(engine)
    engine.close()
    with _chroma(store) as client:
        if how == "collection deleted":
            client.delete_collection("mnemonia-alice")
        else:
            col = client.get_collection("mnemonia-alice")
            col.delete(ids=col.get(include=[])["ids"])
            assert col.count() == 0
    engine = open_store()
    _assert_healthy(engine, EXPECTED)
    assert _top(engine, "what is the cat number 5 called?", "alice") == CATS[5]
    engine.restore(ids[CATS[9]], tenant="alice")  # a soft-deleted memory kept its vector
    assert _top(engine, "what is the cat number 9 called?", "alice") == CATS[9]


def test_missing_vectors_are_rebuilt_from_the_side_store_or_embedded_again(
        store: Path, open_store: Callable[..., MemoryEngine],
        caplog: pytest.LogCaptureFixture) -> None:
    engine = open_store()
    ids = _fill(engine)
    engine.close()
    gone = [ids[t] for t in FACTS[:5]]
    with _chroma(store) as client:
        client.get_collection("mnemonia-bob").delete(ids=gone)
    with sqlite3.connect(store / "mnemonia.sqlite3") as db:  # two vectors kept nowhere now
        db.executemany("DELETE FROM memory_vectors WHERE memory_id = ?", [(i,) for i in gone[:2]])

    with caplog.at_level(logging.WARNING, logger="mnemonia"):
        engine = open_store()
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "tenant bob: 8 memories; Chroma held 3 vectors (5 missing: 3 rebuilt from the " \
           "side-store, 2 embedded again; 0 orphans removed)" in logged
    _assert_healthy(engine, EXPECTED)
    # embedded again from the memory's embedded text (the speaker is part of it)
    col = engine.vectors.collection("bob", model=engine.embedder.name, dimension=0,
                                    create=False)
    got = engine.vectors.get_vectors(col, gone[:2])
    want = HashingEmbedder().embed_documents([f'Bob said, "{t}"' for t in FACTS[:2]])
    np.testing.assert_allclose(np.stack([got[i] for i in gone[:2]]), want, atol=1e-6)
    for text in FACTS[:5]:
        place = text.split(" in the ")[1]
        assert _top(engine, f"what is in the {place}?", "bob") == text


def test_vectors_of_no_memory_stop_the_open_until_doctor_repairs(
        store: Path, open_store: Callable[..., MemoryEngine]) -> None:
    engine = open_store()
    _fill(engine)
    engine.close()
    rng = np.random.default_rng(7)
    with _chroma(store) as client:
        client.get_collection("mnemonia-alice").add(
            ids=["ghost-1", "ghost-2", "ghost-3"], embeddings=rng.standard_normal((3, 256)))
        client.create_collection("mnemonia-carol", embedding_function=None).add(
            ids=["ghost-4", "ghost-5"], embeddings=rng.standard_normal((2, 256)))

    with pytest.raises(StoreInconsistentError) as info:
        open_store()
    msg = str(info.value)
    assert "tenant 'alice': 3 of 13" in msg and "tenant 'carol': 2 of 2" in msg
    assert "mnemonia doctor --repair" in msg and "Nothing was changed" in msg

    engine = open_store(verify=False)
    report = engine.doctor()
    assert not report.consistent and report.problems == 5
    assert report.tenant("alice").orphans == 3 and report.tenant("alice").missing == 0
    assert report.tenant("carol").orphans == 2 and report.tenant("carol").memories == 0
    assert report.tenant("bob").problems == 0
    repaired = engine.doctor(repair=True)
    assert repaired.consistent and repaired.tenant("alice").orphans_removed == 3
    assert repaired.tenant("carol").repaired
    engine.close()

    engine = open_store()  # the normal open is happy again
    _assert_healthy(engine, EXPECTED)
    assert engine.vectors.tenants() == ["alice", "bob"]  # carol's stray collection is gone


def test_the_keyword_index_is_checked_and_rebuilt(
        store: Path, open_store: Callable[..., MemoryEngine]) -> None:
    engine = open_store()
    ids = _fill(engine)
    engine.close()
    with sqlite3.connect(store / "mnemonia.sqlite3") as db:
        db.executemany("DELETE FROM memories_kw WHERE memory_id = ?",
                       [(ids[FACTS[3]],), (ids[CATS[2]],)])
        db.execute("INSERT INTO memories_kw(body, memory_id) VALUES ('tstray words', 'nobody')")

    engine = open_store(verify=False)
    report = engine.doctor()
    assert report.tenant("bob").keyword_off == 1 and report.tenant("alice").keyword_off == 1
    assert report.tenant("bob").keyword_rows == 7 and report.stray_keyword_rows == 1
    assert not report.consistent
    engine.close()

    engine = open_store()  # the row counts differ: the open rebuilds the index
    _assert_healthy(engine, EXPECTED)
    with engine.sql.connect() as conn:
        hits = engine.sql.keywords.keyword_search(conn, "bob", ["wifi", "password"], 3)
        bodies = [r[0] for r in conn.exec_driver_sql("SELECT body FROM memories_kw")]
        df = dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").fetchall())
    assert hits[0][0] == ids[FACTS[3]]
    assert df == dict(Counter(t for body in bodies for t in set(body.split())))


def test_the_open_counts_the_keyword_rows_as_the_index_holds_them(
        open_store: Callable[..., MemoryEngine]) -> None:
    """The check at open counts the keyword index by its ``_docsize`` rows (not its texts):
    the same number as the index's own ``count(*)`` through adds, soft and hard deletes,
    a restore and a new speaker's memories."""
    engine = open_store()
    ids = _fill(engine)

    def both() -> tuple[int | None, int]:
        with engine.sql.connect() as conn:
            return (engine.sql.inspect.keyword_count(conn),
                    int(conn.exec_driver_sql("SELECT count(*) FROM memories_kw").scalar_one()))

    assert both() == (len(CATS) + len(FACTS),) * 2
    engine.forget(ids[CATS[3]], tenant="alice", hard=True)
    engine.forget(ids[FACTS[0]], tenant="bob")
    engine.restore(ids[CATS[9]], tenant="alice")
    engine.add("Carol keeps bees on the roof", tenant="carol", speaker="Carol")
    counted, indexed = both()
    assert counted == indexed == len(CATS) + len(FACTS)  # one gone for good, one added


def test_doctor_on_a_healthy_store(open_store: Callable[..., MemoryEngine]) -> None:
    engine = open_store()
    _fill(engine)
    report = engine.doctor()
    _assert_healthy(engine, EXPECTED)
    assert report.stray_side_vectors == 0 and report.stray_keyword_rows == 0
    assert report.keyword_index.startswith("sqlite fts5")
    data = report.as_dict()
    assert json.loads(json.dumps(data)) == data and data["consistent"] is True
    assert data["tenants"][0]["tenant"] == "alice" and data["tenants"][0]["problems"] == 0
    again = engine.doctor(repair=True)  # nothing to do: nothing done
    assert again.consistent and not any(t.repaired for t in again.tenants)


def test_the_sqlite_file_deleted_under_an_open_engine(
        store: Path, open_store: Callable[..., MemoryEngine]) -> None:
    engine = open_store()
    ids = _fill(engine)
    db = store / "mnemonia.sqlite3"
    os.remove(db)

    with pytest.raises(StoreFileChangedError, match="was deleted while this engine had it"):
        engine.add("this one must not be acknowledged", tenant="alice")
    with pytest.raises(StoreFileChangedError):
        engine.add_many([{"text": "nor this"}], tenant="carol")
    with pytest.raises(StoreFileChangedError):  # a read does not answer from nothing
        engine.recall("cat", tenant="alice")
    with pytest.raises(StoreFileChangedError):
        engine.stats()
    assert not db.exists()  # nothing made a new empty file in its place
    engine.close()
    with _chroma(store) as client:  # the refused adds reached no store either
        assert sorted(c.name for c in client.list_collections()) == ["mnemonia-alice",
                                                                     "mnemonia-bob"]
        assert client.get_collection("mnemonia-alice").count() == 10

    # SQLite's log of the lost file is still there: the open says so rather than replay it
    with pytest.raises(StoreFileChangedError, match="write-ahead log"):
        open_store()
    for leftover in ("mnemonia.sqlite3-wal", "mnemonia.sqlite3-shm"):
        (store / leftover).unlink(missing_ok=True)
    # an empty side-store: every vector in Chroma is reported, and nothing is touched
    with pytest.raises(StoreInconsistentError, match="tenant 'alice': 10 of 10"):
        open_store()
    engine = open_store(verify=False)
    assert engine.doctor().problems == len(ids)
    assert engine.doctor(repair=True).consistent
    engine.close()
    assert open_store().tenants() == []


def test_the_sqlite_file_replaced_under_an_open_engine(
        store: Path, tmp_path: Path, open_store: Callable[..., MemoryEngine]) -> None:
    other = open_store(tmp_path / "other")
    other.add("a memory of another store", tenant="alice")
    other.close()
    engine = open_store()
    ids = _fill(engine)
    copy = store / "incoming.sqlite3"
    shutil.copy(tmp_path / "other" / "mnemonia.sqlite3", copy)
    os.replace(copy, store / "mnemonia.sqlite3")

    with pytest.raises(StoreFileChangedError, match="was replaced by another file"):
        engine.add("this one must not be acknowledged", tenant="alice")
    with pytest.raises(StoreFileChangedError):
        engine.forget(ids[CATS[0]], tenant="alice")
    with pytest.raises(StoreFileChangedError):
        engine.list(tenant="alice")


def test_an_add_whose_vector_write_fails_leaves_nothing_behind(
        open_store: Callable[..., MemoryEngine], monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: the real upsert stores half the batch, then Chroma "goes away"."""
    engine = open_store()
    _fill(engine)
    real_upsert = ChromaIndex.upsert

    def half_then_fail(self: ChromaIndex, col: Any, ids: Any, vectors: Any, *rest: Any) -> None:
        real_upsert(self, col, ids[:2], vectors[:2], *(r[:2] for r in rest))
        raise StoreUnavailableError("Chroma did not answer after 5 attempts (injected)")

    monkeypatch.setattr(ChromaIndex, "upsert", half_then_fail)
    with pytest.raises(StoreUnavailableError):
        engine.add_many([{"text": f"doomed memory {i}"} for i in range(4)], tenant="alice")
    monkeypatch.undo()
    _assert_healthy(engine, EXPECTED)  # no row, no vector, no index entry left


def test_when_chroma_cannot_take_back_a_failed_add_the_next_open_does(
        store: Path, open_store: Callable[..., MemoryEngine],
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = open_store()
    _fill(engine)
    real_upsert = ChromaIndex.upsert

    def half_then_fail(self: ChromaIndex, col: Any, ids: Any, vectors: Any, *rest: Any) -> None:
        real_upsert(self, col, ids[:2], vectors[:2], *(r[:2] for r in rest))
        raise StoreUnavailableError("Chroma did not answer (injected)")

    def unreachable(self: ChromaIndex, col: Any, ids: Any) -> None:
        raise StoreUnavailableError("Chroma did not answer (injected)")

    monkeypatch.setattr(ChromaIndex, "upsert", half_then_fail)
    monkeypatch.setattr(ChromaIndex, "delete", unreachable)
    with pytest.raises(StoreError):
        engine.add_many([{"text": f"doomed memory {i}"} for i in range(4)], tenant="alice")
    monkeypatch.undo()
    assert engine.stats("alice")["memories"] == 10  # never acknowledged, never visible
    engine.close()
    engine = open_store()  # the crash repair removes the two stray vectors and the rows
    _assert_healthy(engine, EXPECTED)


# -- the clean-close mark (mnemonia.store.closing) ----------------------------------------
@pytest.fixture
def chroma_counts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The collections whose count is asked of Chroma (the real call, counted): the open's
    check, and a collection's first search (a test clears the list before an open)."""
    asked: list[str] = []
    real_count = ChromaIndex.count

    def count(self: ChromaIndex, col: Any) -> int:
        asked.append(col.name)
        return real_count(self, col)

    monkeypatch.setattr(ChromaIndex, "count", count)
    return asked


def test_a_clean_close_lets_the_next_open_skip_comparing_the_stores(
        store: Path, open_store: Callable[..., MemoryEngine], chroma_counts: list[str]) -> None:
    engine = open_store()
    _fill(engine)
    engine.close()
    assert (store / MARK).exists()

    chroma_counts.clear()
    engine = open_store()
    assert chroma_counts == [] and not (store / MARK).exists()  # taken while the store is open
    assert _top(engine, "what is the cat number 3 called?", "alice") == CATS[3]
    engine.add("Alice's new cat is called Pixel", tenant="alice")
    engine.close()
    assert (store / MARK).exists()
    chroma_counts.clear()
    engine = open_store()
    assert chroma_counts == []
    _assert_healthy(engine, {"alice": (11, 10), "bob": (8, 8)})


def test_after_a_crash_the_open_compares_the_stores(
        store: Path, open_store: Callable[..., MemoryEngine], chroma_counts: list[str]) -> None:
    engine = open_store()
    _fill(engine)
    engine.close()
    # another process opens the store, adds, and stops without closing the engine
    script = ("import os, sys\n"
              "from mnemonia import MemoryEngine, MnemoniaConfig\n"
              "from mnemonia.embeddings import HashingEmbedder\n"
              "e = MemoryEngine.open(sys.argv[1], embedder=HashingEmbedder(),\n"
              "                      config=MnemoniaConfig.load(env={}, maintenance='manual'))\n"
              "e.add('Bob keeps the ladder in the garage', tenant='bob')\n"
              "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script, str(store)], check=True, timeout=120)
    assert not (store / MARK).exists()
    chroma_counts.clear()
    engine = open_store()
    assert sorted(chroma_counts) == ["mnemonia-alice", "mnemonia-bob"]
    _assert_healthy(engine, {"alice": (10, 9), "bob": (9, 9)})


def test_a_store_changed_after_its_clean_close_is_compared_and_repaired(
        store: Path, open_store: Callable[..., MemoryEngine], chroma_counts: list[str]) -> None:
    engine = open_store()
    ids = _fill(engine)
    engine.close()
    assert (store / MARK).exists()
    with _chroma(store) as client:  # vectors lost behind the engine's back
        client.get_collection("mnemonia-bob").delete(ids=[ids[FACTS[0]], ids[FACTS[1]]])
    chroma_counts.clear()
    engine = open_store()
    assert sorted(chroma_counts) == ["mnemonia-alice", "mnemonia-bob"]
    _assert_healthy(engine, EXPECTED)


def test_no_mark_after_a_failed_write_or_an_unchecked_open(
        store: Path, open_store: Callable[..., MemoryEngine], chroma_counts: list[str]) -> None:
    engine = open_store()
    _fill(engine)
    col = engine.vectors.collection("alice", model=engine.embedder.name, dimension=0,
                                    create=False)
    with pytest.raises(StoreError):  # Chroma refuses a vector of the wrong length
        engine.vectors.upsert(col, ["wrong"], np.ones((1, 3), dtype=np.float32), ["x"], [{}])
    engine.close()
    assert not (store / MARK).exists()

    # an open that does not compare (verify=False) vouches for nothing either
    chroma_counts.clear()
    engine = open_store(verify=False)
    engine.close()
    assert not (store / MARK).exists() and chroma_counts == []
    engine = open_store()
    assert sorted(chroma_counts) == ["mnemonia-alice", "mnemonia-bob"]
    _assert_healthy(engine, EXPECTED)
    engine.close()
    assert (store / MARK).exists()


def test_a_whole_doctor_run_vouches_for_the_stores_like_the_open(
        store: Path, open_store: Callable[..., MemoryEngine], chroma_counts: list[str]) -> None:
    engine = open_store()
    _fill(engine)
    engine.close()
    (store / MARK).unlink()  # as a crash leaves it
    engine = open_store(verify=False)
    # one tenant compared: not the whole store
    assert consistency.doctor(engine.runtime, repair=False, tenants=["alice"]).consistent
    engine.close()
    assert not (store / MARK).exists()
    engine = open_store(verify=False)
    assert engine.doctor(repair=True).consistent  # all of it: as good as the open's check
    engine.close()
    assert (store / MARK).exists()
    chroma_counts.clear()
    engine = open_store()
    assert chroma_counts == []
