"""MnemoniaChatMessageHistory: the chat-history contract, plus what makes it a memory."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_mnemonia import MnemoniaChatMessageHistory
from mnemonia import MemoryEngine
from mnemonia.errors import InvalidInputError, InvalidTenantError

from tests.contracts.langchain_chat_history import ChatHistoryContract


class TestContractOnLangChainsInMemoryHistory(ChatHistoryContract):
    """The contract itself holds for LangChain's reference implementation (deprecated, like
    ``BaseChatMessageHistory`` itself, since langchain-core 1.6.4; removal in 2.0)."""

    @pytest.fixture
    def make_history(self) -> Callable[[str], InMemoryChatMessageHistory]:
        sessions: dict[str, InMemoryChatMessageHistory] = {}

        def make(session_id: str) -> InMemoryChatMessageHistory:
            if session_id not in sessions:
                with warnings.catch_warnings():
                    # Deprecated since langchain-core 1.6.4 (warned once per process); it is
                    # only the reference the contract is checked against here.
                    warnings.simplefilter("ignore", LangChainDeprecationWarning)
                    sessions[session_id] = InMemoryChatMessageHistory()
            return sessions[session_id]
        return make


class TestChatHistoryContract(ChatHistoryContract):
    @pytest.fixture
    def make_history(self, engine: MemoryEngine
                     ) -> Callable[[str], MnemoniaChatMessageHistory]:
        return lambda session_id: MnemoniaChatMessageHistory(
            engine=engine, tenant="alice", session_id=session_id)


def test_every_message_is_an_episode_with_speaker_and_session(engine: MemoryEngine) -> None:
    history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s1")
    history.add_messages([
        SystemMessage(content="Be brief."),
        HumanMessage(content="My dentist appointment is on Thursday at 3pm"),
        AIMessage(content="Noted: dentist, Thursday 3pm."),
        HumanMessage(content="Bring the insurance card", name="Alice"),
    ])
    mems = engine.list(tenant="alice", session_id="s1")
    assert [m.kind for m in mems] == ["episode"] * 4
    assert [m.metadata["speaker"] for m in mems] == ["System", "Human", "AI", "Alice"]
    assert [m.metadata["role"] for m in mems] == ["system", "human", "ai", "human"]
    assert all(m.session_id == "s1" and m.metadata["chat_history"] for m in mems)
    assert mems[1].text == "My dentist appointment is on Thursday at 3pm"


def test_speaker_prefixes_are_configurable(engine: MemoryEngine) -> None:
    history = MnemoniaChatMessageHistory(engine=engine, tenant="t", session_id="s",
                                         human_prefix="Caroline", ai_prefix="Melanie")
    history.add_user_message("I went to the LGBTQ support group yesterday")
    history.add_ai_message("That sounds empowering")
    assert [m.metadata["speaker"] for m in engine.list(tenant="t")] == ["Caroline", "Melanie"]
    hit = engine.recall("What did Caroline go to?", tenant="t", k=1).memories[0]
    assert hit.memory.text == "I went to the LGBTQ support group yesterday"


def test_clear_keeps_the_episodes_as_long_term_memory(engine: MemoryEngine) -> None:
    s1 = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s1")
    s1.add_user_message("My bike is a red Brompton")
    s1.add_ai_message("A classic folding bike!")
    s1.clear()
    assert s1.messages == []
    # The episodes are still memories: recallable from any session, and auditable.
    hit = engine.recall("my red Brompton", tenant="alice", k=1).memories[0]
    assert hit.memory.text == "My bike is a red Brompton"
    assert engine.stats(tenant="alice")["active"] == 2
    events = [e.event for e in engine.history(hit.memory.id, tenant="alice")]
    assert events[0] == "created" and "metadata_updated" in events
    # A new session starts empty but the old facts inform it.
    s2 = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s2")
    assert s2.messages == []


def test_history_ignores_other_memories_of_the_session(engine: MemoryEngine) -> None:
    engine.add("A note the app filed under the session", tenant="alice", session_id="s1")
    history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s1")
    history.add_user_message("hello")
    assert [m.content for m in history.messages] == ["hello"]


def test_forgotten_messages_leave_the_history(engine: MemoryEngine) -> None:
    history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s1")
    history.add_user_message("keep me")
    history.add_user_message("forget me")
    gone = engine.list(tenant="alice", session_id="s1")[1]
    engine.forget(gone.id, tenant="alice")
    assert [m.content for m in history.messages] == ["keep me"]


def test_tenants_are_separate(engine: MemoryEngine) -> None:
    MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s").add_user_message(
        "alice's message")
    bob = MnemoniaChatMessageHistory(engine=engine, tenant="bob", session_id="s")
    assert bob.messages == []


def test_long_and_textless_messages(engine: MemoryEngine) -> None:
    history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s1")
    long = "word " * 5000
    history.add_messages([
        HumanMessage(content=long),
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}]),
    ])
    back = history.messages
    assert back[0].content == long  # the full message comes back
    mems = engine.list(tenant="alice")
    assert len(mems[0].text) == engine.config.max_text_chars  # the episode text is capped
    assert mems[1].text == "[called lookup]"


def test_bad_arguments(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidTenantError):
        MnemoniaChatMessageHistory(engine=engine, tenant="no spaces allowed", session_id="s")
    with pytest.raises(InvalidInputError):
        MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="")
    history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="s")
    with pytest.raises(InvalidInputError):
        history.add_messages(["not a message"])  # type: ignore[list-item]
    assert history.messages == []
