"""The SQL side-store on real SQLite: migrations, the tenant-scoped keyword index, vectors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from mnemonia import MemoryEngine
from mnemonia.store import sql as S


def _old_store(path: Path, applied: int = 3) -> S.SideStore:
    """A side-store as a release with the first ``applied`` migrations left it (the first
    release: 1-3)."""
    store = S.SideStore(f"sqlite:///{path}")
    with store.db.engine.begin() as conn:
        S.schema_migrations.create(conn)
        for version, name, fn in S.MIGRATIONS[:applied]:
            fn(conn)
            conn.execute(S.schema_migrations.insert().values(
                version=version, name=name, applied_at=0.0))
    return store


def test_keyword_index_migration_keeps_every_indexed_memory(tmp_path: Path) -> None:
    store = _old_store(tmp_path / "old.sqlite3")
    with store.db.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO memories_fts(body, ttok, memory_id) VALUES (?, ?, ?)",
            [("Lunch at the Café Lisboa", S.tenant_token("ana"), "m1"),
             ("Lisbon trip in May", S.tenant_token("ana"), "m2"),
             ("Café near the office", S.tenant_token("bo"), "m3")])
    assert store.setup() == [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    assert store.setup() == []  # idempotent
    with store.connect() as conn:
        tables = {r[0] for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "memories_fts" not in tables and "memories_kw" in tables
        assert dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").fetchall()) == {
            S.tenant_token("ana") + "lisbon": 1, S.tenant_token("ana") + "cafe": 1,
            **{S.tenant_token(t) + w: 1 for t, ws in (("ana", ("lunch", "at", "the",
                                                               "lisboa", "trip", "in", "may")),
                                                      ("bo", ("cafe", "near", "the", "office")))
               for w in ws}}
        assert "memory_vectors" in tables
        assert [i for i, _ in store.keywords.keyword_search(conn, "ana", ["cafe"], 5)] == ["m1"]
        assert [i for i, _ in store.keywords.keyword_search(conn, "ana", ["café"], 5)] == ["m1"]
        assert [i for i, _ in store.keywords.keyword_search(conn, "bo", ["CAFE"], 5)] == ["m3"]
        assert [i for i, _ in store.keywords.keyword_search(conn, "ana", ["lisbon"], 5)] == ["m2"]
        assert store.keywords.keyword_search(conn, "bo", ["lisbon"], 5) == []
    store.dispose()


def test_relation_type_indexes_migration(tmp_path: Path) -> None:
    """A store made before migration 13 gets the relations' type indexes (13, then 14's
    index by target and 18's by source with the target's seq), and recall's reads of one
    type's links use them (no read of every relation of each memory)."""
    store = _old_store(tmp_path / "old.sqlite3", applied=12)
    with store.db.engine.begin() as conn:
        for name in ("ix_relations_type_src", "ix_relations_type_dst"):
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")  # as before 13
    assert store.setup() == [13, 14, 15, 16, 17, 18]
    with store.connect() as conn:
        names = {r[0] for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'relations'")}
        # (migration 14's index serves the reads by target instead of ix_relations_type_dst,
        # 18's those by source instead of ix_relations_type_src)
        assert {"ix_relations_outgoing", "ix_relations_incoming"} <= names
        assert not {"ix_relations_type_dst", "ix_relations_type_src"} & names
        plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT src, dst, type, strength FROM relations WHERE "
            "tenant = 'a' AND src IN ('x', 'y') AND type IN ('follows') UNION SELECT src, dst, "
            "type, strength FROM relations WHERE tenant = 'a' AND dst IN ('x', 'y') "
            "AND type IN ('follows')"))
        assert "ix_relations_outgoing" in plan and "ix_relations_incoming" in plan
    store.dispose()


