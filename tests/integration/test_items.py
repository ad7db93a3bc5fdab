"""Keyed items (``engine.items``) on the real SQLite side-store: value filters compiled to SQL
agree with a plain Python reference, namespace paths sort as tuples, the reads walk their
indexes (query plans), TTL expiry, and the migration of items written before migration 9."""

from __future__ import annotations

import doctest
import json
import math
import sqlite3
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia import items as items_mod
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidInputError
from mnemonia.models import ItemWrite
from mnemonia.store import database, item_index
from mnemonia.store.schema import ITEM_KEY, item_labels, item_path, item_tenant

from tests.conftest import START

# -- a plain Python reference of the filter semantics (JSON's: true is not 1, 1 is 1.0) ----
MISSING = object()


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _num(a) or _num(b):
        return _num(a) and _num(b) and a == b
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(same(a[k], b[k]) for k in a))
    return (isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True)))


def apply(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value is not MISSING and same(value, arg)
    if op == "$ne":
        return not apply(value, "$eq", arg)
    if op == "$in":
        return value is not MISSING and any(same(value, a) for a in arg)
    if op == "$nin":
        return not apply(value, "$in", arg)
    if not ((_num(value) and _num(arg)) or (isinstance(value, str) and isinstance(arg, str))):
        return False
    return {"$gt": value > arg, "$gte": value >= arg, "$lt": value < arg,
            "$lte": value <= arg}[op]


def match(value: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(k.startswith("$") for k in expected):
            return all(apply(value, op, arg) for op, arg in expected.items())
        return isinstance(value, Mapping) and all(
            match(value.get(k, MISSING), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (isinstance(value, list) and len(value) == len(expected)
                and all(match(a, b) for a, b in zip(value, expected, strict=True)))
    return value is not MISSING and same(value, expected)


def lookup(value: Mapping[str, Any], key: str) -> Any:
    if key in value:
        return value[key]
    node: Any = value
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node


def passes(value: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    return all(match(lookup(value, k), v) for k, v in flt.items())


# -- a corpus of values that differ in the ways filters care about ------------------------
SCALARS = [None, True, False, 0, 1, 1.0, 2.5, -3, "x", "y", "1", "", "ü", "Zed"]
FIELDS = ["a", "b", "a.b", "ü"]
CORPUS: list[dict[str, Any]] = [
    {"a": 1}, {"a": 1.0}, {"a": True}, {"a": "1"}, {"a": None}, {}, {"a": 2.5, "b": "x"},
    {"a": -3, "b": "y"}, {"a": "x"}, {"a": "Zed"}, {"a": ""}, {"a": [1, 2]}, {"a": [1]},
    {"a": [[1], {"b": 1}]}, {"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, {"a": {"b": True}},
    {"a": {"b": "x"}}, {"a.b": 1}, {"a.b": 2, "a": {"b": 1}}, {"a": {"b": {"c": None}}},
    {"b": False}, {"b": 0}, {"ü": "ü"}, {"ü": 1, "a": [None]}, {"a": [], "b": {}},
    {"a": {}}, {"b": [1.0, "x"]}, {"a": "y", "b": [1, "x"]}, {"a": 0},
]

json_values = st.recursive(
    st.sampled_from(SCALARS),
    lambda kids: st.lists(kids, max_size=2) | st.dictionaries(st.sampled_from(["b", "c"]), kids,
                                                              max_size=2),
    max_leaves=4)
operands = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
                    json_values, min_size=1, max_size=2),
    st.dictionaries(st.sampled_from(["$in", "$nin"]), st.lists(json_values, max_size=3),
                    min_size=1, max_size=1))
filters = st.dictionaries(st.sampled_from(FIELDS), operands, min_size=1, max_size=2)


@pytest.fixture(scope="module")
def corpus_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(tmp_path_factory.mktemp("items") / "store",
                            config=MnemoniaConfig.load(env={}, maintenance="manual"),
                            clock=ManualClock(START), embedder=HashingEmbedder())
    put_corpus(eng)
    yield eng
    eng.close()


def put_corpus(engine: MemoryEngine) -> None:
    engine.items.put([ItemWrite(namespace=("c",), key=f"k{i:02d}", value=v,
                                text=f"value {json.dumps(v)}") for i, v in enumerate(CORPUS)])


def expected(flt: Mapping[str, Any]) -> set[str]:
    return {f"k{i:02d}" for i, v in enumerate(CORPUS) if passes(v, flt)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flt=filters)
def test_sql_filters_agree_with_the_reference(corpus_engine: MemoryEngine,
                                              flt: dict[str, Any]) -> None:
    got = {i.key for i in corpus_engine.items.search(("c",), filter=flt, limit=100)}
    assert got == expected(flt), flt


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flt=filters)
def test_a_search_with_a_query_applies_the_same_filter(corpus_engine: MemoryEngine,
                                                       flt: dict[str, Any]) -> None:
    found = corpus_engine.items.search(("c",), query="value", filter=flt, limit=100,
                                       touch=False)
    assert {i.key for i in found} == expected(flt), flt
    assert all(i.score is not None for i in found)


CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"a": 1}, {"k00", "k01"}),  # 1 == 1.0, true is not 1, "1" is not 1
    ({"a": True}, {"k02"}),
    ({"a": None}, {"k04"}),  # null, not missing
    ({"a": {"$ne": None}}, {f"k{i:02d}" for i in range(len(CORPUS))} - {"k04"}),
    ({"a": {"b": 1}}, {"k14", "k15", "k19"}),  # the fields it names
    ({"a": {"$eq": {"b": 1}}}, {"k14", "k19"}),  # exactly that object
    ({"a.b": 1}, {"k14", "k15", "k18"}),  # a field named "a.b" comes first (k19 has 2)
    ({"a": [1]}, {"k12"}),
    ({"a": {"$gt": 0}}, {"k00", "k01", "k06"}),
    ({"a": {"$gte": "x"}}, {"k08", "k28"}),  # strings in code-point order: "Zed" < "x"
    ({"ü": "ü"}, {"k23"}),
    ({"a": {"$in": [[1, 2], "x"]}}, {"k08", "k11"}),
]


