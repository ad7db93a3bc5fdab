"""Scripted LLMs and tools for the LlamaIndex contract suites (no network, deterministic).

All of them are LlamaIndex's own ``MockFunctionCallingLLM`` driven by a response generator
that records what the LLM was sent, so a test can check what a memory put in the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.tools import FunctionTool
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool


def weather(city: str) -> str:
    """The weather in a city."""
    return f"18C and sunny in {city}"


WEATHER_TOOL = FunctionTool.from_defaults(weather)


class Script:
    """Records every LLM call; ``llm`` answers with ``reply`` (formatted with the call index)."""

    def __init__(self, reply: str = "reply {n}") -> None:
        self.reply = reply
        self.calls: list[list[ChatMessage]] = []

    @property
    def last(self) -> list[ChatMessage]:
        return self.calls[-1]

    def prompt_text(self, call: int = -1) -> str:
        """Everything the LLM was sent in one call, as text."""
        return "\n".join(m.content or "" for m in self.calls[call])

    def chat_llm(self) -> MockFunctionCallingLLM:
        """A chat LLM replying ``reply``."""
        def generate(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
            self.calls.append(list(messages))
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content=self.reply.format(n=len(self.calls)))
        return MockFunctionCallingLLM(response_generator=generate)

    def function_llm(self, city: str = "Porto") -> MockFunctionCallingLLM:
        """A function-calling LLM: calls ``weather(city)``, then answers with the result."""
        def generate(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
            self.calls.append(list(messages))
            if messages and messages[-1].role == MessageRole.TOOL:
                return ChatMessage(role=MessageRole.ASSISTANT,
                                   content=f"The weather: {messages[-1].content}")
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id=f"call-{len(self.calls)}", tool_name="weather",
                tool_kwargs={"city": city})])
        return MockFunctionCallingLLM(response_generator=generate)

    def react_llm(self) -> MockFunctionCallingLLM:
        """A ReAct LLM: one ``Thought``/``Answer`` step answering ``reply``."""
        def generate(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
            self.calls.append(list(messages))
            answer = self.reply.format(n=len(self.calls))
            return ChatMessage(role=MessageRole.ASSISTANT,
                               content=f"Thought: I can answer without tools.\nAnswer: {answer}")
        return MockFunctionCallingLLM(response_generator=generate)


def dump(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as JSON-able dicts, for exact comparisons."""
    return [m.model_dump(mode="json") for m in messages]


def texts(messages: Sequence[ChatMessage]) -> list[tuple[str, str | None]]:
    return [(m.role.value, m.content) for m in messages]


def memory_factory(folder: Path) -> Callable[..., Memory]:
    """``Memory.from_defaults(**kwargs)`` on a SQLite file in ``folder`` without a connection
    pool, so no connection outlives the test (the default in-memory store leaks one, which
    warns when it is garbage-collected, in whatever test runs then)."""
    count = 0

    def make(**kwargs: Any) -> Memory:
        nonlocal count
        count += 1
        engine = create_async_engine(f"sqlite+aiosqlite:///{folder}/chat-{count}.db",
                                     poolclass=NullPool)
        return Memory.from_defaults(async_engine=engine, **kwargs)
    return make