def test_the_memory_before_a_new_one_in_its_session_is_one_index_step(tmp_path: Path) -> None:
    """A store made before migration 16 gets the memories' (tenant, session, time) index in
    place of the (tenant, session) one, and the read of the memory just before a new one in
    its session (its ``follows`` link) walks that index back from the new memory's time: no
    sort of every memory of the session (a chat kept in one session made each enriched add
    read all of it)."""
    from mnemonia.store.graph import PREVIOUS_IN_SESSION

    store = _old_store(tmp_path / "old.sqlite3", applied=15)
    with store.db.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_memories_session_time")  # as before 16
        conn.exec_driver_sql(
            "CREATE INDEX ix_memories_tenant_session ON memories (tenant, session_id)")
    assert store.setup() == [16, 17, 18]
    with store.connect() as conn:
        names = {r[0] for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memories'")}
        assert "ix_memories_session_time" in names
        assert "ix_memories_tenant_session" not in names
        plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {PREVIOUS_IN_SESSION}", ("t", "s", "m", 5.0, 5.0, "m")))
        assert "ix_memories_session_time (tenant=? AND session_id=? AND created_at<?)" in plan
        assert "TEMP B-TREE" not in plan
    store.dispose()


def _open_hub_store(folder: Path) -> MemoryEngine:
    """An engine on ``folder``: manual maintenance, a fixed clock, the hashing embedder."""
    from mnemonia import ManualClock, MnemoniaConfig
    from mnemonia.embeddings import HashingEmbedder

    from tests.conftest import START

    return MemoryEngine.open(folder, config=MnemoniaConfig.load(env={}, maintenance="manual"),
                             clock=ManualClock(START), embedder=HashingEmbedder())


def _hub_store(folder: Path, n: int, *, pointing_in: bool, types: tuple[str, str],
               strong_every: int) -> tuple[MemoryEngine, Any]:
    """An engine on a new store in ``folder`` (:func:`_open_hub_store`) holding a hub memory
    and ``n`` notes of tenant ``t``, each note related to the hub (from the note when
    ``pointing_in``, else from the hub) by ``types[0]`` or, every third, ``types[1]``,
    strength 1.0 every ``strong_every``-th else 0.5, the relations written in the reverse of
    the stored order. Returns the engine and the hub."""
    eng = _open_hub_store(folder)
    hub = eng.add("the hub every note names", tenant="t")
    notes = [eng.add(f"note {i} about the hub", tenant="t") for i in range(n)]
    for i, m in enumerate(reversed(notes)):  # written in the reverse of the stored order
        src, dst = (m.id, hub.id) if pointing_in else (hub.id, m.id)
        eng.relate(src, dst, types[0] if i % 3 else types[1],
                   strength=1.0 if i % strong_every == 0 else 0.5, tenant="t")
    return eng, hub


def test_relations_get_their_source_seq_when_the_store_migrates(tmp_path: Path) -> None:
    """Migration 14 on a store made before it: every relation gets its source memory's
    ``seq``, and spreading's read of a memory's strongest incoming edges answers as the
    ranking of all of them did (strongest first, then the first stored sources)."""
    from mnemonia.recall import EDGES_PER_SOURCE

    folder = tmp_path / "store"
    eng, hub = _hub_store(folder, 40, pointing_in=True, types=("same_entity", "related_to"),
                          strong_every=5)
    with eng.sql.db.engine.begin() as conn:  # the store as it was before migration 14
        conn.exec_driver_sql("DROP INDEX ix_relations_incoming")
        conn.exec_driver_sql("ALTER TABLE relations DROP COLUMN src_seq")
        conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 14")
    eng.close()
    eng = _open_hub_store(folder)
    with eng.sql.connect() as conn:
        seqs = dict(conn.exec_driver_sql("SELECT id, seq FROM memories").fetchall())
        rel = conn.exec_driver_sql(
            "SELECT src, dst, type, strength, src_seq FROM relations").fetchall()
        assert rel and all(r[4] == seqs[r[0]] for r in rel)
        got = eng.sql.graph.edges_around(conn, "t", [hub.id], ["related_to", "same_entity"],
                                         ["correlates", "related_to", "same_entity"],
                                         EDGES_PER_SOURCE)
    ranked = sorted((r for r in rel if r[1] == hub.id), key=lambda r: (-r[3], seqs[r[0]]))
    incoming = [(src, rtype, strength, seq) for src, dst, rtype, strength, n, seq in got if n]
    assert incoming == [(r[0], r[2], r[3], seqs[r[0]]) for r in ranked[:EDGES_PER_SOURCE]]
    assert {src for src, *_ in incoming} == {r[0] for r in ranked[:EDGES_PER_SOURCE]}
    eng.close()


def test_relations_get_their_target_seq_when_the_store_migrates(tmp_path: Path) -> None:
    """Migration 18 on a store made before it: every relation gets its target memory's
    ``seq``, the edges leaving a memory are read from ``ix_relations_outgoing`` alone (no
    read of ``memories``), each with its target's ``seq``, and a relation written after
    the migration gets both ends' ``seq``."""
    from mnemonia.recall import EDGES_PER_SOURCE

    folder = tmp_path / "store"
    eng, hub = _hub_store(folder, 30, pointing_in=False, types=("related_to", "causes"),
                          strong_every=4)
    with eng.sql.db.engine.begin() as conn:  # the store as it was before migration 18
        conn.exec_driver_sql("DROP INDEX ix_relations_outgoing")
        conn.exec_driver_sql("CREATE INDEX ix_relations_type_src "
                             "ON relations (tenant, type, src, dst, strength)")
        conn.exec_driver_sql("ALTER TABLE relations DROP COLUMN dst_seq")
        conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 18")
    eng.close()
    eng = _open_hub_store(folder)
    late = eng.add("a note linked after the migration", tenant="t")
    eng.relate(hub.id, late.id, "related_to", strength=0.5, tenant="t")
    with eng.sql.connect() as conn:
        names = {r[0] for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'relations'")}
        assert "ix_relations_outgoing" in names and "ix_relations_type_src" not in names
        seqs = dict(conn.exec_driver_sql("SELECT id, seq FROM memories").fetchall())
        rel = conn.exec_driver_sql(
            "SELECT src, dst, type, strength, src_seq, dst_seq FROM relations").fetchall()
        assert len(rel) == 31
        assert all(r[4] == seqs[r[0]] and r[5] == seqs[r[1]] for r in rel)
        got = eng.sql.graph.edges_around(conn, "t", [hub.id], ["causes", "related_to"],
                                         [], EDGES_PER_SOURCE)
        plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT src, dst, type, strength, 0 AS incoming, dst_seq "
            "FROM relations WHERE tenant = 't' AND type IN ('causes', 'related_to') "
            "AND src IN ('x', 'y')"))
    assert "COVERING INDEX ix_relations_outgoing" in plan and "memories" not in plan
    assert sorted((dst, rtype, strength, seq) for src, dst, rtype, strength, n, seq in got) \
        == sorted((r[1], r[2], r[3], seqs[r[1]]) for r in rel)
    eng.close()


