"""Recall's caches live in one object (``engine.runtime.caches``) and are dropped in one place
(issue 32 point 3): a write's scope says what it changes, the store's write methods report
the relations and word vectors they write, and the cache drops what that made stale. A
write of the tenant shows in the next recall; a write of another tenant leaves this tenant's
caches alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mnemonia import MemoryEngine
from mnemonia.caches import Changes, RecallCache
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import StoreError

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


def _fresh_entity_index(engine: MemoryEngine, tenant: str) -> tuple[list[str], dict[str, int], int]:
    """What a full read of the tenant gives the entity index: names, counts, active."""
    rt = engine.runtime
    with rt.reading() as conn:
        rows = sorted(rt.sql.graph.entity_counts(conn, tenant))
        return [n for n, _ in rows], dict(rows), rt.sql.memories.active_count(conn, tenant)


def test_an_add_counts_itself_into_its_tenants_entity_index_and_no_other(
        engine: MemoryEngine) -> None:
    """An add that went through keeps the tenant's entity index (no read of the whole
    tenant at the next recall): the next recall counts the new memories and their entities
    in, equal to an index read afresh; another tenant's index stays as it was."""
    _seed(engine)
    caches = engine.runtime.caches
    kept_a, kept_b = caches.entity_indexes["a"], caches.entity_indexes["b"]
    new = engine.add("Priya asked Omar to check the budget", tenant="a",
                     entities=["person:omar", "person:priya"]).id
    assert caches.entity_indexes["a"] is kept_a  # kept, the add pending
    assert caches.entity_indexes["b"] is kept_b  # another tenant's index stays
    reads = []
    counts = engine.runtime.sql.graph.entity_counts
    engine.runtime.sql.graph.entity_counts = lambda *a: reads.append(a) or counts(*a)
    assert new in _recall(engine, "a", "Omar budget")
    assert not reads  # counted in, not read again
    idx = caches.entity_indexes["a"]
    assert idx is not kept_a and "person:omar" not in kept_a.names
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert idx.df["person:priya"] == 2 and idx.active == 4
    assert idx.matrix is not None and idx.matrix.shape[0] == len(idx.names)
    engine.add("Ben bought a new cat bed", tenant="b")
    assert caches.entity_indexes["a"] is idx and caches.entity_indexes["b"] is kept_b
    _recall(engine, "b", "cat bed")
    assert (caches.entity_indexes["b"].names, caches.entity_indexes["b"].df,
            caches.entity_indexes["b"].active) == _fresh_entity_index(engine, "b")


def test_many_adds_between_recalls_count_in_like_a_fresh_read(engine: MemoryEngine) -> None:
    """Adds of one or several memories, some naming new entities, some none, between
    recalls: the kept entity index always equals one read afresh, label vectors included."""
    _seed(engine)
    caches = engine.runtime.caches
    names = ["person:priya", "person:omar", "place:lisbon", "topic:budget", "person:zoe"]
    for step in range(12):
        batch = [{"text": f"Note {step}-{j} about the budget and {names[(step + j) % 5]}",
                  "entities": names[(step + j) % 5:(step + j) % 5 + step % 3]}
                 for j in range(1 + step % 3)]
        engine.add_many(batch, tenant="a")
        if step % 2:
            _recall(engine, "a", "budget notes")
            idx = caches.entity_indexes["a"]
            assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
            assert idx.matrix is not None
            fresh = engine.runtime.embedder.embed_documents(idx.labels)
            assert idx.matrix.shape == fresh.shape and abs(idx.matrix - fresh).max() < 1e-6


