"""Recall's caches live in one object (``engine.runtime.caches``) and are dropped in one place
(issue 32 point 3): a write's scope says what it changes, the store's write methods report
the relations and word vectors they write, and the cache drops what that made stale. A
write of the tenant shows in the next recall; a write of another tenant leaves this tenant's
caches alone."""

from __future__ import annotations

import re
from pathlib import Path

from mnemonia import MemoryEngine
from mnemonia.caches import Changes, RecallCache

CORE = Path(__file__).resolve().parents[2] / "shared" / "mnemonia"


def _seed(engine: MemoryEngine) -> dict[str, str]:
    ids = {
        "a1": engine.add("Priya reviews the quarterly budget", tenant="a",
                         entities=["person:priya"]).id,
        "a2": engine.add("The budget review moved to Thursday", tenant="a",
                         entities=["topic:budget"]).id,
        "a3": engine.add("Omar keeps the budget spreadsheet", tenant="a").id,
        "b1": engine.add("Ben feeds the cat salmon on Sundays", tenant="b",
                         entities=["person:ben"]).id,
        "b2": engine.add("The cat sleeps on the sofa", tenant="b").id,
    }
    engine.relate(ids["a1"], ids["a3"], "related_to", tenant="a")
    engine.relate(ids["b1"], ids["b2"], "related_to", tenant="b")
    for tenant, query in (("a", "who reviews the budget"), ("b", "what does the cat eat")):
        engine.recall(query, tenant=tenant, k=5, min_activation=0.0, touch=False)
    return ids


def _recall(engine: MemoryEngine, tenant: str, query: str) -> list[str]:
    return engine.recall(query, tenant=tenant, k=10, min_activation=0.0, touch=False).ids


def test_the_runtime_holds_recall_caches_in_one_attribute(engine: MemoryEngine) -> None:
    caches = engine.runtime.caches
    assert isinstance(caches, RecallCache)
    _seed(engine)
    assert {"a", "b"} <= set(caches.entity_indexes)
    for name in ("entity_indexes", "label_vectors", "cue_indexes", "term_index", "links",
                 "keyword_words", "query_cache", "recent_queries"):
        assert not hasattr(engine.runtime, name), name


def test_an_add_drops_its_tenants_entity_index_and_no_other(engine: MemoryEngine) -> None:
    _seed(engine)
    caches = engine.runtime.caches
    kept_b = caches.entity_indexes["b"]
    new = engine.add("Priya asked Omar to check the budget", tenant="a",
                     entities=["person:omar"]).id
    assert "a" not in caches.entity_indexes  # dropped by the add's scope
    assert caches.entity_indexes["b"] is kept_b  # another tenant's index stays
    assert new in _recall(engine, "a", "Omar budget")
    assert "person:omar" in caches.entity_indexes["a"].names  # built afresh, with the add
    engine.add("Ben bought a new cat bed", tenant="b")
    assert "a" in caches.entity_indexes and "b" not in caches.entity_indexes


def test_relate_and_supersede_drop_the_tenants_kept_links(engine: MemoryEngine) -> None:
    ids = _seed(engine)
    caches = engine.runtime.caches
    assert caches.kept_links("a", "spread") and caches.kept_links("b", "spread")
    kept_b = dict(caches.kept_links("b", "spread"))
    engine.relate(ids["a1"], ids["a2"], "implies", tenant="a")
    assert not caches.kept_links("a", "spread")
    assert dict(caches.kept_links("b", "spread")) == kept_b
    _recall(engine, "a", "who reviews the budget")
    assert any(ids["a2"] in link for link in caches.kept_links("a", "spread")[ids["a1"]])

    assert ids["a1"] in _recall(engine, "a", "who reviews the budget")
    engine.supersede(ids["a1"], ids["a2"], tenant="a")
    assert not caches.kept_links("a", "spread")
    assert dict(caches.kept_links("b", "spread")) == kept_b
    assert ids["a1"] not in _recall(engine, "a", "who reviews the budget")


def test_forget_restore_and_feedback_show_in_the_next_recall(engine: MemoryEngine) -> None:
    ids = _seed(engine)
    caches = engine.runtime.caches
    kept_b = caches.entity_indexes["b"]
    engine.forget(ids["a1"], tenant="a")
    assert "a" not in caches.entity_indexes and caches.entity_indexes["b"] is kept_b
    assert ids["a1"] not in _recall(engine, "a", "who reviews the budget")
    engine.restore(ids["a1"], tenant="a")
    assert "a" not in caches.entity_indexes
    assert ids["a1"] in _recall(engine, "a", "who reviews the budget")

    engine.recall("what does the cat eat", tenant="b", k=5, min_activation=0.0)  # builds cues
    engine.recall("who reviews the budget", tenant="a", k=5, min_activation=0.0)
    cues_b = caches.cue_indexes["b"]
    engine.feedback(ids["a1"], 5, tenant="a", query="budget owner")
    assert "a" not in caches.cue_indexes and caches.cue_indexes["b"] is cues_b
    engine.recall("who reviews the budget", tenant="a", k=5, min_activation=0.0)
    assert "budget owner" in caches.cue_indexes["a"].queries

    engine.forget(ids["a2"], tenant="a", hard=True)  # a purge: every cache of the tenant
    assert "a" not in caches.entity_indexes and "a" not in caches.cue_indexes
    assert not caches.kept_links("a", "spread")
    assert caches.entity_indexes["b"] is kept_b and caches.cue_indexes["b"] is cues_b


def test_a_relation_write_drops_the_kept_links_it_touches_before_its_commit(
        engine: MemoryEngine) -> None:
    """The store reports the memories whose relations an insert touches as it writes them:
    their kept links go at once (and again once the write's scope ends); the others stay."""
    ids = _seed(engine)
    caches = engine.runtime.caches
    # recall keeps the links of the memories it reached (a1 and a3 spread); a2 has none yet
    caches.links_of("a", "spread", [ids["a1"], ids["a2"], ids["a3"]],
                    lambda ask: {m: () for m in ask})
    everyone = set(caches.kept_links("a", "spread"))
    assert {ids["a1"], ids["a2"], ids["a3"]} <= everyone
    rt = engine.runtime
    with rt.writing(Changes(tenant="a", memories=True)) as conn:
        rt.sql.graph.insert_edges(conn, "a", {(ids["a1"], ids["a2"], "causes"): 0.5}, 0.0)
        assert set(caches.kept_links("a", "spread")) == everyone - {ids["a1"], ids["a2"]}
    assert "a" not in caches.entity_indexes and "b" in caches.entity_indexes


def test_no_service_drops_a_cache_by_hand() -> None:
    """Only the runtime's write scopes and the store's report reach the cache's drops."""
    reach = re.compile(r"\bcaches\.(changed|changing|_\w+)\b|\bforget_\w+\(|links_written")
    found = [f"{p.relative_to(CORE)}:{i}: {line.strip()}"
             for p in sorted(CORE.rglob("*.py")) if p.name not in ("caches.py", "runtime.py")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
             if reach.search(line)]
    assert found == []
