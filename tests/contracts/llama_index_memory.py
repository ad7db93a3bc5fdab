"""A reusable suite for LlamaIndex chat memories (``BaseMemory``), such as ``ChatMemoryBuffer``.

LlamaIndex ships no standard test for memories, so this mixin pins what a user of
``ChatMemoryBuffer`` relies on, inside a chat engine and agents too. The reference
``ChatMemoryBuffer`` passes it (``tests/llama_index/test_llama_index_memory.py``).

Subclasses provide one fixture, ``make_memory``: a callable
``(session_id, token_limit=None) -> BaseMemory`` where memories made with the same session id
share their storage (a new object reads what an earlier one wrote) and different ids do not.
A memory may put extra *system* messages (recalled context) before the chat in ``get``; the
suite checks the chat that follows them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.memory.types import BaseMemory

from tests.contracts.llama_index_helpers import WEATHER_TOOL, Script, dump

MakeMemory = Callable[..., BaseMemory]


def _turns() -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content="You are a helpful assistant."),
        ChatMessage(role=MessageRole.USER, content="Hi, I am Alice and I keep bees."),
        ChatMessage(role=MessageRole.ASSISTANT, content="Hello Alice! How many hives?"),
        ChatMessage(role=MessageRole.USER, content="Three hives, behind the orchard."),
    ]


def chat_part(got: Sequence[ChatMessage], expected: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``got`` without the leading system messages a memory may add before the chat."""
    got = list(got)
    extra = len(got) - len(expected)
    assert extra >= 0, f"get() returned fewer messages than the history: {got}"
    assert all(m.role == MessageRole.SYSTEM for m in got[:extra]), got[:extra]
    return got[extra:]


