"""``MnemoniaMemory``: the memory contract (also run on ``ChatMemoryBuffer`` as the reference),
then what only long-term memory does: recall across sessions, reset keeping episodes, tenants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.memory.types import BaseMemory
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.memory.mnemonia import MnemoniaMemory
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.errors import InvalidInputError, InvalidTenantError, MnemoniaError

from tests.contracts.llama_index_helpers import WEATHER_TOOL, Script, dump
from tests.contracts.llama_index_memory import LlamaIndexMemoryContract

TEA = "My favourite drink is green tea with jasmine"


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def memory_message(messages: list[ChatMessage]) -> str | None:
    """The text of the recalled-memory system message, if ``get`` put one first."""
    if messages and messages[0].role == MessageRole.SYSTEM and "Long-term memory" in (
            messages[0].content or ""):
        return messages[0].content
    return None


class TestChatMemoryBufferContract(LlamaIndexMemoryContract):
    """The reference: LlamaIndex's own ChatMemoryBuffer passes the suite."""

    @pytest.fixture
    def make_memory(self) -> Callable[..., BaseMemory]:
        store = SimpleChatStore()

        def make(session_id: str, token_limit: int | None = None) -> BaseMemory:
            return ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key=session_id,
                                                  token_limit=token_limit)
        return make


class TestMnemoniaMemoryContract(LlamaIndexMemoryContract):
    @pytest.fixture
    def make_memory(self, engine: MemoryEngine) -> Callable[..., BaseMemory]:
        def make(session_id: str, token_limit: int | None = None) -> BaseMemory:
            extra: dict[str, Any] = {} if token_limit is None else {"token_limit": token_limit}
            return MnemoniaMemory(engine=engine, tenant="alice", session_id=session_id, **extra)
        return make


# ---------------------------------------------------------------------------------------
# long-term memory across sessions
# ---------------------------------------------------------------------------------------
def test_a_new_session_recalls_an_earlier_one(engine: MemoryEngine) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put_messages(
        [user(TEA), assistant("Noted!")])
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
    got = friday.get(input="What is my favourite drink?")
    text = memory_message(got)
    assert text is not None and TEA in text
    assert "RELEVANT" in text  # rendered by RecallResult.render()
    assert got[1:] == []  # friday's own chat is still empty


def test_without_input_it_recalls_for_the_latest_user_message(engine: MemoryEngine) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
    friday.put_messages([user("hello"), assistant("hi"), user("what drink do I like?")])
    text = memory_message(friday.get())
    assert text is not None and TEA in text


