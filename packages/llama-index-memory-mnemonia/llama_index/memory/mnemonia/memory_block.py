"""``MnemoniaMemoryBlock``: Mnemonia long-term memory as a block of LlamaIndex ``Memory``."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.utils import get_tokenizer
from llama_index.memory.mnemonia import _private as P

from mnemonia import MemoryEngine, RecallResult, validation

__all__ = ["MnemoniaMemoryBlock"]

_SOURCE = "llama_index.MnemoniaMemoryBlock"
_CACHE = 16  # rendered contents remembered for atruncate
#: How many of the latest messages make the recall query (measured on follow-up questions,
#: benchmarks/followups.py: see docs/llamaindex.md).
DEFAULT_CONTEXT_WINDOW = 2


@dataclass(frozen=True)
class _Rendered:
    result: RecallResult
    snapshot: str


class MnemoniaMemoryBlock(BaseMemoryBlock[str]):
    """A ``Memory`` block that recalls from, and stores into, a tenant's Mnemonia memory.

    ``aget`` recalls for the latest message(s) and returns the rendered ``RELEVANT EPISODES`` /
    ``RELEVANT MEMORY`` text (only what passes the engine's ``min_activation`` floor; optionally
    the tenant's snapshot too), leaving out the messages the chat itself shows.

    Nothing said in a session is lost: ``Memory`` hands its blocks the messages it flushes
    out of short-term memory only past ``token_limit * chat_history_token_ratio`` tokens
    (21,000 with the defaults) and keeps the chat in memory, so a short session would never
    reach long-term memory. With ``store_each_turn`` (the default) the block stores every
    message of the chat as an episode the first time it sees it (``Memory`` gives it the whole
    chat on every ``get``, and agents call ``get`` again after the final reply); ``aput`` (the
    flush) stores the same messages under the same ids, so nothing is stored twice. When
    ``Memory`` has to shrink the blocks (``priority`` > 0), ``atruncate`` drops the
    lowest-scored memories first.

    Example:
        >>> import tempfile
        >>> from llama_index.core.llms import ChatMessage
        >>> from llama_index.core.memory import Memory
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from llama_index.memory.mnemonia import MnemoniaMemoryBlock
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> _ = engine.add("Bob is allergic to peanuts", tenant="bob", importance=0.9)
        >>> block = MnemoniaMemoryBlock(engine=engine, tenant="bob", name="long_term_memory")
        >>> memory = Memory.from_defaults(session_id="s1", memory_blocks=[block])
        >>> memory.put(ChatMessage(role="user", content="Can Bob eat peanuts?"))
        >>> messages = memory.get()
        >>> "allergic to peanuts" in messages[0].content
        True
        >>> engine.close()

    Args:
        engine: A :class:`mnemonia.MemoryEngine`; ``None`` opens the embedded default store.
        tenant: Whose memory.
        name: The block's name (the tag ``Memory`` wraps its text in).
        k: Memories recalled per ``aget`` (default: the engine's ``default_k``).
        context_window: How many of the latest messages (with text) make the query (default
            2: the latest message and the reply before it, so "And what about her school?"
            still recalls what "her" is about; measured on follow-ups and changes of subject,
            ``benchmarks/followups.py``: 1 message found 22 of 24, 2 found 24, 3-5 found 21).
        priority: ``Memory`` truncation priority; 0 never truncates (LlamaIndex semantics).
        store_roles: Roles of the messages ``aput`` stores (system prompts are left out).
        importance: Importance given to stored messages.
        topic, mode, user_id: Passed to ``engine.recall`` (``topic`` also tags stored ones).
        include_snapshot: Append ``engine.snapshot(tenant)`` to what is recalled.
        report_use: Tell the engine which recalled memories the assistant's next reply used.
        store_each_turn: Store the chat's messages as soon as the block sees them (default
            True); False stores only what ``Memory`` flushes.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="long_term_memory", description="The name of the memory block.")
    description: str | None = Field(
        default="What Mnemonia recalls from the user's long-term memory for the latest messages.")
    priority: int = Field(default=1, description="Truncation priority (0 = never truncate).")
    engine: MemoryEngine = Field(exclude=True)
    tenant: str
    k: int | None = None
    context_window: int = DEFAULT_CONTEXT_WINDOW
    store_roles: tuple[str, ...] = ("user", "assistant", "tool")
    importance: float = 0.5
    topic: str | None = None
    mode: str | None = None
    user_id: str | None = None
    include_snapshot: bool = False
    report_use: bool = True
    store_each_turn: bool = True
    tokenizer_fn: Callable[[str], list[Any]] = Field(default_factory=get_tokenizer, exclude=True)

    _rendered: OrderedDict[str, _Rendered] = PrivateAttr(default_factory=OrderedDict)
    _pending: tuple[str, list[str]] | None = PrivateAttr(default=None)
    _stored: set[str] = PrivateAttr(default_factory=set)

    def __init__(self, engine: MemoryEngine | None = None, **data: Any) -> None:
        P.check_tenant(data.get("tenant"))
        P.check_optional_k(data.get("k"))
        P.check_importance(data.get("importance", 0.5))
        window = data.get("context_window", DEFAULT_CONTEXT_WINDOW)
        validation.positive_int(window, "context_window")
        validation.boolean(data.get("store_each_turn", True), "store_each_turn")
        data["engine"] = P.resolve_engine(engine)
        super().__init__(**data)

    # ----------------------------------------------------------------------------------
    # get
    # ----------------------------------------------------------------------------------
    async def _aget(self, messages: list[ChatMessage] | None = None,
                    **block_kwargs: Any) -> str:
        """Recall for the latest message(s); '' when nothing passes the floor."""
        messages = list(messages or [])
        session_id = block_kwargs.get("session_id")
        session = session_id if isinstance(session_id, str) else None
        shown = await self._store(messages, session, store=False)
        await self._report_previous(messages)
        query = P.query_from(messages, self.context_window)
        if not query:
            await self._store(messages, session, store=self.store_each_turn)
            return ""
        k = self.k or self.engine.config.default_k
        result = await self.engine.arecall(
            query, tenant=self.tenant, k=k + len(shown), topic=self.topic, mode=self.mode,
            user_id=self.user_id)
        result = P.without(result, shown)
        result = replace(result, memories=result.memories[:k])
        snapshot = ""
        if self.include_snapshot:
            snapshot = (await asyncio.to_thread(self.engine.snapshot, self.tenant)).strip()
        text = P.render(result, snapshot)
        ids = P.shown_ids(result)
        self._pending = (P.query_from(messages, 1), ids) if ids else None
        # stored after the recall, so a message never crowds out what it asks about
        await self._store(messages, session, store=self.store_each_turn)
        if text:
            self._remember(text, _Rendered(result=result, snapshot=snapshot))
        return text

    def _remember(self, text: str, rendered: _Rendered) -> None:
        self._rendered[text] = rendered
        self._rendered.move_to_end(text)
        while len(self._rendered) > _CACHE:
            self._rendered.popitem(last=False)

    async def _report_previous(self, messages: list[ChatMessage]) -> None:
        """The messages now hold the reply to the previous recall: report what it used."""
        pending, self._pending = self._pending, None
        if pending is None or not self.report_use:
            return
        anchor, ids = pending
        # the message the previous recall was made for, then the assistant replies after it
        for i in range(len(messages) - 2, -1, -1):
            if P.message_text(messages[i]) == anchor:
                reply = "\n".join(P.message_text(m) for m in messages[i + 1:]
                                  if m.role == MessageRole.ASSISTANT and P.message_text(m))
                if reply:
                    await asyncio.to_thread(P.report_use, self.engine, reply, ids,
                                            tenant=self.tenant)
                return

    # ----------------------------------------------------------------------------------
    # put
    # ----------------------------------------------------------------------------------
    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store messages (typically those flushed from short-term memory) as episodes; one
        already stored (seen by ``aget``) is not stored again."""
        by_session: dict[str | None, list[ChatMessage]] = {}
        for m in messages:
            session_id = m.additional_kwargs.get("session_id")
            clean = m.model_copy(update={"additional_kwargs": {
                key: v for key, v in m.additional_kwargs.items() if key != "session_id"}})
            sid = session_id if isinstance(session_id, str) and session_id else None
            by_session.setdefault(sid, []).append(clean)
        for sid, group in by_session.items():
            await self._store(group, sid, store=True)

    async def _store(self, messages: list[ChatMessage], session_id: str | None, *,
                     store: bool) -> set[str]:
        """The ids of the storable ``messages``; with ``store``, those not stored yet are
        stored now (in order, one batch)."""
        max_chars = self.engine.config.max_text_chars
        kept = [m for m in messages
                if P.role_of(m) in self.store_roles and P.message_text(m)]
        ids = P.turn_ids(kept, tenant=self.tenant, session_id=session_id, max_chars=max_chars)
        if store:
            items = []
            for mid, m in zip(ids, kept, strict=True):
                if mid in self._stored:
                    continue
                item = P.message_item(m, session_id=session_id or None, max_chars=max_chars,
                                      importance=self.importance, topic=self.topic,
                                      chat_history=False, source=_SOURCE)
                items.append({**item, "id": mid})
            if items:
                await self.engine.aadd_many(items, tenant=self.tenant)
                self._stored.update(i["id"] for i in items)
        return set(ids)

    # ----------------------------------------------------------------------------------
    # truncate
    # ----------------------------------------------------------------------------------
    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the snapshot, then the lowest-scored memories, until ``tokens_to_truncate``
        tokens are saved. Content this block did not render is dropped whole."""
        if tokens_to_truncate <= 0:
            return content
        rendered = self._rendered.get(content) if isinstance(content, str) else None
        if rendered is None:
            return None
        original = len(self.tokenizer_fn(content))
        text, result, snapshot = P.shrink(
            rendered.result, rendered.snapshot,
            lambda t: original - len(self.tokenizer_fn(t)) >= tokens_to_truncate)
        if not text:
            return None
        self._remember(text, _Rendered(result=result, snapshot=snapshot))
        return text
