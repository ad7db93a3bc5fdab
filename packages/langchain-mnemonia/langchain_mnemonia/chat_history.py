"""``MnemoniaChatMessageHistory``: a chat history whose every message is also a memory."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from mnemonia import Memory, MemoryEngine
from mnemonia.errors import InvalidInputError

from langchain_mnemonia._private.engine import default_engine
from langchain_mnemonia._private.messages import (
    CLEARED_FLAG,
    HISTORY_FLAG,
    episode_text,
    message_from_record,
    message_record,
    speaker_of,
)
from langchain_mnemonia._private.validation import check_boolean, check_tenant

__all__ = ["MnemoniaChatMessageHistory"]


class MnemoniaChatMessageHistory(BaseChatMessageHistory):
    """Chat message history whose every message is also a Mnemonia ``episode`` memory:
    messages of one session come back in order, and any session of the tenant can recall them.

    Every message is stored as an episode of ``session_id`` spoken by its speaker
    (``message.name``, else ``human_prefix`` / ``ai_prefix`` / ``System`` / ``Tool``), so it is
    embedded as ``Speaker said, "text"``. The full message (type, name, tool calls, ...) is kept
    in the memory's metadata and comes back unchanged from :attr:`messages`. :meth:`clear`
    empties this session's history only; the episodes stay long-term memories until forgotten
    or evicted. (LangChain deprecates ``BaseChatMessageHistory`` since langchain-core 1.6.4,
    removal in 2.0; subclasses do not warn. For LangGraph apps, :class:`MnemoniaStore` is the
    durable path.)

    Setup:
        Install ``langchain-mnemonia``; the embedded store runs offline.

        .. code-block:: bash

            pip install -U langchain-mnemonia

    Key init args:
        engine: MemoryEngine | None
            The memory engine; ``None``: the embedded default (``./memory``).
        tenant: str
            Whose memory the messages become.
        session_id: str
            The conversation (1-256 characters).
        importance, topic:
            Given to each stored message.
        human_prefix, ai_prefix: str
            Speaker names of messages without ``name``.
        report_use: bool
            Report each AI message as the reply to the tenant's last recall, so the memories it
            echoed count as used and rank higher for similar questions.

    Instantiate:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from langchain_mnemonia import MnemoniaChatMessageHistory
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s1")

    Usage:
        >>> history.add_user_message("I just adopted a cat called Miso")
        >>> history.add_ai_message("Congratulations! How old is Miso?")
        >>> [m.type for m in history.messages]
        ['human', 'ai']
        >>> history.clear()
        >>> history.messages
        []
        >>> engine.recall("what is the cat called?", tenant="alice").memories[0].memory.text
        'I just adopted a cat called Miso'
        >>> engine.close()

    Use within a chain:
        .. code-block:: python

            from langchain_core.runnables.history import RunnableWithMessageHistory

            chat = RunnableWithMessageHistory(
                prompt | llm,
                lambda session_id: MnemoniaChatMessageHistory(
                    engine=engine, tenant="alice", session_id=session_id),
                input_messages_key="input", history_messages_key="history")
    """

    def __init__(
        self,
        engine: MemoryEngine | None = None,
        *,
        tenant: str,
        session_id: str,
        importance: float = 0.5,
        topic: str | None = None,
        human_prefix: str = "Human",
        ai_prefix: str = "AI",
        report_use: bool = True,
    ) -> None:
        """Open the history of one session.

        Args:
            engine: The memory engine; ``None`` opens the embedded default (``./memory``).
            tenant: Whose memory the messages become.
            session_id: The conversation; 1-256 characters.
            importance: Importance in [0, 1] given to each stored message.
            topic: Optional topic of the stored messages.
            human_prefix: Speaker name for human messages without ``name``.
            ai_prefix: Speaker name for AI messages without ``name``.
            report_use: Report each AI message to the engine as the reply to the tenant's
                last recall (``engine.report_use``), so the memories it echoed count as used
                and rank higher for similar questions.
        """
        if not isinstance(session_id, str) or not session_id or len(session_id) > 256:
            raise InvalidInputError(f"session_id={session_id!r}: must be a 1-256 char string")
        for name, value in (("human_prefix", human_prefix), ("ai_prefix", ai_prefix)):
            if not isinstance(value, str) or not value.strip():
                raise InvalidInputError(f"{name}={value!r}: must be a non-empty string")
        self.engine = engine if engine is not None else default_engine()
        self.tenant = check_tenant(tenant)
        self.session_id = session_id
        self.importance = importance
        self.topic = topic
        self.human_prefix = human_prefix
        self.ai_prefix = ai_prefix
        self.report_use = check_boolean(report_use, "report_use")

    def __repr__(self) -> str:
        return (f"MnemoniaChatMessageHistory(tenant={self.tenant!r}, "
                f"session_id={self.session_id!r})")

    # ---------------------------------------------------------------- reading
    def _history_memories(self) -> list[Memory]:
        return [m for m in self.engine.list(tenant=self.tenant, session_id=self.session_id)
                if m.metadata.get(HISTORY_FLAG) and not m.metadata.get(CLEARED_FLAG)]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """This session's messages, oldest first (not the ones before the last ``clear``)."""
        return [message_from_record(m.metadata["message"]) for m in self._history_memories()]

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    # ---------------------------------------------------------------- writing
    def _items(self, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        max_chars = self.engine.config.max_text_chars
        items = []
        for message in messages:
            if not isinstance(message, BaseMessage):
                raise InvalidInputError(
                    f"expected LangChain messages, got {type(message).__name__}: {message!r}")
            items.append({
                "text": episode_text(message, max_chars),
                "kind": "episode",
                "importance": self.importance,
                "topic": self.topic,
                "session_id": self.session_id,
                "speaker": speaker_of(message, self.human_prefix, self.ai_prefix),
                "metadata": {"role": message.type, HISTORY_FLAG: True,
                             "message": message_record(message)},
            })
        return items

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages (one batched embedding pass; all or nothing)."""
        items = self._items(messages)
        if items:
            self.engine.add_many(items, tenant=self.tenant)
            self._report(messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        items = self._items(messages)
        if items:
            await self.engine.aadd_many(items, tenant=self.tenant)
            await asyncio.to_thread(self._report, messages)

    def _report(self, messages: Sequence[BaseMessage]) -> None:
        """AI replies are reported as the answer to the tenant's last recall."""
        if not self.report_use:
            return
        for message in messages:
            if message.type == "ai" and message.text.strip():
                self.engine.report_use(message.text, None, tenant=self.tenant)

    def clear(self) -> None:
        """Empty this session's history; its episodes stay recallable long-term memories."""
        for memory in self._history_memories():
            self.engine.update_metadata(memory.id, tenant=self.tenant,
                                        metadata={CLEARED_FLAG: True})

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)