def test_messages_in_the_window_are_not_repeated_as_memories(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1")
    memory.put_messages([user(TEA), assistant("Noted, green tea with jasmine.")])
    got = memory.get(input="favourite drink green tea jasmine")
    assert memory_message(got) is None  # everything relevant is already in the chat
    assert [m.content for m in got] == [TEA, "Noted, green tea with jasmine."]


def test_messages_trimmed_out_of_the_window_come_back_as_memories(
        engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1", token_limit=200)
    memory.put(user(TEA))
    for i in range(20):
        memory.put_messages([user(f"tell me about topic number {i} of astronomy"),
                             assistant(f"astronomy topic {i} is about planets")])
    got = memory.get(input="What is my favourite drink?")
    assert TEA not in [m.content for m in got[1:]]  # trimmed from the chat...
    text = memory_message(got)
    assert text is not None and TEA in text  # ...but recalled
    tokens = len(memory.tokenizer_fn(" ".join(m.content or "" for m in got)))
    assert tokens <= 200 + 2
    assert len(memory.tokenizer_fn(text)) <= 200 * 0.3  # chat_history_token_ratio 0.7


def test_the_floor_keeps_unrelated_memories_out(engine: MemoryEngine) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    res = engine.recall("quantum chromodynamics lattice gauge", tenant="alice",
                        min_activation=0, touch=False)
    assert res.memories and res.memories[0].explanation.activation < (
        engine.config.min_activation)  # the hit exists, below the floor
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
    assert memory_message(friday.get(input="quantum chromodynamics lattice gauge")) is None


def test_k_bounds_the_recalled_memories(engine: MemoryEngine) -> None:
    engine.add_many([{"text": f"green tea fact number {i}"} for i in range(6)], tenant="alice")
    one = MnemoniaMemory(engine=engine, tenant="alice", k=1)
    text = memory_message(one.get(input="green tea fact"))
    assert text is not None
    section = text.split("RELEVANT MEMORY")[1]
    assert section.count("\n- ") == 1


def test_tenants_never_see_each_other(engine: MemoryEngine) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="s").put(user(TEA))
    bob = MnemoniaMemory(engine=engine, tenant="bob", session_id="s")
    assert bob.get_all() == []
    assert memory_message(bob.get(input="What is my favourite drink?")) is None


def test_reset_keeps_the_long_term_episodes(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1")
    memory.put_messages([user(TEA), assistant("Noted!")])
    memory.reset()
    assert memory.get_all() == []
    assert [m.text for m in engine.list(tenant="alice")] == [TEA, "Noted!"]
    text = memory_message(memory.get(input="What is my favourite drink?"))
    assert text is not None and TEA in text  # no longer in the window: recalled instead
    events = [e.event for e in engine.history(engine.list(tenant="alice")[0].id,
                                              tenant="alice")]
    # the last change of state (recall hits are in the audit trail too, as "recalled")
    assert [e for e in events if e != "recalled"][-1] == "metadata_updated"


def test_forgotten_messages_leave_the_chat(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1")
    memory.put_messages([user("keep me"), user("forget me")])
    engine.forget(engine.list(tenant="alice")[1].id, tenant="alice")
    assert [m.content for m in memory.get_all()] == ["keep me"]


def test_messages_are_stored_as_episodes(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1", importance=0.7,
                            topic="drinks")
    memory.put(ChatMessage(role=MessageRole.USER, content=TEA,
                           additional_kwargs={"name": "Alice"}))
    (m,) = engine.list(tenant="alice")
    assert (m.kind, m.session_id, m.importance, m.topic, m.text) == (
        "episode", "s1", 0.7, "drinks", TEA)
    assert m.metadata["speaker"] == "Alice"
    assert m.metadata["role"] == "user" and m.metadata["chat_history"] is True
    assert ChatMessage.model_validate(m.metadata["message"]).content == TEA


def test_a_message_without_text_is_stored_with_a_description(engine: MemoryEngine) -> None:
    from llama_index.core.base.llms.types import ToolCallBlock
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1")
    call = ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
        tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Porto"})])
    memory.put_messages([call, ChatMessage(role=MessageRole.ASSISTANT, content="")])
    assert [m.text for m in engine.list(tenant="alice")] == [
        "called weather({'city': 'Porto'})", "[assistant message without text]"]
    assert dump(memory.get_all()) == dump(
        [call, ChatMessage(role=MessageRole.ASSISTANT, content="")])


def test_a_message_longer_than_the_engine_allows_is_kept_whole(
        open_engine: Callable[..., MemoryEngine]) -> None:
    engine = open_engine(config=MnemoniaConfig.load(env={}).__class__(max_text_chars=100))
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1")
    long = "bees " * 100
    memory.put(user(long))
    assert len(engine.list(tenant="alice")[0].text) == 100
    assert memory.get_all()[0].content == long


def test_set_does_not_store_a_message_twice(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s1")
    memory.put_messages([user("one"), assistant("two")])
    memory.set([user("one"), assistant("two"), user("three")])
    assert [m.text for m in engine.list(tenant="alice")] == ["one", "two", "three"]
    memory.set([user("one"), user("other")])
    assert [m.content for m in memory.get_all()] == ["one", "other"]
    assert len(engine.list(tenant="alice")) == 4  # "two", "three" reset, not deleted


def test_history_survives_reopening_the_store(engine: MemoryEngine,
                                              open_engine: Callable[..., MemoryEngine]
                                              ) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="s1").put_messages(
        [user(TEA), assistant("Noted!")])
    path = engine.path
    engine.close()
    again = open_engine(path)
    memory = MnemoniaMemory(engine=again, tenant="alice", session_id="s1")
    assert [m.content for m in memory.get_all()] == [TEA, "Noted!"]


# ---------------------------------------------------------------------------------------
# how the memories are injected
# ---------------------------------------------------------------------------------------
def test_insert_method_user_prefixes_the_latest_user_message(engine: MemoryEngine) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday",
                            insert_method="user")
    friday.put_messages([user("hi"), assistant("hello"), user("What drink do I like?")])
    got = friday.get()
    assert [m.role for m in got] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.USER]
    assert TEA in (got[-1].content or "") and got[-1].content.endswith("What drink do I like?")
    assert friday.get_all()[-1].content == "What drink do I like?"  # stored one untouched


def test_custom_memory_template(engine: MemoryEngine) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday",
                            memory_template="Known about the user:\n{memories}")
    got = friday.get(input="favourite drink")
    assert got[0].content.startswith("Known about the user:\n")
    assert TEA in got[0].content


