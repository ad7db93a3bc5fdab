"""The job registry (``mnemonia.maintenance.jobs``) is the one list of maintenance jobs:
``maintain()``, the scheduler, its default cadences, the reports and ``mnemonia maintain JOB``
all follow it (issue 32, point 5: ``mnemonia maintain expire`` was refused and the CLI help
listed 4 of the 6 jobs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
import sqlalchemy as sa
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia import cli as cli_module
from mnemonia import maintenance as mt
from mnemonia.cli import app
from mnemonia.errors import InvalidInputError
from mnemonia.maintenance.jobs import JOB_NAMES, JOBS, MAINTAIN_ORDER, job, report_field
from mnemonia.models import ItemWrite
from mnemonia.store import sql as S
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import START


def _stored(engine: MemoryEngine) -> int:
    with engine.sql.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(S.memories)).scalar_one())


def _cli(*args: str) -> tuple[int, str]:
    # the CLI's console takes its width from COLUMNS when mnemonia.cli is first imported
    # (under xdist: at collection, 80 columns, and the tables' titles wrap): a wide one here
    with _swap(cli_module, "console", Console(width=200)):
        out = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return out.exit_code, out.output


@contextlib.contextmanager
def _swap(module: object, name: str, value: object) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


# -- the registry drives the scheduler, its cadences and maintain() ---------------------------
def test_the_scheduler_runs_the_registry_in_its_order(engine: MemoryEngine) -> None:
    names = [j.name for j in JOBS]
    assert names == ["enrich", "evict", "consolidate", "review", "reevaluate", "expire"]
    assert list(JOB_NAMES) == names
    scheduler = mt.Scheduler(engine)
    assert list(scheduler.jobs) == list(mt.Scheduler.jobs) == names
    assert list(scheduler.runs) == list(scheduler.intervals) == names
    engine.add("The deploy runs every Friday at noon", tenant="t")
    assert list(scheduler.run_pending()) == names  # all due at start, in registry order


def test_every_interval_key_is_a_config_field_and_the_defaults_come_from_it(
        make_engine) -> None:  # type: ignore[no-untyped-def]
    config_fields = {f.name for f in fields(MnemoniaConfig)}
    defaults = MnemoniaConfig()
    for j in JOBS:
        assert j.interval_key in config_fields, j
        assert mt.DEFAULT_INTERVALS[j.name] == getattr(defaults, j.interval_key)
    assert list(mt.DEFAULT_INTERVALS) == list(JOB_NAMES)
    assert mt.DEFAULT_INTERVALS == {"enrich": 60.0, "evict": 3600.0, "consolidate": 3600.0,
                                    "review": 600.0, "reevaluate": 600.0, "expire": 300.0}
    overrides = {j.interval_key: 7.0 + i for i, j in enumerate(JOBS)}
    scheduler = mt.Scheduler(make_engine(**overrides))
    assert scheduler.intervals == {j.name: 7.0 + i for i, j in enumerate(JOBS)}


def test_each_job_has_its_field_in_the_maintenance_report(engine: MemoryEngine) -> None:
    engine.add_many([{"text": "The weekly sync is on Monday at ten"},
                     {"text": "the weekly sync is on monday at ten."}], tenant="t")
    steps: list[tuple[str, str | None]] = []
    report = engine.maintain(on_step=lambda name, tenant: steps.append((name, tenant)))
    (tm,) = report.tenants
    for j in JOBS:
        whole = tm if j.scope == "tenant" else report
        assert isinstance(getattr(whole, report_field(j)), j.report), j
    # the order maintain() always had: the TTL sweep, the tick, then each tenant's jobs
    assert [j.name for j in MAINTAIN_ORDER] == [
        "expire", "enrich", "evict", "consolidate", "review", "reevaluate"]
    assert steps == [("expire", None), ("reevaluate", None), ("enrich", "t"), ("evict", "t"),
                     ("consolidate", "t"), ("review", "t")]
    assert report.counts["concepts_created"] == 1


def test_an_unknown_job_is_refused_with_the_list_of_jobs(engine: MemoryEngine) -> None:
    assert job("expire").scope == "store" and job("review").scope == "tenant"
    with pytest.raises(InvalidInputError) as caught:
        job("defrag")
    message = str(caught.value)
    assert "'defrag'" in message and all(name in message for name in JOB_NAMES)
    with pytest.raises(InvalidInputError, match="unknown job 'defrag'"):
        mt.Scheduler(engine, intervals={"defrag": 5})


# -- mnemonia maintain JOB ---------------------------------------------------------------------
def test_the_cli_help_lists_every_job() -> None:
    code, text = _cli("maintain", "--help")
    assert code == 0, text
    assert "|".join((*JOB_NAMES, "all")) in text


def test_the_cli_refuses_an_unknown_job_listing_them_all(tmp_path: Path) -> None:
    code, text = _cli("maintain", "defrag", "--path", str(tmp_path / "store"))
    assert code == 2, text
    assert "job='defrag'" in text and all(name in text for name in JOB_NAMES)


@pytest.fixture
def store(tmp_path: Path, real_embedder, config: MnemoniaConfig) -> Path:  # type: ignore[no-untyped-def]
    """A store on the bundled model (what the CLI opens it with): two tenants' memories and
    keyed items, one of which expired long before the CLI's (system) clock."""
    path = tmp_path / "store"
    with MemoryEngine.open(path, config=config, clock=ManualClock(START),
                           embedder=real_embedder) as engine:
        engine.add_many([{"text": "The weekly team sync happens every Monday at ten."},
                         {"text": "the weekly team sync happens every monday at ten"},
                         {"text": "Caroline moved to Lisbon in May for a design job"}],
                        tenant="t")
        engine.add("Melanie paints sunsets over the lake", tenant="u")
        engine.items.put([ItemWrite(namespace=("t",), key="gone", value={"v": 1},
                                    text="a note that expires", ttl=1),
                          ItemWrite(namespace=("t",), key="kept", value={"v": 2},
                                    text="a note that stays")])
    return path


@pytest.mark.integration
@pytest.mark.parametrize("name", [*JOB_NAMES, "all"])
def test_the_cli_runs_every_job_the_scheduler_runs(store: Path, name: str) -> None:
    code, text = _cli("maintain", name, "--path", str(store))
    assert code == 0, text
    assert f"mnemonia maintain {name}" in text  # the summary table
    if name == "all":
        assert "re-evaluation (all tenants)" in text and "TTL sweep (all tenants)" in text


@pytest.mark.integration
def test_maintain_expire_sweeps_the_expired_items(store: Path, real_embedder) -> None:  # type: ignore[no-untyped-def]
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        before = _stored(engine)  # the expired item is still stored (hidden from reads)
    code, text = _cli("maintain", "expire", "--path", str(store))
    assert code == 0, text  # before the registry: "error: job='expire': must be one of ..."
    row = next(line for line in text.splitlines() if "all tenants" in line)
    assert row.split("│")[2].strip() == "1"  # expired
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        assert engine.items.get(("t",), ["gone", "kept"]).keys() == {"kept"}
        assert _stored(engine) == before - 1  # now removed for good
