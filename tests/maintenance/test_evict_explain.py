"""Eviction explains itself (issue 37 point 3): the fading list (the inspector's page) and
``mnemonia maintain evict --dry-run`` show each candidate's signals and why it goes before
the next, in the order eviction takes them, and the dry run writes nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from maint_helpers import set_rows
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia import cli as cli_module
from mnemonia.cli import app
from mnemonia.inspection import fading
from mnemonia.scoring import priority as prio
from mnemonia.store import sql as S
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import START

TEXTS = ["haha nice!", "ok, see you then",
         "Caroline adopted a grey cat named Pixel from the Lisbon shelter last spring",
         "Melanie signed up for a pottery class at the community centre on Thursdays",
         "Jon opened a dance studio downtown after losing his banking job",
         "lol yes"]


def _fill(engine: MemoryEngine) -> dict[str, str]:
    ids = {m.text: m.id for m in engine.add_many([{"text": t} for t in TEXTS], tenant="t")}
    set_rows(engine, list(ids.values()), state="batched")
    engine.feedback(ids["lol yes"], 5, tenant="t")
    set_rows(engine, ids[TEXTS[4]], state="skipped")
    return ids


def test_the_fading_list_is_the_eviction_order_with_its_reasons(engine: MemoryEngine) -> None:
    ids = _fill(engine)
    f = fading(engine.runtime, "t", limit=10)
    order = [i.memory.id for i in f.items]
    assert f.policy == "informative" and f.active == 6 and len(order) == 6
    assert order[0] == ids[TEXTS[4]]  # skipped by the gatekeeper
    assert set(order[1:3]) == {ids["haha nice!"], ids["ok, see you then"]}
    assert order[-1] == ids["lol yes"]  # used: last
    by_id = {i.memory.id: i for i in f.items}
    assert by_id[ids["lol yes"]].uses == 1 and by_id[ids["lol yes"]].used
    assert by_id[ids[TEXTS[2]]].content_words == prio.content_words(TEXTS[2])
    assert f.items[0].reason == "skipped by the gatekeeper (the other is batched)"
    assert f.items[-2].reason == "never used (the other was used 1 time)"
    assert f.items[1].reason == "stored earlier (#0 < #1)"  # both: 2 words, same access
    assert f.items[2].reason.startswith("less information: 2 (2 content words, importance 0.5)")
    assert f.items[-1].reason == ""  # nothing follows
    # a shorter list still says why its last one goes before the next
    assert fading(engine.runtime, "t", limit=2).items[-1].reason == f.items[1].reason
    assert [i.next_run for i in f.items] == [True] + [False] * 5  # max(1, int(6 * .05))
    assert engine.evict(tenant="t").ids == (order[0],)


def test_the_fading_list_follows_the_configured_policy(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(eviction_policy="composite")
    _fill(eng)
    f = fading(eng.runtime, "t", limit=10)
    assert f.policy == "composite"
    prios = [i.priority for i in f.items]
    assert prios == sorted(prios)
    assert all(i.reason.startswith(("lower priority", "last accessed", "stored earlier"))
               for i in f.items[:-1])


def _cli(*args: str) -> tuple[int, str]:
    with _swap(cli_module, "console", Console(width=250)):
        out = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return out.exit_code, out.output


@contextlib.contextmanager
def _swap(module: object, name: str, value: object) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _counts(engine: MemoryEngine) -> tuple[int, int]:
    with engine.sql.connect() as conn:
        deleted = conn.execute(sa.select(sa.func.count()).select_from(S.memories).where(
            S.memories.c.deleted_at.is_not(None))).scalar_one()
        events = conn.execute(sa.select(sa.func.count()).select_from(S.memory_events)).scalar_one()
    return int(deleted), int(events)


@pytest.mark.integration
def test_cli_evict_dry_run_shows_signals_and_reasons_and_writes_nothing(
        tmp_path: Path, real_embedder, config: MnemoniaConfig) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "store"
    with MemoryEngine.open(path, config=config, clock=ManualClock(START),
                           embedder=real_embedder) as engine:
        ids = _fill(engine)
        before = _counts(engine)
    code, text = _cli("maintain", "evict", "--dry-run", "--path", str(path), "--tenant", "t")
    assert code == 0, text
    assert "evict --dry-run t: policy informative, one run takes 1 of 6 active" in text
    lines = [ln for ln in text.splitlines() if "│" in ln]
    rows = [ln for ln in lines if any(mid in ln for mid in ids.values())]
    assert len(rows) == 6
    assert ids[TEXTS[4]] in rows[0] and "1*" in rows[0]  # in the next run
    assert "skipped by the gatekeeper (the other is batched)" in rows[0]
    assert ids["lol yes"] in rows[-1]
    assert "never used (the other was used 1 time)" in rows[-2]
    assert "less information" in text
    with MemoryEngine.open(path, embedder=real_embedder, maintenance="manual") as engine:
        assert _counts(engine) == before
        assert engine.stats("t")["active"] == 6
    code, text = _cli("maintain", "evict", "--dry-run", "--limit", "2", "--path", str(path),
                      "--tenant", "t")
    assert code == 0 and sum(any(m in ln for m in ids.values())
                             for ln in text.splitlines()) == 2


@pytest.mark.parametrize("args", [["maintain", "consolidate", "--dry-run"],
                                  ["maintain", "--dry-run"],
                                  ["maintain", "evict", "--dry-run", "--every", "1m"]])
def test_cli_dry_run_is_refused_for_anything_but_evict(tmp_path: Path, args: list[str]) -> None:
    code, text = _cli(*args, "--path", str(tmp_path / "never"))
    assert code == 2, text
    assert "--dry-run: only for `maintain evict`" in text
    assert not (tmp_path / "never").exists()  # refused before the store is opened


def test_cli_dry_run_refuses_a_bad_limit(tmp_path: Path) -> None:
    code, text = _cli("maintain", "evict", "--dry-run", "--limit", "0",
                      "--path", str(tmp_path / "never"))
    assert code == 2 and "limit" in text
    assert not (tmp_path / "never").exists()