@pytest.mark.parametrize(("flt", "keys"), CASES)
def test_filter_semantics(corpus_engine: MemoryEngine, flt: dict[str, Any],
                          keys: set[str]) -> None:
    assert expected(flt) == keys  # the reference says so...
    assert {i.key for i in corpus_engine.items.search(("c",), filter=flt, limit=100)} == keys


@pytest.mark.parametrize("flt", [
    {"a": {"$regex": "x"}}, {"a": {"$in": "x"}}, {"a": {"$eq": 1, "b": 2}}, {'a"b': 1},
    {"a": float("nan")}, {"a": object()}, {1: 2}, ["a"],
])
def test_bad_filters_are_refused_with_every_reason(corpus_engine: MemoryEngine,
                                                   flt: Any) -> None:
    with pytest.raises(InvalidInputError):
        corpus_engine.items.search(("c",), filter=flt)


def test_the_engine_items_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tests = [t for t in doctest.DocTestFinder().find(items_mod) if t.examples]
    runner = doctest.DocTestRunner()
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0 and tests


# -- paths -----------------------------------------------------------------------------------
labels = st.text(alphabet=st.sampled_from(["a", "b", " ", "-", ".", "\x01", "\x02", "\x03",
                                           "ü", "~"]), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(labels, min_size=1, max_size=4).map(tuple), min_size=2, max_size=8))
def test_paths_sort_as_tuples_and_decode(namespaces: list[tuple[str, ...]]) -> None:
    for ns in namespaces:
        assert item_labels(item_path(["lg", *ns])) == ("lg", *ns)
    by_path = sorted(namespaces, key=lambda ns: item_path(["lg", *ns]))
    assert by_path == sorted(namespaces)
    for a in namespaces:  # descendants are one range
        p = item_path(["lg", *a])
        for b in namespaces:
            q = item_path(["lg", *b])
            below = b[:len(a)] == a and len(b) > len(a)
            assert below == (p + "\x01" <= q < p + "\x02")


