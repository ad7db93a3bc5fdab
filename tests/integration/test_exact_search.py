"""Exact nearest neighbours for small tenants of an embedded store: the mirror of a collection's
vectors answers like a brute-force cosine through every write, and recall on a mirrored
tenant sees every add, replace and delete, and falls back to Chroma's HNSW past the limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidConfigError
from mnemonia.store.exact import SPLIT_COLUMNS, Mirror

FACTS = [
    "The staging cluster runs on Kubernetes in Frankfurt",
    "Priya reviews the quarterly budget every March",
    "The office cat is called Miso and likes salmon",
    "Deployments freeze on Fridays after noon",
    "The wifi password changed to correct-horse",
    "Lunch on Thursdays is at the Thai place downstairs",
    "The on-call rotation swaps every Monday morning",
    "Backups of the billing database run nightly at 2am",
]


def _brute(held: dict[str, np.ndarray], q: np.ndarray) -> dict[str, float]:
    """Each held vector's cosine with ``q``."""
    qn = q / np.linalg.norm(q)
    return {i: float(v @ qn / np.linalg.norm(v)) for i, v in held.items()}


def test_a_mirror_answers_like_a_brute_force_cosine_through_writes() -> None:
    rng = np.random.default_rng(3)
    held = {f"m{i}": rng.standard_normal(16).astype(np.float32) for i in range(300)}
    mirror = Mirror(list(held), np.stack(list(held.values())))
    q = rng.standard_normal(16).astype(np.float32)
    before = mirror.scores(q)
    want_before = _brute(held, q)
    # replace some, delete many (the rows are compacted), add past the capacity
    for i in range(0, 50):
        held[f"m{i}"] = rng.standard_normal(16).astype(np.float32)
    mirror.put([f"m{i}" for i in range(50)], np.stack([held[f"m{i}"] for i in range(50)]))
    gone = [f"m{i}" for i in range(100, 280)]
    mirror.drop(gone)
    for i in gone:
        del held[i]
    new = {f"n{i}": rng.standard_normal(16).astype(np.float32) for i in range(400)}
    mirror.put(list(new), np.stack(list(new.values())))
    held.update(new)
    assert mirror.size == len(held)

    want = _brute(held, q)
    got = mirror.scores(q)
    ids, sims = got.top(25)
    best = sorted(want, key=lambda i: -want[i])[:25]
    assert ids == best
    np.testing.assert_allclose(sims, [want[i] for i in best], atol=1e-6)
    assert got.of(["m0", "m150", "n7", "nope"]) == pytest.approx(
        {"m0": want["m0"], "n7": want["n7"]}, abs=1e-6)
    assert len(got.top(10_000)[0]) == len(held)
    # scores asked before the writes still answer as the mirror was then
    old_ids, old_sims = before.top(5)
    assert old_ids == sorted(want_before, key=lambda i: -want_before[i])[:5]
    np.testing.assert_allclose(old_sims, [want_before[i] for i in old_ids], atol=1e-6)
    assert set(before.of(["m150", "n7"])) == {"m150"}


