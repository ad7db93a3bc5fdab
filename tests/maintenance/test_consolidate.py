"""Consolidation: LSH candidates + exact Jaccard, deterministic groups, concept memories,
part_of relations, hidden members, idempotence, the summariser."""

from __future__ import annotations

import json

import numpy as np
import pytest
from maint_helpers import events, row, set_rows
from mnemonia import MemoryEngine
from mnemonia import maintenance as mt
from mnemonia.errors import InvalidInputError

WORDS = ["apple", "river", "stone", "cloud", "lamp", "forest", "violin", "garden", "pepper",
         "mirror", "candle", "harbor", "copper", "meadow"]


def words(*idx: int) -> str:
    return " ".join(WORDS[i] for i in idx)


TEAM = [
    "The weekly team sync happens every Monday at ten in room B.",
    "the weekly team sync happens every monday at ten in room b",
    "The weekly team sync happens every Monday at ten in room C. Bring the roadmap.",
]


def _add_team(engine: MemoryEngine, tenant: str = "t") -> list[str]:
    mems = engine.add_many(
        [{"text": TEAM[0], "importance": 0.9, "entities": ["room:b"], "topic": "work"},
         {"text": TEAM[1], "importance": 0.6, "entities": ["team:core"], "topic": "work"},
         {"text": TEAM[2], "importance": 0.3, "topic": "work"},
         {"text": "Grandma's apple pie needs cinnamon and two eggs", "importance": 0.5},
         {"text": "The car is due for an oil change in March", "importance": 0.5}],
        tenant=tenant)
    return [m.id for m in mems]


def test_near_duplicates_become_one_concept(engine: MemoryEngine) -> None:
    ids = _add_team(engine)
    report = engine.consolidate(tenant="t")
    assert (report.scanned, report.groups, report.concepts_created) == (5, 1, 1)
    assert report.members_consolidated == 3
    (cid,) = report.concept_ids
    concept = engine.get(cid, tenant="t")
    assert concept.kind == "concept"
    # merged in group order (seed = highest priority first) without repeated sentences
    assert concept.text == ("The weekly team sync happens every Monday at ten in room B. "
                            "The weekly team sync happens every Monday at ten in room C. "
                            "Bring the roadmap.")
    assert concept.importance == pytest.approx((0.9 + 0.6 + 0.3) / 3)
    assert {"room:b", "team:core"} <= set(concept.entities)
    assert concept.topic == "work"
    assert concept.metadata["consolidated_from"] == ids[:3]
    for mid in ids[:3]:
        member = engine.get(mid, tenant="t")
        assert member.consolidated_into == cid and not member.deleted  # members stay
        rels = [(r.src, r.dst, r.type) for r in engine.relations(mid, tenant="t")]
        assert (mid, cid, "part_of") in rels
        (ev,) = events(engine, "t", mid, "consolidated")
        assert ev.before == {"consolidated_into": None} and ev.after == {"consolidated_into": cid}
    assert events(engine, "t", cid, "consolidated")[0].after == {"members": ids[:3], "count": 3}
    assert concept.metadata["consolidated_count"] == 3
    for mid in ids[3:]:
        assert engine.get(mid, tenant="t").consolidated_into is None
    assert engine.stats("t")["consolidated"] == 3


def test_a_second_run_creates_nothing(engine: MemoryEngine) -> None:
    _add_team(engine)
    first = engine.consolidate(tenant="t")
    stats = engine.stats("t")
    second = engine.consolidate(tenant="t")
    assert first.concepts_created == 1
    assert (second.groups, second.concepts_created, second.members_consolidated) == (0, 0, 0)
    assert engine.stats("t") == stats


def test_members_are_hidden_when_their_concept_is_recalled(engine: MemoryEngine) -> None:
    ids = _add_team(engine)
    (cid,) = engine.consolidate(tenant="t").concept_ids
    res = engine.recall("weekly team sync on Monday", tenant="t", k=10, min_activation=0)
    assert cid in res.ids
    assert not set(ids[:3]) & set(res.ids)
    assert not set(ids[:3]) & {h.memory.id for h in res.episodes}
    # without their concept (soft-deleted), the members come back
    engine.forget(cid, tenant="t")
    res = engine.recall("weekly team sync on Monday", tenant="t", k=10, min_activation=0)
    assert set(ids[:3]) <= set(res.ids)


