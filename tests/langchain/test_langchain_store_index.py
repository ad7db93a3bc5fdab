"""MnemoniaStore takes LangGraph's ``index=`` (IndexConfig) as InMemoryStore does: ``fields``
choose what is embedded, ``dims`` is checked against the engine's model, a user ``embed`` is
used (a store the adapter opens) or refused with the reason (an engine already running
another model); bad configs write nothing."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_mnemonia import MnemoniaStore
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from mnemonia import MemoryEngine
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidInputError
from mnemonia.store.schema import item_id

NS = ("users", "alice")


def _embed_fn(emb: HashingEmbedder) -> Any:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [list(map(float, row)) for row in emb.embed_documents(texts)]
    embed.calls = calls  # type: ignore[attr-defined]
    return embed


def _text(store: MnemoniaStore, key: str) -> str:
    return store.engine.get(item_id(store.tenant_prefix, NS, key),
                            tenant=store.tenant_for(NS)).text


def test_fields_choose_what_is_embedded(engine: MemoryEngine) -> None:
    store = MnemoniaStore(engine=engine, index={"fields": ["memory", "context[*].content"]})
    store.put(NS, "a", {"memory": "Alice drinks green tea", "kind": "preference",
                        "context": [{"content": "said at breakfast"}]})
    assert _text(store, "a") == "Alice drinks green tea\nsaid at breakfast"
    store.put(NS, "b", {"memory": "Alice flies to Lisbon"}, index=["memory"])
    assert _text(store, "b") == "Alice flies to Lisbon"
    whole = MnemoniaStore(engine=engine, index={"fields": ["$"]}, tenant_prefix="w")
    whole.put(NS, "c", {"content": "x", "n": 2})
    assert whole.engine.get(item_id("w", NS, "c"), tenant=whole.tenant_for(NS)).text == \
        json.dumps({"content": "x", "n": 2}, sort_keys=True)
    assert store.index_fields == ["memory", "context[*].content"]
    assert store.index_config == {"fields": ["memory", "context[*].content"]}


def test_dims_of_the_engines_model_are_accepted(engine: MemoryEngine,
                                                hashing_embedder: HashingEmbedder) -> None:
    store = MnemoniaStore(engine=engine, index={"dims": hashing_embedder.dimension,
                                                "fields": ["text"]})
    store.put(NS, "k", {"text": "Alice has a cat called Miso"})
    assert [i.key for i in store.search(NS, query="cat Miso")] == ["k"]


def test_other_dims_are_refused_saying_what_is_allowed(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInputError) as err:
        MnemoniaStore(engine=engine, index={"dims": 1536, "fields": ["text"]})
    message = str(err.value)
    assert "dims=1536" in message and "256-dimension" in message and "dims=256" in message
    assert "mnemonia/hashing-256" in message
    assert engine.tenants() == []


def test_the_engines_own_model_as_embed_is_accepted(engine: MemoryEngine,
                                                    hashing_embedder: HashingEmbedder) -> None:
    store = MnemoniaStore(engine=engine, index={"dims": 256, "embed": hashing_embedder})
    store.put(NS, "k", {"text": "Alice has a cat called Miso"})
    assert store.get(NS, "k") is not None


def test_another_embed_on_a_given_engine_is_refused_with_the_reason(
        engine: MemoryEngine, hashing_embedder: HashingEmbedder) -> None:
    embed = _embed_fn(HashingEmbedder(dimension=64))
    with pytest.raises(InvalidInputError) as err:
        MnemoniaStore(engine=engine, index={"dims": 64, "embed": embed, "fields": ["text"]})
    message = str(err.value)
    assert "cannot be used" in message and "mnemonia/hashing-256" in message
    assert "MemoryEngine.open(path, embedder=" in message
    assert "dims=64" in message  # both problems in one error
    assert embed.calls == [] and engine.tenants() == []  # type: ignore[attr-defined]


def test_an_embed_is_used_when_the_store_opens_its_own_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    embed = _embed_fn(HashingEmbedder(dimension=64))
    store = MnemoniaStore(index={"dims": 64, "embed": embed, "fields": ["text"]})
    try:
        assert store.engine.path == (tmp_path / "memory").resolve()
        assert store.engine.embedder.dimension == 64
        store.put(NS, "tea", {"text": "Alice drinks green tea"})
        store.put(NS, "trip", {"text": "Alice flies to Lisbon"})
        assert store.search(NS, query="green tea", limit=1)[0].key == "tea"
        embedded = [t for call in embed.calls for t in call]  # type: ignore[attr-defined]
        assert any("green tea" in t for t in embedded)
        # The process's shared store now runs that model: another embed cannot replace it.
        with pytest.raises(InvalidInputError, match="already open with the model"):
            MnemoniaStore(index={"embed": _embed_fn(HashingEmbedder(dimension=64))})
    finally:
        store.engine.close()


def test_wrong_dims_for_a_store_it_would_open_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError, match="dims=1536 does not match"):
        MnemoniaStore(index={"dims": 1536, "embed": _embed_fn(HashingEmbedder(dimension=64))})
    assert not (tmp_path / "memory").exists()


async def _aembed(texts: list[str]) -> list[list[float]]:
    return [[1.0] for _ in texts]


@pytest.mark.parametrize(("index", "index_fields", "says"), [
    ({"dims": 256, "fields": ["text"], "embedding": "x"}, None, "unknown key(s) ['embedding']"),
    ({"dims": "256"}, None, "dims='256'"),
    ({"dims": 0}, None, "dims=0"),
    ({"dims": True}, None, "dims=True"),
    ({"fields": "text"}, None, "fields='text'"),
    ({"fields": ["text", ""]}, None, "fields=['text', '']"),
    ({"embed": 42}, None, "embed=42"),
    ({"embed": _aembed}, None, "async function"),
    ({"fields": ["a"]}, ["b"], "disagree"),
    (["text"], None, "must be a LangGraph IndexConfig dict"),
    (None, "text", "index_fields='text'"),
])
def test_bad_index_configs_are_refused(engine: MemoryEngine, index: Any, index_fields: Any,
                                       says: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        MnemoniaStore(engine=engine, index=index, index_fields=index_fields)
    assert says in str(err.value)
    assert engine.tenants() == []


def test_every_violation_is_reported_at_once(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInputError) as err:
        MnemoniaStore(engine=engine, index={"dims": -1, "fields": 3, "extra": 1})
    message = str(err.value)
    assert "dims=-1" in message and "fields=3" in message and "['extra']" in message


@pytest.fixture
def both(engine: MemoryEngine, hashing_embedder: HashingEmbedder) -> Iterator[
        list[BaseStore]]:
    """The same index config on LangGraph's InMemoryStore and on MnemoniaStore."""
    embed = _embed_fn(hashing_embedder)
    index = {"dims": 256, "embed": embed, "fields": ["memory"]}
    yield [InMemoryStore(index=index),  # type: ignore[arg-type]
           MnemoniaStore(engine=engine, index={**index, "embed": hashing_embedder})]