def test_namespace_listing_with_awkward_labels(engine: MemoryEngine) -> None:
    namespaces = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a b",), ("a\x01",),
                  ("a", "\x02"), ("a-", "x"), ("b", "a"), ("a", "b-c")]
    engine.items.put([ItemWrite(namespace=ns, key="k", value={"i": i}, text=f"note {i}")
                      for i, ns in enumerate(namespaces)])
    items = engine.items
    assert items.namespaces() == sorted(namespaces)
    assert items.namespaces(match=[("prefix", ("a",))]) == sorted(
        ns for ns in namespaces if ns[0] == "a")
    assert items.namespaces(match=[("prefix", ("a",))], max_depth=2) == [
        ("a",), ("a", "\x02"), ("a", "b"), ("a", "b-c")]
    assert items.namespaces(match=[("suffix", ("*",))], max_depth=1, limit=3, offset=1) == [
        ("a\x01",), ("a b",), ("a-",)]
    assert {i.namespace for i in items.search(("a",), limit=100)} == {
        ns for ns in namespaces if ns[0] == "a"}
    assert [i.namespace for i in items.search(("a", "b"))] == [("a", "b", "c"), ("a", "b")]
    with pytest.raises(InvalidInputError, match="match type"):
        items.namespaces(match=[("infix", ("a",))])


