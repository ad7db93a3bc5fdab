"""LlamaIndex agents wired as LlamaIndex's docs wire a memory: a ``FunctionAgent`` with
``Memory.from_defaults(memory_blocks=[MnemoniaMemoryBlock(...)])`` and with
``MnemoniaMemory``; the LLM is LlamaIndex's own ``MockFunctionCallingLLM`` scripted to call a
tool and answer (no network). What reaches the LLM's prompt is checked: the tenant's
memories, never another tenant's. And a session's turns survive the process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from llama_index.memory.mnemonia import MnemoniaMemory, MnemoniaMemoryBlock
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

from tests.contracts.llama_index_helpers import WEATHER_TOOL, Script

ROOT = Path(__file__).resolve().parents[2]
ALICE = "Alice lives in Lisbon and cycles to work"
BOB = "Bob lives in Lisbon and drives a taxi"


def _prompt(script: Script, call: int) -> str:
    return script.prompt_text(call)


def _seed(engine: MemoryEngine) -> None:
    engine.add(ALICE, tenant="alice")
    engine.add(BOB, tenant="bob")


async def test_function_agent_with_the_memory_block(engine: MemoryEngine,
                                                    li_memory: Callable[..., Memory]) -> None:
    _seed(engine)
    # li_memory is Memory.from_defaults(...) with its chat in a SQLite file closed properly
    memory = li_memory(session_id="s1", memory_blocks=[
        MnemoniaMemoryBlock(engine=engine, tenant="alice", name="long_term_memory")])
    script = Script()
    agent = FunctionAgent(tools=[WEATHER_TOOL], llm=script.function_llm(city="Lisbon"))
    answer = await agent.run(user_msg="Where does Alice live? And the weather there?",
                             memory=memory)
    assert "18C and sunny in Lisbon" in str(answer)
    first = _prompt(script, 0)
    assert "<long_term_memory>" in first and ALICE in first
    assert BOB not in first and "taxi" not in "\n".join(
        _prompt(script, i) for i in range(len(script.calls)))
    # the tool round trip reached the LLM too
    assert [m.role.value for m in script.calls[1]][-2:] == ["assistant", "tool"]


async def test_function_agent_with_mnemonia_memory(engine: MemoryEngine) -> None:
    _seed(engine)
    script = Script()
    agent = FunctionAgent(tools=[WEATHER_TOOL], llm=script.function_llm(city="Lisbon"))
    await agent.run(user_msg="Where does Bob live?",
                    memory=MnemoniaMemory(engine=engine, tenant="bob", session_id="b1"))
    prompt = _prompt(script, 0)
    assert BOB in prompt and ALICE not in prompt and "cycles" not in prompt


async def test_mnemonia_memory_question_does_not_crowd_out_its_answer(
        engine: MemoryEngine) -> None:
    _seed(engine)
    script = Script()
    agent = FunctionAgent(tools=[WEATHER_TOOL], llm=script.function_llm(city="Lisbon"))
    await agent.run(user_msg="Where does Bob live? And the weather there?",
                    memory=MnemoniaMemory(engine=engine, tenant="bob", session_id="b1"))
    assert BOB in _prompt(script, 0)


async def test_a_follow_up_keeps_the_memory_the_previous_turn_needed(
        engine: MemoryEngine, li_memory: Callable[..., Memory]) -> None:
    engine.add("Emma goes to Riverside Primary School", tenant="alice")
    engine.add("Alice's car is a blue Skoda estate", tenant="alice")
    memory = li_memory(session_id="s1", memory_blocks=[
        MnemoniaMemoryBlock(engine=engine, tenant="alice")])
    await memory.aput_messages([
        ChatMessage(role="user", content="Where does Emma go to school?"),
        ChatMessage(role="assistant", content="Emma goes to Riverside Primary School."),
        ChatMessage(role="user", content="And is it far?")])
    got = await memory.aget()
    assert "Riverside Primary" in (got[0].content or "")


def test_three_turns_survive_the_process(tmp_path: Path) -> None:
    """LlamaIndex's Memory keeps the chat in memory and flushes to blocks only past ~21,000
    tokens; the block stores each turn, so a process that ends after three turns loses
    nothing: a new process recalls every turn."""
    folder = tmp_path / "store"
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("_three_turns.py")),
                           str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    engine = MemoryEngine.open(folder, embedder=HashingEmbedder(),
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    try:
        stored = [m.text for m in engine.list(tenant="alice", session_id="monday")]
        for said in ["My daughter Emma starts at Riverside Primary in September.",
                     "Our dog Biscuit needs his vaccinations next Friday.",
                     "I am training for the Lisbon half marathon."]:
            assert said in stored
            assert f"Noted: {said.lower()}" in stored  # the replies too, the last one included
            assert said in [h.text for h in engine.recall(said, tenant="alice", k=3)]
        assert len(stored) == len(set(stored)) == 6  # each once
    finally:
        engine.close()
