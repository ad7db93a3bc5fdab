"""maintain() runs every job and reports counts; the background Scheduler; the CLI entry."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import timedelta

import pytest
from maint_helpers import log_access, row, set_rows
from mnemonia import ManualClock, MemoryEngine
from mnemonia import maintenance as mt
from mnemonia.cli import run_maintenance
from mnemonia.errors import InvalidInputError


def _wait(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the scheduler")
        time.sleep(0.01)


def _store(engine: MemoryEngine, tenant: str = "t") -> dict[str, str]:
    texts = {"a": "The weekly team sync happens every Monday at ten in room B.",
             "b": "the weekly team sync happens every monday at ten in room b",
             "c": "Caroline moved to Lisbon in May for a design job",
             "d": "Melanie paints sunsets over the lake"}
    mems = engine.add_many([{"text": t, "id": f"{tenant}-{k}"} for k, t in texts.items()],
                           tenant=tenant)
    ids = {m.id[-1]: m.id for m in mems}
    set_rows(engine, list(ids.values()), state="batched", enriched_at=None)
    set_rows(engine, ids["d"], state="skipped")
    return ids


def test_maintain_runs_everything_and_counts(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(max_memories=4)
    ids = _store(eng)
    log_access(eng, "t", ids["d"], at=clock.now(), user="u", times=3)
    report = eng.maintain()
    assert isinstance(report, mt.MaintenanceReport)
    (t,) = report.tenants
    assert report.reevaluation.promoted == 1  # d: skipped -> batched, then enriched below
    assert t.enrichment.enriched == 4  # a, b, c and the freshly promoted d
    assert t.eviction.reason == "not_over_max_memories"
    assert t.consolidation.concepts_created == 1
    assert t.review.reviewed >= 4
    counts = report.counts
    assert counts == {"tenants": 1, "enriched": 4, "evicted": 0, "concepts_created": 1,
                      "members_consolidated": 2, "reviewed": t.review.reviewed, "scanned": 3,
                      "promoted": 1, "expired": 0}
    json.dumps(report.as_dict())  # JSON-safe
    # the concept pushed the tenant over max_memories: the next run evicts down to it
    again = eng.maintain()
    assert again.tenants[0].eviction.evicted == 1
    assert again.counts["concepts_created"] == 0


def test_maintain_one_tenant(engine: MemoryEngine) -> None:
    _store(engine, "a")
    _store(engine, "b")
    report = engine.maintain(tenant="a")
    assert [t.tenant for t in report.tenants] == ["a"]
    assert engine.stats("b")["by_kind"]["concept"] == 0


def test_scheduler_cadence_on_the_engine_clock(engine: MemoryEngine, clock: ManualClock) -> None:
    _store(engine)
    scheduler = mt.Scheduler(engine, poll_interval=0.01)
    assert scheduler.intervals["reevaluate"] == 600.0  # default: every 10 minutes
    with scheduler:
        assert scheduler.running
        _wait(lambda: all(scheduler.runs[j] == 1 for j in mt.JOB_NAMES))
        clock.advance(timedelta(minutes=10))
        _wait(lambda: scheduler.runs["reevaluate"] == 2 and scheduler.runs["enrich"] == 2)
        time.sleep(0.1)
        assert scheduler.runs["consolidate"] == 1 and scheduler.runs["evict"] == 1
        assert scheduler.runs["review"] == 2
    assert not scheduler.running
    assert engine.stats("t")["by_kind"]["concept"] == 1
    assert not scheduler.errors


def test_scheduler_custom_intervals_and_disabled_jobs(engine: MemoryEngine,
                                                      clock: ManualClock) -> None:
    _store(engine)
    scheduler = mt.Scheduler(engine, intervals={"reevaluate": 60, "consolidate": None},
                             poll_interval=0.01)
    done = scheduler.run_pending()
    assert set(done) == {"enrich", "evict", "review", "reevaluate", "expire"}
    assert scheduler.run_pending() == {}
    clock.advance(timedelta(seconds=60))
    assert set(scheduler.run_pending()) == {"reevaluate", "enrich"}


def test_scheduler_survives_a_failing_job_and_stops_cleanly(engine: MemoryEngine,
                                                            clock: ManualClock) -> None:
    _store(engine)
    calls = []

    def bad_summariser(texts: list[str]) -> str:
        calls.append(texts)
        raise RuntimeError("LLM unavailable")

    engine.summariser = bad_summariser
    scheduler = mt.Scheduler(engine, poll_interval=0.01, intervals={"consolidate": 60})
    scheduler.start()
    try:
        _wait(lambda: scheduler.runs["review"] == 1)
        clock.advance(timedelta(seconds=60))
        _wait(lambda: len(scheduler.errors) == 2)
    finally:
        scheduler.stop()
    assert {job for job, _ in scheduler.errors} == {"consolidate"}
    assert scheduler.runs["consolidate"] == 0 and scheduler.runs["enrich"] == 2
    assert not scheduler.running
    assert threading.active_count() >= 1


def test_scheduler_stops_when_the_engine_closes(tmp_path, clock, config, hashing_embedder) -> None:  # type: ignore[no-untyped-def]
    eng = MemoryEngine.open(tmp_path / "s", config=config, clock=clock, embedder=hashing_embedder)
    scheduler = mt.Scheduler(eng, poll_interval=0.01).start()
    _wait(lambda: scheduler.runs["reevaluate"] == 1)
    eng.close()
    _wait(lambda: not scheduler.running)
    scheduler.stop()


def test_scheduler_rejects_bad_settings(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInputError) as err:
        mt.Scheduler(engine, intervals={"dance": 5, "review": -1}, poll_interval=0)
    message = str(err.value)
    assert "dance" in message and "review" in message and "poll_interval" in message


def test_run_cli_all_with_progress_and_table(engine: MemoryEngine) -> None:
    from rich.console import Console

    _store(engine)
    buf = io.StringIO()
    result = run_maintenance(engine, "all", progress=True,
                        console=Console(file=buf, width=120, force_terminal=False))
    assert result["job"] == "all" and result["counts"]["concepts_created"] == 1
    out = buf.getvalue()
    assert "mnemonia maintain all" in out and "concepts" in out
    assert "re-evaluation (all tenants)" in out
    table_row = next(line for line in out.splitlines() if line.startswith("│ t "))
    # enriched, evicted, concepts, consolidated, reviewed
    assert [c.strip() for c in table_row.split("│")[2:7]] == ["3", "0", "1", "2", "3"]
    json.dumps(result)


@pytest.mark.parametrize("job", ["evict", "consolidate", "review", "enrich", "reevaluate"])
def test_run_cli_single_jobs(engine: MemoryEngine, job: str) -> None:
    _store(engine)
    result = run_maintenance(engine, job, tenant="t", progress=False)
    key = "reevaluate" if job == "reevaluate" else "t"
    assert result["job"] == job and key in result["reports"]
    if job == "evict":
        assert result["reports"]["t"]["evicted"] == 1  # explicit: the budget, max(1, 0)
        assert result["counts"]["evicted"] == 1
    assert row(engine, "t-c").id == "t-c"


def test_run_cli_rejects_unknown_jobs(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInputError, match="job"):
        run_maintenance(engine, "defrag", progress=False)


def test_docstring_examples_run() -> None:
    import doctest

    tests = [t for module in (mt, mt.scheduler) for t in doctest.DocTestFinder().find(module)
             if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert len(tests) >= 2 and runner.failures == 0


def test_scheduler_can_serve_some_tenants_only(engine: MemoryEngine) -> None:
    _store(engine, "a")
    _store(engine, "b")
    scheduler = mt.Scheduler(engine, tenants=["a"], poll_interval=0.01)
    done = scheduler.run_pending()
    assert set(done["consolidate"]) == {"a"}
    assert engine.stats("a")["by_kind"]["concept"] == 1
    assert engine.stats("b")["by_kind"]["concept"] == 0
    with pytest.raises(InvalidInputError):
        mt.Scheduler(engine, tenants=["not a tenant!"])