# -- the reads walk their indexes ------------------------------------------------------------
def _plans(engine: MemoryEngine, statements: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    db = sqlite3.connect(str(engine.path / "mnemonia.sqlite3"))  # type: ignore[operator]
    try:
        return [" | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql, params))
                for sql, params in statements]
    finally:
        db.close()


def test_item_reads_use_the_indexes_and_a_limit(engine: MemoryEngine, clock: ManualClock,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(40):
        engine.items.put([ItemWrite(namespace=(f"n{j}",), key=f"k{i}",
                                    value={"i": i, "odd": i % 2}, text=f"note {i}")
                          for j in range(3)])
        clock.advance(timedelta(seconds=1))
    seen: list[tuple[str, tuple[Any, ...]]] = []
    fetch = database.Database.fetch

    def spy(self: Any, conn: Any, statement: str, params: Any = (), **kw: Any) -> Any:
        seen.append((statement, tuple(params)))
        return fetch(self, conn, statement, params, **kw)

    monkeypatch.setattr(database.Database, "fetch", spy)
    page = engine.items.search(("n1",), filter={"odd": 1}, limit=3, offset=2)
    assert [i.value["i"] for i in page] == [35, 33, 31]  # last updated first
    assert engine.items.namespaces(limit=2) == [("n0",), ("n1",)]
    assert set(engine.items.get(("n2",), ["k1", "k2", "nope"])) == {"k1", "k2"}
    plans = _plans(engine, seen)
    assert plans and all("SCAN" not in p and "TEMP B-TREE" not in p for p in plans), plans
    pages = [p for (sql, _), p in zip(seen, plans, strict=True) if " DESC" in sql]
    assert pages and all("ix_memories_item_order" in p for p in pages), pages
    steps = [p for (sql, _), p in zip(seen, plans, strict=True) if "LIMIT 1" in sql]
    assert steps and all("USING INDEX ix_memories_item_" in p for p in steps), steps
    keyed = [p for (sql, _), p in zip(seen, plans, strict=True) if "AS expires" in sql]
    assert keyed and all("ix_memories_item_key" in p for p in keyed), keyed
    # a search with a query reads its candidates by id, the filter checked on those rows
    seen.clear()
    assert engine.items.search(("n1",), query="note", filter={"odd": 1}, limit=3, touch=False)
    by_id = [p for (sql, _), p in zip(seen, _plans(engine, seen), strict=True)
             if "WHERE m.id IN" in sql]
    assert by_id and all("item" not in p and "SCAN" not in p for p in by_id), by_id


# -- expiry ----------------------------------------------------------------------------------
def test_expired_items_leave_every_read_and_the_sweep_removes_them(
        engine: MemoryEngine, clock: ManualClock) -> None:
    items = engine.items
    items.put([ItemWrite(namespace=("t",), key="a", value={"v": 1}, text="alpha", ttl=1),
               ItemWrite(namespace=("t",), key="b", value={"v": 2}, text="beta", ttl=3),
               ItemWrite(namespace=("u",), key="c", value={"v": 3}, text="gamma", ttl=1)])
    got = items.get(("t",), ["a"])["a"]
    assert got.expires_at == START + timedelta(minutes=1)
    clock.advance(timedelta(minutes=2))
    assert items.get(("t",), ["a", "b"]).keys() == {"b"}
    assert [i.key for i in items.search(("t",), query="alpha beta")] == ["b"]
    assert items.namespaces() == [("t",)]
    assert engine.stats()["memories"] == 3
    report = engine.maintain()
    assert report.counts["expired"] == 2
    assert engine.stats()["memories"] == 1
    assert engine.items.get(("t",), ["b"]).keys() == {"b"}
    with pytest.raises(InvalidInputError, match="ttl"):
        items.put([ItemWrite(namespace=("t",), key="x", value={}, ttl=math.inf)])


# -- items written before migration 9 --------------------------------------------------------
def test_items_of_an_older_store_are_found_after_the_migration(
        tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
        hashing_embedder: HashingEmbedder) -> None:
    """What the LangGraph adapter wrote before the core kept items (no path, no times, the
    old ids) is found by key, search and listing once migration 9 has run."""
    folder = tmp_path / "old"
    old = {"alpha": ("users", "alice"), "beta": ("users", "bob")}
    with MemoryEngine.open(folder, config=config, clock=clock,
                           embedder=hashing_embedder) as eng:
        for key, ns in old.items():
            meta = {ITEM_KEY: {"namespace": list(ns), "key": key, "value": {"k": key},
                               "created_at": START.isoformat(), "indexed": True}}
            eng.add(f"{key} was stored long ago", tenant=item_tenant("s-1", ns), kind="fact",
                    metadata=meta, id=f"lg-old-{key}")
    db = sqlite3.connect(str(folder / "mnemonia.sqlite3"))
    db.execute("DELETE FROM schema_migrations WHERE version = 9")
    for ix in ("ix_memories_item_order", "ix_memories_item_key", "ix_memories_item_expires"):
        db.execute(f"DROP INDEX {ix}")
    db.commit()
    db.close()
    clock.advance(timedelta(hours=1))
    with MemoryEngine.open(folder, config=config, clock=clock,
                           embedder=hashing_embedder) as eng:
        items = eng.items
        assert items.namespaces(space="s-1") == [("users", "alice"), ("users", "bob")]
        got = items.get(("users", "alice"), ["alpha"], space="s-1")["alpha"]
        assert got.memory_id == "lg-old-alpha" and got.updated_at == START
        assert [i.key for i in items.search(("users",), space="s-1", query="beta")][:1] == [
            "beta"]
        items.put([ItemWrite(namespace=("users", "alice"), key="alpha", value={"k": 2},
                             text="alpha again")], space="s-1")
        again = items.get(("users", "alice"), ["alpha"], space="s-1")["alpha"]
        assert again.memory_id == "lg-old-alpha" and again.value == {"k": 2}  # in place
        assert again.created_at == START


def test_a_filtered_query_search_fills_the_page_however_selective_the_filter(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nearest neighbours widen by the filter's share of them; a filter too selective for
    that is read by SQL and ranked exactly (``matching_ids``), so both fill the page."""
    engine.items.put([ItemWrite(namespace=("w",), key=f"k{i:03d}",
                                value={"bucket": i % 10, "rare": i in (7, 300, 599)},
                                text=f"garden note {i} about tomatoes and basil")
                      for i in range(600)])
    calls: list[int] = []
    matching = item_index.ItemIndex.matching_ids

    def spy(self: Any, conn: Any, tenant: str, where: Any, limit: int) -> list[str]:
        out = matching(self, conn, tenant, where, limit)
        calls.append(len(out))
        return out

    monkeypatch.setattr(item_index.ItemIndex, "matching_ids", spy)
    some = engine.items.search(("w",), query="garden tomatoes", filter={"bucket": 3},
                               limit=8, touch=False)
    assert len(some) == 8 and all(i.value["bucket"] == 3 for i in some)
    assert calls == []  # widened by the share that passed: no SQL read of every match
    rare = engine.items.search(("w",), query="garden tomatoes", filter={"rare": True},
                               limit=8, touch=False)
    assert sorted(i.key for i in rare) == ["k007", "k300", "k599"]
    assert calls == [3]
    assert engine.items.search(("w",), query="garden", filter={"bucket": 99}) == []