def test_initial_token_count_is_respected(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", token_limit=50)
    with pytest.raises(ValueError, match="Initial token count exceeds token limit"):
        memory.get(initial_token_count=51)  # like ChatMemoryBuffer
    with pytest.raises(InvalidInputError):
        memory.get(initial_token_count=-1)


def test_from_defaults_like_chat_memory_buffer(engine: MemoryEngine) -> None:
    llm = MockLLM()
    memory = MnemoniaMemory.from_defaults(engine=engine, tenant="alice", session_id="s1",
                                          llm=llm, chat_history=[user("hi"), assistant("yo")])
    assert memory.token_limit == int(llm.metadata.context_window * 0.75)
    assert [m.content for m in memory.get_all()] == ["hi", "yo"]
    assert MnemoniaMemory.from_defaults(engine=engine, tenant="alice").token_limit == 3000
    assert MnemoniaMemory.class_name() == "MnemoniaMemory"
    assert "engine" not in memory.model_dump()


def test_default_session_ids_are_distinct(engine: MemoryEngine) -> None:
    a, b = MnemoniaMemory(engine=engine, tenant="alice"), MnemoniaMemory(engine=engine,
                                                                      tenant="alice")
    assert a.session_id != b.session_id


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"tenant": "no spaces"}, InvalidTenantError),
    ({"tenant": None}, InvalidTenantError),
    ({"tenant": "alice", "k": 0}, InvalidInputError),
    ({"tenant": "alice", "importance": 1.5}, InvalidInputError),
    ({"tenant": "alice", "session_id": ""}, InvalidInputError),
    ({"tenant": "alice", "memory_template": "no placeholder"}, InvalidInputError),
])
def test_bad_arguments_are_refused(engine: MemoryEngine, kwargs: dict[str, Any],
                                   error: type[Exception]) -> None:
    with pytest.raises(error):
        MnemoniaMemory(engine=engine, **kwargs)


def test_bad_engine_and_messages_are_refused(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInputError, match="MemoryEngine"):
        MnemoniaMemory(engine="./memory", tenant="alice")  # type: ignore[arg-type]
    memory = MnemoniaMemory(engine=engine, tenant="alice")
    with pytest.raises(MnemoniaError, match="ChatMessage"):
        memory.put_messages([user("fine"), "not a message"])  # type: ignore[list-item]
    with pytest.raises(MnemoniaError):
        memory.get(input=42)  # type: ignore[arg-type]
    assert engine.list(tenant="alice") == []  # nothing half-written


# ---------------------------------------------------------------------------------------
# recall use reported to the engine
# ---------------------------------------------------------------------------------------
@pytest.fixture
def reported(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list]]:
    """Record ``engine.report_use`` calls."""
    calls: list[tuple[str, list]] = []

    def spy(reply: str, ids: list[str], *, tenant: str) -> list[str]:
        calls.append((reply, list(ids)))
        return list(ids)
    monkeypatch.setattr(engine, "report_use", spy)
    return calls


def test_the_reply_reports_which_recalled_memories_it_used(
        engine: MemoryEngine, reported: list[tuple[str, list]]) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    tea_id = engine.list(tenant="alice")[0].id
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
    friday.put(user("What is my favourite drink?"))
    friday.get()
    friday.put(assistant("You like green tea with jasmine."))
    assert reported == [("You like green tea with jasmine.", [tea_id])]
    friday.put(assistant("Anything else?"))  # one report per recall
    assert len(reported) == 1


async def test_use_is_reported_on_the_async_path_too(
        engine: MemoryEngine, reported: list[tuple[str, list]]) -> None:
    await MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").aput(user(TEA))
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
    await friday.aput(user("What is my favourite drink?"))
    await friday.aget()
    await friday.aput(assistant("Green tea."))
    assert [r for r, _ in reported] == ["Green tea."]


