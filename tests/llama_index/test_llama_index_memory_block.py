"""``MnemoniaMemoryBlock``: the block contract, then the floor, truncation by score, what is
stored, use reporting, and the block inside ``Memory`` with an agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.memory import Memory
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.memory.mnemonia import MnemoniaMemoryBlock
from mnemonia import MemoryEngine
from mnemonia.errors import InvalidInputError, InvalidTenantError

from tests.contracts.llama_index_helpers import WEATHER_TOOL, Script
from tests.contracts.llama_index_memory_block import LlamaIndexMemoryBlockContract

PEANUTS = "Alice's daughter Maya is allergic to peanuts."


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


class TestMnemoniaMemoryBlockContract(LlamaIndexMemoryBlockContract):
    @pytest.fixture
    def make_block(self, engine: MemoryEngine) -> Callable[..., BaseMemoryBlock[Any]]:
        def make(**fields: Any) -> BaseMemoryBlock[Any]:
            return MnemoniaMemoryBlock(engine=engine, tenant="alice", **fields)
        return make


@pytest.fixture
def block(engine: MemoryEngine) -> MnemoniaMemoryBlock:
    return MnemoniaMemoryBlock(engine=engine, tenant="alice")


async def test_recalls_for_the_latest_message(engine: MemoryEngine,
                                              block: MnemoniaMemoryBlock) -> None:
    engine.add(PEANUTS, tenant="alice")
    engine.add("The garden shed is painted blue", tenant="alice")
    content = await block.aget([user("How is the shed painted?"), assistant("Let me think."),
                                user("Can Maya eat peanuts?")])
    assert PEANUTS in content
    assert "RELEVANT MEMORY" in content  # RecallResult.render()
    assert "shed" not in content.split("RELEVANT MEMORY")[1]


async def test_context_window_widens_the_query(engine: MemoryEngine) -> None:
    engine.add(PEANUTS, tenant="alice")
    messages = [user("Can Maya eat peanuts?"), assistant("One moment."), user("ok thanks")]
    narrow = MnemoniaMemoryBlock(engine=engine, tenant="alice")
    wide = MnemoniaMemoryBlock(engine=engine, tenant="alice", context_window=3)
    assert PEANUTS not in await narrow.aget(messages)
    assert PEANUTS in await wide.aget(messages)


async def test_the_floor_keeps_unrelated_memories_out(engine: MemoryEngine,
                                                      block: MnemoniaMemoryBlock) -> None:
    engine.add(PEANUTS, tenant="alice")
    question = "quantum chromodynamics lattice gauge"
    assert len(engine.recall(question, tenant="alice", min_activation=0, touch=False)) == 1
    assert await block.aget([user(question)]) == ""


async def test_k_bounds_what_is_recalled(engine: MemoryEngine) -> None:
    engine.add_many([{"text": f"peanut allergy note number {i}"} for i in range(6)],
                    tenant="alice")
    one = MnemoniaMemoryBlock(engine=engine, tenant="alice", k=1)
    content = await one.aget([user("peanut allergy note")])
    assert content.split("RELEVANT MEMORY")[1].count("\n- ") == 1


async def test_tenants_never_see_each_other(engine: MemoryEngine) -> None:
    engine.add(PEANUTS, tenant="alice")
    bob = MnemoniaMemoryBlock(engine=engine, tenant="bob")
    assert await bob.aget([user("Can Maya eat peanuts?")]) == ""


async def test_atruncate_drops_the_lowest_scored_first(engine: MemoryEngine) -> None:
    engine.add_many([
        {"text": "Maya is allergic to peanuts and to tree nuts", "importance": 0.9},
        {"text": "Maya allergic peanuts hospital visit last spring", "importance": 0.5},
        {"text": "peanuts are sold at the corner shop", "importance": 0.1},
    ], tenant="alice")
    block = MnemoniaMemoryBlock(engine=engine, tenant="alice", k=3)
    res = engine.recall("Is Maya allergic to peanuts?", tenant="alice", k=3, touch=False)
    ranked = [h.text for h in sorted([*res.memories, *res.episodes], key=lambda h: -h.score)]
    assert len(ranked) == 3
    content = await block.aget([user("Is Maya allergic to peanuts?")])
    assert all(t in content for t in ranked)
    smaller = await block.atruncate(content, 1)
    assert smaller is not None
    assert ranked[-1] not in smaller and ranked[0] in smaller and ranked[1] in smaller
    only_best = f"RELEVANT MEMORY\n- {ranked[0]}"
    tokens = block.tokenizer_fn
    smallest = await block.atruncate(content, len(tokens(content)) - len(tokens(only_best)))
    assert smallest == only_best
    assert await block.atruncate(content, 10**6) is None
    assert await block.atruncate("text this block never rendered", 1) is None
    assert await block.atruncate(content, 0) == content


async def test_memory_truncates_the_block_by_score(
        engine: MemoryEngine, li_memory: Callable[..., Memory]) -> None:
    """Inside Memory, a tight token_limit makes Memory call atruncate: the best stays."""
    engine.add_many([{"text": f"Maya peanut allergy detail {i}: "
                              + "carry the epinephrine pen always " * 3,
                      "importance": 0.2 + 0.1 * i} for i in range(5)], tenant="alice")
    block = MnemoniaMemoryBlock(engine=engine, tenant="alice", k=5)
    memory = li_memory(session_id="s", memory_blocks=[block], token_limit=120)
    await memory.aput(user("Tell me about Maya's peanut allergy"))
    got = await memory.aget()
    text = got[0].content or ""
    kept = [i for i in range(5) if f"detail {i}:" in text]
    assert 0 < len(kept) < 5
    res = engine.recall("Tell me about Maya's peanut allergy", tenant="alice", k=6,
                        touch=False, min_activation=0)
    # the question itself is stored now (store_each_turn) but never shown: the chat has it
    best = [h.text.split(":")[0] for h in sorted([*res.memories, *res.episodes],
                                                 key=lambda h: -h.score)
            if h.memory.session_id != "s"]
    assert {f"Maya peanut allergy detail {i}" for i in kept} == set(best[:len(kept)])


async def test_what_is_stored(engine: MemoryEngine, block: MnemoniaMemoryBlock) -> None:
    await block.aput([
        ChatMessage(role=MessageRole.SYSTEM, content="You are a helpful assistant."),
        user(PEANUTS),
        ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
            tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Porto"})]),
        ChatMessage(role=MessageRole.TOOL, content="18C and sunny",
                    additional_kwargs={"tool_call_id": "c1"}),
        assistant("Noted."),
    ], from_short_term_memory=True, session_id="s1")
    stored = engine.list(tenant="alice")
    assert [m.text for m in stored] == [PEANUTS, "18C and sunny", "Noted."]
    assert {m.kind for m in stored} == {"episode"}
    assert {m.session_id for m in stored} == {"s1"}
    assert [m.metadata["role"] for m in stored] == ["user", "tool", "assistant"]
    assert not any(m.metadata.get("chat_history") for m in stored)  # not a chat window


async def test_aget_with_the_memory_session_does_not_restrict_recall(
        engine: MemoryEngine, block: MnemoniaMemoryBlock) -> None:
    await block.aput([user(PEANUTS)], session_id="monday")
    assert PEANUTS in await block.aget([user("Can Maya eat peanuts?")], session_id="friday")


@pytest.fixture
def reported(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list]]:
    calls: list[tuple[str, list]] = []

    def spy(reply: str, ids: list[str], *, tenant: str) -> list[str]:
        calls.append((reply, list(ids)))
        return list(ids)
    monkeypatch.setattr(engine, "report_use", spy)
    return calls


async def test_the_next_messages_report_use(engine: MemoryEngine,
                                            reported: list[tuple[str, list]],
                                            li_memory: Callable[..., Memory]) -> None:
    peanuts = engine.add(PEANUTS, tenant="alice")
    block = MnemoniaMemoryBlock(engine=engine, tenant="alice")
    memory = li_memory(session_id="s", memory_blocks=[block])
    await memory.aput(user("Can Maya eat peanuts?"))
    await memory.aget()
    await memory.aput(assistant("No: Maya is allergic to peanuts."))
    await memory.aput(user("Thanks! What else?"))
    await memory.aget()
    assert reported == [("No: Maya is allergic to peanuts.", [peanuts.id])]
    await memory.aget()  # nothing new since: nothing reported twice
    assert len(reported) == 1


async def test_use_reaches_the_engine(engine: MemoryEngine,
                                      li_memory: Callable[..., Memory]) -> None:
    pytest.importorskip("mnemonia.maintenance", reason="the engine's maintenance module")
    peanuts = engine.add(PEANUTS, tenant="alice")
    memory = li_memory(session_id="s",
                       memory_blocks=[MnemoniaMemoryBlock(engine=engine, tenant="alice")])
    await memory.aput(user("Can Maya eat peanuts?"))
    await memory.aget()
    await memory.aput(assistant("No: Maya is allergic to peanuts."))
    await memory.aput(user("Thanks!"))
    await memory.aget()
    assert "used" in [e.event for e in engine.history(peanuts.id, tenant="alice")]


async def test_report_use_can_be_turned_off(engine: MemoryEngine,
                                            reported: list[tuple[str, list]]) -> None:
    engine.add(PEANUTS, tenant="alice")
    block = MnemoniaMemoryBlock(engine=engine, tenant="alice", report_use=False)
    await block.aget([user("Can Maya eat peanuts?")])
    await block.aget([user("Can Maya eat peanuts?"), assistant("No, allergic to peanuts."),
                      user("ok")])
    assert reported == []


async def test_snapshot_can_be_included(engine: MemoryEngine) -> None:
    pytest.importorskip("mnemonia.maintenance", reason="the engine's maintenance module")
    engine.add("Alice is a beekeeper in Porto who sells lavender honey at the market",
               tenant="alice", importance=0.95)
    snapshot = engine.snapshot("alice")
    assert snapshot
    block = MnemoniaMemoryBlock(engine=engine, tenant="alice", include_snapshot=True)
    content = await block.aget([user("astronomy")])
    assert snapshot.strip() in content
    assert await block.atruncate(content, 1) is None or snapshot.strip() not in (
        await block.atruncate(content, 1) or "")


async def test_in_an_agent_with_memory(engine: MemoryEngine,
                                       li_memory: Callable[..., Memory]) -> None:
    engine.add("Alice lives in Lisbon", tenant="alice")
    memory = li_memory(session_id="s",
                       memory_blocks=[MnemoniaMemoryBlock(engine=engine, tenant="alice")])
    script = Script()
    agent = FunctionAgent(tools=[WEATHER_TOOL], llm=script.function_llm(city="Lisbon"))
    await agent.run(user_msg="Where does Alice live?", memory=memory)
    assert "Alice lives in Lisbon" in (script.calls[0][0].content or "")


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"tenant": "bad tenant"}, InvalidTenantError),
    ({"tenant": "alice", "k": -1}, InvalidInputError),
    ({"tenant": "alice", "context_window": 0}, InvalidInputError),
    ({"tenant": "alice", "importance": -0.1}, InvalidInputError),
])
def test_bad_arguments_are_refused(engine: MemoryEngine, kwargs: dict[str, Any],
                                   error: type[Exception]) -> None:
    with pytest.raises(error):
        MnemoniaMemoryBlock(engine=engine, **kwargs)


def test_defaults(block: MnemoniaMemoryBlock) -> None:
    assert block.name == "long_term_memory"
    assert block.priority == 1  # truncatable by Memory (0 would mean never)
    assert block.accept_short_term_memory is True
    assert block.context_window == 2  # measured: benchmarks/followups.py
    assert block.store_each_turn is True
    assert "engine" not in block.model_dump()
