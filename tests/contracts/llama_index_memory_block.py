"""A reusable suite for LlamaIndex long-term memory blocks (``BaseMemoryBlock``).

It pins what a user of ``Memory.from_defaults(memory_blocks=[...])`` relies on from a block that
remembers: what it is given (directly, or flushed out of the short-term chat by ``Memory``)
comes back when a later message asks about it, ``accept_short_term_memory`` is honoured,
``atruncate`` shrinks, and the block works inside ``Memory``, sync and async.

Subclasses provide one fixture, ``make_block``: a callable ``(**fields) -> BaseMemoryBlock``
returning a block over fresh, empty storage (``fields`` are block fields such as ``name``,
``priority`` or ``accept_short_term_memory``), and may override ``FACT`` / ``QUESTION`` with a
fact and a question about it that their block's retrieval connects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.memory import Memory
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.storage.chat_store.sql import MessageStatus
from llama_index.core.utils import get_tokenizer

from tests.contracts.llama_index_helpers import memory_factory

MakeBlock = Callable[..., BaseMemoryBlock[Any]]


def as_text(content: Any) -> str:
    """Block content (str, content blocks or chat messages) as text."""
    if not content:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for item in content:
        if isinstance(item, ChatMessage):
            parts.append(item.content or "")
        elif isinstance(item, TextBlock):
            parts.append(item.text)
    return "\n".join(parts)


def _filler(n: int) -> list[ChatMessage]:
    out = []
    for i in range(n):
        out.append(ChatMessage(role=MessageRole.USER,
                               content=f"Tell me about constellation number {i} in the sky."))
        out.append(ChatMessage(role=MessageRole.ASSISTANT,
                               content=f"Constellation {i} is a group of distant stars."))
    return out


class LlamaIndexMemoryBlockContract:
    """Behaviour every long-term memory block must show. Needs the ``make_block`` fixture."""

    @pytest.fixture
    def li_memory(self, tmp_path: Path) -> Callable[..., Memory]:
        return memory_factory(tmp_path)

    FACT = "Alice's daughter Maya is allergic to peanuts."
    QUESTION = "Can Maya eat peanuts?"

    def _ask(self) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole.USER, content=self.QUESTION)]

    def _fact(self) -> list[ChatMessage]:
        return [ChatMessage(role=MessageRole.USER, content=self.FACT),
                ChatMessage(role=MessageRole.ASSISTANT, content="I will remember that.")]

    def test_is_a_memory_block(self, make_block: MakeBlock) -> None:
        block = make_block(name="long_term")
        assert isinstance(block, BaseMemoryBlock)
        assert block.name == "long_term"

    async def test_empty_storage_gives_nothing(self, make_block: MakeBlock) -> None:
        block = make_block()
        assert not as_text(await block.aget(self._ask()))
        assert not as_text(await block.aget([]))
        assert not as_text(await block.aget(None))

    async def test_what_is_put_comes_back(self, make_block: MakeBlock) -> None:
        block = make_block()
        await block.aput(self._fact())
        assert self.FACT in as_text(await block.aget(self._ask()))

    async def test_flushed_messages_come_back(self, make_block: MakeBlock) -> None:
        block = make_block()
        await block.aput(self._fact(), from_short_term_memory=True, session_id="s1")
        assert self.FACT in as_text(await block.aget(self._ask(), session_id="s2"))

    async def test_accept_short_term_memory_false_ignores_flushes(
            self, make_block: MakeBlock) -> None:
        block = make_block(accept_short_term_memory=False)
        await block.aput(self._fact(), from_short_term_memory=True)
        assert self.FACT not in as_text(await block.aget(self._ask()))

    async def test_atruncate_shrinks(self, make_block: MakeBlock) -> None:
        block = make_block()
        await block.aput(self._fact())
        await block.aput(_filler(3))
        content = await block.aget(self._ask())
        tokens = len(get_tokenizer()(as_text(content)))
        smaller = await block.atruncate(content, 1)
        assert smaller is None or len(get_tokenizer()(as_text(smaller))) < tokens
        assert await block.atruncate(content, 10**6) is None

    async def test_inside_memory_flushed_turns_are_recalled(
            self, make_block: MakeBlock, li_memory: Callable[..., Memory]) -> None:
        block = make_block(name="long_term")
        memory = li_memory(session_id="s1", memory_blocks=[block], token_limit=300)
        await memory.aput_messages(self._fact())
        for message in _filler(12):  # pushes the fact out of the short-term chat
            await memory.aput(message)
        chat = await memory.aget_all()
        active = await memory.aget_all(status=MessageStatus.ACTIVE)
        assert self.FACT not in [m.content for m in active] and len(chat) > len(active)
        got = await memory.aget(input=self.QUESTION)
        assert got[0].role == MessageRole.SYSTEM
        assert "<long_term>" in (got[0].content or "")
        assert self.FACT in (got[0].content or "")

    def test_inside_memory_sync(self, make_block: MakeBlock,
                                li_memory: Callable[..., Memory]) -> None:
        block = make_block(name="long_term")
        memory = li_memory(session_id="s1", memory_blocks=[block], token_limit=300)
        memory.put_messages(self._fact())
        for message in _filler(12):
            memory.put(message)
        got = memory.get(input=self.QUESTION)
        assert self.FACT in (got[0].content or "")
