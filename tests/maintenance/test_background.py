"""Maintenance runs by itself: an engine opened with the defaults runs its jobs on the engine's
clock (on a ManualClock when the clock is advanced past their due time, deterministically; on
the system clock in a background thread), survives a failing job and stops on close()."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig, Scheduler
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidConfigError

TURNS = [
    "We are flying to Lisbon on the ninth of June with the kids",
    "My sister Lena will look after our dog while we travel",
    "The hotel in Lisbon is close to the old tram line",
]


def _open(path: Path, clock: ManualClock | None = None, **config: object) -> MemoryEngine:
    return MemoryEngine.open(path, clock=clock, embedder=HashingEmbedder(),
                             config=MnemoniaConfig.load(env={}, **config))


def _turns(engine: MemoryEngine) -> list[str]:
    mems = engine.add_many([{"text": t, "session_id": "s1"} for t in TURNS], tenant="fam")
    assert [m.state for m in mems] == ["batched"] * len(TURNS)
    return [m.id for m in mems]


def test_background_is_the_default_and_follows_a_manual_clock(tmp_path: Path,
                                                               clock: ManualClock) -> None:
    engine = _open(tmp_path / "s", clock)
    try:
        assert engine.config.maintenance == "background"
        assert engine.scheduler is not None and engine.scheduler.running
        ids = _turns(engine)
        assert engine.stats("fam")["relations"] == 0
        clock.advance(timedelta(seconds=59))  # enrichment is due a minute after open
        assert engine.stats("fam")["relations"] == 0
        assert engine.scheduler.runs["enrich"] == 0
        clock.advance(timedelta(seconds=2))
        assert engine.scheduler.runs["enrich"] == 1
        follows = [r for r in engine.relations(ids[1], tenant="fam") if r.type == "follows"]
        assert {(r.src, r.dst) for r in follows} == {(ids[0], ids[1]), (ids[1], ids[2])}
        # enriched memories are due for review: the review job (every 10 min) reviews them
        assert all(engine.get(i, tenant="fam").sm2.repetitions == 0 for i in ids)
        assert engine.scheduler.runs["review"] == 0
        clock.advance(timedelta(minutes=10))
        assert engine.scheduler.runs["review"] == 1
        assert engine.scheduler.runs["reevaluate"] == 1
        assert all(any(e.event == "reviewed" for e in engine.history(i, tenant="fam"))
                   for i in ids)
        assert engine.scheduler.runs["consolidate"] == 0  # its own slower cadence (1 h)
        clock.advance(timedelta(hours=1))
        assert engine.scheduler.runs["consolidate"] == 1 and engine.scheduler.runs["evict"] == 1
        assert not engine.scheduler.errors
    finally:
        engine.close()
    assert not engine.scheduler.running
    runs = dict(engine.scheduler.runs)
    clock.advance(timedelta(days=1))  # a closed engine's jobs never run again
    assert engine.scheduler.runs == runs


def test_manual_maintenance_runs_nothing_by_itself(tmp_path: Path, clock: ManualClock) -> None:
    with MemoryEngine.open(tmp_path / "s", clock=clock, embedder=HashingEmbedder(),
                           config=MnemoniaConfig.load(env={}), maintenance="manual") as engine:
        assert engine.scheduler is None
        _turns(engine)
        clock.advance(timedelta(days=2))
        assert engine.stats("fam")["relations"] == 0
        assert engine.enrich(tenant="fam").enriched == len(TURNS)
    env = MnemoniaConfig.load(env={"MNEMONIA_MAINTENANCE": "manual"})
    assert env.maintenance == "manual"
    with pytest.raises(InvalidConfigError, match="maintenance='sometimes'"):
        MemoryEngine.open(tmp_path / "t", embedder=HashingEmbedder(), maintenance="sometimes")


def test_a_failing_job_is_logged_and_retried(tmp_path: Path, clock: ManualClock,
                                             caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def summariser(texts: list[str]) -> str:
        calls.append(len(texts))
        raise RuntimeError("LLM unavailable")

    engine = MemoryEngine.open(tmp_path / "s", clock=clock, embedder=HashingEmbedder(),
                               config=MnemoniaConfig.load(env={}), summariser=summariser)
    try:
        engine.add_many([{"text": "The deploy runs every Friday at noon"},
                         {"text": "the deploy runs every friday at noon."}], tenant="ops")
        with caplog.at_level(logging.ERROR, logger="mnemonia.maintenance"):
            clock.advance(timedelta(hours=1, seconds=1))
        assert calls == [2]
        assert [job for job, _ in engine.scheduler.errors] == ["consolidate"]
        assert "maintenance job consolidate failed" in caplog.text
        assert engine.scheduler.runs["enrich"] == 1  # the other jobs ran
        clock.advance(timedelta(hours=1))
        assert calls == [2, 2]  # retried at its next turn
    finally:
        engine.close()


@pytest.mark.slow
def test_on_the_system_clock_a_batched_memory_gets_its_relations_within_a_minute(
        tmp_path: Path) -> None:
    engine = MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(),
                               config=MnemoniaConfig.load(env={}))
    try:
        assert isinstance(engine.scheduler, Scheduler) and engine.scheduler.running
        ids = _turns(engine)
        start = time.monotonic()
        while time.monotonic() - start < 75:
            if engine.relations(ids[2], tenant="fam"):
                break
            time.sleep(0.5)
        waited = time.monotonic() - start
        assert engine.relations(ids[2], tenant="fam"), "not enriched after 75 s"
        assert waited <= 62  # the first enrichment sweep comes a minute after open
    finally:
        engine.close()
    assert not engine.scheduler.running


@pytest.mark.integration
def test_cli_maintain_every_runs_the_jobs_as_a_process_of_its_own(
        tmp_path: Path, real_embedder: object) -> None:
    from mnemonia.cli import app
    from typer.testing import CliRunner

    store = tmp_path / "s"
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        ids = [m.id for m in engine.add_many([{"text": t, "session_id": "s1"} for t in TURNS],
                                             tenant="fam")]
        assert not engine.relations(ids[1], tenant="fam")
    runner = CliRunner()
    out = runner.invoke(app, ["maintain", "--every", "1s", "--rounds", "2", "--path", str(store)])
    assert out.exit_code == 0, out.output
    assert "maintaining" in out.output and "round 2: ran" in out.output
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        kinds = {r.type for r in engine.relations(ids[1], tenant="fam")}
        assert "follows" in kinds  # enriched by the maintain process
    bad = runner.invoke(app, ["maintain", "--every", "soon", "--path", str(store)])
    assert bad.exit_code == 2 and "--every='soon'" in bad.output
