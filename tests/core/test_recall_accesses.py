"""A recall's accesses (access count, stability, access log) are written on the side-store's
writer thread while the caller uses the answer; the process still reads its own writes, a
failed write is logged, and closing the engine finishes what is pending.

Real Chroma, real SQLite, the hashing embedder.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder


def _open(path: Path, clock: ManualClock) -> MemoryEngine:
    return MemoryEngine.open(path, config=MnemoniaConfig.load(env={}, maintenance="manual"),
                             clock=clock, embedder=HashingEmbedder())


def _fill(engine: MemoryEngine) -> str:
    first = engine.add("Alice keeps bees in her garden", tenant="t").id
    engine.add("Bob repairs old bicycles", tenant="t")
    return first


class _Gate:
    """Wraps ``record_access``: notes the thread it runs on and holds the write until
    released."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.release = threading.Event()
        self.threads: list[str] = []
        self.written = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.threads.append(threading.current_thread().name)
        assert self.release.wait(30), "the test never released the write"
        self.inner(*args, **kwargs)
        self.written.set()


def test_recall_returns_before_its_accesses_are_written_and_reads_wait_for_them(
        tmp_path: Path, clock: ManualClock) -> None:
    with _open(tmp_path / "store", clock) as engine:
        bees = _fill(engine)
        gate = _Gate(engine.runtime.sql.events.record_access)
        engine.runtime.sql.events.record_access = gate  # type: ignore[method-assign]
        hits = engine.recall("bees in the garden", tenant="t", k=1)
        # the answer is here while its write is still held on the writer thread
        assert [h.memory.id for h in hits.memories] == [bees]
        assert not gate.written.is_set()
        threading.Timer(0.2, gate.release.set).start()
        # a read of the same process waits for the write: it sees its own access
        assert engine.get(bees, tenant="t").access_count == 1
        assert gate.written.is_set()
        assert gate.threads == ["mnemonia-writer_0"]
        # and the next recall is counted as well
        gate.written.clear()
        engine.recall("bees in the garden", tenant="t", k=1)
        assert engine.get(bees, tenant="t").access_count == 2


def test_a_failed_access_write_is_logged_and_later_ones_still_land(
        tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    with _open(tmp_path / "store", clock) as engine:
        bees = _fill(engine)
        inner = engine.runtime.sql.events.record_access

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("disk full")

        engine.runtime.sql.events.record_access = broken  # type: ignore[method-assign]
        with caplog.at_level(logging.WARNING, logger="mnemonia"):
            engine.recall("bees in the garden", tenant="t", k=1)
            assert engine.get(bees, tenant="t").access_count == 0  # rolled back
        warned = [r for r in caplog.records if "recording the accesses" in r.getMessage()]
        assert len(warned) == 1
        assert "tenant 't'" in warned[0].getMessage()
        assert "failed and was not written" in warned[0].getMessage()
        assert "disk full" in str(warned[0].exc_info[1])  # type: ignore[index]
        engine.runtime.sql.events.record_access = inner  # type: ignore[method-assign]
        engine.recall("bees in the garden", tenant="t", k=1)
        assert engine.get(bees, tenant="t").access_count == 1


def test_closing_the_engine_finishes_the_pending_access_writes(
        tmp_path: Path, clock: ManualClock) -> None:
    engine = _open(tmp_path / "store", clock)
    bees = _fill(engine)
    gate = _Gate(engine.runtime.sql.events.record_access)
    engine.runtime.sql.events.record_access = gate  # type: ignore[method-assign]
    engine.recall("bees in the garden", tenant="t", k=1)
    threading.Timer(0.2, gate.release.set).start()
    engine.close()
    assert gate.written.is_set()
    with _open(tmp_path / "store", clock) as again:
        assert again.get(bees, tenant="t").access_count == 1
        log = again.runtime.sql.events.access_ranks  # the access log row is there too
        with again.runtime.reading() as conn:
            assert [(m, rank) for m, rank, _ in log(conn, "t", [bees], float("inf"))] == \
                [(bees, 1)]
