"""``MnemoniaMemory``: a drop-in for ``ChatMemoryBuffer`` with long-term memory behind it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.llms.llm import LLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.memory.types import BaseMemory
from llama_index.core.utils import get_tokenizer
from llama_index.memory.mnemonia import _private as P

from mnemonia import Memory, MemoryEngine, RecallResult, validation
from mnemonia.errors import InvalidInputError

__all__ = ["DEFAULT_CHAT_HISTORY_TOKEN_RATIO", "DEFAULT_TOKEN_LIMIT", "DEFAULT_TOKEN_LIMIT_RATIO",
           "MnemoniaMemory"]

#: Same defaults as ``ChatMemoryBuffer``.
DEFAULT_TOKEN_LIMIT = 3000
DEFAULT_TOKEN_LIMIT_RATIO = 0.75
#: Same default as LlamaIndex ``Memory``: the chat keeps at least 70% of the token budget.
DEFAULT_CHAT_HISTORY_TOKEN_RATIO = 0.7
_SOURCE = "llama_index.MnemoniaMemory"


class MnemoniaMemory(BaseMemory):
    """Chat memory for one session of one tenant, with the tenant's long-term memory behind it.

    Use it wherever ``ChatMemoryBuffer`` is used (``SimpleChatEngine``, ``FunctionAgent``,
    ``ReActAgent``...). Every message put into it is stored in Mnemonia as an ``episode`` of
    ``session_id``. ``get`` returns the session's recent chat (trimmed to ``token_limit`` by
    LlamaIndex's own ``ChatMemoryBuffer``) plus, first, a system message with what the
    tenant's memory recalls for the input (or, without ``input``, for the latest user
    message): memories from
    earlier sessions, ranked by Mnemonia's recall (similarity, spreading along relations,
    retention, utility) and cut at the engine's ``min_activation`` floor. Messages already in
    the returned chat are not repeated there. ``reset`` empties this session's chat only; the
    episodes stay long-term memories until forgotten.

    Example:
        >>> import tempfile
        >>> from llama_index.core.chat_engine import SimpleChatEngine
        >>> from llama_index.core.llms import ChatMessage, MockLLM
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from llama_index.memory.mnemonia import MnemoniaMemory
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> monday = MnemoniaMemory(engine=engine, tenant="alice", session_id="monday")
        >>> monday.put(ChatMessage(role="user", content="My favourite drink is green tea"))
        >>> friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
        >>> messages = friday.get(input="What is my favourite drink?")
        >>> messages[0].role.value, "green tea" in messages[0].content
        ('system', True)
        >>> chat = SimpleChatEngine.from_defaults(memory=friday, llm=MockLLM())
        >>> _ = chat.chat("Remind me what I like to drink")
        >>> [m.role.value for m in friday.get_all()]
        ['user', 'assistant']
        >>> engine.close()

    Args:
        engine: A :class:`mnemonia.MemoryEngine`; ``None`` opens the embedded default store.
        tenant: Whose memory (tenants never see each other).
        session_id: This conversation; default a new random id.
        k: How many memories to recall per ``get`` (default: the engine's ``default_k``).
        token_limit: Token budget of the returned messages (chat + memory message).
        chat_history_token_ratio: Share of ``token_limit`` kept for the chat (default 0.7, as
            in LlamaIndex ``Memory``); the memory message gets the rest, dropping its
            lowest-scored memories until it fits.
        insert_method: ``"system"`` (default) puts the memories in a system message first;
            ``"user"`` prepends them to the latest user message (for agents that drop a
            leading system message, such as ``ReActAgent`` without a ``system_prompt``).
        memory_template: The memory message, with a ``{memories}`` placeholder.
        importance: Importance given to the stored messages, in [0, 1].
        topic, mode, user_id: Passed to ``engine.recall`` (``topic`` also tags stored messages).
        include_snapshot: Also inject ``engine.snapshot(tenant)``.
        report_use: Report to the engine which recalled memories the next assistant reply used.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: MemoryEngine = Field(exclude=True, description="The Mnemonia engine.")
    tenant: str = Field(description="Whose memory.")
    session_id: str = Field(default_factory=lambda: uuid.uuid4().hex,
                            description="This conversation.")
    k: int | None = Field(default=None, description="Memories recalled per get.")
    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, gt=0)
    chat_history_token_ratio: float = Field(
        default=DEFAULT_CHAT_HISTORY_TOKEN_RATIO, gt=0.0, le=1.0,
        description="Share of token_limit kept for the chat; the memory message gets the rest.")
    tokenizer_fn: Callable[[str], list[Any]] = Field(default_factory=get_tokenizer, exclude=True)
    insert_method: Literal["system", "user"] = "system"
    memory_template: str = P.DEFAULT_MEMORY_TEMPLATE
    importance: float = 0.5
    topic: str | None = None
    mode: str | None = None
    user_id: str | None = None
    include_snapshot: bool = False
    report_use: bool = True

    _last_recalled: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, engine: MemoryEngine | None = None, **data: Any) -> None:
        # Checked here, not in pydantic validators, so callers get Mnemonia's own errors.
        P.check_tenant(data.get("tenant"))
        P.check_optional_k(data.get("k"))
        P.check_importance(data.get("importance", 0.5))
        if "session_id" in data:
            P.check_session_id(data["session_id"])
        template = data.get("memory_template", P.DEFAULT_MEMORY_TEMPLATE)
        if not isinstance(template, str) or "{memories}" not in template:
            raise InvalidInputError(
                f"memory_template={template!r}: must be a string containing '{{memories}}'")
        data["engine"] = P.resolve_engine(engine)
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "MnemoniaMemory"

    @classmethod
    def from_defaults(
        cls,
        engine: MemoryEngine | None = None,
        tenant: str | None = None,
        session_id: str | None = None,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        token_limit: int | None = None,
        tokenizer_fn: Callable[[str], list[Any]] | None = None,
        **kwargs: Any,
    ) -> MnemoniaMemory:
        """Build one like ``ChatMemoryBuffer.from_defaults``: ``token_limit`` defaults to 3/4
        of the LLM's context window (or 3000); ``chat_history`` becomes the session's chat."""
        if token_limit is None:
            token_limit = (int(llm.metadata.context_window * DEFAULT_TOKEN_LIMIT_RATIO)
                           if llm is not None else DEFAULT_TOKEN_LIMIT)
        data: dict[str, Any] = {"tenant": tenant, "token_limit": token_limit, **kwargs}
        if session_id is not None:
            data["session_id"] = session_id
        if tokenizer_fn is not None:
            data["tokenizer_fn"] = tokenizer_fn
        memory = cls(engine=engine, **data)
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    # ----------------------------------------------------------------------------------
    # reading
    # ----------------------------------------------------------------------------------
    def _records(self) -> list[tuple[Memory, ChatMessage]]:
        """The session's short-term chat: stored messages not reset, oldest first."""
        out = []
        for m in self.engine.list(tenant=self.tenant, session_id=self.session_id):
            md = m.metadata
            if md.get(P.CHAT_HISTORY_KEY) and P.MESSAGE_KEY in md and not md.get(P.RESET_KEY):
                out.append((m, P.load_message(md)))
        return out

    def get_all(self) -> list[ChatMessage]:
        """The whole chat history of this session (since the last ``reset``)."""
        return [msg for _, msg in self._records()]

    async def aget_all(self) -> list[ChatMessage]:
        return await asyncio.to_thread(self.get_all)

    def _query(self, input: Any, history: Sequence[ChatMessage]) -> str:
        if isinstance(input, ChatMessage):
            text = P.message_text(input)
        elif input is None:
            text = ""
        elif isinstance(input, str):
            text = input.strip()
        else:
            raise InvalidInputError(f"input={input!r}: must be a string, a ChatMessage or None")
        return text or P.last_user_text(history)

    def _recall_kwargs(self, records: list[tuple[Memory, ChatMessage]],
                       window: list[ChatMessage]) -> dict[str, Any]:
        # what the chat window shows (the question just put included) is left out before
        # scoring: a copy of the question would otherwise top the recall and push the memory
        # it asks about under the relative floor
        shown = [m.id for m, _ in records[len(records) - len(window):]]
        return {"tenant": self.tenant, "k": self.k, "topic": self.topic, "mode": self.mode,
                "user_id": self.user_id, "exclude_ids": shown}

    def _window(self, initial_token_count: int) -> tuple[list[tuple[Memory, ChatMessage]],
                                                         list[ChatMessage]]:
        validation.positive_int(initial_token_count, "initial_token_count", minimum=0)
        if initial_token_count > self.token_limit:
            # ChatMemoryBuffer's message, as a Mnemonia error (still a ValueError)
            raise InvalidInputError(
                f"Initial token count exceeds token limit ({initial_token_count} > "
                f"{self.token_limit})")
        records = self._records()
        return records, self._short_term([msg for _, msg in records], initial_token_count)

    def _short_term(self, messages: list[ChatMessage], initial_token_count: int
                    ) -> list[ChatMessage]:
        """The latest messages that fit: LlamaIndex's own ``ChatMemoryBuffer`` over the
        session's chat does the trimming (never starting on an assistant or tool message,
        keeping at least the latest one), so it is exactly the buffer's."""
        if not messages:
            return []
        buffer = ChatMemoryBuffer.from_defaults(chat_history=messages,
                                                token_limit=self.token_limit,
                                                tokenizer_fn=self.tokenizer_fn)
        return buffer.get(initial_token_count=initial_token_count)

    def _assemble(self, records: list[tuple[Memory, ChatMessage]], window: list[ChatMessage],
                  result: RecallResult | None, snapshot: str, initial_token_count: int
                  ) -> list[ChatMessage]:
        """Leave out what the window shows, fit the memory budget, trim the chat, insert."""
        self._last_recalled = []
        if result is None:
            result = RecallResult(query="", tenant=self.tenant, mode="", memories=[])
        in_window = {m.id for m, _ in records[len(records) - len(window):]}
        result = P.without(result, in_window)
        budget = min(int(self.token_limit * (1.0 - self.chat_history_token_ratio)),
                     self.token_limit - initial_token_count)
        text, result, _ = P.shrink(
            result, snapshot,
            lambda t: len(self.tokenizer_fn(self.memory_template.replace("{memories}", t)))
            <= budget)
        if not text:
            return window
        self._last_recalled = P.shown_ids(result)
        body = self.memory_template.replace("{memories}", text)
        window = self._short_term(window, min(self.token_limit, initial_token_count
                                              + len(self.tokenizer_fn(body))))
        if self.insert_method == "system":
            return [ChatMessage(role=MessageRole.SYSTEM, content=body), *window]
        for i in range(len(window) - 1, -1, -1):
            if window[i].role == MessageRole.USER:
                msg = window[i].model_copy(deep=True)
                msg.blocks = [TextBlock(text=body + "\n\n"), *msg.blocks]
                return [*window[:i], msg, *window[i + 1:]]
        return [*window, ChatMessage(role=MessageRole.USER, content=body)]

    def get(self, input: str | ChatMessage | None = None, initial_token_count: int = 0,
            **kwargs: Any) -> list[ChatMessage]:
        """The memory message (if anything is recalled) and the session's recent chat.

        Args:
            input: What to recall for; default the latest user message of the session.
            initial_token_count: Tokens the caller already uses (e.g. a system prompt),
                counted against ``token_limit`` like ``ChatMemoryBuffer`` does.
        """
        records, window = self._window(initial_token_count)
        query = self._query(input, [msg for _, msg in records])
        result = (self.engine.recall(query, **self._recall_kwargs(records, window))
                  if query else None)
        snapshot = self.engine.snapshot(self.tenant) if self.include_snapshot else ""
        return self._assemble(records, window, result, snapshot, initial_token_count)

    async def aget(self, input: str | ChatMessage | None = None, initial_token_count: int = 0,
                   **kwargs: Any) -> list[ChatMessage]:
        """Async :meth:`get`."""
        records, window = await asyncio.to_thread(self._window, initial_token_count)
        query = self._query(input, [msg for _, msg in records])
        result = (await self.engine.arecall(query, **self._recall_kwargs(records, window))
                  if query else None)
        snapshot = (await asyncio.to_thread(self.engine.snapshot, self.tenant)
                    if self.include_snapshot else "")
        return self._assemble(records, window, result, snapshot, initial_token_count)

    # ----------------------------------------------------------------------------------
    # writing
    # ----------------------------------------------------------------------------------
    def _items(self, messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
        if isinstance(messages, ChatMessage) or not isinstance(messages, Sequence):
            raise InvalidInputError(
                f"expected a list of ChatMessage, got {type(messages).__name__}")
        return [P.message_item(m, session_id=self.session_id,
                               max_chars=self.engine.config.max_text_chars,
                               importance=self.importance, topic=self.topic,
                               chat_history=True, source=_SOURCE) for m in messages]

    def _reply_text(self, messages: Sequence[ChatMessage]) -> str:
        return "\n".join(P.message_text(m) for m in messages
                         if m.role == MessageRole.ASSISTANT and P.message_text(m))

    def _report(self, messages: Sequence[ChatMessage]) -> None:
        reply = self._reply_text(messages)
        if self.report_use and reply and self._last_recalled:
            ids, self._last_recalled = self._last_recalled, []
            P.report_use(self.engine, reply, ids, tenant=self.tenant)

    def put(self, message: ChatMessage) -> None:
        """Store one message of this session (also a long-term episode)."""
        self.put_messages([message])

    async def aput(self, message: ChatMessage) -> None:
        await self.aput_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store messages of this session in order (one batched embedding pass)."""
        items = self._items(messages)
        if items:
            self.engine.add_many(items, tenant=self.tenant)
            self._report(messages)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        items = self._items(messages)
        if items:
            await self.engine.aadd_many(items, tenant=self.tenant)
            await asyncio.to_thread(self._report, messages)

    def set(self, messages: list[ChatMessage]) -> None:
        """Make ``messages`` the session's chat history.

        Messages that extend the current history are only appended (nothing is stored twice);
        the rest of the old history is reset (it stays in long-term memory).
        """
        items = self._items(messages)
        records = self._records()
        keep = 0
        while (keep < len(records) and keep < len(messages)
               and P.same_message(records[keep][1], messages[keep])):
            keep += 1
        self._mark_reset([m for m, _ in records[keep:]])
        if items[keep:]:
            self.engine.add_many(items[keep:], tenant=self.tenant)

    async def aset(self, messages: list[ChatMessage]) -> None:
        await asyncio.to_thread(self.set, messages)

    def _mark_reset(self, memories: Sequence[Memory]) -> None:
        if not memories:
            return
        at = self.engine.clock.now().isoformat()
        for m in memories:
            self.engine.update_metadata(m.id, tenant=self.tenant, metadata={P.RESET_KEY: at})

    def reset(self) -> None:
        """Empty this session's chat history. Its messages stay long-term memories (recalled
        in later sessions) until forgotten with ``engine.forget``."""
        self._mark_reset([m for m, _ in self._records()])
        self._last_recalled = []

    async def areset(self) -> None:
        await asyncio.to_thread(self.reset)
