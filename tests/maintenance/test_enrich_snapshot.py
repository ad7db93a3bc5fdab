"""Gatekeeper state at ingest, enrichment (now for immediate, at the sweep for batched, never
for skipped) and the snapshot."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from maint_helpers import row, set_rows
from mnemonia import ManualClock, MemoryEngine
from mnemonia.errors import InvalidInputError
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval

LONG = ("Caroline finally signed the lease for the sunny two bedroom flat near the harbour "
        "market after three weeks of viewings with her sister")


def _expected_state(engine: MemoryEngine, text: str, importance: float,
                    existing: list[str]) -> str:
    emb = engine.embedder
    vec = emb.embed_documents([text])[0]
    sims = [float(vec @ emb.embed_documents([t])[0]) for t in existing]
    novelty = min(1.0, max(0.0, 1.0 - max(sims, default=0.0)))
    tokens = len({w for w in text.lower().replace(",", " ").split()})
    g = reeval.gatekeeper_score(importance=importance, novelty=novelty, distinct_tokens=tokens)
    return reeval.gatekeeper_state(g)


def test_gatekeeper_sets_the_state_at_ingest(engine: MemoryEngine) -> None:
    seen: list[str] = []
    cases = [(LONG, 0.9, "immediate"), ("Buy oat milk", 0.5, "batched"),
             (LONG, 0.0, "skipped")]  # a duplicate (novelty 0) of no importance
    for text, importance, state in cases:
        assert _expected_state(engine, text, importance, seen) == state
        mem = engine.add(text, tenant="t", importance=importance)
        assert mem.state == state
        created = engine.history(mem.id, tenant="t")[0]
        assert created.event == "created" and created.after["state"] == state  # type: ignore[index]
        seen.append(text)


def test_immediate_is_enriched_now_batched_at_the_sweep_skipped_never(engine: MemoryEngine) -> None:
    hot = engine.add(LONG, tenant="t", importance=0.9)
    calm = engine.add("Caroline wants to repaint the flat kitchen in sage green", tenant="t",
                      importance=0.5, session_id="s1")
    dull = engine.add("ok", tenant="t", importance=0.0)
    set_rows(engine, dull.id, state="skipped")
    assert (hot.state, calm.state) == ("immediate", "batched")
    assert row(engine, hot.id).enriched_at is not None
    assert "name:caroline" in engine.get(hot.id, tenant="t").entities
    assert row(engine, calm.id).enriched_at is None
    assert "name:caroline" not in engine.get(calm.id, tenant="t").entities

    report = engine.enrich(tenant="t")
    assert (report.pending, report.enriched) == (1, 1)
    assert row(engine, calm.id).enriched_at is not None
    assert "name:caroline" in engine.get(calm.id, tenant="t").entities
    rels = {(r.src, r.dst, r.type) for r in engine.relations(calm.id, tenant="t")}
    assert (calm.id, hot.id, "same_entity") in rels
    assert row(engine, dull.id).enriched_at is None
    assert engine.enrich(tenant="t").pending == 0  # nothing left; skipped is never pending


def test_the_sweep_adds_related_to_and_follows(engine: MemoryEngine) -> None:
    texts = ["The garden hose leaks at the tap connector",
             "The garden hose leaks at the tap connector again today",
             "Order a new connector for the garden hose tap"]
    mems = engine.add_many([{"text": t, "session_id": "chores", "importance": 0.5}
                            for t in texts], tenant="t")
    ids = [m.id for m in mems]
    set_rows(engine, ids, state="batched", enriched_at=None)
    with engine.sql.begin() as conn:  # drop what ingest may have linked already
        from mnemonia.store import sql as S
        conn.execute(S.relations.delete())
    engine.enrich(tenant="t")
    vec = engine.embedder.embed_documents(texts)
    cos01 = float(np.dot(vec[0], vec[1]))
    assert cos01 >= engine.config.related_threshold
    rels = {(r.src, r.dst, r.type) for mid in ids for r in engine.relations(mid, tenant="t")}
    assert (ids[0], ids[1], "related_to") in rels or (ids[1], ids[0], "related_to") in rels
    assert (ids[0], ids[1], "follows") in rels and (ids[1], ids[2], "follows") in rels
    # enriched memories are scheduled for SM-2 (due now) and join the review pass
    assert all(engine.get(i, tenant="t").sm2.next_review is None for i in ids)
    assert set(engine.review(tenant="t").ids) == set(ids)


def test_snapshot_is_the_top_enriched_by_priority(make_engine, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(snapshot_size=3)
    texts = [f"fact{i} number{i} about thing{i}" for i in range(6)]
    mems = eng.add_many([{"text": t, "importance": 0.1 + 0.15 * i}
                         for i, t in enumerate(texts)], tenant="t")
    ids = [m.id for m in mems]
    set_rows(eng, ids, state="batched", enriched_at=None)
    assert eng.snapshot("t") == ""  # nothing enriched yet
    eng.enrich(tenant="t")
    set_rows(eng, ids[5], state="skipped")  # the most important one, but skipped
    clock.advance(timedelta(hours=3))
    now = clock.now()
    ranked = sorted(
        (m for m in eng.list(tenant="t") if m.id != ids[5]),
        key=lambda m: -prio.priority(importance=m.importance, created_at=m.created_at,
                                     accessed_at=m.accessed_at, access_count=m.access_count,
                                     stability=m.stability, now=now))
    text = eng.snapshot("t")
    assert text.splitlines() == ["MEMORY SNAPSHOT"] + [f"- {m.text}" for m in ranked[:3]]
    assert len(eng.snapshot("t", limit=10).splitlines()) == 1 + 5
    eng.forget(ranked[0].id, tenant="t")
    assert f"- {ranked[0].text}" not in eng.snapshot("t").splitlines()
    with pytest.raises(InvalidInputError):
        eng.snapshot("t", limit=0)


def test_snapshot_shows_a_concept_instead_of_its_members(engine: MemoryEngine) -> None:
    texts = ["Standup is at 9:30 every weekday in the east room",
             "standup is at 9:30 every weekday in the east room.",
             "Lunch orders close at eleven"]
    ids = [m.id for m in engine.add_many([{"text": t, "importance": 0.8} for t in texts],
                                         tenant="t")]
    set_rows(engine, ids, state="batched", enriched_at=None)
    engine.enrich(tenant="t")
    (cid,) = engine.consolidate(tenant="t").concept_ids
    assert row(engine, cid).state == "batched"  # like its members: enriched at the sweep
    # until the concept is enriched, its members stand for themselves
    assert len(engine.snapshot("t", limit=10).splitlines()) == 1 + 3
    assert engine.enrich(tenant="t").enriched == 1
    lines = engine.snapshot("t", limit=10).splitlines()
    concept = engine.get(cid, tenant="t")
    assert concept.text.lower().rstrip(".") == texts[0].lower()  # one sentence, merged once
    assert sorted(lines[1:]) == sorted([f"- {concept.text}", f"- {texts[2]}"])
