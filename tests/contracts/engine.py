"""A reusable suite for MemoryEngine: subclasses provide the `eng` fixture (embedded or
server mode, real model) and run the same behaviour checks against it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from mnemonia import ManualClock, MemoryEngine
from mnemonia.errors import InvalidInputError, MemoryNotFoundError, StoreInconsistentError

T = "alice"
FACTS = [
    ("Alice's cat is called Miso and loves tuna.", 0.6),
    ("Alice works as a nurse at the city hospital.", 0.7),
    ("The team uses Redis as the cache for the web app.", 0.5),
    ("Alice is learning to play the cello on weekends.", 0.5),
    ("The quarterly report is due on the 30th of June.", 0.8),
    ("Alice prefers green tea over coffee in the morning.", 0.4),
]


class EngineContract:
    """Behaviour every store mode must show. Needs fixtures `eng` and `clock`; `reopen(**kw)`
    closes `eng` and opens the store again (``kw`` passed to ``MemoryEngine.open``)."""

    @pytest.fixture
    def loaded(self, eng: MemoryEngine) -> dict[str, str]:
        mems = eng.add_many([{"text": t, "importance": i} for t, i in FACTS], tenant=T)
        return {m.text: m.id for m in mems}

    def test_add_get_roundtrip(self, eng: MemoryEngine, clock: ManualClock) -> None:
        m = eng.add("Bob likes jazz", tenant=T, importance=0.8, kind="fact", topic="music",
                    entities=["person:bob"], session_id="s1", metadata={"src": "chat"})
        got = eng.get(m.id, tenant=T)
        assert got.text == "Bob likes jazz" and got.importance == 0.8 and got.kind == "fact"
        assert got.topic == "music" and "person:bob" in got.entities
        assert got.metadata == {"src": "chat"} and got.session_id == "s1"
        assert got.created_at == clock.now() and got.access_count == 0
        assert got.sm2.easiness == 2.5 and got.sm2.next_review is None and got.utility == 0.5

    def test_recall_finds_the_right_memory(self, eng: MemoryEngine,
                                          loaded: dict[str, str]) -> None:
        res = eng.recall("What is the name of Alice's cat?", tenant=T, k=3)
        assert res.memories[0].memory.text.startswith("Alice's cat is called Miso")
        res = eng.recall("which cache does the web app use", tenant=T, k=1)
        assert "Redis" in res.memories[0].memory.text
        exp = res.memories[0].explanation
        assert exp.cosine is not None and exp.cosine > 0.3 and exp.keyword is not None
        assert exp.score == pytest.approx(res.memories[0].score)

    def test_recall_leaves_excluded_ids_out_before_scoring(
            self, eng: MemoryEngine, loaded: dict[str, str]) -> None:
        q = "What is the name of Alice's cat?"
        copy = eng.add(q, tenant=T)  # the question itself, stored first (a chat memory does)
        shown = eng.recall(q, tenant=T, k=3, touch=False)
        assert shown.memories[0].memory.id == copy.id
        res = eng.recall(q, tenant=T, k=3, touch=False, exclude_ids=[copy.id])
        assert copy.id not in {h.memory.id for h in res.memories}
        assert len(res.memories) == 3
        eng.forget(copy.id, tenant=T, hard=True)
        alone = eng.recall(q, tenant=T, k=3, touch=False)
        # the same hits with the same scores as if the copy were not there at all (its words
        # do not count in the keyword statistics either)
        assert [(h.memory.id, round(h.score, 9)) for h in res.memories] == [
            (h.memory.id, round(h.score, 9)) for h in alone.memories]
        assert res.memories[0].memory.text.startswith("Alice's cat is called Miso")

    @pytest.mark.parametrize("bad", ["some-id", 42, [1], [None]])
    def test_recall_rejects_bad_exclude_ids(self, eng: MemoryEngine, loaded: dict[str, str],
                                            bad: object) -> None:
        before = eng.stats(T)
        with pytest.raises(InvalidInputError, match="exclude_ids"):
            eng.recall("Alice's cat", tenant=T, exclude_ids=bad)  # type: ignore[arg-type]
        assert eng.stats(T) == before

    def test_recall_touch_updates_access(self, eng: MemoryEngine, loaded: dict[str, str],
                                         clock: ManualClock) -> None:
        mid = loaded["Alice works as a nurse at the city hospital."]
        clock.advance(timedelta(hours=3))
        res = eng.recall("Where does Alice work?", tenant=T, k=1)
        assert res.memories[0].memory.id == mid
        m = eng.get(mid, tenant=T)
        assert m.access_count == 1 and m.accessed_at == clock.now() and m.stability == 1.5
        eng.recall("Where does Alice work?", tenant=T, k=1, touch=False)
        assert eng.get(mid, tenant=T).access_count == 1
        assert eng.stats(T)["accesses"] == 1

    def test_relation_makes_connected_memory_surface(self, eng: MemoryEngine,
                                                     loaded: dict[str, str]) -> None:
        cat = loaded["Alice's cat is called Miso and loves tuna."]
        report = loaded["The quarterly report is due on the 30th of June."]
        before = eng.recall("Tell me about Miso the cat", tenant=T, k=6, touch=False,
                            min_activation=0.15)
        assert report not in [h.memory.id for h in before.memories]
        eng.relate(cat, report, "implies", tenant=T, strength=1.0)
        after = eng.recall("Tell me about Miso the cat", tenant=T, k=6, touch=False,
                           min_activation=0.15)
        hit = next(h for h in after.memories if h.memory.id == report)
        assert hit.explanation.path == (cat, "implies")
        assert hit.explanation.activation <= after.memories[0].explanation.activation

    def test_a_symmetric_relation_spreads_from_its_target_too(
            self, eng: MemoryEngine, loaded: dict[str, str]) -> None:
        """A ``related_to`` edge written from the report to the cat (a symmetric type)
        brings the report in from the cat: spreading reads the strongest edges that point
        at a memory as well as those leaving it (PostgreSQL reads them in one LATERAL join,
        SQLite in a union of index ranges)."""
        cat = loaded["Alice's cat is called Miso and loves tuna."]
        report = loaded["The quarterly report is due on the 30th of June."]
        eng.relate(report, cat, "related_to", tenant=T, strength=1.0)
        after = eng.recall("Tell me about Miso the cat", tenant=T, k=6, touch=False,
                           min_activation=0.15)
        hit = next(h for h in after.memories if h.memory.id == report)
        assert hit.explanation.path == (cat, "related_to")

    def test_forget_restore_and_hard_forget(self, eng: MemoryEngine,
                                            loaded: dict[str, str]) -> None:
        mid = loaded["Alice prefers green tea over coffee in the morning."]
        eng.forget(mid, tenant=T)
        res = eng.recall("What does Alice drink in the morning?", tenant=T, k=6,
                         min_activation=0)
        assert mid not in res.ids
        assert eng.stats(T)["deleted"] == 1
        eng.restore(mid, tenant=T)
        res = eng.recall("What does Alice drink in the morning?", tenant=T, k=1)
        assert res.ids == [mid]
        eng.forget(mid, tenant=T, hard=True)
        with pytest.raises(MemoryNotFoundError):
            eng.get(mid, tenant=T)
        assert eng.stats(T)["memories"] == len(FACTS) - 1
        events = {e.event for m in loaded.values() if m != mid for e in eng.history(m, tenant=T)}
        assert "created" in events

    def test_supersede_hides_old_and_links_new(self, eng: MemoryEngine) -> None:
        old = eng.add("The launch is on April 14th", tenant=T)
        new = eng.add("The launch moved to April 28th", tenant=T)
        eng.supersede(old.id, new.id, tenant=T)
        res = eng.recall("When is the launch?", tenant=T, k=5, min_activation=0)
        assert old.id not in res.ids
        hit = next(h for h in res.memories if h.memory.id == new.id)
        assert hit.supersedes == (old.id,)
        assert [e.event for e in eng.history(old.id, tenant=T)][-1] == "superseded"

    def test_contradictions_reported(self, eng: MemoryEngine) -> None:
        a = eng.add("Carol is vegetarian", tenant=T)
        b = eng.add("Carol ordered a steak at dinner", tenant=T)
        eng.relate(a.id, b.id, "contradicts", tenant=T, strength=0.8)
        res = eng.recall("Is Carol vegetarian?", tenant=T, k=5, min_activation=0)
        hit = next(h for h in res.memories if h.memory.id == a.id)
        assert hit.contradictions == (b.id,)

    def test_feedback_is_an_sm2_review(self, eng: MemoryEngine, loaded: dict[str, str],
                                       clock: ManualClock) -> None:
        mid = loaded["Alice works as a nurse at the city hospital."]
        intervals = [eng.feedback(mid, q, tenant=T).sm2.interval_days for q in (4, 5, 5, 1)]
        assert intervals == [1, 6, 15, 1]
        m = eng.get(mid, tenant=T)
        assert m.sm2.repetitions == 0 and m.sm2.next_review == clock.now() + timedelta(days=1)
        assert [e.event for e in eng.history(mid, tenant=T)].count("feedback") == 4

    def test_tenants_are_isolated(self, eng: MemoryEngine, loaded: dict[str, str]) -> None:
        eng.add("Bob's secret password hint is 'blue whale'", tenant="bob")
        res = eng.recall("password hint blue whale", tenant=T, k=10, min_activation=0)
        assert all(h.memory.tenant == T for h in res.memories)
        some = next(iter(loaded.values()))
        with pytest.raises(MemoryNotFoundError):
            eng.get(some, tenant="bob")

    def test_exactly_k_with_floor_zero(self, eng: MemoryEngine, loaded: dict[str, str]) -> None:
        res = eng.recall("quantum chromodynamics lecture", tenant=T, k=5, min_activation=0)
        assert len(res.memories) == 5
        scores = [h.score for h in res.memories]
        assert scores == sorted(scores, reverse=True)

    def test_render_sections(self, eng: MemoryEngine, loaded: dict[str, str]) -> None:
        res = eng.recall("Alice's hobbies on weekends", tenant=T, k=2, episode_k=3)
        text = res.render()
        assert "RELEVANT MEMORY" in text and "cello" in text
        if res.episodes:
            assert text.index("RELEVANT EPISODES") < text.index("RELEVANT MEMORY")

    def test_reopen_keeps_everything(self, eng: MemoryEngine, loaded: dict[str, str],
                                     reopen) -> None:  # type: ignore[no-untyped-def]
        eng2 = reopen()
        assert {m.id for m in eng2.list(tenant=T)} == set(loaded.values())
        res = eng2.recall("What is the name of Alice's cat?", tenant=T, k=1)
        assert res.memories[0].memory.text.startswith("Alice's cat")

    def test_export_import(self, eng: MemoryEngine, loaded: dict[str, str], tmp_path,
                           other_engine) -> None:  # type: ignore[no-untyped-def]
        a, b = list(loaded.values())[:2]
        eng.relate(a, b, "part_of", tenant=T)
        n = eng.export(tmp_path / "dump.jsonl", tenant=T)
        assert n == len(FACTS)
        target = other_engine()
        assert target.import_(tmp_path / "dump.jsonl") == len(FACTS)
        assert {m.text for m in target.list(tenant=T)} == set(loaded)
        assert [r.type for r in target.relations(a, tenant=T)] == ["part_of"]

    def test_keyword_document_counts_follow_every_write(
            self, eng: MemoryEngine, tmp_path, other_engine) -> None:  # type: ignore[no-untyped-def]
        """The keyword index's document counts (recall's idf weights, the postings budget)
        are each word's memories in the tenant, the speaker's words included (its indexed
        text is ``Speaker said, "text"``, also when the speaker came in ``metadata``), the
        same on SQLite and PostgreSQL, after adds, a replace, soft forget, restore,
        supersede, hard forget and an import; other tenants' memories never count."""
        long = "x" * 300  # one term longer than a PostgreSQL count key may be
        mems = eng.add_many([
            {"text": "The kettle boils over", "speaker": "Ana"},
            {"text": "Crème brûlée at the café", "speaker": "Bo"},
            {"text": "the kettle leaks"},
            {"text": f"kettle {long}"},
            {"text": "the teapot is new", "metadata": {"speaker": "Cy"}},
        ], tenant="kd")
        a, b, c, d, e = (m.id for m in mems)
        eng.add("kettle kettle teapot said", tenant="other")
        f = eng.add("Ana bought a kettle", tenant="kd").id
        eng.add_many([{"id": c, "text": "the teapot cracked"}], tenant="kd", replace=True)
        eng.forget(a, tenant="kd")
        eng.restore(a, tenant="kd")
        eng.forget(d, tenant="kd")  # soft: still counted
        eng.supersede(c, e, tenant="kd")
        eng.forget(b, tenant="kd", hard=True)
        words = ["kettle", "teapot", "said", "ana", "cy", "bo", "boils", "creme", "crème",
                 "cafe", "leaks", long, "nowhere"]
        expected = {"kettle": 3, "teapot": 2, "said": 2, "ana": 2, "cy": 1, "boils": 1,
                    long: 1}

        def counts(engine: MemoryEngine) -> dict[str, int]:
            with engine.sql.connect() as conn:
                return engine.sql.keywords.term_docs(conn, "kd", words)

        assert counts(eng) == expected
        assert {m.id for m in eng.list(tenant="kd", include_deleted=True)} == {a, c, d, e, f}
        eng.export(tmp_path / "kd.jsonl", tenant="kd")
        target = other_engine()
        target.import_(tmp_path / "kd.jsonl")
        assert counts(target) == expected

    def test_replace_in_place_keeps_history(self, eng: MemoryEngine) -> None:
        m = eng.add("The wifi password is hunter2", tenant=T, id="wifi")
        eng.feedback("wifi", 4, tenant=T)
        out = eng.add_many([{"id": "wifi", "text": "The wifi password is now correct-horse"},
                            {"id": "door", "text": "The door code is 1234"}], tenant=T,
                           replace=True)
        assert [x.id for x in out] == ["wifi", "door"]
        got = eng.get("wifi", tenant=T)
        assert got.text.endswith("correct-horse") and got.created_at == m.created_at
        assert got.sm2.repetitions == 1
        assert [e.event for e in eng.history("wifi", tenant=T)][-1] == "updated"
        res = eng.recall("what is the wifi password", tenant=T, k=1)
        assert res.ids == ["wifi"] and "correct-horse" in res.memories[0].memory.text
        assert eng.stats(T)["memories"] == 2

    @pytest.mark.parametrize("lost", ["some", "all"])
    def test_vectors_chroma_lost_are_rebuilt_at_open(self, eng: MemoryEngine,
                                                     loaded: dict[str, str], reopen,  # type: ignore[no-untyped-def]
                                                     lost: str) -> None:
        cat = loaded[FACTS[0][0]]
        col = eng.vectors.collection(T, model=eng.embedder.name, dimension=0, create=False)
        gone = [cat, loaded[FACTS[2][0]]] if lost == "some" else col.get(include=[])["ids"]
        col.delete(ids=gone)  # chromadb's own call, behind the engine's back
        assert col.count() == len(FACTS) - len(gone)
        eng2 = reopen()
        report = eng2.doctor()
        assert report.consistent and report.problems == 0, report.as_dict()
        health = report.tenant(T)
        assert health.memories == health.active == health.chroma_vectors == len(FACTS)
        assert health.side_vectors == len(FACTS)
        assert eng2.recall("What is the name of Alice's cat?", tenant=T, k=1).ids == [cat]
        new = eng2.add("Alice's cat also likes salmon", tenant=T)
        assert eng2.doctor().tenant(T).chroma_vectors == len(FACTS) + 1
        assert new.id in eng2.recall("what does the cat like, salmon?", tenant=T, k=3).ids

    def test_vectors_of_no_memory_stop_the_open_until_repaired(
            self, eng: MemoryEngine, loaded: dict[str, str], reopen) -> None:  # type: ignore[no-untyped-def]
        col = eng.vectors.collection(T, model=eng.embedder.name, dimension=0, create=False)
        col.add(ids=["ghost-1", "ghost-2"],
                embeddings=[[0.1] * eng.embedder.dimension, [0.2] * eng.embedder.dimension])
        with pytest.raises(StoreInconsistentError, match="doctor --repair"):
            reopen()
        eng2 = reopen(verify=False)
        found = eng2.doctor()
        assert not found.consistent and found.tenant(T).orphans == 2
        assert found.tenant(T).memories == len(FACTS)
        assert eng2.doctor(repair=True).tenant(T).orphans_removed == 2
        col2 = eng2.vectors.collection(T, model=eng2.embedder.name, dimension=0, create=False)
        assert sorted(col2.get(include=[])["ids"]) == sorted(loaded.values())
        eng2.close()
        eng3 = reopen()
        assert eng3.doctor().problems == 0
        assert {m.id for m in eng3.list(tenant=T)} == set(loaded.values())
