"""``MnemoniaRetriever``: a tenant's Mnemonia memory as a LlamaIndex retriever."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.memory.mnemonia import _private as P

from mnemonia import Hit, MemoryEngine, RecallResult, validation

__all__ = ["METADATA_KEYS_FOR_LLM", "MnemoniaRetriever"]

#: Node metadata the LLM sees next to the text (the rest is for code: ids, explanation...).
METADATA_KEYS_FOR_LLM = ("created_at",)


class MnemoniaRetriever(BaseRetriever):
    """Retrieve a tenant's memories with Mnemonia's recall pipeline.

    Returns exactly ``k`` nodes when the tenant holds at least ``k`` memories (no activation
    floor: ``k`` means "k documents", as LlamaIndex users expect), best first. Each node's id is
    the memory id; its metadata holds ``id``, ``kind``, ``created_at``, ``importance``,
    ``entities``, the score ``explanation`` (cosine, keyword, spreading path, retention,
    utility, final score) and links to contradicting or superseded memories. Only the text and
    ``created_at`` reach the LLM. Sync and async; works in ``RetrieverQueryEngine``.

    Example:
        >>> import tempfile
        >>> from llama_index.core.llms import MockLLM
        >>> from llama_index.core.query_engine import RetrieverQueryEngine
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from llama_index.memory.mnemonia import MnemoniaRetriever
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> _ = engine.add_many([{"text": "The staging database runs on port 5433"},
        ...                      {"text": "Deploys happen on Tuesdays"}], tenant="ops")
        >>> retriever = MnemoniaRetriever(engine=engine, tenant="ops", k=2)
        >>> nodes = retriever.retrieve("which port does the staging database use?")
        >>> len(nodes), nodes[0].node.text
        (2, 'The staging database runs on port 5433')
        >>> sorted(nodes[0].node.metadata["explanation"])[:3]
        ['activation', 'cosine', 'entity']
        >>> query_engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        >>> response = query_engine.query("staging database port")
        >>> response.source_nodes[0].node.node_id == nodes[0].node.node_id
        True
        >>> engine.close()

    Args:
        engine: A :class:`mnemonia.MemoryEngine`; ``None`` opens the embedded default store.
        tenant: Whose memories.
        k: How many nodes to return (default 3).
        topic, mode, user_id: Passed to ``engine.recall``.
        touch: Record the access (strengthens retrieved memories). Default True.
    """

    def __init__(
        self,
        engine: MemoryEngine | None = None,
        *,
        tenant: str,
        k: int = 3,
        topic: str | None = None,
        mode: str | None = None,
        user_id: str | None = None,
        touch: bool = True,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.tenant = P.check_tenant(tenant)
        self.k = k
        validation.boolean(touch, "touch")
        self.engine = P.resolve_engine(engine)
        self.topic = topic
        self.mode = mode
        self.user_id = user_id
        self.touch = touch
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def k(self) -> int:
        """How many nodes each retrieval returns (settable)."""
        return self._k

    @k.setter
    def k(self, value: int) -> None:
        self._k = P.check_k(value)

    def _kwargs(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "k": self.k, "topic": self.topic, "mode": self.mode,
                "user_id": self.user_id, "touch": self.touch, "min_activation": 0}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self.engine.recall(query_bundle.query_str, **self._kwargs()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(await self.engine.arecall(query_bundle.query_str, **self._kwargs()))

    def _nodes(self, result: RecallResult) -> list[NodeWithScore]:
        return [self.hit_to_node(h) for h in result.memories]

    @staticmethod
    def hit_to_node(hit: Hit) -> NodeWithScore:
        """One recall hit as a ``NodeWithScore`` (id = memory id, explanation in metadata)."""
        m = hit.memory
        user_md = {key: v for key, v in m.metadata.items() if key != P.MESSAGE_KEY}
        metadata: dict[str, Any] = {
            "id": m.id,
            "tenant": m.tenant,
            "kind": m.kind,
            "topic": m.topic,
            "session_id": m.session_id,
            "created_at": m.created_at.isoformat(),
            "importance": m.importance,
            "entities": list(m.entities),
            "score": hit.score,
            "explanation": hit.explanation.to_dict(),
            "contradictions": list(hit.contradictions),
            "supersedes": list(hit.supersedes),
            "memory_metadata": user_md,
        }
        hidden = [key for key in metadata if key not in METADATA_KEYS_FOR_LLM]
        node = TextNode(id_=m.id, text=m.text, metadata=metadata,
                        excluded_llm_metadata_keys=hidden,
                        excluded_embed_metadata_keys=list(metadata))
        return NodeWithScore(node=node, score=hit.score)
