"""``MnemoniaRetriever``: Mnemonia recall as a LangChain retriever."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from mnemonia import MemoryEngine
from pydantic import Field, field_validator

from langchain_mnemonia._private.documents import hit_to_document
from langchain_mnemonia._private.engine import default_engine
from langchain_mnemonia._private.validation import check_tenant

__all__ = ["MnemoniaRetriever"]

_PER_CALL = ("k", "mode", "topic", "entity", "min_activation", "user_id", "touch")


class MnemoniaRetriever(BaseRetriever):
    """Mnemonia recall as a LangChain retriever: a tenant's memories, best first, as
    ``Document`` objects.

    Setup:
        Install ``langchain-mnemonia``. The embedded store (Chroma + SQLite + the bundled
        all-MiniLM-L6-v2 model) runs offline; no API key.

        .. code-block:: bash

            pip install -U langchain-mnemonia

    Key init args:
        engine: MemoryEngine | None
            The memory engine; ``None``: the embedded default (``./memory``), opened on first
            use and shared with every adapter built without one.
        tenant: str
            Whose memories to search; tenants never see each other.
        k: int
            How many documents (default 3): exactly ``k`` whenever the tenant holds at least
            ``k`` memories (``min_activation=0`` fills the list with weak matches).
        mode, topic, entity, min_activation, user_id, touch:
            Passed to ``engine.recall``; each can also be given per call
            (``retriever.invoke(query, k=1)``).

    Instantiate:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from langchain_mnemonia import MnemoniaRetriever
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> _ = engine.add("Alice prefers green tea in the morning", tenant="alice")
        >>> _ = engine.add("Alice's flight to Lisbon leaves on Friday", tenant="alice")
        >>> retriever = MnemoniaRetriever(engine=engine, tenant="alice", k=1)

    Usage:
        >>> docs = retriever.invoke("what tea does Alice drink?")
        >>> docs[0].page_content
        'Alice prefers green tea in the morning'
        >>> sorted(k for k in ("id", "score", "explanation") if k in docs[0].metadata)
        ['explanation', 'id', 'score']
        >>> len(retriever.invoke("Lisbon", k=2))
        2
        >>> engine.close()

        Each document's metadata carries the memory ``id``, its ``score`` and the score
        ``explanation`` (cosine, keyword overlap, spreading path, retention, utility).

    Use within a chain:
        .. code-block:: python

            from langchain_core.output_parsers import StrOutputParser
            from langchain_core.prompts import ChatPromptTemplate
            from langchain_core.runnables import RunnablePassthrough

            prompt = ChatPromptTemplate.from_template(
                "Answer from what you remember.\\n\\nMemories: {context}\\n\\nQuestion: {question}")

            def format_docs(docs):
                return "\\n".join(doc.page_content for doc in docs)

            chain = (
                {"context": retriever | format_docs, "question": RunnablePassthrough()}
                | prompt
                | llm
                | StrOutputParser()
            )
            chain.invoke("What does Alice drink in the morning?")
    """

    engine: MemoryEngine | None = None
    """The memory engine; ``None``: the embedded default (``./memory``), opened on first use."""
    tenant: str
    """Whose memories to search; tenants never see each other."""
    k: int = Field(default=3, ge=1)
    """How many documents to return."""
    mode: str | None = None
    """Score blend (``agent_memory``, ``general``, ``belief``, ``procedural``, ``relevance``);
    ``None`` uses the engine's default mode."""
    topic: str | None = None
    """Keep memories of this topic and untopiced ones."""
    entity: str | None = None
    """Keep only memories linked to this ``type:name`` entity."""
    min_activation: float = Field(default=0.0, ge=0.0, le=1.0)
    """Activation floor. 0 (the default) fills the list up to ``k``."""
    user_id: str | None = None
    """Who is asking (re-evaluation counts distinct users)."""
    touch: bool = True
    """Record the access (strengthens recalled memories), as the engine does by default."""

    @field_validator("tenant")
    @classmethod
    def _valid_tenant(cls, value: str) -> str:
        return check_tenant(value)

    def _engine(self) -> MemoryEngine:
        """The engine; the embedded default is opened here, on first use (never while the
        object is validated: building a retriever opens no database)."""
        if self.engine is None:
            self.engine = default_engine()
        return self.engine

    def _recall_kwargs(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(overrides) - set(_PER_CALL) - {"verbose"})
        if unknown:
            raise TypeError(
                f"MnemoniaRetriever got unexpected argument(s) {unknown}; per call it accepts "
                f"{', '.join(_PER_CALL)}")
        params = {name: overrides.get(name, getattr(self, name)) for name in _PER_CALL}
        params["tenant"] = self.tenant
        return params

    def _to_documents(self, result: Any) -> list[Document]:
        return [hit_to_document(hit, rank) for rank, hit in enumerate(result.memories, start=1)]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._to_documents(self._engine().recall(query, **self._recall_kwargs(kwargs)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result = await self._engine().arecall(query, **self._recall_kwargs(kwargs))
        return self._to_documents(result)