def test_a_repeated_id_in_one_write_keeps_its_last_vector() -> None:
    mirror = Mirror([], np.zeros((0, 0), dtype=np.float32))
    mirror.put(["a", "a", "b"], np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    assert mirror.size == 2
    assert mirror.scores(np.array([0, 1], dtype=np.float32)).of(["a"]) == {"a": 1.0}


def _open(path: Path, clock: ManualClock, limit: int) -> MemoryEngine:
    cfg = MnemoniaConfig.load(env={}, maintenance="manual", exact_search_limit=limit)
    return MemoryEngine.open(path, config=cfg, clock=clock, embedder=HashingEmbedder())


def _cosines(engine: MemoryEngine, query: str) -> dict[str, float | None]:
    res = engine.recall(query, tenant="t", k=len(FACTS) + 2, min_activation=0, touch=False)
    return {h.memory.text: h.explanation.cosine for h in res.memories}


def test_recall_on_a_mirrored_tenant_agrees_with_chroma_and_sees_every_write(
        tmp_path: Path, clock: ManualClock) -> None:
    exact = _open(tmp_path / "exact", clock, 10_000)
    hnsw = _open(tmp_path / "hnsw", clock, 0)
    try:
        for eng in (exact, hnsw):
            eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS)], tenant="t")
        col = exact.vectors.collection("t", model=exact.embedder.name, dimension=0,
                                       create=False)
        queries = ["who reviews the budget?", "what is the cat called?", "when are backups?"]

        def agree() -> None:
            for q in queries:
                got, want = _cosines(exact, q), _cosines(hnsw, q)
                assert list(got) == list(want)
                assert got == pytest.approx(want, abs=1e-6)

        agree()
        assert exact.vectors.mirrored(col)
        assert not hnsw.vectors.mirrored(hnsw.vectors.collection(
            "t", model=hnsw.embedder.name, dimension=0, create=False))
        # an add, a replaced text (embedded again) and a hard delete, on both
        for eng in (exact, hnsw):
            eng.add("Backups of the mail server run weekly on Sundays", tenant="t")
            eng.add_many([{"id": "f2", "text": "The office dog is called Pepper"}],
                         tenant="t", replace=True)
            eng.forget("f7", tenant="t", hard=True)
        agree()
        texts = _cosines(exact, "when are backups?")
        assert "Backups of the mail server run weekly on Sundays" in texts
        assert FACTS[7] not in texts and FACTS[2] not in texts
        assert "The office dog is called Pepper" in _cosines(exact, "what is the dog called?")
        assert exact.vectors.mirrored(col)
        # the mirror holds what Chroma holds: the deleted vector is gone, the replaced is new
        qv = exact.embedder.embed_query("what is the dog called?")
        held = exact.vectors.scores(col, qv)
        assert held is not None and set(held.of(["f7", "f2", "f0"])) == {"f2", "f0"}
        stored = exact.vectors.get_vectors(col, ["f2"])["f2"]
        assert held.of(["f2"])["f2"] == pytest.approx(
            _brute({"f2": stored}, qv)["f2"], abs=1e-6)
    finally:
        exact.close()
        hnsw.close()


def test_a_tenant_past_the_limit_is_searched_by_chroma_until_it_shrinks(
        tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock, 6)
    try:
        ids = [m.id for m in eng.add_many([{"text": t} for t in FACTS[:5]], tenant="t")]
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        assert FACTS[2] in _cosines(eng, "what is the cat called?")
        assert eng.vectors.mirrored(col)
        more = [m.id for m in eng.add_many([{"text": t} for t in FACTS[5:]], tenant="t")]
        assert not eng.vectors.mirrored(col)  # 8 vectors: past the limit, Chroma answers
        assert FACTS[7] in _cosines(eng, "when do backups of the billing database run?")
        assert not eng.vectors.mirrored(col)
        counted: list[str] = []
        count = eng.vectors.count
        eng.vectors.count = lambda c: counted.append(c.name) or count(c)  # type: ignore
        eng.forget(more[0], tenant="t", hard=True)
        _cosines(eng, "when do backups of the billing database run?")
        # 7 left, known without counting (8 counted, one deleted): still Chroma's
        assert not eng.vectors.mirrored(col) and not counted
        for mid in (more[1], ids[0]):
            eng.forget(mid, tenant="t", hard=True)
        got = _cosines(eng, "when do backups of the billing database run?")
        assert counted == [col.name]  # it may have come down to the limit: counted again
        assert eng.vectors.mirrored(col)  # 5 again: read into memory at the next recall
        assert FACTS[7] in got and FACTS[0] not in got and FACTS[5] not in got
    finally:
        eng.close()