def test_report_use_can_be_turned_off(engine: MemoryEngine,
                                      reported: list[tuple[str, list]]) -> None:
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday",
                            report_use=False)
    friday.get(input="favourite drink")
    friday.put(assistant("Green tea."))
    assert reported == []


def test_use_reaches_the_engine(engine: MemoryEngine) -> None:
    """Without a spy: the engine records a ``used`` event on the memory the reply echoed."""
    pytest.importorskip("mnemonia.maintenance", reason="the engine's maintenance module")
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    tea_id = engine.list(tenant="alice")[0].id
    friday = MnemoniaMemory(engine=engine, tenant="alice", session_id="friday")
    friday.put(user("What is my favourite drink?"))
    friday.get()
    friday.put(assistant("Your favourite drink is green tea with jasmine."))
    assert "used" in [e.event for e in engine.history(tea_id, tenant="alice")]


def test_snapshot_can_be_injected(engine: MemoryEngine) -> None:
    pytest.importorskip("mnemonia.maintenance", reason="the engine's maintenance module")
    engine.add("Alice is a beekeeper in Porto who sells lavender honey at the market",
               tenant="alice", importance=0.95)
    snapshot = engine.snapshot("alice")
    assert "beekeeper" in snapshot
    memory = MnemoniaMemory(engine=engine, tenant="alice", include_snapshot=True)
    assert snapshot.strip() in (memory_message(memory.get(input="astronomy")) or "")
    plain = MnemoniaMemory(engine=engine, tenant="alice")
    assert memory_message(plain.get(input="astronomy")) is None


# ---------------------------------------------------------------------------------------
# in a chat engine and agents, over several sessions
# ---------------------------------------------------------------------------------------
def test_chat_engine_remembers_across_sessions(engine: MemoryEngine) -> None:
    script = Script()
    monday = SimpleChatEngine.from_defaults(
        memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="monday"),
        llm=script.chat_llm(), system_prompt="You are a helpful assistant.")
    monday.chat(TEA)
    friday = SimpleChatEngine.from_defaults(
        memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="friday"),
        llm=script.chat_llm(), system_prompt="You are a helpful assistant.")
    friday.chat("Which drink should you make me?")
    sent = script.last
    assert [m.role for m in sent] == [MessageRole.SYSTEM, MessageRole.SYSTEM, MessageRole.USER]
    assert sent[0].content == "You are a helpful assistant."
    assert TEA in (sent[1].content or "")
    assert sent[2].content == "Which drink should you make me?"


async def test_function_agent_remembers_across_sessions(engine: MemoryEngine) -> None:
    script = Script()
    agent = FunctionAgent(tools=[WEATHER_TOOL], llm=script.function_llm(city="Lisbon"))
    await agent.run(user_msg="I live in Lisbon, what is the weather?",
                    memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="monday"))
    first = len(script.calls)
    await agent.run(user_msg="Where do I live?",
                    memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="friday"))
    sent = script.calls[first]
    assert sent[0].role == MessageRole.SYSTEM
    assert "I live in Lisbon" in (sent[0].content or "")


async def test_react_agent_remembers_across_sessions(engine: MemoryEngine) -> None:
    script = Script()
    agent = ReActAgent(tools=[WEATHER_TOOL], llm=script.react_llm(), system_prompt="Be brief.")
    await agent.run(user_msg=TEA,
                    memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="monday"))
    await agent.run(user_msg="What is my favourite drink?",
                    memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="friday"))
    assert TEA in script.prompt_text(-1)


async def test_react_agent_without_system_prompt_needs_insert_method_user(
        engine: MemoryEngine) -> None:
    """ReActAgent drops a leading system message when it has no system_prompt of its own;
    ``insert_method="user"`` puts the memories where it keeps them."""
    MnemoniaMemory(engine=engine, tenant="alice", session_id="monday").put(user(TEA))
    script = Script()
    agent = ReActAgent(tools=[WEATHER_TOOL], llm=script.react_llm())
    await agent.run(user_msg="What is my favourite drink?",
                    memory=MnemoniaMemory(engine=engine, tenant="alice", session_id="friday",
                                          insert_method="user"))
    assert TEA in script.prompt_text(-1)
    user_turns = [m for m in script.last if m.role == MessageRole.USER]
    assert any(isinstance(b, TextBlock) and TEA in b.text for b in user_turns[-1].blocks)
