"""A reusable suite for LlamaIndex retrievers (``BaseRetriever``) over a document collection.

It pins what a user of ``VectorIndexRetriever`` relies on: ``NodeWithScore`` lists, best first,
``k`` meaning "k nodes", sync and async agreeing, and the retriever working inside
``RetrieverQueryEngine``. LlamaIndex's own ``VectorIndexRetriever`` passes it
(``tests/llama_index/test_llama_index_retriever.py``).

Subclasses provide one fixture, ``make_retriever``: a callable ``(texts, k) -> BaseRetriever``
returning a retriever of ``k`` nodes over fresh storage holding exactly ``texts``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle

MakeRetriever = Callable[[list[str], int], BaseRetriever]

DOCS = [
    "The staging database listens on port 5433.",
    "Deploys to production happen on Tuesdays after the review.",
    "The cache is a Redis cluster with three nodes.",
    "On-call engineers rotate every Monday morning.",
    "Backups of the database run nightly at two o'clock.",
]


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


class LlamaIndexRetrieverContract:
    """Behaviour every retriever must show. Needs the ``make_retriever`` fixture."""

    def test_returns_nodes_with_scores(self, make_retriever: MakeRetriever) -> None:
        nodes = make_retriever(DOCS, 3).retrieve("Which port does the staging database use?")
        assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
        assert all(n.node.get_content() in DOCS for n in nodes)
        assert all(isinstance(n.score, float) for n in nodes)

    def test_best_first(self, make_retriever: MakeRetriever) -> None:
        nodes = make_retriever(DOCS, 5).retrieve("database port")
        scores = [n.score for n in nodes]
        assert scores == sorted(scores, reverse=True)

    @pytest.mark.parametrize("k", [1, 2, 4])
    def test_k_means_k_nodes(self, make_retriever: MakeRetriever, k: int) -> None:
        nodes = make_retriever(DOCS, k).retrieve("something about the weather on Mars")
        assert len(nodes) == k
        assert len(set(_ids(nodes))) == k

    def test_fewer_documents_than_k(self, make_retriever: MakeRetriever) -> None:
        nodes = make_retriever(DOCS[:2], 5).retrieve("database")
        assert sorted(n.node.get_content() for n in nodes) == sorted(DOCS[:2])

    def test_query_bundle_or_string(self, make_retriever: MakeRetriever) -> None:
        retriever = make_retriever(DOCS, 3)
        a = retriever.retrieve("When do deploys happen?")
        b = retriever.retrieve(QueryBundle(query_str="When do deploys happen?"))
        assert _ids(a) == _ids(b)

    async def test_async_agrees_with_sync(self, make_retriever: MakeRetriever) -> None:
        retriever = make_retriever(DOCS, 3)
        sync = retriever.retrieve("Redis cluster cache")
        asynchronous = await retriever.aretrieve("Redis cluster cache")
        assert set(_ids(asynchronous)) == set(_ids(sync))
        assert all(isinstance(n, NodeWithScore) for n in asynchronous)

    def test_node_ids_are_stable(self, make_retriever: MakeRetriever) -> None:
        retriever = make_retriever(DOCS, 5)
        first = {n.node.get_content(): n.node.node_id for n in retriever.retrieve("database")}
        again = {n.node.get_content(): n.node.node_id for n in retriever.retrieve("database")}
        assert first == again

    def test_in_a_query_engine(self, make_retriever: MakeRetriever) -> None:
        retriever = make_retriever(DOCS, 2)
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        response = engine.query("Which port does the staging database use?")
        assert len(response.source_nodes) == 2
        assert all(n.node.get_content() in str(response) for n in response.source_nodes)

    async def test_in_a_query_engine_async(self, make_retriever: MakeRetriever) -> None:
        retriever = make_retriever(DOCS, 2)
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        response = await engine.aquery("When are backups made?")
        assert len(response.source_nodes) == 2