def test_same_calls_same_answers_as_inmemorystore(both: list[BaseStore]) -> None:
    answers = []
    for store in both:
        store.put(NS, "tea", {"memory": "Alice drinks green tea", "note": "Lisbon flight"})
        store.put(NS, "trip", {"memory": "Alice flies to Lisbon", "note": "green tea"})
        store.put(NS, "cat", {"memory": "Alice has a cat called Miso", "note": "n"})
        store.put(("users", "bob"), "tea", {"memory": "Bob drinks green tea"})
        top_tea = store.search(NS, query="green tea", limit=1)[0].key
        top_trip = store.search(NS, query="flies to Lisbon", limit=1)[0].key
        unindexed = store.search(NS, query="green tea", limit=3)
        store.put(NS, "cat", {"memory": "Alice's cat Miso is now called Tuna"})
        store.delete(NS, "trip")
        answers.append((
            top_tea, top_trip, sorted(i.key for i in unindexed),
            store.get(NS, "cat").value,  # type: ignore[union-attr]
            store.get(NS, "trip"),
            sorted(i.key for i in store.search(NS, query="Lisbon")),
            [i.namespace for i in store.search(("users", "bob"), query="tea")],
        ))
    assert answers[0] == answers[1]
    assert answers[0][:2] == ("tea", "trip")


async def test_async_calls_with_an_index_config(both: list[BaseStore]) -> None:
    for store in both:
        await store.aput(NS, "tea", {"memory": "Alice drinks green tea"})
        await store.aput(NS, "trip", {"memory": "Alice flies to Lisbon"})
        found = await store.asearch(NS, query="green tea", limit=1)
        assert [i.key for i in found] == ["tea"]
        await store.adelete(NS, "tea")
        assert await store.aget(NS, "tea") is None


def test_the_signature_takes_index_as_langgraphs_stores_do() -> None:
    assert "index" in inspect.signature(MnemoniaStore).parameters
    assert inspect.signature(MnemoniaStore).parameters["index"].kind is \
        inspect.signature(InMemoryStore).parameters["index"].kind