def test_a_mirror_answers_a_batch_of_queries_exactly_ties_by_position(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemonia.store import exact

    monkeypatch.setattr(exact, "QUERY_BLOCK", 7)  # several blocks
    rng = np.random.default_rng(5)
    held = {f"m{i}": rng.standard_normal(16).astype(np.float32) for i in range(200)}
    held["twin"] = held["m3"].copy()  # an exact tie: the row written first goes first
    mirror = Mirror(list(held), np.stack(list(held.values())))
    mirror.drop(["m10"])
    del held["m10"]
    queries = np.stack([held["m3"], *rng.standard_normal((19, 16)).astype(np.float32)])
    ids, sims = mirror.nearest(queries, 6)
    assert len(ids) == len(sims) == 20 and ids[0][:2] == ["m3", "twin"]
    for q, got, got_sims in zip(queries, ids, sims, strict=True):
        want = _brute(held, q)
        assert got == sorted(want, key=lambda i: (-round(want[i], 5), i != "m3"))[:6]
        np.testing.assert_allclose(got_sims, [want[i] for i in got], atol=1e-6)
    assert Mirror([], np.zeros((0, 0), np.float32)).nearest(queries[:2], 3) == ([[], []],
                                                                               [[], []])


@pytest.mark.parametrize("size", [1000, 2001, 2013])
def test_equal_vectors_score_equal_wherever_they_sit(size: int) -> None:
    # 384 dimensions: a product runs in slices of 672 vectors, so the copies sit in several
    # slices, at their edges and in the last (partial) one; a row layout, or a slice of 681,
    # gave some of them a score one bit off (the development machine's OpenBLAS)
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((size, 384)).astype(np.float32)
    v = rng.standard_normal(384).astype(np.float32)
    at = sorted({p for p in (0, 1, 7, 8, 15, 16, 17, 671, 672, 673, 680, 681, 1343, 1344,
                             1999, 2000, size - 2, size - 1) if p < size})
    vectors[at] = v
    mirror = Mirror([f"m{i}" for i in range(size)], vectors)
    mirror.put(["late"], v[None, :])  # written after the others: the tail of the matrix
    for q in rng.standard_normal((8, 384)).astype(np.float32):
        got = mirror.scores(q).of([f"m{p}" for p in at] + ["late"])
        assert len(set(got.values())) == 1, got
        ids, _ = mirror.nearest(q[None, :], size + 1)
        assert [i for i in ids[0] if i in got] == [f"m{p}" for p in at] + ["late"]


def test_ingest_asks_the_mirror_for_neighbours(tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock, 100)
    try:
        eng.add_many([{"text": t} for t in FACTS], tenant="t")
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        assert eng.vectors.mirrored(col)  # made by ingest's first neighbour query
        vecs = eng.embedder.embed_documents(FACTS[:2])
        ids, _ = eng.vectors.query(col, vecs, 3)
        stored = {m.id: m.text for m in eng.list(tenant="t")}
        assert stored[ids[0][0]] == FACTS[0]
        assert stored[ids[1][0]] == FACTS[1]
    finally:
        eng.close()


@pytest.mark.parametrize("key", ["exact_search_limit", "own_index_limit"])
@pytest.mark.parametrize("bad", [-1, 2.5, "many", True, None])
def test_the_search_limits_must_be_whole_numbers_from_zero(key: str, bad: object) -> None:
    with pytest.raises(InvalidConfigError, match=key):
        MnemoniaConfig(**{key: bad})


def test_mirrors_over_the_budget_drop_the_least_recently_searched(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemonia.store import chroma

    monkeypatch.setattr(chroma, "MIRRORED_VECTORS", 10)
    eng = _open(tmp_path / "s", clock, 100)
    try:
        cols = {}
        for tenant in ("a", "b", "c"):
            eng.add_many([{"text": t} for t in FACTS[:4]], tenant=tenant)
            cols[tenant] = eng.vectors.collection(tenant, model=eng.embedder.name,
                                                  dimension=0, create=False)
        for tenant in ("a", "b", "a"):
            eng.recall("what is the cat called?", tenant=tenant, touch=False)
        assert eng.vectors.mirrored(cols["a"]) and eng.vectors.mirrored(cols["b"])
        res = eng.recall("what is the cat called?", tenant="c", touch=False)
        assert res.memories[0].memory.text == FACTS[2]
        # 4 + 4 + 4 > 10: b, searched longest ago, made room
        mirrored = [t for t in cols if eng.vectors.mirrored(cols[t])]
        assert mirrored == ["a", "c"]
        assert eng.recall("what is the cat called?", tenant="b",
                          touch=False).memories[0].memory.text == FACTS[2]
        assert [t for t in cols if eng.vectors.mirrored(cols[t])] == ["b", "c"]
    finally:
        eng.close()


@pytest.mark.parametrize("page", [3, 4, 100])
def test_a_mirror_is_read_from_chroma_page_by_page(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, page: int) -> None:
    from mnemonia.store import chroma

    monkeypatch.setattr(chroma, "_VECTOR_PAGE", page)
    eng = _open(tmp_path / "s", clock, 100)
    try:
        mems = eng.add_many([{"text": t} for t in FACTS], tenant="t")
        # a store from before the side-store kept vectors: the mirror is read from Chroma
        _drop_side_vectors(eng, [m.id for m in mems])
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        qv = eng.embedder.embed_query("who reviews the budget?")
        held = eng.vectors.scores(col, qv)
        assert held is not None
        stored = eng.vectors.get_vectors(col, [m.id for m in mems])
        want = _brute(stored, qv)
        assert held.of(want) == pytest.approx(want, abs=1e-6)
        assert held.top(3)[0] == sorted(want, key=lambda i: -want[i])[:3]
    finally:
        eng.close()


def test_recalls_beside_writes_see_a_consistent_mirror(tmp_path: Path,
                                                        clock: ManualClock) -> None:
    import threading

    eng = _open(tmp_path / "s", clock, 10_000)
    errors: list[BaseException] = []
    try:
        eng.add_many([{"text": t} for t in FACTS], tenant="t")
        done = threading.Event()

        def recalls() -> None:
            try:
                while not done.is_set():
                    res = eng.recall("what is the cat called?", tenant="t", k=5, touch=False)
                    assert res.memories and res.memories[0].memory.text == FACTS[2]
            except BaseException as e:  # reported below
                errors.append(e)

        reader = threading.Thread(target=recalls)
        reader.start()
        added = []
        try:
            for n in range(30):
                added += eng.add_many([{"text": f"Note {n}: the printer on floor {n} jams"},
                                       {"text": f"Note {n}: room {n} has a whiteboard"}],
                                      tenant="t")
                if n % 3 == 0:
                    eng.forget(added[-1].id, tenant="t", hard=True)
                    added.pop()
        finally:
            done.set()
            reader.join()
        assert not errors, errors
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        qv = eng.embedder.embed_query("the printer jams")
        held = eng.vectors.scores(col, qv)
        assert held is not None
        ids = [m.id for m in eng.list(tenant="t", limit=1000)]
        stored = eng.vectors.get_vectors(col, ids)
        assert set(held.of(ids)) == set(stored) == set(ids)
        assert held.of(ids) == pytest.approx(
            _brute(stored, qv), abs=1e-6)
    finally:
        eng.close()


def test_a_tenant_emptied_by_hard_deletes_recalls_nothing_after_a_reopen(
        tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock, 100)
    m = eng.add(FACTS[2], tenant="t")
    eng.forget(m.id, tenant="t", hard=True)
    eng.close()
    eng = _open(tmp_path / "s", clock, 100)  # the mirror is read from an empty collection
    try:
        assert eng.recall("what is the cat called?", tenant="t").memories == []
        new = eng.add(FACTS[2], tenant="t")
        assert eng.recall("what is the cat called?", tenant="t").ids[:1] == [new.id]
    finally:
        eng.close()


@pytest.mark.parametrize("size", [SPLIT_COLUMNS - 16, SPLIT_COLUMNS - 1, 11_150])
def test_a_large_mirror_scores_in_two_halves_the_same_to_the_bit(size: int) -> None:
    """A query's product with a mirror of SPLIT_COLUMNS vectors or more runs in two halves
    at once (the second on the helper thread): every score equals the one-thread product's
    (the helper busy with another recall's half: the product runs whole on the calling
    thread) to the bit, equal vectors on either side of the cut score equal, and the scores
    are the cosines."""
    import os

    import mnemonia.store.exact as exact

    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((size, 384)).astype(np.float32)
    cut = exact._columns(size) // 2 // exact.LANES * exact.LANES
    at = [0, cut - 1, cut, cut + 1, size - 1]
    vectors[at] = vectors[3]
    ids = [f"m{i}" for i in range(size)]
    mirror = Mirror(ids, vectors)
    exact._helper = None
    for q in rng.standard_normal((4, 384)).astype(np.float32):
        got = mirror.scores(q).of(ids)
        with exact._helper_free:  # the helper busy with another recall's half
            whole = mirror.scores(q).of(ids)
        assert got == whole
        assert len({got[f"m{p}"] for p in at}) == 1
        brute = _brute(dict(zip(ids, vectors, strict=True)), q)
        assert max(abs(got[i] - brute[i]) for i in ids) < 1e-5
    split = exact._columns(size) >= SPLIT_COLUMNS  # (the product has whole LANES)
    assert (exact._helper is not None and exact._helper[0] == os.getpid()) == split


def _drop_side_vectors(eng: MemoryEngine, ids: list[str]) -> None:
    """Delete the side-store's copy of the vectors of ``ids`` (as a store written before it
    kept them has none)."""
    with eng.runtime.sql.begin() as conn:
        eng.runtime.sql.vectors.vectors_delete(conn, ids)


def _held(eng: MemoryEngine, query: str) -> dict[str, float]:
    """Every memory's score in the tenant's mirror (read on this call when there is none)."""
    col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
    held = eng.vectors.scores(col, eng.embedder.embed_query(query))
    assert held is not None
    return held.of(eng.vectors.all_ids(col))


def test_a_mirror_read_again_from_the_side_store_scores_the_same_to_the_bit(
        tmp_path: Path, clock: ManualClock) -> None:
    """The writes put the vectors given into the mirror, and a mirror read on the next open
    comes from the side-store's copy of the same vectors: every score is equal to the bit,
    and so are those read from Chroma (a few 1e-8 off) to 1e-6."""
    eng = _open(tmp_path / "s", clock, 100)
    try:
        eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS[:4])], tenant="t")
        _held(eng, "who reviews the budget?")  # mirrored now: the next writes go into it
        eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS) if i >= 4],
                     tenant="t")
        eng.add_many([{"id": "f2", "text": "The office dog is called Pepper"}], tenant="t",
                     replace=True)
        kept = _held(eng, "what is the dog called?")
    finally:
        eng.close()
    eng = _open(tmp_path / "s", clock, 100)
    try:
        again = _held(eng, "what is the dog called?")
        assert set(again) == set(kept) == {f"f{i}" for i in range(len(FACTS))}
        assert again == kept  # float equality: the same to the bit
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        qv = eng.embedder.embed_query("what is the dog called?")
        assert again == pytest.approx(_brute(eng.vectors.get_vectors(col, list(again)), qv),
                                      abs=1e-6)
    finally:
        eng.close()


