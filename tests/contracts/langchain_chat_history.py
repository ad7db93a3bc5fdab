"""A reusable suite for LangChain ``BaseChatMessageHistory`` implementations.

LangChain ships no standard test for chat histories, so this mixin pins what a user of
``InMemoryChatMessageHistory`` relies on. Subclasses provide one fixture, ``make_history``: a
callable ``session_id -> BaseChatMessageHistory`` where histories made with the same session id
share their storage (a new object reads what an earlier one wrote) and different ids do not.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

MakeHistory = Callable[[str], BaseChatMessageHistory]


def _turns() -> list[BaseMessage]:
    return [
        SystemMessage(content="You are a helpful assistant."),
        HumanMessage(content="Hi, I am Alice and I keep bees."),
        AIMessage(content="Hello Alice! How many hives do you have?"),
        HumanMessage(content="Three hives, behind the orchard."),
    ]


def _same(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    """Equal by type, content, name and tool data (ids may be assigned by the store)."""
    def key(m: BaseMessage) -> tuple[object, ...]:
        return (m.type, m.content, m.name, getattr(m, "tool_calls", None),
                getattr(m, "tool_call_id", None), m.additional_kwargs)
    return [key(m) for m in a] == [key(m) for m in b]


class ChatHistoryContract:
    """Behaviour every chat message history must show. Needs the ``make_history`` fixture."""

    def test_new_session_is_empty(self, make_history: MakeHistory) -> None:
        assert make_history("empty-session").messages == []

    def test_messages_come_back_in_order(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        turns = _turns()
        history.add_messages(turns)
        assert _same(history.messages, turns)

    def test_one_by_one_equals_bulk(self, make_history: MakeHistory) -> None:
        a, b = make_history("one-by-one"), make_history("bulk")
        for message in _turns():
            a.add_message(message)
        b.add_messages(_turns())
        assert _same(a.messages, b.messages)

    def test_convenience_methods(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        history.add_user_message("What is the capital of Portugal?")
        history.add_ai_message("Lisbon.")
        history.add_user_message(HumanMessage(content="And of Spain?"))
        assert [(m.type, m.content) for m in history.messages] == [
            ("human", "What is the capital of Portugal?"),
            ("ai", "Lisbon."),
            ("human", "And of Spain?"),
        ]

    def test_message_details_survive(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        turns: list[BaseMessage] = [
            HumanMessage(content="weather in Porto?", name="alice",
                         additional_kwargs={"lang": "en"}),
            AIMessage(content="", tool_calls=[
                {"name": "weather", "args": {"city": "Porto"}, "id": "call-1"}]),
            ToolMessage(content="18C and sunny", tool_call_id="call-1"),
            AIMessage(content=[{"type": "text", "text": "It is 18C and sunny in Porto."}]),
        ]
        history.add_messages(turns)
        back = history.messages
        assert _same(back, turns)
        assert isinstance(back[1], AIMessage) and back[1].tool_calls[0]["args"] == {
            "city": "Porto"}
        assert isinstance(back[2], ToolMessage)

    def test_persists_across_instances(self, make_history: MakeHistory) -> None:
        make_history("s1").add_messages(_turns())
        assert _same(make_history("s1").messages, _turns())

    def test_sessions_are_isolated(self, make_history: MakeHistory) -> None:
        make_history("s1").add_user_message("only in s1")
        make_history("s2").add_user_message("only in s2")
        assert [m.content for m in make_history("s1").messages] == ["only in s1"]
        assert [m.content for m in make_history("s2").messages] == ["only in s2"]

    def test_clear_empties_only_that_session(self, make_history: MakeHistory) -> None:
        s1, s2 = make_history("s1"), make_history("s2")
        s1.add_messages(_turns())
        s2.add_messages(_turns()[:2])
        s1.clear()
        assert s1.messages == []
        assert make_history("s1").messages == []
        assert _same(s2.messages, _turns()[:2])

    def test_add_after_clear(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        history.add_messages(_turns())
        history.clear()
        history.add_user_message("a fresh start")
        assert [m.content for m in history.messages] == ["a fresh start"]

    def test_clear_twice_and_clear_empty(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        history.clear()
        history.add_user_message("x")
        history.clear()
        history.clear()
        assert history.messages == []

    def test_empty_add_is_a_no_op(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        history.add_messages([])
        assert history.messages == []

    def test_str_is_the_buffer(self, make_history: MakeHistory) -> None:
        history = make_history("s1")
        history.add_user_message("hello")
        history.add_ai_message("hi there")
        assert str(history) == "Human: hello\nAI: hi there"

    async def test_async_round_trip(self, make_history: MakeHistory) -> None:
        history = make_history("async-session")
        await history.aadd_messages(_turns())
        assert _same(await history.aget_messages(), _turns())
        await history.aclear()
        assert await history.aget_messages() == []

    async def test_async_and_sync_see_the_same(self, make_history: MakeHistory) -> None:
        history = make_history("mixed")
        history.add_user_message("sync first")
        await history.aadd_messages([AIMessage(content="async second")])
        assert [m.content for m in await history.aget_messages()] == [
            "sync first", "async second"]
        assert [m.content for m in history.messages] == ["sync first", "async second"]

    @pytest.mark.parametrize("count", [1, 25])
    def test_many_messages_keep_order(self, make_history: MakeHistory, count: int) -> None:
        history = make_history("many")
        for i in range(count):
            history.add_user_message(f"message number {i}")
        assert [m.content for m in history.messages] == [
            f"message number {i}" for i in range(count)]