class LlamaIndexMemoryContract:
    """Behaviour every LlamaIndex chat memory must show. Needs the ``make_memory`` fixture."""

    # ---- storage ---------------------------------------------------------------------
    def test_new_session_is_empty(self, make_memory: MakeMemory) -> None:
        memory = make_memory("empty-session")
        assert memory.get_all() == []
        assert [m for m in memory.get() if m.role != MessageRole.SYSTEM] == []

    def test_messages_come_back_in_order(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        for message in _turns():
            memory.put(message)
        assert dump(memory.get_all()) == dump(_turns())

    def test_put_messages_equals_puts(self, make_memory: MakeMemory) -> None:
        a, b = make_memory("one-by-one"), make_memory("bulk")
        for message in _turns():
            a.put(message)
        b.put_messages(_turns())
        assert dump(a.get_all()) == dump(b.get_all())

    def test_get_returns_the_chat(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        memory.put_messages(_turns())
        got = memory.get()
        assert all(isinstance(m, ChatMessage) for m in got)
        assert dump(chat_part(got, _turns())) == dump(_turns())

    def test_get_takes_an_input(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        memory.put_messages(_turns()[1:])
        got = memory.get(input="How many hives does Alice keep?")
        assert dump(chat_part(got, _turns()[1:])) == dump(_turns()[1:])

    def test_message_details_survive(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        turns = [
            ChatMessage(role=MessageRole.USER, content="weather in Porto?",
                        additional_kwargs={"name": "alice"}),
            ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="call-1", tool_name="weather", tool_kwargs={"city": "Porto"})]),
            ChatMessage(role=MessageRole.TOOL, content="18C and sunny",
                        additional_kwargs={"tool_call_id": "call-1"}),
            ChatMessage(role=MessageRole.ASSISTANT, content="It is 18C and sunny in Porto."),
        ]
        memory.put_messages(turns)
        back = memory.get_all()
        assert dump(back) == dump(turns)
        block = back[1].blocks[0]
        assert isinstance(block, ToolCallBlock) and block.tool_kwargs == {"city": "Porto"}

    def test_persists_across_instances(self, make_memory: MakeMemory) -> None:
        make_memory("s1").put_messages(_turns())
        assert dump(make_memory("s1").get_all()) == dump(_turns())

    def test_sessions_are_isolated(self, make_memory: MakeMemory) -> None:
        make_memory("s1").put(ChatMessage(role=MessageRole.USER, content="only in s1"))
        make_memory("s2").put(ChatMessage(role=MessageRole.USER, content="only in s2"))
        assert [m.content for m in make_memory("s1").get_all()] == ["only in s1"]
        assert [m.content for m in make_memory("s2").get_all()] == ["only in s2"]

    def test_set_replaces_the_history(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        memory.put_messages(_turns())
        new = [ChatMessage(role=MessageRole.USER, content="Let us talk about goats.")]
        memory.set(new)
        assert dump(memory.get_all()) == dump(new)

    def test_set_extending_the_history(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        memory.put_messages(_turns()[:2])
        memory.set(_turns())
        assert dump(memory.get_all()) == dump(_turns())

    def test_set_empty_clears(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        memory.put_messages(_turns())
        memory.set([])
        assert memory.get_all() == []

    def test_reset_empties_only_that_session(self, make_memory: MakeMemory) -> None:
        s1, s2 = make_memory("s1"), make_memory("s2")
        s1.put_messages(_turns())
        s2.put_messages(_turns()[:2])
        s1.reset()
        assert s1.get_all() == []
        assert make_memory("s1").get_all() == []
        assert dump(s2.get_all()) == dump(_turns()[:2])

    def test_put_after_reset(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1")
        memory.put_messages(_turns())
        memory.reset()
        memory.reset()
        memory.put(ChatMessage(role=MessageRole.USER, content="a fresh start"))
        assert [m.content for m in memory.get_all()] == ["a fresh start"]

    def test_token_limit_keeps_the_latest_turns(self, make_memory: MakeMemory) -> None:
        memory = make_memory("s1", token_limit=60)
        turns = []
        for i in range(12):
            turns.append(ChatMessage(role=MessageRole.USER, content=f"question {i} about hives"))
            turns.append(ChatMessage(role=MessageRole.ASSISTANT, content=f"answer {i} on bees"))
        memory.put_messages(turns)
        assert len(memory.get_all()) == len(turns)
        chat = [m for m in memory.get() if m.role != MessageRole.SYSTEM]
        assert 0 < len(chat) < len(turns)
        assert dump(chat) == dump(turns[-len(chat):])
        assert chat[0].role == MessageRole.USER  # never starts on an assistant reply

    # ---- async -----------------------------------------------------------------------
    async def test_async_round_trip(self, make_memory: MakeMemory) -> None:
        memory = make_memory("async-session")
        await memory.aput(_turns()[0])
        await memory.aput_messages(_turns()[1:])
        assert dump(await memory.aget_all()) == dump(_turns())
        assert dump(chat_part(await memory.aget(), _turns())) == dump(_turns())
        new = [ChatMessage(role=MessageRole.USER, content="Something else entirely.")]
        await memory.aset(new)
        assert dump(await memory.aget_all()) == dump(new)
        await memory.areset()
        assert await memory.aget_all() == []

    async def test_async_and_sync_see_the_same(self, make_memory: MakeMemory) -> None:
        memory = make_memory("mixed")
        memory.put(ChatMessage(role=MessageRole.USER, content="sync first"))
        await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content="async second"))
        assert [m.content for m in await memory.aget_all()] == ["sync first", "async second"]
        assert [m.content for m in memory.get_all()] == ["sync first", "async second"]

    # ---- inside LlamaIndex -------------------------------------------------------------
    def test_simple_chat_engine(self, make_memory: MakeMemory) -> None:
        memory = make_memory("chat")
        script = Script()
        chat = SimpleChatEngine.from_defaults(memory=memory, llm=script.chat_llm(),
                                              system_prompt="Be brief.")
        assert str(chat.chat("My hives are behind the orchard.")) == "reply 1"
        assert str(chat.chat("Where are my hives?")) == "reply 2"
        assert [(m.role, m.content) for m in memory.get_all()] == [
            (MessageRole.USER, "My hives are behind the orchard."),
            (MessageRole.ASSISTANT, "reply 1"),
            (MessageRole.USER, "Where are my hives?"),
            (MessageRole.ASSISTANT, "reply 2"),
        ]
        second = script.calls[1]
        assert second[0].content == "Be brief."
        assert [m.content for m in second[-3:]] == [
            "My hives are behind the orchard.", "reply 1", "Where are my hives?"]
        assert [m.content for m in chat.chat_history] == [m.content for m in memory.get_all()]
        chat.reset()
        assert memory.get_all() == []

    async def test_simple_chat_engine_async(self, make_memory: MakeMemory) -> None:
        memory = make_memory("achat")
        script = Script()
        chat = SimpleChatEngine.from_defaults(memory=memory, llm=script.chat_llm())
        assert str(await chat.achat("I keep three hives.")) == "reply 1"
        assert str(await chat.achat("How many hives?")) == "reply 2"
        assert [m.content for m in await memory.aget_all()] == [
            "I keep three hives.", "reply 1", "How many hives?", "reply 2"]
        assert "I keep three hives." in script.prompt_text(1)

    async def test_function_agent(self, make_memory: MakeMemory) -> None:
        memory = make_memory("function-agent")
        script = Script()
        agent = FunctionAgent(tools=[WEATHER_TOOL], llm=script.function_llm())
        result = await agent.run(user_msg="What is the weather in Porto?", memory=memory)
        assert str(result) == "The weather: 18C and sunny in Porto"
        assert [m.role for m in memory.get_all()] == [
            MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]
        calls = len(script.calls)
        await agent.run(user_msg="And tomorrow?", memory=memory)
        assert "What is the weather in Porto?" in script.prompt_text(calls)
        assert [m.content for m in memory.get_all()][-1] == "The weather: 18C and sunny in Porto"
        assert len(memory.get_all()) == 8

    async def test_react_agent(self, make_memory: MakeMemory) -> None:
        memory = make_memory("react-agent")
        script = Script(reply="answer {n}")
        agent = ReActAgent(tools=[WEATHER_TOOL], llm=script.react_llm(),
                           system_prompt="Be brief.")
        assert str(await agent.run(user_msg="Hello, I am Alice.", memory=memory)) == "answer 1"
        assert [m.role for m in memory.get_all()] == [MessageRole.USER, MessageRole.ASSISTANT]
        assert str(await agent.run(user_msg="Who am I?", memory=memory)) == "answer 2"
        assert "Hello, I am Alice." in script.prompt_text(1)
        assert len(memory.get_all()) == 4