def test_grouping_is_seeded_by_priority(make_engine) -> None:  # type: ignore[no-untyped-def]
    # J(A,B) = 9/11, J(B,C) = 9/11, J(A,C) = 8/12 < 0.7: who joins depends on the seed order
    a, b, c = words(*range(10)), words(*range(9), 10), words(*range(8), 10, 11)
    for name, imps, expected in (("high-a", (0.9, 0.5, 0.1), ("a", "b")),
                                 ("high-c", (0.1, 0.5, 0.9), ("c", "b"))):
        eng = make_engine(name)
        mems = eng.add_many([{"text": t, "importance": imp, "id": f"{key}-{name}"}
                             for key, t, imp in zip("abc", (a, b, c), imps, strict=True)],
                            tenant="t")
        set_rows(eng, [m.id for m in mems], state="batched")
        report = eng.consolidate(tenant="t")
        assert report.groups == 1
        concept = eng.get(report.concept_ids[0], tenant="t")
        assert concept.metadata["consolidated_from"] == [f"{k}-{name}" for k in expected]


def test_jaccard_threshold_is_exact(engine: MemoryEngine) -> None:
    base = words(*range(10))
    at = words(*range(7))  # subset of 7 of 10: Jaccard exactly 0.7 -> joins
    below = words(*range(7), 12)  # 7 of 11: 0.636 -> does not
    mems = engine.add_many([{"text": base, "importance": 0.9}, {"text": at},
                            {"text": below, "importance": 0.1}], tenant="t")
    report = engine.consolidate(tenant="t")
    assert report.groups == 1
    concept = engine.get(report.concept_ids[0], tenant="t")
    assert concept.metadata["consolidated_from"] == [mems[0].id, mems[1].id]
    assert engine.get(mems[2].id, tenant="t").consolidated_into is None


def test_min_group_and_threshold_come_from_config(make_engine) -> None:  # type: ignore[no-untyped-def]
    eng = make_engine(consolidation_min_group=3)
    eng.add_many([{"text": TEAM[0]}, {"text": TEAM[1]}, {"text": "unrelated words here"}],
                 tenant="t")
    assert eng.consolidate(tenant="t").groups == 0  # a pair is below the minimum group size
    strict = make_engine("strict", consolidation_threshold=0.95)
    strict.add_many([{"text": TEAM[0]}, {"text": TEAM[2]}], tenant="t")
    assert strict.consolidate(tenant="t").groups == 0


def test_summariser_writes_the_concept_text(engine: MemoryEngine) -> None:
    seen: list[list[str]] = []

    def summarise(texts: list[str]) -> str:
        seen.append(texts)
        return f"Team sync: Mondays at ten ({len(texts)} notes)."

    ids = _add_team(engine)
    (cid,) = engine.consolidate(tenant="t", summariser=summarise).concept_ids
    assert seen == [[TEAM[0], TEAM[1], TEAM[2]]]
    assert engine.get(cid, tenant="t").text == "Team sync: Mondays at ten (3 notes)."
    assert engine.get(ids[0], tenant="t").consolidated_into == cid


def test_engine_level_summariser_is_the_default(tmp_path, clock, config, hashing_embedder) -> None:  # type: ignore[no-untyped-def]
    with MemoryEngine.open(tmp_path / "s", config=config, clock=clock, embedder=hashing_embedder,
                           summariser=lambda texts: "SUMMARY " + str(len(texts))) as eng:
        _add_team(eng)
        (cid,) = eng.consolidate(tenant="t").concept_ids
        assert eng.get(cid, tenant="t").text == "SUMMARY 3"


def test_a_bad_summariser_result_is_refused(engine: MemoryEngine) -> None:
    _add_team(engine)
    with pytest.raises(InvalidInputError, match="summariser"):
        engine.consolidate(tenant="t", summariser=lambda texts: "   ")
    assert engine.stats("t")["by_kind"]["concept"] == 0
    with pytest.raises(InvalidInputError, match="summariser"):
        engine.consolidate(tenant="t", summariser="not callable")  # type: ignore[arg-type]


def test_concept_takes_the_highest_member_state(engine: MemoryEngine) -> None:
    ids = _add_team(engine)
    set_rows(engine, ids[:3], state="skipped", enriched_at=None)
    set_rows(engine, ids[1], state="immediate")
    (cid,) = engine.consolidate(tenant="t").concept_ids
    r = row(engine, cid)
    assert r.state == "immediate" and r.enriched_at is not None  # enriched at once


def test_deleted_and_consolidated_memories_are_not_regrouped(engine: MemoryEngine) -> None:
    ids = _add_team(engine)
    engine.forget(ids[0], tenant="t")
    report = engine.consolidate(tenant="t")
    assert report.scanned == 4
    concept = engine.get(report.concept_ids[0], tenant="t")
    assert concept.metadata["consolidated_from"] == ids[1:3]
    assert engine.get(ids[0], tenant="t").consolidated_into is None


