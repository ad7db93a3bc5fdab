"""MnemoniaRetriever: exactly k documents, best first, explanations, sync and async."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_mnemonia import MnemoniaRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from mnemonia import MemoryEngine
from mnemonia.errors import InvalidTenantError, UnknownModeError
from pydantic import ValidationError

from tests.langchain.conftest import FACTS


def test_returns_exactly_k_best_first(engine: MemoryEngine, facts: dict[str, str]) -> None:
    retriever = MnemoniaRetriever(engine=engine, tenant="alice", k=4)
    docs = retriever.invoke("what is the name of Alice's cat?")
    assert len(docs) == 4
    assert all(isinstance(d, Document) for d in docs)
    assert docs[0].page_content == "Alice's cat is called Miso and loves tuna."
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    assert [d.metadata["rank"] for d in docs] == [1, 2, 3, 4]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 6])
def test_k_means_k_documents_even_for_an_unrelated_query(
        engine: MemoryEngine, facts: dict[str, str], k: int) -> None:
    retriever = MnemoniaRetriever(engine=engine, tenant="alice", k=k)
    assert len(retriever.invoke("zzz qqq xylophone")) == k


def test_fewer_memories_than_k_returns_them_all(engine: MemoryEngine,
                                                facts: dict[str, str]) -> None:
    docs = MnemoniaRetriever(engine=engine, tenant="alice", k=50).invoke("Alice")
    assert sorted(d.page_content for d in docs) == sorted(FACTS)


def test_unknown_tenant_returns_nothing(engine: MemoryEngine) -> None:
    assert MnemoniaRetriever(engine=engine, tenant="nobody").invoke("anything") == []


def test_k_per_call_overrides_the_constructor(engine: MemoryEngine,
                                              facts: dict[str, str]) -> None:
    retriever = MnemoniaRetriever(engine=engine, tenant="alice", k=3)
    assert len(retriever.invoke("cello", k=1)) == 1
    assert len(retriever.invoke("cello", k=5)) == 5
    assert len(retriever.invoke("cello")) == 3


def test_metadata_carries_id_score_and_explanation(engine: MemoryEngine,
                                                   facts: dict[str, str]) -> None:
    doc = MnemoniaRetriever(engine=engine, tenant="alice", k=1).invoke("Redis cache")[0]
    assert doc.page_content == "The team uses Redis as the cache for the web app."
    assert doc.id == doc.metadata["id"] == facts[doc.page_content]
    exp = doc.metadata["explanation"]
    assert exp["score"] == pytest.approx(doc.metadata["score"])
    assert exp["cosine"] > 0 and exp["keyword"] > 0
    assert {"activation", "retention", "utility", "importance", "mode", "path"} <= set(exp)
    assert doc.metadata["kind"] == "fact" and doc.metadata["tenant"] == "alice"


def test_user_metadata_is_kept(engine: MemoryEngine) -> None:
    engine.add("The wifi password is on the fridge", tenant="t", metadata={"source": "note"})
    doc = MnemoniaRetriever(engine=engine, tenant="t", k=1).invoke("wifi password")[0]
    assert doc.metadata["source"] == "note"


def test_tenants_never_see_each_other(engine: MemoryEngine, facts: dict[str, str]) -> None:
    engine.add("Bob keeps his passport in the blue drawer", tenant="bob")
    docs = MnemoniaRetriever(engine=engine, tenant="bob", k=5).invoke("Alice cat Miso")
    assert [d.page_content for d in docs] == ["Bob keeps his passport in the blue drawer"]
    docs = MnemoniaRetriever(engine=engine, tenant="alice", k=6).invoke("passport drawer")
    assert all("passport" not in d.page_content for d in docs)


def test_forgotten_memories_are_not_returned(engine: MemoryEngine,
                                             facts: dict[str, str]) -> None:
    cat = facts["Alice's cat is called Miso and loves tuna."]
    engine.forget(cat, tenant="alice")
    docs = MnemoniaRetriever(engine=engine, tenant="alice", k=6).invoke("cat Miso")
    assert cat not in {d.id for d in docs}
    assert len(docs) == 5


def test_topic_and_mode(engine: MemoryEngine) -> None:
    engine.add("Deploys go out on Tuesdays", tenant="t", topic="work")
    engine.add("Deploy the garden lights on Tuesdays", tenant="t", topic="home")
    retriever = MnemoniaRetriever(engine=engine, tenant="t", k=2, topic="work",
                                  mode="relevance")
    docs = retriever.invoke("deploys on Tuesdays")
    assert [d.page_content for d in docs] == ["Deploys go out on Tuesdays"]
    assert docs[0].metadata["explanation"]["mode"] == "relevance"
    assert len(retriever.invoke("deploys on Tuesdays", topic="home")) == 1
    with pytest.raises(UnknownModeError):
        retriever.invoke("x", mode="no-such-mode")


def test_touch_strengthens_what_is_recalled(engine: MemoryEngine,
                                            facts: dict[str, str]) -> None:
    tea = facts["Alice prefers green tea over coffee in the morning."]
    MnemoniaRetriever(engine=engine, tenant="alice", k=1, touch=False).invoke("green tea")
    assert engine.get(tea, tenant="alice").access_count == 0
    MnemoniaRetriever(engine=engine, tenant="alice", k=1).invoke("green tea")
    assert engine.get(tea, tenant="alice").access_count == 1


def test_bad_arguments(engine: MemoryEngine) -> None:
    with pytest.raises(ValidationError):
        MnemoniaRetriever(engine=engine, tenant="alice", k=0)
    with pytest.raises((ValidationError, InvalidTenantError)):
        MnemoniaRetriever(engine=engine, tenant="not a tenant!")
    retriever = MnemoniaRetriever(engine=engine, tenant="alice")
    with pytest.raises(TypeError, match="top_k"):
        retriever.invoke("x", top_k=3)


async def test_async_matches_sync(engine: MemoryEngine, facts: dict[str, str]) -> None:
    retriever = MnemoniaRetriever(engine=engine, tenant="alice", k=3, touch=False)
    sync = retriever.invoke("Alice hospital nurse")
    docs = await retriever.ainvoke("Alice hospital nurse")
    assert [d.id for d in docs] == [d.id for d in sync]
    assert len(await retriever.ainvoke("Alice hospital nurse", k=1)) == 1


def test_batch_of_queries(engine: MemoryEngine, facts: dict[str, str]) -> None:
    retriever = MnemoniaRetriever(engine=engine, tenant="alice", k=1)
    out = retriever.batch(["cello weekends", "quarterly report due"])
    assert [d[0].page_content for d in out] == [
        "Alice is learning to play the cello on weekends.",
        "The quarterly report is due on the 30th of June."]


@pytest.mark.integration
class TestMnemoniaRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever suite, on the real model, Chroma and SQLite."""

    @pytest.fixture(autouse=True)
    def _engine(self, real_engine: MemoryEngine) -> Iterator[None]:
        real_engine.add_many([{"text": t} for t in FACTS], tenant="docs")
        self.engine = real_engine
        yield

    @property
    def retriever_constructor(self) -> type[MnemoniaRetriever]:
        return MnemoniaRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"engine": self.engine, "tenant": "docs", "k": 3}

    @property
    def retriever_query_example(self) -> str:
        return "What does Alice drink in the morning?"
