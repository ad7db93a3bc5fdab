"""Knowledge updates that are safe to be wrong (issue 34 point 5): a supersession keeps its
evidence in its event, ``unsupersede`` undoes it (recall, relation, event), the pair is kept
apart for good (``Events.kept_apart``, also across an export and import), a supersession
written inside ingest's transaction shows in the next recall, and the CLI and MCP surfaces.
Real Chroma and SQLite, on the hashing embedder (the CLI test on the bundled model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from mnemonia import MemoryEngine, lifecycle
from mnemonia.caches import Changes
from mnemonia.errors import InvalidInputError, MemoryDeletedError, MemoryNotFoundError
from mnemonia.store import sql as S

T = "alice"
EVIDENCE = {"automatic": True, "frame": "alice | lives in <place>", "old_value": "Lisbon",
            "new_value": "Porto", "cue": "moved to", "confidence": 0.83}


def _pair(engine: MemoryEngine, tenant: str = T) -> tuple[str, str]:
    """Two memories ingest's own detection leaves alone (no known slot, no change cue), for
    supersessions made here by hand."""
    old = engine.add("Alice near the river: the notes say Lisbon", tenant=tenant)
    new = engine.add("Alice near the river: the notes say Porto", tenant=tenant)
    return old.id, new.id


def _kept_apart(engine: MemoryEngine, ids: list[str], tenant: str = T) -> set[frozenset[str]]:
    with engine.runtime.reading() as conn:
        return engine.runtime.sql.events.kept_apart(conn, tenant, ids)


def _ids(engine: MemoryEngine, query: str = "where does Alice live near the river",
         tenant: str = T) -> list[str]:
    return engine.recall(query, tenant=tenant, k=10, min_activation=0, touch=False).ids


def _snapshot(engine: MemoryEngine) -> tuple[Any, ...]:
    """Every row of the tables a supersession writes."""
    with engine.sql.connect() as conn:
        return tuple(tuple(sorted(map(repr, conn.execute(sa.select(t)).fetchall())))
                     for t in (S.memories, S.relations, S.memory_events))


# -- supersede: the evidence --------------------------------------------------------------------
def test_a_supersession_keeps_its_evidence_and_one_by_hand_keeps_none(
        engine: MemoryEngine) -> None:
    old, new = _pair(engine)
    lifecycle.supersede(engine.runtime, T, old, new, evidence=EVIDENCE)
    last = engine.history(old, tenant=T)[-1]
    assert (last.event, last.before) == ("superseded", {"superseded_by": None})
    assert last.after == {"superseded_by": new, "evidence": EVIDENCE}

    other_old, other_new = (engine.add("The launch is on April 14th", tenant=T).id,
                            engine.add("The launch moved to April 28th", tenant=T).id)
    engine.supersede(other_old, other_new, tenant=T)
    assert engine.history(other_old, tenant=T)[-1].after == {"superseded_by": other_new}


def test_superseding_again_records_what_it_replaced(engine: MemoryEngine) -> None:
    old, new = _pair(engine)
    newest = engine.add("Alice moved again, to Braga", tenant=T).id
    engine.supersede(old, new, tenant=T)
    engine.supersede(old, newest, tenant=T)
    last = engine.history(old, tenant=T)[-1]
    assert last.before == {"superseded_by": new} and last.after == {"superseded_by": newest}
    # the newest version takes the place of the one before: one supersedes link into it
    assert [(r.src, r.type) for r in engine.relations(old, tenant=T)
            if r.dst == old] == [(newest, "supersedes")]


def test_unsupersede_removes_every_supersedes_link_into_the_memory(
        engine: MemoryEngine) -> None:
    """A link left by an earlier supersession (written by another path, e.g. a detector that
    re-supersedes directly, or relate) goes too: nothing supersedes a current memory; only
    the pair that was undone is kept apart."""
    old, new = _pair(engine)
    earlier = engine.add("Alice moved to Braga", tenant=T).id
    engine.relate(earlier, old, "supersedes", tenant=T)
    engine.supersede(old, new, tenant=T)
    engine.unsupersede(old, tenant=T)
    assert [r for r in engine.relations(old, tenant=T) if r.type == "supersedes"] == []
    assert _kept_apart(engine, [old, new, earlier]) == {frozenset((old, new))}


@pytest.mark.parametrize(("evidence", "fragment"), [
    ("moved to", "evidence='moved to': must be a dict"),
    ({"confidence": float("nan")}, "evidence is not JSON-safe"),
    ({"cue": object()}, "evidence is not JSON-safe"),
    ({"note": "x" * 70_000}, "bytes as JSON; the maximum is 65536"),
])
def test_evidence_that_is_not_a_json_safe_dict_is_refused_and_nothing_is_written(
        engine: MemoryEngine, evidence: Any, fragment: str) -> None:
    old, new = _pair(engine)
    before = _snapshot(engine)
    with pytest.raises(InvalidInputError) as info:
        lifecycle.supersede(engine.runtime, T, old, new, evidence=evidence)
    assert fragment in str(info.value)
    assert _snapshot(engine) == before


# -- unsupersede --------------------------------------------------------------------------------
def test_unsupersede_brings_it_back_to_recall_and_keeps_the_pair_apart(
        engine: MemoryEngine) -> None:
    old, new = _pair(engine)
    bystander = engine.add("Bruno lives in Faro", tenant=T).id
    engine.relate(new, bystander, "related_to", tenant=T)  # the new one keeps a link after
    lifecycle.supersede(engine.runtime, T, old, new, evidence=EVIDENCE)
    res = engine.recall("where does Alice live near the river", tenant=T, k=10,
                        min_activation=0, touch=False)  # keeps the new one's links
    assert old not in res.ids
    assert next(h for h in res.memories if h.id == new).supersedes == (old,)
    assert _kept_apart(engine, [old, new, bystander]) == set()

    back = engine.unsupersede(old, tenant=T)
    assert back.id == old and back.superseded_by is None
    assert engine.get(old, tenant=T).superseded_by is None
    assert [r.type for r in engine.relations(old, tenant=T)
            if r.type == "supersedes"] == []
    last = engine.history(old, tenant=T)[-1]
    assert (last.event, last.before, last.after) == (
        "unsuperseded", {"superseded_by": new}, {"superseded_by": None, "kept_apart": new})
    res = engine.recall("where does Alice live near the river", tenant=T, k=10,
                        min_activation=0, touch=False)
    assert old in res.ids  # back in default recall
    assert next(h for h in res.memories if h.id == new).supersedes == ()  # not a kept link

    pair = {frozenset((old, new))}
    assert _kept_apart(engine, [old, new]) == pair
    assert _kept_apart(engine, [old]) == pair  # the event is on the old one
    assert _kept_apart(engine, [bystander, new]) == set()
    assert _kept_apart(engine, [old, new], tenant="bob") == set()
    # a second supersession by hand and its undo: still the one pair
    engine.supersede(new, old, tenant=T)
    engine.unsupersede(new, tenant=T)
    assert _kept_apart(engine, [old, new]) == pair


def test_unsupersede_of_a_forgotten_memory_leaves_it_forgotten(engine: MemoryEngine) -> None:
    old, new = _pair(engine)
    engine.supersede(old, new, tenant=T)
    engine.forget(old, tenant=T)
    back = engine.unsupersede(old, tenant=T)
    assert back.superseded_by is None and back.deleted
    assert old not in _ids(engine)


def test_unsupersede_refusals_write_nothing(engine: MemoryEngine) -> None:
    old, new = _pair(engine)
    plain = engine.add("Alice plays the violin", tenant=T).id
    bobs = engine.add("Bob collects stamps", tenant="bob").id
    engine.supersede(old, new, tenant=T)
    before = _snapshot(engine)
    with pytest.raises(InvalidInputError, match=f"memory '{plain}' in tenant 'alice' is not "
                                                "superseded"):
        engine.unsupersede(plain, tenant=T)
    with pytest.raises(MemoryNotFoundError) as unknown:
        engine.unsupersede("no-such-id", tenant=T)
    with pytest.raises(MemoryNotFoundError) as foreign:
        engine.unsupersede(bobs, tenant=T)
    assert str(foreign.value).replace(bobs, "<id>") == str(unknown.value).replace(
        "no-such-id", "<id>")  # another tenant's id: the very words of an unknown one
    with pytest.raises(MemoryNotFoundError):
        engine.unsupersede(old, tenant="bob")
    with pytest.raises(InvalidInputError, match="old_id="):
        engine.unsupersede(["not", "an", "id"], tenant=T)  # type: ignore[arg-type]
    assert _snapshot(engine) == before
    assert engine.get(old, tenant=T).superseded_by == new


# -- supersede_in: inside a write transaction another write holds -------------------------------
def test_a_supersession_inside_ingests_transaction_shows_in_the_next_recall(
        engine: MemoryEngine) -> None:
    """The detector calls ``supersede_in`` inside ingest's transaction, whose scope declares
    the tenant's memories changed: the kept links and rows of the two memories must not
    outlive it (recall has kept them just before)."""
    old, new = _pair(engine)
    engine.relate(old, new, "related_to", tenant=T)  # links for recall to read and keep
    rt = engine.runtime
    res = engine.recall("where does Alice live near the river", tenant=T, k=10,
                        min_activation=0, touch=False)
    assert old in res.ids and next(h for h in res.memories if h.id == new).supersedes == ()
    assert rt.caches.kept_links(T, "hidden")[new] == ((), ())  # recall kept what it read
    with rt.exclusive(Changes(tenant=T, memories=True)), rt.sql.begin() as conn:  # as ingest
        lifecycle.supersede_in(rt, conn, T, old, new, rt.now(), EVIDENCE)
    res = engine.recall("where does Alice live near the river", tenant=T, k=10,
                        min_activation=0, touch=False)
    assert old not in res.ids
    assert next(h for h in res.memories if h.id == new).supersedes == (old,)
    assert engine.history(old, tenant=T)[-1].after == {"superseded_by": new,
                                                       "evidence": EVIDENCE}


def test_supersede_in_refuses_before_it_writes(engine: MemoryEngine) -> None:
    old, new = _pair(engine)
    bobs = engine.add("Bob lives in Porto", tenant="bob").id
    gone = engine.add("Alice once lived in Coimbra", tenant=T).id
    engine.forget(gone, tenant=T)
    rt = engine.runtime
    before = _snapshot(engine)
    for args, error, fragment in (
            ((old, old), InvalidInputError, "cannot supersede itself"),
            ((old, bobs), MemoryNotFoundError, f"no memory with id '{bobs}' in tenant 'alice'"),
            (("nope", new), MemoryNotFoundError, "no memory with id 'nope'"),
            ((gone, new), MemoryDeletedError, "is deleted; restore it first")):
        with pytest.raises(error, match=fragment), \
                rt.writing(Changes(tenant=T, relations=True)) as conn:
            lifecycle.supersede_in(rt, conn, T, *args, rt.now())
    assert _snapshot(engine) == before


# -- export and import ---------------------------------------------------------------------------
def test_a_pair_kept_apart_stays_apart_after_export_and_import(
        engine: MemoryEngine, tmp_path: Path) -> None:
    old, new = _pair(engine)
    lifecycle.supersede(engine.runtime, T, old, new, evidence=EVIDENCE)
    engine.unsupersede(old, tenant=T)
    other_old, other_new = (engine.add("The launch is on April 14th", tenant=T).id,
                            engine.add("The launch moved to April 28th", tenant=T).id)
    engine.supersede(other_old, other_new, tenant=T)
    out = tmp_path / "alice.jsonl"
    engine.export(out, tenant=T)
    events = [r for r in map(json.loads, out.read_text().splitlines())
              if r["type"] == "event" and r["event"] in ("superseded", "unsuperseded")]
    assert {(r["memory_id"], r["event"]) for r in events} == {
        (old, "superseded"), (old, "unsuperseded"), (other_old, "superseded")}

    with MemoryEngine.open(tmp_path / "other", config=engine.config, clock=engine.clock,
                           embedder=engine.embedder) as other:
        other.import_(out)
        assert _kept_apart(other, [old, new, other_old, other_new]) == {frozenset((old, new))}
        assert other.get(old, tenant=T).superseded_by is None
        assert other.get(other_old, tenant=T).superseded_by == other_new
        assert old in _ids(other)
        assert other.history(old, tenant=T)[-2].after == {"superseded_by": new,
                                                          "evidence": EVIDENCE}
        other.unsupersede(other_old, tenant=T)  # an imported supersession can be undone
        assert [r.type for r in other.relations(other_old, tenant=T)] == []


# -- the command line ----------------------------------------------------------------------------
@pytest.mark.integration
def test_cli_unsupersede_prints_what_it_undid(tmp_path: Path, real_embedder: Any) -> None:
    from mnemonia.cli import app
    from typer.testing import CliRunner

    store = tmp_path / "s"
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        old, new = _pair(engine, "fam")
        engine.supersede(old, new, tenant="fam")
    run = CliRunner().invoke
    base = ["--path", str(store), "--tenant", "fam"]
    out = run(app, ["unsupersede", old, *base], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    # rich wraps at the width it detects (under pytest-xdist not always COLUMNS)
    assert " ".join(out.output.split()) == f"{old} is no longer superseded by {new} (kept apart)"
    again = run(app, ["unsupersede", old, *base], env={"COLUMNS": "200"})
    assert again.exit_code == 2 and "is not superseded" in again.output
    assert "Traceback" not in again.output
    unknown = run(app, ["unsupersede", "nope", *base], env={"COLUMNS": "200"})
    assert unknown.exit_code == 2 and "no memory with id 'nope' in tenant 'fam'" in unknown.output
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        assert engine.get(old, tenant="fam").superseded_by is None
        assert _kept_apart(engine, [old, new], "fam") == {frozenset((old, new))}
        assert old in _ids(engine, tenant="fam")