LINKED = ("m-c", "m-a", "m-f", "m-b", "m-e", "m-d", "m-g")  # stored in this order, not by id


def check_entity_link_order_migration(open_engine: Callable[[], MemoryEngine]) -> None:
    """A store made before migration 12 (entity links without ``seq``): its links get their
    memory's ``seq``, the ``(tenant, entity, seq)`` index is made, and an entity's first
    linked memories are the first stored, not the smallest ids. ``open_engine`` opens the
    same store each time."""
    with open_engine() as eng:
        eng.add_many([{"id": mid, "text": f"note {n} on the lighthouse",
                       "entities": ["place:lighthouse"]} for n, mid in enumerate(LINKED)],
                     tenant="t")
        with eng.sql.begin() as conn:  # as migrations 1-11 left the table
            conn.exec_driver_sql("DROP INDEX ix_memory_entities_seq")
            conn.exec_driver_sql("ALTER TABLE memory_entities DROP COLUMN seq")
            conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 12")
    with open_engine() as eng:
        with eng.sql.connect() as conn:
            assert [r[0] for r in conn.exec_driver_sql(
                "SELECT version FROM schema_migrations WHERE version = 12")] == [12]
            links = dict(conn.exec_driver_sql("SELECT memory_id, seq FROM memory_entities").all())
            stored = dict(conn.exec_driver_sql("SELECT id, seq FROM memories").all())
            assert links == {mid: stored[mid] for mid in LINKED}
            assert sorted(links, key=links.__getitem__) == list(LINKED)
            indexes = {ix["name"]: ix["column_names"]
                       for ix in sa.inspect(conn).get_indexes("memory_entities")}
            assert indexes["ix_memory_entities_seq"] == ["tenant", "entity", "seq"]
            assert eng.sql.graph.entity_first(
                conn, "t", "place:lighthouse", 5) == ["m-c", "m-a", "m-f", "m-b", "m-e"]
        # a memory added now is linked to the first stored ones
        new = eng.add("one more note on the lighthouse", tenant="t",
                      entities=["place:lighthouse"])
        eng.enrich(tenant="t")
        same = {r.dst for r in eng.relations(new.id, tenant="t")
                if r.src == new.id and r.type == "same_entity"}
        assert same == set(LINKED[:5])


def test_entity_links_of_an_older_store_get_the_order_their_memories_were_stored(
        tmp_path: Path) -> None:
    from mnemonia.embeddings import HashingEmbedder

    check_entity_link_order_migration(lambda: MemoryEngine.open(
        tmp_path / "s", embedder=HashingEmbedder(), maintenance="manual"))


