"""``MnemoniaRetriever``: the retriever contract (also run on LlamaIndex's own
``VectorIndexRetriever`` as the reference), then ids, explanations and what the LLM sees."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.memory.mnemonia import MnemoniaMemory, MnemoniaRetriever
from mnemonia import MemoryEngine
from mnemonia.errors import InvalidInputError, InvalidTenantError, InvalidTextError

from tests.contracts.llama_index_retriever import DOCS, LlamaIndexRetrieverContract


class TestVectorIndexRetrieverContract(LlamaIndexRetrieverContract):
    """The reference: LlamaIndex's in-memory vector index passes the suite."""

    @pytest.fixture
    def make_retriever(self) -> Callable[[list[str], int], BaseRetriever]:
        def make(texts: list[str], k: int) -> BaseRetriever:
            index = VectorStoreIndex([TextNode(text=t) for t in texts],
                                     embed_model=MockEmbedding(embed_dim=8))
            return index.as_retriever(similarity_top_k=k)
        return make


class TestMnemoniaRetrieverContract(LlamaIndexRetrieverContract):
    @pytest.fixture
    def make_retriever(self, engine: MemoryEngine) -> Callable[[list[str], int], BaseRetriever]:
        count = 0

        def make(texts: list[str], k: int) -> BaseRetriever:
            nonlocal count
            count += 1
            tenant = f"docs{count}"
            engine.add_many([{"text": t} for t in texts], tenant=tenant)
            return MnemoniaRetriever(engine=engine, tenant=tenant, k=k)
        return make


@pytest.fixture
def ops(engine: MemoryEngine) -> MemoryEngine:
    engine.add_many([{"text": t} for t in DOCS], tenant="ops")
    return engine


def test_node_id_and_explanation_in_metadata(ops: MemoryEngine) -> None:
    retriever = MnemoniaRetriever(engine=ops, tenant="ops", k=2)
    nodes = retriever.retrieve("Which port does the staging database use?")
    top = nodes[0]
    assert top.node.get_content() == DOCS[0]
    memory = ops.get(top.node.node_id, tenant="ops")  # the node id is the memory id
    assert top.node.metadata["id"] == memory.id
    res = ops.recall("Which port does the staging database use?", tenant="ops", k=2,
                     min_activation=0, touch=False)
    assert top.node.metadata["explanation"] == res.memories[0].explanation.to_dict()
    assert top.score == pytest.approx(res.memories[0].score)
    assert top.node.metadata["explanation"]["score"] == pytest.approx(top.score)
    md = top.node.metadata
    assert (md["tenant"], md["kind"], md["importance"]) == ("ops", "episode", 0.5)
    assert md["created_at"] == memory.created_at.isoformat()


def test_exactly_k_even_below_the_floor(ops: MemoryEngine) -> None:
    query = "quantum chromodynamics lattice gauge"
    assert len(ops.recall(query, tenant="ops", touch=False)) < 3  # the floor cuts them
    nodes = MnemoniaRetriever(engine=ops, tenant="ops", k=3).retrieve(query)
    assert len(nodes) == 3


def test_the_llm_sees_text_and_date_only(ops: MemoryEngine) -> None:
    node = MnemoniaRetriever(engine=ops, tenant="ops", k=1).retrieve("staging port")[0].node
    for_llm = node.get_content(metadata_mode=MetadataMode.LLM)
    assert DOCS[0] in for_llm and "created_at" in for_llm
    assert "explanation" not in for_llm and "cosine" not in for_llm
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == DOCS[0]


def test_chat_episodes_do_not_carry_the_raw_message(engine: MemoryEngine) -> None:
    from llama_index.core.base.llms.types import ChatMessage
    MnemoniaMemory(engine=engine, tenant="alice", session_id="s").put(
        ChatMessage(role="user", content="My favourite drink is green tea"))
    node = MnemoniaRetriever(engine=engine, tenant="alice", k=1).retrieve("drink")[0].node
    assert node.metadata["session_id"] == "s"
    assert node.metadata["memory_metadata"]["role"] == "user"
    assert "message" not in node.metadata["memory_metadata"]


def test_tenants_never_see_each_other(ops: MemoryEngine) -> None:
    ops.add("Bob's secret: the vault code is 1234", tenant="bob")
    nodes = MnemoniaRetriever(engine=ops, tenant="ops", k=5).retrieve("vault code secret")
    assert all("vault" not in n.node.get_content() for n in nodes)
    assert MnemoniaRetriever(engine=ops, tenant="nobody", k=3).retrieve("anything") == []


def test_forgotten_memories_are_not_retrieved(ops: MemoryEngine) -> None:
    retriever = MnemoniaRetriever(engine=ops, tenant="ops", k=1)
    top = retriever.retrieve("staging database port")[0]
    ops.forget(top.node.node_id, tenant="ops")
    assert top.node.node_id not in [n.node.node_id for n in
                                    MnemoniaRetriever(engine=ops, tenant="ops", k=5)
                                    .retrieve("staging database port")]


def test_k_can_change_between_calls(ops: MemoryEngine) -> None:
    retriever = MnemoniaRetriever(engine=ops, tenant="ops", k=1)
    assert len(retriever.retrieve("database")) == 1
    retriever.k = 4
    assert len(retriever.retrieve("database")) == 4
    with pytest.raises(InvalidInputError):
        retriever.k = 0


def test_touch_strengthens_or_not(ops: MemoryEngine) -> None:
    quiet = MnemoniaRetriever(engine=ops, tenant="ops", k=1, touch=False)
    node_id = quiet.retrieve("staging database port")[0].node.node_id
    assert ops.get(node_id, tenant="ops").access_count == 0
    MnemoniaRetriever(engine=ops, tenant="ops", k=1).retrieve("staging database port")
    assert ops.get(node_id, tenant="ops").access_count == 1


def test_topic_and_mode_are_passed_to_recall(engine: MemoryEngine) -> None:
    engine.add("Use port 5433 for staging", tenant="ops", topic="infra")
    engine.add("Port wine is from Porto", tenant="ops", topic="travel")
    nodes = MnemoniaRetriever(engine=engine, tenant="ops", k=2, topic="infra",
                              mode="relevance").retrieve("port")
    assert [n.node.get_content() for n in nodes] == ["Use port 5433 for staging"]
    assert nodes[0].node.metadata["explanation"]["mode"] == "relevance"


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"tenant": "has space"}, InvalidTenantError),
    ({"tenant": "ops", "k": 0}, InvalidInputError),
    ({"tenant": "ops", "k": "3"}, InvalidInputError),
    ({"tenant": "ops", "touch": "yes"}, InvalidInputError),
])
def test_bad_arguments_are_refused(engine: MemoryEngine, kwargs: dict,
                                   error: type[Exception]) -> None:
    with pytest.raises(error):
        MnemoniaRetriever(engine=engine, **kwargs)


def test_an_empty_query_is_refused(ops: MemoryEngine) -> None:
    with pytest.raises(InvalidTextError):
        MnemoniaRetriever(engine=ops, tenant="ops").retrieve("   ")