def test_the_enrichment_sweep_counts_its_entity_links_in(engine: MemoryEngine) -> None:
    """Enrichment links the entities it extracts to stored memories: the kept index counts
    them in (no read of the whole tenant), equal to an index read afresh."""
    _seed(engine)
    for text in ("Lena Park met Omar in Lisbon", "Lena Park moved to Porto",
                 "The Porto office opens in May"):
        engine.add(text, tenant="a")
    _recall(engine, "a", "budget")
    caches = engine.runtime.caches
    kept = caches.entity_indexes["a"]
    report = engine.enrich(tenant="a")
    assert report.enriched >= 3
    assert caches.entity_indexes["a"] is kept  # kept, the sweep's links pending
    _recall(engine, "a", "Lena Park")
    idx = caches.entity_indexes["a"]
    assert idx is not kept and (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert idx.df["name:lena park"] == 2


def test_eviction_and_consolidation_keep_the_entity_index_right(engine: MemoryEngine) -> None:
    """An eviction soft-deletes memories: the kept index counts them and their entity links
    out (an entity no memory names any more leaves it); consolidation adds a concept (counted
    in) and marks its members, which changes nothing the index counts. Neither makes the
    next recall read the whole tenant, and the index equals one read afresh."""
    _seed(engine)
    team = ["The weekly team sync happens every Monday at ten in room B",
            "the weekly team sync happens every monday at ten in room b",
            "The weekly team sync happens every Monday at ten in room C. Bring the roadmap."]
    engine.add_many([{"text": t, "entities": ["room:b", f"team:t{j}"], "importance": 0.9}
                     for j, t in enumerate(team)]
                    + [{"text": f"Old note {j} about the parking lot", "importance": 0.0,
                        "entities": [f"lot:{j}", "topic:parking"]} for j in range(6)],
                    tenant="a")
    caches, graph = engine.runtime.caches, engine.runtime.sql.graph
    reads: list[str] = []
    counts = graph.entity_counts

    def recall_reading_nothing_whole(query: str) -> None:
        graph.entity_counts = lambda *a: reads.append(a[1]) or counts(*a)  # type: ignore
        try:
            _recall(engine, "a", query)
        finally:
            graph.entity_counts = counts  # type: ignore[method-assign]
        assert not reads

    recall_reading_nothing_whole("parking")
    kept = caches.entity_indexes["a"]
    assert kept.df["topic:parking"] == 6 and kept.active == 12

    evicted = engine.evict(tenant="a").ids
    assert evicted and caches.entity_indexes["a"] is kept  # kept, the eviction pending
    recall_reading_nothing_whole("parking")
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert idx.active == 12 - len(evicted) and len(idx.names) < len(kept.names)
    assert idx.matrix is not None and idx.matrix.shape[0] == len(idx.names)

    report = engine.consolidate(tenant="a")
    assert report.concepts_created == 1 and caches.entity_indexes["a"] is idx
    recall_reading_nothing_whole("team sync")
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert idx.df["room:b"] == 4


def test_a_replace_and_a_purge_keep_what_recall_kept_right(engine: MemoryEngine) -> None:
    """A memory replaced in place (``add_many(replace=True)``, a LangGraph store's ``put`` of
    a key it holds) has its old entity links counted out of the kept entity index and its new
    ones in; a purge (a hard ``forget``, a store's ``delete``, the TTL sweep) counts its
    memories out, those deleted already included as nothing. Neither makes the next recall
    read the whole tenant, and the index equals one read afresh. A purge drops the kept
    links of the memories related to the purged ones (and the tenant's use cues), no other."""
    ids = _seed(engine)
    caches, graph = engine.runtime.caches, engine.runtime.sql.graph
    extra = engine.add_many([
        {"text": "Zoe books the budget offsite in Lisbon", "entities": ["person:zoe",
                                                                        "place:lisbon"]},
        {"text": "Zoe flies to Lisbon on Friday", "entities": ["person:zoe"]},
        {"text": "The offsite agenda is due Monday", "entities": ["topic:offsite"]},
    ], tenant="a")
    z1, z2, _ = (m.id for m in extra)
    engine.relate(z1, z2, "related_to", tenant="a")
    reads: list[str] = []
    counts = graph.entity_counts

    def recall_reading_nothing_whole(query: str) -> list[str]:
        graph.entity_counts = lambda *a: reads.append(a[1]) or counts(*a)  # type: ignore
        try:
            return _recall(engine, "a", query)
        finally:
            graph.entity_counts = counts  # type: ignore[method-assign]

    _recall(engine, "a", "Zoe Lisbon offsite")  # (counts the adds in)
    kept = caches.entity_indexes["a"]
    assert kept.df["person:zoe"] == 2 and kept.active == 6

    engine.add_many([{"id": z1, "text": "Zoe books the budget offsite in Porto",
                      "entities": ["person:zoe", "place:porto"]}], tenant="a", replace=True)
    assert caches.entity_indexes["a"] is kept  # kept, the edit pending
    assert z1 in recall_reading_nothing_whole("offsite in Porto")
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert "place:lisbon" not in idx.names and idx.df["place:porto"] == 1
    assert idx.active == 6 and idx.matrix is not None and idx.matrix.shape[0] == len(idx.names)

    # the kept links of z1 and z2 (related) and of a1 (another relation) are there
    assert {z1, z2, ids["a1"]} <= set(caches.kept_links("a", "spread"))
    engine.forget(ids["a2"], tenant="a")  # deleted, then purged below: counted out once
    engine.forget(z2, tenant="a", hard=True)
    engine.forget(ids["a2"], tenant="a", hard=True)
    spread = caches.kept_links("a", "spread")
    assert z1 not in spread and z2 not in spread and ids["a1"] in spread
    assert caches.entity_indexes["a"] is idx  # kept, the purges pending
    got = recall_reading_nothing_whole("Zoe flies to Lisbon")
    assert z2 not in got and ids["a2"] not in got
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert idx.df["person:zoe"] == 1 and "topic:budget" not in idx.names and idx.active == 4
    assert not reads


def _fresh_terms(engine: MemoryEngine) -> dict[str, list[float]]:
    rt = engine.runtime
    with rt.reading() as conn:
        terms, matrix = rt.sql.terms.term_vectors_all(conn, rt.embedder.name)
    return {t: matrix[i].tolist() for i, t in enumerate(terms)}


def test_new_word_vectors_are_read_into_the_kept_word_index(engine: MemoryEngine) -> None:
    """Enrichment stores the vectors of new words: the kept word index reads those in after
    the write (not every word again), equal to one read afresh, and recall ranks with it as
    with a fresh one. Words of a write that rolled back are not read in."""
    rt, caches = engine.runtime, engine.runtime.caches
    engine.add_many([{"text": t} for t in ("Priya reviews the quarterly budget",
                                           "The budget review moved to Thursday")], tenant="a")
    engine.enrich(tenant="a")
    _recall(engine, "a", "budget reviews")
    kept = caches.term_index
    assert kept is not None and "quarterly" in kept.position
    whole: list[str] = []
    read_all = rt.sql.terms.term_vectors_all
    rt.sql.terms.term_vectors_all = lambda *a: whole.append("read") or read_all(*a)  # type: ignore
    engine.add_many([{"text": "Omar audits the quarterly spreadsheets in Lisbon"},
                     {"text": "Spreadsheets of the budget are audited yearly"}], tenant="a")
    engine.enrich(tenant="a")
    assert caches.term_index is kept  # kept; the new words are read in at the next recall
    got = _recall(engine, "a", "who audits spreadsheets?")
    idx = caches.term_index
    assert idx is not None and idx is not kept and not whole
    held = {t: idx.matrix[idx.position[t]].tolist() for t in idx.terms}  # type: ignore[index]
    assert held == _fresh_terms(engine) and len(idx.terms) == len(idx.position)
    assert {"audits", "spreadsheets", "lisbon"} <= set(idx.terms) - set(kept.terms)

    with pytest.raises(RuntimeError), rt.writing() as conn:  # stored, then rolled back
        rt.sql.terms.term_vectors_put(conn, rt.embedder.name,
                                      [("zeppelin", rt.embedder.embed_documents(["x"])[0])])
        raise RuntimeError("the write fails after storing a word")
    again = _recall(engine, "a", "who audits spreadsheets?")
    assert again == got and "zeppelin" not in caches.term_index.position  # type: ignore
    rt.sql.terms.term_vectors_all = read_all  # type: ignore[method-assign]
    with rt.changing(Changes(words=True)):  # (any words: the index is read afresh)
        pass
    assert caches.term_index is None
    assert _recall(engine, "a", "who audits spreadsheets?") == got


def test_an_extractor_that_repeats_an_entity_links_it_once(tmp_path: Path) -> None:
    engine = MemoryEngine.open(tmp_path / "store", embedder=HashingEmbedder(),
                               entity_extractor=lambda text: ["name:ada", "name:ada"],
                               maintenance="manual")
    try:
        engine.add("Ada writes the notes", tenant="a")
        _recall(engine, "a", "notes")
        engine.enrich(tenant="a")
        _recall(engine, "a", "Ada")
        idx = engine.runtime.caches.entity_indexes["a"]
        assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
        assert idx.df == {"name:ada": 1}
    finally:
        engine.close()


def test_an_index_read_while_a_write_of_the_tenant_is_under_way_is_not_kept(
        engine: MemoryEngine) -> None:
    """Its reads may see the write in part (or before an add that is then counted in
    twice): it serves its own recall only. One whose reads began before an add ended is not
    kept either."""
    ids = _seed(engine)
    caches, rt = engine.runtime.caches, engine.runtime
    with rt.changing(Changes(tenant="a", memories=True)):  # a wholesale write (an import)
        pass
    assert "a" not in caches.entity_indexes
    with rt.changing(Changes(tenant="a", memories=True)):
        assert ids["a1"] in _recall(engine, "a", "who reviews the budget")
        assert "a" not in caches.entity_indexes
    _recall(engine, "a", "who reviews the budget")
    assert "a" in caches.entity_indexes

    stale = caches.entity_indexes.pop("a")
    epoch = caches.index_epoch("a")
    engine.add("Zoe joins the budget review", tenant="a", entities=["person:zoe"])
    caches.keep_index(caches.entity_indexes, "a", stale, epoch)
    assert "a" not in caches.entity_indexes


def test_an_add_that_fails_drops_the_entity_index(engine: MemoryEngine,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(engine)
    caches, rt = engine.runtime.caches, engine.runtime

    def broken(*args: object, **kwargs: object) -> None:
        raise StoreError("the side-store went away")

    monkeypatch.setattr(rt.sql.memories, "mark_committed", broken)
    with pytest.raises(StoreError):
        engine.add("Omar leaves the budget team", tenant="a", entities=["person:omar"])
    assert "a" not in caches.entity_indexes
    monkeypatch.undo()
    _recall(engine, "a", "budget team")
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")


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
    kept_a, kept_b = caches.entity_indexes["a"], caches.entity_indexes["b"]
    assert kept_a.df["person:priya"] == 1 and kept_a.active == 3
    engine.forget(ids["a1"], tenant="a")
    # kept, the soft delete pending: the next recall counts a1 and its entity out
    assert caches.entity_indexes["a"] is kept_a and caches.entity_indexes["b"] is kept_b
    assert ids["a1"] not in _recall(engine, "a", "who reviews the budget")
    idx = caches.entity_indexes["a"]
    assert idx is not kept_a and (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert "person:priya" not in idx.names and idx.active == 2
    assert idx.matrix is not None and idx.matrix.shape[0] == len(idx.names)
    engine.forget(ids["a1"], tenant="a")  # deleted already: nothing pending
    assert not caches.entity_index("a")[1]
    engine.restore(ids["a1"], tenant="a")
    assert caches.entity_indexes["a"] is idx  # kept, the restore pending
    assert ids["a1"] in _recall(engine, "a", "who reviews the budget")
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert idx.df["person:priya"] == 1 and idx.active == 3

    engine.recall("what does the cat eat", tenant="b", k=5, min_activation=0.0)  # builds cues
    engine.recall("who reviews the budget", tenant="a", k=5, min_activation=0.0)
    cues_b = caches.cue_indexes["b"]
    engine.feedback(ids["a1"], 5, tenant="a", query="budget owner")
    assert "a" not in caches.cue_indexes and caches.cue_indexes["b"] is cues_b
    engine.recall("who reviews the budget", tenant="a", k=5, min_activation=0.0)
    assert "budget owner" in caches.cue_indexes["a"].queries

    idx = caches.entity_indexes["a"]
    engine.forget(ids["a2"], tenant="a", hard=True)  # a purge: counted out, its uses dropped
    assert caches.entity_indexes["a"] is idx and "a" not in caches.cue_indexes
    assert caches.entity_indexes["b"] is kept_b and caches.cue_indexes["b"] is cues_b
    assert ids["a2"] not in _recall(engine, "a", "budget review Thursday")
    idx = caches.entity_indexes["a"]
    assert (idx.names, idx.df, idx.active) == _fresh_entity_index(engine, "a")
    assert "topic:budget" not in idx.names and idx.active == 2


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


def test_a_new_process_reads_the_label_vectors_stored_where_links_are_written(
        tmp_path: Path) -> None:
    """Entity label vectors are stored where entity links are written (an add's given
    entities, enrichment's extracted ones, a replace, an import), so a tenant's first recall
    in a new process reads them and embeds no label; they equal the labels embedded afresh.
    A store without them (older) still recalls: the labels are embedded then."""
    from mnemonia import MnemoniaConfig

    config = MnemoniaConfig.load(env={}, maintenance="manual")

    class Counting(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.documents: list[str] = []

        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            self.documents += list(texts)
            return super().embed_documents(texts)

    with MemoryEngine.open(tmp_path / "s", config=config, embedder=HashingEmbedder()) as eng:
        a = eng.add_many([{"text": "Priya reviews the quarterly budget",
                           "entities": ["person:priya"]},
                          {"text": "Lena Park met Omar in Lisbon"}], tenant="a")
        eng.enrich(tenant="a")
        eng.add_many([{"id": a[0].id, "text": "Priya reviews the budget with Zoe",
                       "entities": ["person:priya", "person:zoe"]}], tenant="a", replace=True)
        eng.export(tmp_path / "a.jsonl", tenant="a")
    emb = Counting()
    with MemoryEngine.open(tmp_path / "s", config=config, embedder=emb) as eng:
        assert _recall(eng, "a", "who reviews the budget")
        idx = eng.runtime.caches.entity_indexes["a"]
        assert {"person:priya", "person:zoe", "name:lena park", "name:lisbon"} <= set(idx.names)
        labels = set(idx.labels)
        assert not labels & set(emb.documents)  # read, not embedded
        assert idx.matrix is not None
        fresh = HashingEmbedder().embed_documents(idx.labels)
        assert abs(idx.matrix - fresh).max() < 1e-6
    emb = Counting()
    with MemoryEngine.open(tmp_path / "imported", config=config, embedder=HashingEmbedder()) \
            as eng:
        eng.import_(tmp_path / "a.jsonl")
    with MemoryEngine.open(tmp_path / "imported", config=config, embedder=emb) as eng:
        assert _recall(eng, "a", "who reviews the budget")
        assert not set(eng.runtime.caches.entity_indexes["a"].labels) & set(emb.documents)
        with eng.sql.begin() as conn:  # a store from before label vectors were stored
            conn.exec_driver_sql("DELETE FROM term_vectors WHERE model LIKE '%#labels'")
    emb = Counting()
    with MemoryEngine.open(tmp_path / "imported", config=config, embedder=emb) as eng:
        assert _recall(eng, "a", "who reviews the budget")
        assert set(eng.runtime.caches.entity_indexes["a"].labels) <= set(emb.documents)
