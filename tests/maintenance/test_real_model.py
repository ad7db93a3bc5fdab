"""The maintenance jobs on the bundled all-MiniLM-L6-v2 (real Chroma, real SQLite)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from maint_helpers import events, row
from mnemonia import ManualClock, MemoryEngine

pytestmark = pytest.mark.integration

NOTES = [
    "The quarterly planning offsite is in Porto from May 12 to May 14.",
    "the quarterly planning offsite is in Porto from May 12 to May 14",
    "Remember: the quarterly planning offsite is in Porto from May 12 to May 14.",
    "Dana's flight to Porto lands at 18:40 on May 11.",
    "The hotel booking code for the offsite is QX-4471.",
    "Our espresso machine needs a new gasket.",
]


def test_concept_replaces_its_members_in_recall_on_the_real_model(
        real_engine: MemoryEngine) -> None:
    ids = [m.id for m in real_engine.add_many([{"text": t} for t in NOTES], tenant="team")]
    report = real_engine.consolidate(tenant="team")
    assert report.groups == 1 and report.members_consolidated == 3
    (cid,) = report.concept_ids
    res = real_engine.recall("When is the planning offsite in Porto?", tenant="team", k=3)
    assert res.ids[0] == cid
    assert not set(ids[:3]) & set(res.ids)
    assert ids[3] in res.ids or ids[4] in res.ids  # the related notes still come up


def test_use_recall_and_review_on_the_real_model(real_engine: MemoryEngine,
                                                 clock: ManualClock) -> None:
    ids = [m.id for m in real_engine.add_many([{"text": t, "importance": 0.6} for t in NOTES],
                                              tenant="team")]
    real_engine.enrich(tenant="team")
    res = real_engine.recall("what's the hotel booking code?", tenant="team", k=3)
    assert res.ids[0] == ids[4]
    used = real_engine.report_use("Your hotel booking code for the offsite is QX-4471.",
                                  res.ids, tenant="team")
    assert used == [ids[4]]
    clock.advance(timedelta(minutes=1))
    report = real_engine.review(tenant="team")
    assert ids[4] in report.ids and report.from_use == 1
    (ev,) = events(real_engine, "team", ids[4], "reviewed")
    assert ev.after is not None and (ev.after["quality"], ev.after["source"]) == (5, "use")
    assert row(real_engine, ids[4]).utility == pytest.approx(0.55)


def test_enriched_relations_on_the_real_model(real_engine: MemoryEngine) -> None:
    mems = real_engine.add_many([{"text": t, "importance": 0.5, "session_id": "chat"}
                                 for t in NOTES[3:5]], tenant="team")
    a, b = (m.id for m in mems)
    real_engine.enrich(tenant="team")
    rels = {(r.src, r.dst, r.type) for r in real_engine.relations(b, tenant="team")}
    assert (a, b, "follows") in rels
    assert "name:porto" in real_engine.get(a, tenant="team").entities