def test_a_memory_without_a_side_store_vector_is_mirrored_from_chroma(
        tmp_path: Path, clock: ManualClock) -> None:
    eng = _open(tmp_path / "s", clock, 100)
    try:
        mems = eng.add_many([{"text": t} for t in FACTS], tenant="t")
    finally:
        eng.close()
    cat = mems[2].id
    eng = _open(tmp_path / "s", clock, 100)
    try:
        _drop_side_vectors(eng, [cat])
        held = _held(eng, "what is the cat called?")
        assert set(held) == {m.id for m in mems}
        assert max(held, key=held.__getitem__) == cat
        assert eng.recall("what is the cat called?", tenant="t").ids[:1] == [cat]
    finally:
        eng.close()


def test_a_replace_leaves_no_mirror_read_before_the_side_store_took_it(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replace writes the new vector to Chroma first, then to the side-store: a mirror read
    from the side-store in between (another thread's recall) holds the old one, and must not
    outlive the replace."""
    eng = _open(tmp_path / "s", clock, 100)
    try:
        eng.add_many([{"id": f"f{i}", "text": t} for i, t in enumerate(FACTS)], tenant="t")
        vectors = eng.vectors
        upsert = type(vectors).upsert

        def upsert_then_a_recall_reads_the_mirror(self: Any, col: Any, *args: Any,
                                                  **kwargs: Any) -> None:
            upsert(self, col, *args, **kwargs)
            self._drop_mirror(col.name)  # noqa: SLF001 - the mirror read in the window
            assert self.scores(col, eng.embedder.embed_query("the office dog")) is not None

        monkeypatch.setattr(type(vectors), "upsert", upsert_then_a_recall_reads_the_mirror)
        eng.add_many([{"id": "f2", "text": "The office dog is called Pepper"}], tenant="t",
                     replace=True)
        monkeypatch.undo()
        held = _held(eng, "The office dog is called Pepper")
        assert max(held, key=held.__getitem__) == "f2"
        assert held["f2"] == pytest.approx(1.0, abs=1e-6)
        assert eng.recall("what is the dog called?", tenant="t").ids[:1] == ["f2"]
    finally:
        eng.close()


def test_side_store_vectors_of_another_length_are_not_mirrored(
        tmp_path: Path, clock: ManualClock) -> None:
    """Vectors the side-store holds at a length the collection's are not (an embedder
    changed, its rebuild not finished): the mirror is read from Chroma."""
    eng = _open(tmp_path / "s", clock, 100)
    try:
        mems = eng.add_many([{"text": t} for t in FACTS], tenant="t")
    finally:
        eng.close()
    eng = _open(tmp_path / "s", clock, 100)
    try:
        rng = np.random.default_rng(0)
        with eng.runtime.sql.begin() as conn:
            eng.runtime.sql.vectors.vectors_put(
                conn, [(m.id, rng.normal(size=64).astype(np.float32)) for m in mems],
                replace=True)
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        qv = eng.embedder.embed_query("what is the cat called?")
        want = _brute(eng.vectors.get_vectors(col, [m.id for m in mems]), qv)
        assert _held(eng, "what is the cat called?") == pytest.approx(want, abs=1e-6)
        assert eng.recall("what is the cat called?", tenant="t").ids[:1] == [mems[2].id]
    finally:
        eng.close()