def test_an_interrupted_run_is_finished_without_a_duplicate(engine: MemoryEngine) -> None:
    ids = _add_team(engine)
    # what a crash between writing the concept and marking its members leaves behind
    with engine.sql.connect() as conn:
        rows = engine.sql.memories.rows(conn, "t", ids[:3])
    engine.add_many([mt.concept_item(engine.runtime, "t", ids[:3], rows, None)], tenant="t")
    report = engine.consolidate(tenant="t")
    assert report.concepts_created == 0 and report.members_consolidated == 3
    assert engine.stats("t")["by_kind"]["concept"] == 1
    cid = engine.get(ids[0], tenant="t").consolidated_into
    assert cid == mt.concept_id("t", ids[:3])


def test_tenants_are_consolidated_separately(engine: MemoryEngine) -> None:
    engine.add("The weekly team sync happens every Monday at ten in room B.", tenant="a")
    engine.add("the weekly team sync happens every monday at ten in room b", tenant="b")
    assert engine.consolidate(tenant="a").groups == 0
    assert engine.consolidate(tenant="b").groups == 0


@pytest.mark.parametrize("threshold", [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
def test_lsh_banding_keeps_pairs_at_the_threshold(threshold: float) -> None:
    bands, rows = mt.lsh_params(threshold)
    assert bands * rows <= mt.MINHASH_PERMUTATIONS
    assert 1 - (1 - threshold ** rows) ** bands >= mt.LSH_RECALL_AT_THRESHOLD


@pytest.mark.slow
def test_candidates_cover_every_memory_not_a_sample(engine: MemoryEngine) -> None:
    """Two near-duplicates 5,000 memories apart in a 5,200-memory tenant are still found."""
    rng = np.random.default_rng(7)
    n = 5200
    vecs = rng.normal(size=(n, engine.embedder.dimension)).astype(np.float32)
    texts = [f"entry{i} carries token{i} and marker{i} plus label{i}" for i in range(n)]
    texts[5150] = texts[7].upper() + "!"  # same word set as memory 7
    texts[3000] = "entry3000 carries token3000 and marker3000 plus label3000 today"
    texts[4100] = "entry3000 carries token3000 and marker3000 plus label3000"
    items = [{"text": t, "embedding": v.tolist(), "id": f"m{i}"}
             for i, (t, v) in enumerate(zip(texts, vecs, strict=True))]
    for start in range(0, n, 500):
        engine.add_many(items[start:start + 500], tenant="big")
    report = engine.consolidate(tenant="big")
    assert report.scanned == n and report.groups == 2
    grouped = sorted(tuple(sorted(json.loads(row(engine, c).metadata)["consolidated_from"]))
                     for c in report.concept_ids)
    assert grouped == [("m3000", "m4100"), ("m5150", "m7")]


def test_a_large_family_of_duplicates_is_one_concept(engine: MemoryEngine) -> None:
    mems = engine.add_many([{"text": "ok, thanks!" if i % 2 else "OK thanks"}
                            for i in range(300)], tenant="t")
    report = engine.consolidate(tenant="t")
    assert (report.groups, report.members_consolidated) == (1, 300)
    concept = engine.get(report.concept_ids[0], tenant="t")
    assert concept.metadata["consolidated_count"] == 300
    assert len(concept.metadata["consolidated_from"]) == 100
    assert all(engine.get(m.id, tenant="t").consolidated_into == concept.id for m in mems)
    # 300 texts, two distinct sentences: each kept once
    assert concept.text in ("OK thanks. ok, thanks!", "ok, thanks! OK thanks")


def test_two_versions_of_one_fact_are_never_merged(engine: MemoryEngine) -> None:
    """Issue 34 point 2: "X is A" and "X is B" (Jaccard 0.78) stay apart, with or without a
    supersession between them; restatements of one value still merge."""
    same = "The shared build server for the whole project is Jenkins"
    other = "The shared build server for the whole project is Drone"
    ids = [m.id for m in engine.add_many([{"text": same}, {"text": same + "."},
                                          {"text": other}], tenant="t")]
    engine.consolidate(tenant="t")
    merged = {i: engine.get(i, tenant="t").consolidated_into for i in ids}
    assert merged[ids[0]] is not None and merged[ids[0]] == merged[ids[1]]
    assert merged[ids[2]] is None
    concept = engine.get(merged[ids[0]], tenant="t")
    assert "Drone" not in concept.text


def test_a_superseded_memory_is_not_consolidated(engine: MemoryEngine) -> None:
    a = engine.add("My monthly budget for groceries and rent is $1,500 in total", tenant="t")
    b = engine.add("My monthly budget for groceries and rent is $1,500 in total!", tenant="t")
    c = engine.add("Update: my monthly budget for groceries and rent is $2,000 in total now",
                   tenant="t")
    engine.supersede(a.id, c.id, tenant="t")
    engine.consolidate(tenant="t")
    assert engine.get(a.id, tenant="t").consolidated_into is None
    assert engine.get(b.id, tenant="t").superseded_by is not None  # detected at ingest