def test_keyword_terms_are_per_tenant_and_fold_case_and_accents() -> None:
    a, b = S.tenant_token("a"), S.tenant_token("b")
    assert S.keyword_terms("Crème BRÛLÉE, x_y!", a) == [a + "creme", a + "brulee", a + "x",
                                                        a + "y"]
    assert set(S.keyword_terms("same words", a)).isdisjoint(S.keyword_terms("same words", b))


def test_document_frequencies_are_per_tenant(tmp_path: Path) -> None:
    """The postings budget counts a word's memories in the asking tenant only: a word that
    floods another tenant does not push it out of this tenant's search."""
    store = S.SideStore(f"sqlite:///{tmp_path / 's.sqlite3'}")
    store.setup()
    with store.db.engine.begin() as conn:
        store.keywords.fts_insert(conn, [(f"n{i}", "noisy", f"invoice number {i}")
                                         for i in range(50)])
        store.keywords.fts_insert(conn, [("q1", "quiet", "the invoice is paid"),
                                         ("q2", "quiet", "paid in full")])
    with store.connect() as conn:
        hits = store.keywords.keyword_search(conn, "quiet", ["invoice", "paid"], 5, max_postings=3)
        assert [i for i, _ in hits] == ["q1", "q2"]
        noisy = store.keywords.keyword_search(conn, "noisy", ["invoice"], 100, max_postings=3)
        assert noisy == []  # 50 postings: over the budget, left out
    store.dispose()


def _vocab(store: S.SideStore) -> dict[str, int]:
    """Document frequencies counted from the index itself (fts5vocab walks the postings)."""
    with store.db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v "
                             "USING fts5vocab(main, memories_kw, 'row')")
        counted = dict(conn.exec_driver_sql("SELECT term, doc FROM temp.v").fetchall())
        conn.exec_driver_sql("DROP TABLE temp.v")
    return counted


def test_document_frequencies_follow_adds_replaces_and_forgets(engine: MemoryEngine) -> None:
    mems = engine.add_many([{"text": f"the kettle {w} number {i}"} for i, w in
                            enumerate(["boils", "leaks", "boils", "hums"])], tenant="df")
    engine.add("Another tenant's kettle boils", tenant="other")
    engine.add_many([{"id": mems[0].id, "text": "the teapot cracked"}], tenant="df",
                    replace=True)
    engine.forget(mems[1].id, tenant="df", hard=True)
    engine.forget(mems[2].id, tenant="df")  # soft: still indexed
    with engine.sql.connect() as conn:
        kept = dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").fetchall())
    assert kept == _vocab(engine.sql)
    tok = S.tenant_token("df")
    assert kept[tok + "kettle"] == 2 and kept[tok + "teapot"] == 1
    assert tok + "leaks" not in kept  # its only memory is gone: no zero rows left behind
    assert kept[S.tenant_token("other") + "kettle"] == 1


def test_the_keyword_index_holds_the_text_recall_scores(engine: MemoryEngine) -> None:
    """A memory's indexed text is ``Speaker said, "text"`` with the speaker its metadata
    keeps, also when it came in ``metadata`` alone: what recall's keyword scoring and the
    doctor's re-indexing read from the row (the index held the bare text, so its document
    counts missed the speaker's words)."""
    given = engine.add("the teapot cracked", tenant="sp", speaker="Ana")
    in_meta = engine.add("the kettle leaks", tenant="sp", metadata={"speaker": "Bo"})
    with engine.sql.connect() as conn:
        bodies = dict(conn.exec_driver_sql("SELECT memory_id, body FROM memories_kw").all())
        tok = S.tenant_token("sp")
        assert bodies[in_meta.id].split() == [tok + w for w in
                                              ("bo", "said", "the", "kettle", "leaks")]
        assert bodies[given.id].split()[:2] == [tok + "ana", tok + "said"]
        assert engine.sql.keywords.term_docs(conn, "sp", ["said", "bo"]) == {"said": 2, "bo": 1}
        hits = engine.sql.keywords.keyword_search(conn, "sp", ["bo"], 5)
    assert [i for i, _ in hits] == [in_meta.id]


