"""A reusable suite for LangGraph ``BaseStore`` implementations with semantic search.

Ported from LangGraph's own store tests (``libs/checkpoint/tests/test_store.py`` in
langchain-ai/langgraph: namespace listing, namespace validation, put / get / delete, vector
insert / update / filters / pagination / edge cases / index paths / non-ASCII), run against
any store instead of ``InMemoryStore``, plus namespace isolation and batch semantics.

Two adaptations, both stated where they apply: a store may embed the indexed fields of an item
as one text (LangGraph's in-memory store keeps one vector per field and max-pools), so the
"index paths" test checks rankings rather than score equalities across fields; and scores come
from the store's own ranking, so only their order is compared.

The suite is also run against LangGraph's ``InMemoryStore`` (``tests/langchain``): it passes there
but for three checks marked stricter in their docstrings (what ``PostgresStore`` does).

Subclasses provide one fixture, ``make_store``: a callable ``(fields=None) -> BaseStore`` that
returns an empty store with semantic search on, embedding the value paths in ``fields`` (or its
default text when ``None``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

import pytest
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp

MakeStore = Callable[..., BaseStore]


class StoreContract:
    """Behaviour every LangGraph store with semantic search must show."""

    @pytest.fixture
    def store(self, make_store: MakeStore) -> BaseStore:
        return make_store()

    # ---------------------------------------------------------------- put / get / delete
    def test_put_get_round_trip(self, store: BaseStore) -> None:
        store.put(("users", "alice"), "prefs", {"theme": "dark", "tags": ["a", "b"], "n": 1.5})
        item = store.get(("users", "alice"), "prefs")
        assert item is not None
        assert item.value == {"theme": "dark", "tags": ["a", "b"], "n": 1.5}
        assert item.key == "prefs"
        assert item.namespace == ("users", "alice")
        assert isinstance(item.created_at, datetime) and isinstance(item.updated_at, datetime)
        assert item.created_at <= item.updated_at

    def test_get_missing_is_none(self, store: BaseStore) -> None:
        assert store.get(("nobody",), "nothing") is None
        store.put(("users",), "a", {"x": 1})
        assert store.get(("users",), "b") is None
        assert store.get(("users", "a"), "a") is None

    def test_put_replaces(self, store: BaseStore) -> None:
        store.put(("docs",), "d", {"text": "first version"})
        store.put(("docs",), "d", {"text": "second version"})
        second = store.get(("docs",), "d")
        assert second is not None and second.value == {"text": "second version"}
        assert [i.key for i in store.search(("docs",))] == ["d"]
        assert [i.value for i in store.search(("docs",), query="version")] == [
            {"text": "second version"}]

    def test_update_keeps_created_at(self, store: BaseStore) -> None:
        """Stricter than InMemoryStore (which resets it); what PostgresStore does."""
        store.put(("docs",), "d", {"text": "first version"})
        first = store.get(("docs",), "d")
        store.put(("docs",), "d", {"text": "second version"})
        second = store.get(("docs",), "d")
        assert first is not None and second is not None
        assert second.created_at == first.created_at
        assert second.updated_at >= first.updated_at

    def test_delete(self, store: BaseStore) -> None:
        store.put(("docs",), "d", {"text": "to delete"})
        store.delete(("docs",), "d")
        assert store.get(("docs",), "d") is None
        assert store.search(("docs",)) == []
        assert store.search(("docs",), query="to delete") == []
        store.delete(("docs",), "d")  # deleting twice is fine
        store.delete(("never",), "existed")

    def test_put_after_delete(self, store: BaseStore) -> None:
        store.put(("docs",), "d", {"text": "one"})
        store.delete(("docs",), "d")
        store.put(("docs",), "d", {"text": "two"})
        item = store.get(("docs",), "d")
        assert item is not None and item.value == {"text": "two"}

    def test_same_key_in_two_namespaces(self, store: BaseStore) -> None:
        store.put(("a",), "k", {"text": "in a"})
        store.put(("b",), "k", {"text": "in b"})
        store.delete(("a",), "k")
        assert store.get(("a",), "k") is None
        item = store.get(("b",), "k")
        assert item is not None and item.value == {"text": "in b"}

    async def test_async_put_get_delete(self, store: BaseStore) -> None:
        await store.aput(("users", "bob"), "prefs", {"lang": "pt"})
        item = await store.aget(("users", "bob"), "prefs")
        assert item is not None and item.value == {"lang": "pt"}
        await store.adelete(("users", "bob"), "prefs")
        assert await store.aget(("users", "bob"), "prefs") is None

    # ---------------------------------------------------------------- batch
    def test_batch_results_in_op_order(self, store: BaseStore) -> None:
        store.put(("b",), "x", {"text": "existing"})
        results = store.batch([
            GetOp(("b",), "x"),
            PutOp(("b",), "y", {"text": "new"}),
            SearchOp(("b",), None, 10, 0, None),
            GetOp(("b",), "missing"),
        ])
        assert len(results) == 4
        assert results[0] is not None and results[0].value == {"text": "existing"}
        assert results[1] is None
        assert isinstance(results[2], list)
        assert results[3] is None
        assert store.get(("b",), "y") is not None

    def test_batch_last_put_to_a_key_wins(self, store: BaseStore) -> None:
        store.batch([PutOp(("b",), "k", {"v": 1}), PutOp(("b",), "k", {"v": 2})])
        item = store.get(("b",), "k")
        assert item is not None and item.value == {"v": 2}

    async def test_abatch(self, store: BaseStore) -> None:
        results = await store.abatch([PutOp(("b",), "k", {"v": 1}), GetOp(("b",), "other")])
        assert results == [None, None]
        item = await store.aget(("b",), "k")
        assert item is not None and item.value == {"v": 1}

    # ---------------------------------------------------------------- namespace isolation
    def test_namespaces_never_see_each_other(self, store: BaseStore) -> None:
        store.put(("users", "alice"), "secret", {"text": "alice's locker code is 4417"})
        store.put(("users", "bob"), "note", {"text": "bob likes chess"})
        hits = store.search(("users", "bob"), query="locker code 4417", limit=10)
        assert [h.namespace for h in hits] == [("users", "bob")]
        assert store.get(("users", "bob"), "secret") is None
        assert store.search(("users", "bo"), query="chess") == []
        assert store.search(("users", "alice", "sub"), query="locker") == []

    def test_prefix_search_spans_child_namespaces(self, store: BaseStore) -> None:
        store.put(("users", "alice"), "a", {"text": "alice plays the cello"})
        store.put(("users", "bob"), "b", {"text": "bob plays the cello too"})
        store.put(("teams",), "t", {"text": "the team plays the cello"})
        found = store.search(("users",), query="who plays the cello?", limit=10)
        assert sorted(h.namespace for h in found) == [("users", "alice"), ("users", "bob")]
        assert sorted(h.key for h in store.search(("users",))) == ["a", "b"]
        assert len(store.search((), query="cello", limit=10)) == 3

    # ---------------------------------------------------------------- ported: namespaces
    def test_list_namespaces_basic(self, store: BaseStore) -> None:
        namespaces = [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
            ("admin", "users", "789"),
        ]
        for i, ns in enumerate(namespaces):
            store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})

        result = store.list_namespaces(prefix=("a", "b"))
        assert sorted(result) == sorted([
            ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")])
        result = store.list_namespaces(suffix=("f",))
        assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")])
        result = store.list_namespaces(prefix=("a",), suffix=("f",))
        assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f")])
        result = store.list_namespaces(prefix=("a", "b"), max_depth=3)
        assert sorted(result) == sorted([("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")])
        result = store.list_namespaces(prefix=("a", "b"), limit=2)
        assert result == [("a", "b", "c"), ("a", "b", "d", "e")]
        result = store.list_namespaces(prefix=("a", "b"), offset=2)
        assert result == [("a", "b", "d", "i"), ("a", "b", "f")]
        result = store.list_namespaces(prefix=("a", "*", "f"))
        assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f")])
        result = store.list_namespaces(suffix=("*", "f"))
        assert sorted(result) == sorted([("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")])
        assert store.list_namespaces(prefix=("nonexistent",)) == []
        assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]

    def test_list_namespaces_with_wildcards(self, store: BaseStore) -> None:
        namespaces = [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ]
        for i, ns in enumerate(namespaces):
            store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
        result = store.list_namespaces(prefix=("users", "*"))
        assert sorted(result) == sorted([
            ("users", "123"), ("users", "456"), ("users", "789", "settings")])
        result = store.list_namespaces(suffix=("*", "preferences"))
        assert result == [("guests", "456", "preferences")]
        result = store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings"))
        assert result == []
        store.put(namespace=("admin", "users", "settings", "789"), key="foo",
                  value={"data": "some_val"})
        result = store.list_namespaces(prefix=("*", "users"), suffix=("settings", "*"))
        assert result == [("admin", "users", "settings", "789")]

    def test_list_namespaces_pagination(self, store: BaseStore) -> None:
        for i in range(20):
            store.put(namespace=("namespace", f"sub_{i:02d}"), key=f"id_{i:02d}",
                      value={"data": f"value_{i:02d}"})
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=0) == [
            ("namespace", f"sub_{i:02d}") for i in range(5)]
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=5) == [
            ("namespace", f"sub_{i:02d}") for i in range(5, 10)]
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=15) == [
            ("namespace", f"sub_{i:02d}") for i in range(15, 20)]

    def test_list_namespaces_max_depth(self, store: BaseStore) -> None:
        namespaces = [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"),
                      ("h", "i", "j", "k")]
        for i, ns in enumerate(namespaces):
            store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
        assert sorted(store.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"),
                                                              ("h", "i")]

    def test_list_namespaces_no_conditions(self, store: BaseStore) -> None:
        namespaces = [("a", "b"), ("c", "d"), ("e", "f", "g")]
        for i, ns in enumerate(namespaces):
            store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
        assert sorted(store.list_namespaces()) == sorted(namespaces)

    def test_list_namespaces_empty_store(self, store: BaseStore) -> None:
        assert store.list_namespaces() == []

    def test_list_namespaces_drops_emptied_namespaces(self, store: BaseStore) -> None:
        """Stricter than InMemoryStore (which keeps listing a namespace after its last item is
        deleted); what PostgresStore does."""
        store.put(("gone",), "k", {"x": 1})
        store.put(("kept",), "k", {"x": 1})
        store.delete(("gone",), "k")
        assert store.list_namespaces() == [("kept",)]

    async def test_alist_namespaces(self, store: BaseStore) -> None:
        await store.aput(("x", "y"), "k", {"v": 1})
        assert await store.alist_namespaces(prefix=("x",)) == [("x", "y")]

    async def test_cannot_put_empty_namespace(self, store: BaseStore) -> None:
        doc = {"foo": "bar"}
        for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(bad, "foo", doc)
            with pytest.raises(InvalidNamespaceError):
                await store.aput(bad, "foo", doc)

        await store.aput(("foo", "langgraph", "foo"), "bar", doc)
        item = await store.aget(("foo", "langgraph", "foo"), "bar")
        assert item is not None and item.value == doc
        assert (await store.asearch(("foo", "langgraph", "foo")))[0].value == doc
        assert (await store.asearch(("foo", "langgraph", "foo"), query="bar"))[0].value == doc
        await store.adelete(("foo", "langgraph", "foo"), "bar")
        assert await store.aget(("foo", "langgraph", "foo"), "bar") is None
        store.put(("foo", "langgraph", "foo"), "bar", doc)
        item = store.get(("foo", "langgraph", "foo"), "bar")
        assert item is not None and item.value == doc
        assert store.search(("foo", "langgraph", "foo"))[0].value == doc
        store.delete(("foo", "langgraph", "foo"), "bar")
        assert store.get(("foo", "langgraph", "foo"), "bar") is None

        # Past the public put api, the reserved root is allowed.
        await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
        item = await store.aget(("langgraph", "foo"), "bar")
        assert item is not None and item.value == doc
        assert (await store.asearch(("langgraph", "foo")))[0].value == doc
        await store.adelete(("langgraph", "foo"), "bar")
        assert await store.aget(("langgraph", "foo"), "bar") is None

    def test_batch_validates_labels(self, store: BaseStore) -> None:
        """A label with a period cannot sneak in through ``batch`` (``validate_op_namespace``
        in langgraph.store.base; InMemoryStore does not call it)."""
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("foo.bar",), "k", {"v": 1})])
        with pytest.raises(InvalidNamespaceError):
            store.batch([GetOp(("a", ""), "k")])

    # ---------------------------------------------------------------- ported: vector search
    def test_vector_insert_with_auto_embedding(self, store: BaseStore) -> None:
        docs = [
            ("doc1", {"text": "short text"}),
            ("doc2", {"text": "longer text document"}),
            ("doc3", {"text": "longest text document here"}),
            ("doc4", {"description": "text in description field"}),
            ("doc5", {"content": "text in content field"}),
            ("doc6", {"body": "text in body field"}),
        ]
        for key, value in docs:
            store.put(("test",), key, value)
        results = store.search(("test",), query="long text")
        assert len(results) > 0
        doc_order = [r.key for r in results]
        assert "doc2" in doc_order
        assert "doc3" in doc_order

    async def test_async_vector_insert_with_auto_embedding(self, store: BaseStore) -> None:
        docs = [
            ("doc1", {"text": "short text"}),
            ("doc2", {"text": "longer text document"}),
            ("doc3", {"text": "longest text document here"}),
            ("doc4", {"description": "text in description field"}),
            ("doc5", {"content": "text in content field"}),
            ("doc6", {"body": "text in body field"}),
        ]
        for key, value in docs:
            await store.aput(("test",), key, value)
        results = await store.asearch(("test",), query="long text")
        doc_order = [r.key for r in results]
        assert "doc2" in doc_order
        assert "doc3" in doc_order

    def test_vector_update_with_embedding(self, store: BaseStore) -> None:
        store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
        store.put(("test",), "doc2", {"text": "something about dogs"})
        store.put(("test",), "doc3", {"text": "text about birds"})

        results_initial = store.search(("test",), query="Zany Xerxes")
        assert results_initial[0].key == "doc1"
        initial_score = results_initial[0].score
        assert initial_score is not None

        store.put(("test",), "doc1", {"text": "new text about dogs"})
        results_after = store.search(("test",), query="Zany Xerxes")
        after_score = next((r.score for r in results_after if r.key == "doc1"), 0.0)
        assert after_score is not None
        assert after_score < initial_score

        results_new = store.search(("test",), query="new text about dogs")
        for r in results_new:
            if r.key == "doc1":
                assert r.score is not None and r.score > after_score

        # Not indexed: never ranked ahead of indexed items.
        store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
        results_new = store.search(("test",), query="new text about dogs", limit=3)
        assert not any(r.key == "doc4" for r in results_new)

    async def test_async_vector_update_with_embedding(self, store: BaseStore) -> None:
        await store.aput(("test",), "doc1", {"text": "zany zebra Xerxes"})
        await store.aput(("test",), "doc2", {"text": "something about dogs"})
        await store.aput(("test",), "doc3", {"text": "text about birds"})
        results_initial = await store.asearch(("test",), query="Zany Xerxes")
        assert results_initial[0].key == "doc1"
        initial_score = results_initial[0].score
        assert initial_score is not None
        await store.aput(("test",), "doc1", {"text": "new text about dogs"})
        results_after = await store.asearch(("test",), query="Zany Xerxes")
        after_score = next((r.score for r in results_after if r.key == "doc1"), 0.0)
        assert after_score is not None and after_score < initial_score
        await store.aput(("test",), "doc4", {"text": "new text about dogs"}, index=False)
        results_new = await store.asearch(("test",), query="new text about dogs", limit=3)
        assert not any(r.key == "doc4" for r in results_new)

    _FILTER_DOCS: ClassVar[list[tuple[str, dict[str, Any]]]] = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]

    def test_vector_search_with_filters(self, store: BaseStore) -> None:
        for key, value in self._FILTER_DOCS:
            store.put(("test",), key, value)
        results = store.search(("test",), query="apple", filter={"color": "red"})
        assert len(results) == 2
        assert results[0].key == "doc1"
        results = store.search(("test",), query="car", filter={"color": "red"})
        assert len(results) == 2
        assert results[0].key == "doc2"
        results = store.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
        assert len(results) == 3
        assert results[0].key == "doc4"
        results = store.search(("test",), query="apple",
                               filter={"score": {"$gte": 4.0}, "color": "green"})
        assert len(results) == 1
        assert results[0].key == "doc3"

    async def test_async_vector_search_with_filters(self, store: BaseStore) -> None:
        for key, value in self._FILTER_DOCS:
            await store.aput(("test",), key, value)
        results = await store.asearch(("test",), query="apple", filter={"color": "red"})
        assert [r.key for r in results][:1] == ["doc1"] and len(results) == 2
        results = await store.asearch(("test",), query="car", filter={"color": "red"})
        assert [r.key for r in results][:1] == ["doc2"] and len(results) == 2
        results = await store.asearch(("test",), query="apple",
                                      filter={"score": {"$gte": 4.0}, "color": "green"})
        assert [r.key for r in results] == ["doc3"]

    def test_filters_without_query(self, store: BaseStore) -> None:
        for key, value in self._FILTER_DOCS:
            store.put(("test",), key, value)
        assert sorted(r.key for r in store.search(("test",), filter={"color": "red"})) == [
            "doc1", "doc2"]
        assert sorted(r.key for r in store.search(
            ("test",), filter={"score": {"$lt": 4.0}})) == ["doc2", "doc4"]
        assert sorted(r.key for r in store.search(
            ("test",), filter={"color": {"$ne": "red"}})) == ["doc3", "doc4"]
        assert store.search(("test",), filter={"color": "purple"}) == []

    async def test_async_batched_vector_search_concurrent(self, store: BaseStore) -> None:
        colors = ["red", "blue", "green", "yellow", "purple"]
        things = ["apple", "car", "house", "book", "phone"]
        scores = [3.0, 3.5, 4.0, 4.5, 5.0]
        docs = []
        for i in range(50):
            color, thing, score = colors[i % 5], things[i % 5], scores[i % 5]
            docs.append((f"doc{i}", {"text": f"{color} {thing}", "color": color,
                                     "score": score, "index": i}))
        await asyncio.gather(*[store.aput(("test",), key, value) for key, value in docs])
        await asyncio.gather(*[store.adelete(("test",), key) for key, _ in docs])
        await asyncio.gather(*[store.aput(("test",), key, value) for key, value in docs])

        search_queries: list[tuple[str, dict[str, Any]]] = [
            ("apple", {"color": "red"}),
            ("car", {"color": "blue"}),
            ("house", {"color": "green"}),
            ("phone", {"score": {"$gt": 4.99}}),
            ("book", {"score": {"$lte": 3.5}}),
            ("apple", {"score": {"$gte": 3.0}, "color": "red"}),
            ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
            ("house", {"index": {"$gt": 25}}),
            ("phone", {"index": {"$lte": 10}}),
        ]
        all_results = await asyncio.gather(*[
            store.asearch(("test",), query=query, filter=flt) for query, flt in search_queries])
        ops = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
               "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}
        for results, (query, flt) in zip(all_results, search_queries, strict=True):
            assert len(results) > 0, f"No results for query {query!r} with filter {flt}"
            for result in results:
                if "color" in flt:
                    assert result.value["color"] == flt["color"]
                for field in ("score", "index"):
                    if field in flt:
                        for op, bound in flt[field].items():
                            assert ops[op](result.value[field], bound)

    def test_vector_search_pagination(self, store: BaseStore) -> None:
        for i in range(5):
            store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
        page1 = store.search(("test",), query="test", limit=2)
        page2 = store.search(("test",), query="test", limit=2, offset=2)
        assert len(page1) == 2 and len(page2) == 2
        assert page1[0].key != page2[0].key
        assert not {r.key for r in page1} & {r.key for r in page2}
        assert len(store.search(("test",), query="test", limit=10)) == 5

    async def test_async_vector_search_pagination(self, store: BaseStore) -> None:
        for i in range(5):
            await store.aput(("test",), f"doc{i}", {"text": f"test document number {i}"})
        page1 = await store.asearch(("test",), query="test", limit=2)
        page2 = await store.asearch(("test",), query="test", limit=2, offset=2)
        assert len(page1) == 2 and len(page2) == 2
        assert page1[0].key != page2[0].key
        assert len(await store.asearch(("test",), query="test", limit=10)) == 5

    def test_search_without_query_pagination(self, store: BaseStore) -> None:
        for i in range(5):
            store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
        keys = [r.key for r in store.search(("test",), limit=10)]
        assert sorted(keys) == [f"doc{i}" for i in range(5)]
        assert [r.key for r in store.search(("test",), limit=2, offset=1)] == keys[1:3]

    def test_vector_search_edge_cases(self, store: BaseStore) -> None:
        store.put(("test",), "doc1", {"text": "test document"})
        assert len(store.search(("test",), query="")) == 1
        assert len(store.search(("test",), query=None)) == 1
        assert len(store.search(("test",), query="test " * 100)) == 1
        assert len(store.search(("test",), query="test!@#$%^&*()")) == 1

    async def test_async_vector_search_edge_cases(self, store: BaseStore) -> None:
        await store.aput(("test",), "doc1", {"text": "test document"})
        assert len(await store.asearch(("test",), query="")) == 1
        assert len(await store.asearch(("test",), query=None)) == 1
        assert len(await store.asearch(("test",), query="test " * 100)) == 1
        assert len(await store.asearch(("test",), query="test!@#$%^&*()")) == 1

    async def test_embed_with_path(self, make_store: MakeStore) -> None:
        # Store-level fields: key2 is not indexed.
        store = make_store(fields=["key0", "key1", "key3"])
        await store.aput(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
        await store.aput(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www",
                                             "key3": "xxx"})
        results = await store.asearch(("test",), query="xxx")
        assert sorted(r.key for r in results) == ["doc1", "doc2"]
        results = await store.asearch(("test",), query="uuu")
        assert results[0].key == "doc2"
        assert results[0].score is not None and results[1].score is not None
        assert results[0].score > results[1].score
        # key2 is not embedded: its words do not pull either document up.
        www = await store.asearch(("test",), query="www")
        yyy = await store.asearch(("test",), query="yyy")
        assert len(www) == 2 and len(yyy) == 2
        assert all(r.score is not None and r.score < results[0].score for r in www + yyy)

        # Operation-level fields override the store's.
        store = make_store(fields=["key17"])
        await store.aput(("test",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc",
                                             "key3": "ddd"}, index=["key0", "key1"])
        await store.aput(("test",), "doc4", {"key0": "eee", "key1": "bbb", "key2": "fff",
                                             "key3": "ggg"}, index=["key1", "key3"])
        results = await store.asearch(("test",), query="aaa")
        assert results[0].key == "doc3"
        assert results[0].score is not None and results[1].score is not None
        assert results[0].score > results[1].score
        results = await store.asearch(("test",), query="ggg")
        assert results[0].key == "doc4"
        assert results[0].score is not None and results[1].score is not None
        assert results[0].score > results[1].score
        await store.aput(("test",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
        results = await store.asearch(("test",), query="hhh")
        assert len(results) == 3
        doc5 = next(r for r in results if r.key == "doc5")
        assert doc5.score is None

    def test_non_ascii(self, store: BaseStore) -> None:
        texts = {"1": "这是中文", "2": "これは日本語です", "3": "이건 한국어야", "4": "Это русский",
                 "5": "यह रूसी है"}
        for key, text in texts.items():
            store.put(("user_123", "memories"), key, {"text": text})
        for key, text in texts.items():
            assert store.search(("user_123", "memories"), query=text)[0].key == key
