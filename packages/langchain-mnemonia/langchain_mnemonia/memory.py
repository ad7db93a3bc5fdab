"""``MnemoniaMemory``: long-term memory for legacy ``langchain_classic`` chains.

Needs the ``[legacy]`` extra: ``pip install "langchain-mnemonia[legacy]"``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from mnemonia import MemoryEngine, RecallResult
from pydantic import Field, PrivateAttr, field_validator

from langchain_mnemonia._private.engine import default_engine
from langchain_mnemonia._private.extras import missing_extra
from langchain_mnemonia._private.messages import episode_text
from langchain_mnemonia._private.validation import check_tenant
from langchain_mnemonia.chat_history import MnemoniaChatMessageHistory

try:
    from langchain_classic.base_memory import BaseMemory
except ImportError as e:  # pragma: no cover - exercised by a test that hides the package
    raise missing_extra("legacy", e) from e

__all__ = ["MnemoniaMemory"]


def _as_text(value: Any) -> str:
    if isinstance(value, BaseMessage):
        return value.text
    return value if isinstance(value, str) else str(value)


class MnemoniaMemory(BaseMemory):
    """Legacy LangChain memory (``langchain_classic``) that recalls what matters for each
    input: a drop-in where ``ConversationBufferMemory`` was.

    ``load_memory_variables`` recalls the tenant's memories for the chain input and renders the
    ``RELEVANT EPISODES`` / ``RELEVANT MEMORY`` sections under ``memory_key`` (default
    ``history``). The engine's ``min_activation`` floor decides what is injected, so an
    unrelated input gets nothing. ``save_context`` stores the turn (input and output as
    episodes) and reports to the engine which recalled memories the output used, which
    strengthens them. ``clear`` forgets only the per-turn state; long-term memories stay
    (forget them with the engine).

    Setup:
        Install ``langchain-mnemonia`` with the ``legacy`` extra (``langchain-classic``).

        .. code-block:: bash

            pip install -U "langchain-mnemonia[legacy]"

    Key init args:
        engine: MemoryEngine | None
            The memory engine; ``None``: the embedded default (``./memory``), opened on first
            use.
        tenant: str
            Whose memory.
        memory_key: str
            The prompt variable this memory fills (default ``history``).
        session_id: str | None
            If set, turns are also kept as this session's chat history.
        k, episode_k, mode, topic, min_activation:
            Passed to ``engine.recall`` (``None``: the engine's defaults).
        return_messages: bool
            Return one ``SystemMessage`` (for ``MessagesPlaceholder``) instead of a string.

    Instantiate:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from langchain_mnemonia import MnemoniaMemory
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> memory = MnemoniaMemory(engine=engine, tenant="alice")

    Usage:
        >>> memory.save_context({"input": "My sister Ana lives in Porto"},
        ...                     {"output": "Nice, Porto is lovely."})
        >>> print(memory.load_memory_variables({"input": "Where does Ana live?"})["history"])
        RELEVANT MEMORY
        - My sister Ana lives in Porto
        >>> memory.memory_variables
        ['history']
        >>> engine.close()
    """

    engine: MemoryEngine | None = None
    """The memory engine; ``None`` opens the embedded default (``./memory``)."""
    tenant: str
    """Whose memory."""
    memory_key: str = "history"
    """The prompt variable this memory fills."""
    input_key: str | None = None
    """Which chain input is the query; ``None``: the only input that is not a memory variable."""
    output_key: str | None = None
    """Which chain output is the reply; ``None``: the only output (or ``output``)."""
    session_id: str | None = None
    """If set, turns are also kept as this session's chat history."""
    k: int | None = Field(default=None, ge=1)
    """How many memories to recall; ``None``: the engine's default."""
    episode_k: int | None = Field(default=None, ge=0)
    """How many direct episode hits for ``RELEVANT EPISODES``; ``None``: the engine's default."""
    mode: str | None = None
    """Score blend; ``None``: the engine's default mode."""
    topic: str | None = None
    """Recall this topic (and untopiced memories); stored turns get this topic."""
    min_activation: float | None = Field(default=None, ge=0.0, le=1.0)
    """Activation floor; ``None``: the engine's default."""
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    """Importance of the stored turns."""
    include_snapshot: bool = False
    """Also inject the tenant's snapshot (top memories by priority) before what is recalled."""
    return_messages: bool = False
    """Return a list with one ``SystemMessage`` (for ``MessagesPlaceholder``) not a string."""
    human_prefix: str = "Human"
    """Speaker name of the input."""
    ai_prefix: str = "AI"
    """Speaker name of the output."""
    user_id: str | None = None
    """Who is asking (re-evaluation counts distinct users)."""

    _recalled: list[str] = PrivateAttr(default_factory=list)

    @field_validator("tenant")
    @classmethod
    def _valid_tenant(cls, value: str) -> str:
        return check_tenant(value)

    def _engine(self) -> MemoryEngine:
        """The engine; the embedded default is opened here, on first use (never while the
        object is validated: building the memory opens no database)."""
        if self.engine is None:
            self.engine = default_engine()
        return self.engine

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    @property
    def last_recalled(self) -> list[str]:
        """Ids of the memories injected by the last ``load_memory_variables``."""
        return list(self._recalled)

    # ---------------------------------------------------------------- inputs and outputs
    def _input(self, inputs: dict[str, Any]) -> str:
        if self.input_key is not None:
            return _as_text(inputs[self.input_key])
        keys = [k for k in inputs if k not in (*self.memory_variables, "stop")]
        if len(keys) != 1:
            raise ValueError(
                f"MnemoniaMemory expects one input key, got {sorted(keys)}; set input_key=...")
        return _as_text(inputs[keys[0]])

    def _output(self, outputs: dict[str, Any]) -> str:
        if self.output_key is not None:
            return _as_text(outputs[self.output_key])
        if len(outputs) == 1:
            return _as_text(next(iter(outputs.values())))
        if "output" in outputs:
            return _as_text(outputs["output"])
        raise ValueError(
            f"MnemoniaMemory got several output keys {sorted(outputs)}; set output_key=...")

    def _recall_kwargs(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "k": self.k, "episode_k": self.episode_k,
                "mode": self.mode, "topic": self.topic, "min_activation": self.min_activation,
                "user_id": self.user_id}

    def _variables(self, result: RecallResult | None, snapshot: str) -> dict[str, Any]:
        parts = []
        if snapshot.strip():
            parts.append(snapshot.strip())
        if result is not None:
            self._recalled = [h.memory.id for h in (*result.memories, *result.episodes)]
            rendered = result.render()
            if rendered:
                parts.append(rendered)
        else:
            self._recalled = []
        text = "\n\n".join(parts)
        if self.return_messages:
            return {self.memory_key: [SystemMessage(content=text)] if text else []}
        return {self.memory_key: text}

    # ---------------------------------------------------------------- BaseMemory
    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Recall for the chain input and render the ``RELEVANT ...`` sections."""
        engine = self._engine()
        query = self._input(inputs)
        result = engine.recall(query, **self._recall_kwargs()) if query.strip() else None
        snapshot = engine.snapshot(self.tenant) if self.include_snapshot else ""
        return self._variables(result, snapshot)

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        engine = self._engine()
        query = self._input(inputs)
        result = (await engine.arecall(query, **self._recall_kwargs())
                  if query.strip() else None)
        snapshot = (await asyncio.to_thread(engine.snapshot, self.tenant)
                    if self.include_snapshot else "")
        return self._variables(result, snapshot)

    def _turn(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> tuple[str, str]:
        return self._input(inputs), self._output(outputs)

    def _history(self) -> MnemoniaChatMessageHistory | None:
        if self.session_id is None:
            return None
        return MnemoniaChatMessageHistory(
            self._engine(), tenant=self.tenant, session_id=self.session_id,
            importance=self.importance, topic=self.topic, human_prefix=self.human_prefix,
            ai_prefix=self.ai_prefix)

    def _messages(self, question: str, answer: str) -> list[BaseMessage]:
        out: list[BaseMessage] = []
        if question.strip():
            out.append(HumanMessage(content=question))
        if answer.strip():
            out.append(AIMessage(content=answer))
        return out

    def _items(self, messages: list[BaseMessage]) -> list[dict[str, Any]]:
        max_chars = self._engine().config.max_text_chars
        return [{"text": episode_text(m, max_chars), "kind": "episode",
                 "importance": self.importance, "topic": self.topic,
                 "speaker": self.human_prefix if m.type == "human" else self.ai_prefix,
                 "metadata": {"role": m.type}} for m in messages]

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Store the turn and report which recalled memories the reply used."""
        engine = self._engine()
        question, answer = self._turn(inputs, outputs)
        messages = self._messages(question, answer)
        history = self._history()
        if history is not None:
            history.add_messages(messages)
        elif messages:
            engine.add_many(self._items(messages), tenant=self.tenant)
        if self._recalled and answer.strip():
            engine.report_use(answer, self._recalled, tenant=self.tenant)
        self._recalled = []

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        engine = self._engine()
        question, answer = self._turn(inputs, outputs)
        messages = self._messages(question, answer)
        history = self._history()
        if history is not None:
            await history.aadd_messages(messages)
        elif messages:
            await engine.aadd_many(self._items(messages), tenant=self.tenant)
        if self._recalled and answer.strip():
            await asyncio.to_thread(engine.report_use, answer, self._recalled,
                                    tenant=self.tenant)
        self._recalled = []

    def clear(self) -> None:
        """Forget the per-turn state (what was last recalled). Long-term memories stay."""
        self._recalled = []

    async def aclear(self) -> None:
        self.clear()