def test_vectors_are_kept_in_the_side_store_and_match_chroma(engine: MemoryEngine) -> None:
    mems = engine.add_many([{"text": "the boiler was serviced in March"},
                            {"text": "Ana's bike has a flat tyre"}], tenant="v")
    ids = [m.id for m in mems]
    with engine.sql.connect() as conn:
        stored = engine.sql.vectors.vectors_get(conn, ids)
    col = engine.vectors.collection("v", model=engine.embedder.name, dimension=0, create=False)
    chroma = engine.vectors.get_vectors(col, ids)
    for i in ids:
        np.testing.assert_allclose(np.frombuffer(stored[i], dtype="<f4"), chroma[i], rtol=1e-6)
    # replacing a memory replaces its vector; a hard forget removes it
    engine.add_many([{"id": ids[0], "text": "the boiler needs a new pump"}], tenant="v",
                    replace=True)
    with engine.sql.connect() as conn:
        new = np.frombuffer(engine.sql.vectors.vectors_get(conn, [ids[0]])[ids[0]], dtype="<f4")
    np.testing.assert_allclose(new, engine.embedder.embed_documents(
        ["the boiler needs a new pump"])[0], rtol=1e-5, atol=1e-6)
    engine.forget(ids[1], tenant="v", hard=True)
    with engine.sql.connect() as conn:
        assert set(engine.sql.vectors.vectors_get(conn, ids)) == {ids[0]}


def test_recall_falls_back_to_chroma_for_memories_without_a_stored_vector(
        engine: MemoryEngine) -> None:
    """Stores made before the side-store kept vectors still score keyword candidates."""
    engine.add_many([{"text": f"filler note {i} about gardening"} for i in range(30)],
                    tenant="f")
    target = engine.add("the zeppelin museum opens at nine", tenant="f")
    with engine.sql.begin() as conn:
        conn.execute(S.memory_vectors.delete())
    res = engine.recall("zeppelin", tenant="f", k=3, touch=False)
    assert res.ids[0] == target.id
    assert res.memories[0].explanation.cosine == pytest.approx(
        float(engine.embedder.embed_query("zeppelin")
              @ engine.embedder.embed_documents([target.text])[0]), abs=1e-4)


def test_a_memory_read_back_is_what_its_constructor_makes(tmp_path: Path) -> None:
    # to_memory fills a Memory without calling its __init__ (one per recall hit): the result
    # must equal what the constructor makes from the same fields, every field set, and
    # Memory must stay a plain frozen dataclass without a __post_init__ to skip.
    import dataclasses

    from mnemonia.embeddings import HashingEmbedder
    from mnemonia.models import Memory

    assert dataclasses.is_dataclass(Memory) and not hasattr(Memory, "__post_init__")
    assert not hasattr(Memory, "__slots__")
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(),
                           maintenance="manual") as engine:
        added = engine.add("Ana keeps bees on the roof", tenant="t", topic="home",
                           entities=["person:ana"], metadata={"speaker": "Ana", "n": [1, 2]},
                           importance=0.7, session_id="s1")
        engine.pin(added.id, tenant="t")
        got = engine.get(added.id, tenant="t")
        fields = {f.name for f in dataclasses.fields(Memory)}
        assert set(vars(got)) == fields
        assert got == Memory(**{name: getattr(got, name) for name in fields})
        assert got.pinned and got.metadata == {"speaker": "Ana", "n": [1, 2]}
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.text = "changed"  # type: ignore[misc]
        hit = engine.recall("bees on the roof", tenant="t", touch=False).memories[0]
        assert hit.memory == got and hit.memory.metadata is not got.metadata


def test_an_embedded_store_is_read_through_a_memory_map(engine: MemoryEngine) -> None:
    """Every connection to an SQLite side-store maps the file for reads (recall's row and
    edge reads of a cold store are ~15% faster than through SQLite's own page copies)."""
    from mnemonia.store.dialect import SQLITE_MMAP_BYTES

    engine.add("a memory to read", tenant="t")
    with engine.sql.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA mmap_size").scalar_one() == SQLITE_MMAP_BYTES
    assert engine.recall("memory", tenant="t", k=1).memories[0].text == "a memory to read"


def test_concurrent_sessions_reuse_the_pools_connections(engine: MemoryEngine) -> None:
    """Threads reading at once keep their SQLite connections open between calls (each new
    one costs its pragmas, an empty page cache and the change triggers of its first write):
    a second burst of as many readers opens none."""
    import threading

    from mnemonia.store.dialect import SQLITE_POOL

    engine.add("a memory to read", tenant="t")
    opened: list[object] = []
    sa.event.listen(engine.sql.db.engine, "connect", lambda conn, record: opened.append(conn))
    readers = min(12, SQLITE_POOL)
    barrier = threading.Barrier(readers)

    def read() -> None:
        with engine.sql.connect() as conn:
            barrier.wait(10)  # all sessions open at once
            conn.exec_driver_sql("SELECT count(*) FROM memories").scalar_one()

    def burst() -> int:
        threads = [threading.Thread(target=read) for _ in range(readers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        return len(opened)

    first = burst()
    assert first <= readers and burst() == first
