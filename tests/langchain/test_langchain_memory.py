"""MnemoniaMemory: legacy BaseMemory that recalls per input and reports use."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import SystemMessage
from langchain_mnemonia import MnemoniaChatMessageHistory, MnemoniaMemory
from mnemonia import MemoryEngine
from pydantic import Field


class RecordingLLM(FakeListLLM):
    """A fake LLM that answers from a list and keeps every prompt it was given."""

    prompts: list[str] = Field(default_factory=list)

    def _call(self, prompt: str, *args: Any, **kwargs: Any) -> str:
        self.prompts.append(prompt)
        return super()._call(prompt, *args, **kwargs)


def _events(engine: MemoryEngine, memory_id: str, tenant: str = "alice") -> list[str]:
    return [e.event for e in engine.history(memory_id, tenant=tenant)]


def test_memory_variables(engine: MemoryEngine) -> None:
    assert MnemoniaMemory(engine=engine, tenant="alice").memory_variables == ["history"]
    assert MnemoniaMemory(engine=engine, tenant="alice",
                          memory_key="memories").memory_variables == ["memories"]


def test_load_recalls_for_the_input_and_renders_the_sections(
        engine: MemoryEngine, facts: dict[str, str]) -> None:
    engine.add_many([
        {"text": "I took Miso to the vet on Monday", "speaker": "Alice"},
        {"text": "Miso's vet said she needs less tuna", "speaker": "Alice"},
    ], tenant="alice")
    memory = MnemoniaMemory(engine=engine, tenant="alice", k=1)
    text = memory.load_memory_variables({"input": "How is Miso, Alice's cat?"})["history"]
    episodes, _, relevant = text.partition("\n\nRELEVANT MEMORY\n")
    assert episodes.startswith("RELEVANT EPISODES\n")
    assert "Miso" in episodes
    assert relevant.count("\n- ") == 0 and relevant.startswith("- ")  # k=1: one memory
    assert "Miso" in relevant
    assert len(memory.last_recalled) >= 2


def test_an_unrelated_input_injects_nothing(engine: MemoryEngine,
                                            facts: dict[str, str]) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice")
    assert memory.load_memory_variables({"input": "zzz qqq vvv"}) == {"history": ""}
    assert memory.last_recalled == []


def test_save_context_stores_the_turn(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", ai_prefix="Bot")
    memory.save_context({"input": "I moved to Porto last spring"},
                        {"output": "Porto is a lovely city!"})
    mems = engine.list(tenant="alice")
    assert [(m.text, m.kind, m.metadata["speaker"]) for m in mems] == [
        ("I moved to Porto last spring", "episode", "Human"),
        ("Porto is a lovely city!", "episode", "Bot")]
    hit = engine.recall("Where did I move to?", tenant="alice", k=1).memories[0]
    assert hit.memory.text == "I moved to Porto last spring"


def test_save_context_reports_use_of_what_the_reply_echoes(
        engine: MemoryEngine, facts: dict[str, str]) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", k=2)
    memory.load_memory_variables({"input": "What is the cat called, and what does it love?"})
    recalled = memory.last_recalled
    cat = facts["Alice's cat is called Miso and loves tuna."]
    assert cat in recalled
    memory.save_context({"input": "What is the cat called, and what does it love?"},
                        {"output": "Alice's cat is called Miso, and Miso loves tuna."})
    assert "used" in _events(engine, cat)
    for other in set(recalled) - {cat}:
        assert "used" not in _events(engine, other)
    assert memory.last_recalled == []  # reported once


def test_session_turns_become_chat_history(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="chat-1")
    memory.save_context({"input": "hi"}, {"output": "hello!"})
    history = MnemoniaChatMessageHistory(engine=engine, tenant="alice", session_id="chat-1")
    assert [(m.type, m.content) for m in history.messages] == [("human", "hi"),
                                                               ("ai", "hello!")]


def test_return_messages(engine: MemoryEngine, facts: dict[str, str]) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", return_messages=True)
    out = memory.load_memory_variables({"question": "Where does Alice work as a nurse?"})
    [message] = out["history"]
    assert isinstance(message, SystemMessage)
    assert "Alice works as a nurse at the city hospital." in message.content
    assert memory.load_memory_variables({"question": "zzz qqq vvv"}) == {"history": []}


def test_include_snapshot(engine: MemoryEngine) -> None:
    engine.add("Alice is allergic to penicillin", tenant="alice", importance=0.95)
    snapshot = engine.snapshot("alice")
    assert snapshot
    memory = MnemoniaMemory(engine=engine, tenant="alice", include_snapshot=True)
    text = memory.load_memory_variables({"input": "zzz qqq vvv"})["history"]
    assert text == snapshot.strip()


def test_input_and_output_keys(engine: MemoryEngine) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice")
    with pytest.raises(ValueError, match="input_key"):
        memory.load_memory_variables({"a": "x", "b": "y"})
    with pytest.raises(ValueError, match="output_key"):
        memory.save_context({"input": "x"}, {"a": "1", "b": "2"})
    keyed = MnemoniaMemory(engine=engine, tenant="alice", input_key="question",
                           output_key="answer")
    keyed.save_context({"question": "Is it raining?", "lang": "en"},
                       {"answer": "No, sunny.", "tokens": 3})
    assert [m.text for m in engine.list(tenant="alice")] == ["Is it raining?", "No, sunny."]


def test_clear_forgets_only_the_turn_state(engine: MemoryEngine,
                                           facts: dict[str, str]) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice")
    memory.load_memory_variables({"input": "Redis cache web app"})
    assert memory.last_recalled
    memory.clear()
    assert memory.last_recalled == []
    assert engine.stats(tenant="alice")["active"] == len(facts)


async def test_async_load_and_save(engine: MemoryEngine, facts: dict[str, str]) -> None:
    memory = MnemoniaMemory(engine=engine, tenant="alice", session_id="s")
    out = await memory.aload_memory_variables({"input": "When is the quarterly report due?"})
    assert "The quarterly report is due on the 30th of June." in out["history"]
    report = facts["The quarterly report is due on the 30th of June."]
    await memory.asave_context({"input": "When is the quarterly report due?"},
                               {"output": "The quarterly report is due on the 30th of June."})
    assert "used" in _events(engine, report)
    assert len(MnemoniaChatMessageHistory(engine=engine, tenant="alice",
                                          session_id="s").messages) == 2
    await memory.aclear()


def test_inside_a_classic_conversation_chain(engine: MemoryEngine) -> None:
    from langchain_classic.chains import ConversationChain

    llm = RecordingLLM(responses=["Nice to meet Miso!", "Your cat is called Miso.",
                                  "I don't know."])
    memory = MnemoniaMemory(engine=engine, tenant="alice")
    with pytest.warns(LangChainDeprecationWarning, match="ConversationChain"):
        chain = ConversationChain(llm=llm, memory=memory)

    first = chain.invoke({"input": "My cat is called Miso and she is three years old"})
    assert first["response"] == "Nice to meet Miso!"
    assert first["history"] == ""  # nothing remembered yet

    second = chain.invoke({"input": "What is my cat called?"})
    assert second["response"] == "Your cat is called Miso."
    # What the model saw: the recalled memory, rendered into the prompt.
    assert "RELEVANT MEMORY\n- My cat is called Miso and she is three years old" in llm.prompts[1]
    assert llm.prompts[1].rstrip().endswith("Human: What is my cat called?\nAI:")
    # Both turns were stored, and the reply that echoed the memory reported its use.
    texts = [m.text for m in engine.list(tenant="alice")]
    assert texts[:4] == ["My cat is called Miso and she is three years old",
                         "Nice to meet Miso!", "What is my cat called?",
                         "Your cat is called Miso."]
    cat = engine.list(tenant="alice")[0].id
    assert "used" in _events(engine, cat)
