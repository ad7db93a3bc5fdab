"""The guides' LangChain-side examples run as written (docs/examples/, included whole in
docs/langmem.md, docs/langgraph-agents.md and docs/langchain-agents.md): each file's main()
with a scripted chat model in place of the LLM (no network) on an engine with the real
bundled model, checking what each guide says: what is stored, that a memory reaches the
model's prompt from another thread, and that users never see each other's memories."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from mnemonia import MemoryEngine

from tests.langchain.fakes import ScriptedChatModel

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

pytestmark = pytest.mark.integration


def example(name: str) -> ModuleType:
    """Import docs/examples/<name>.py as a module (not as __main__: no LLM is called)."""
    spec = importlib.util.spec_from_file_location(f"guide_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def memory_lines(system_prompt: str) -> list[str]:
    return [line[2:] for line in system_prompt.splitlines() if line.startswith("- ")]


@pytest.mark.filterwarnings(
    # LangMem's docs wire create_react_agent, which LangGraph 1.0 deprecated in favour of
    # langchain.agents.create_agent; the guide says so, and the LangChain v1 guide uses it.
    "ignore:create_react_agent has been moved:DeprecationWarning")
def test_the_langmem_guide(real_engine: MemoryEngine, capsys: pytest.CaptureFixture[str]
                           ) -> None:
    guide = example("langmem_agent")
    model = ScriptedChatModel(tool_calls={
        "Remember that my cat is called Miso.": (
            "manage_memory", {"content": "The user's cat is called Miso", "action": "create"}),
        "Remember that my dog is called Rex.": (
            "manage_memory", {"content": "The user's dog is called Rex", "action": "create"}),
    })
    store = guide.main(model, real_engine)
    assert model.bound == ["manage_memory", "search_memory"]   # LangMem's two tools
    # what LangMem's manage tool stored, one namespace per user
    assert [i.value for i in store.search(("memories", "alice"))] == [
        {"content": "The user's cat is called Miso"}]
    assert [i.value for i in store.search(("memories", "bob"))] == [
        {"content": "The user's dog is called Rex"}]
    # the new threads' questions: the prompt-time search put the user's memory, and only
    # theirs, in the system message
    alice, bob = model.system_prompts()[-2:]
    assert memory_lines(alice) == ["The user's cat is called Miso"]
    assert memory_lines(bob) == ["The user's dog is called Rex"]
    assert sum(1 for m in model.seen[-1] if m.type == "human") == 1   # a new thread
    out = capsys.readouterr().out
    assert "alice (a2): What is my pet called?\n  agent: The user's cat is called Miso" in out
    assert "bob (b2): What is my pet called?\n  agent: The user's dog is called Rex" in out
    assert out.count("manage_memory: created memory ") == 2


def test_the_langchain_v1_guide(real_engine: MemoryEngine,
                                capsys: pytest.CaptureFixture[str]) -> None:
    guide = example("langchain_agent")
    model = ScriptedChatModel(tool_calls={
        "Please remember that I am allergic to peanuts.": (
            "save_memory", {"fact": "Allergic to peanuts"}),
        "Please remember that I am vegetarian.": ("save_memory", {"fact": "Vegetarian"}),
        "What do you know about my diet?": ("search_memories", {"query": "diet and food"}),
    })
    store = guide.main(model, real_engine)
    assert model.bound == ["save_memory", "search_memories"]
    assert [i.value for i in store.search(("memories", "alice"))] == [
        {"text": "Allergic to peanuts"}]
    assert [i.value for i in store.search(("memories", "bob"))] == [{"text": "Vegetarian"}]
    out = capsys.readouterr().out
    # the dynamic prompt recalled each user's memory into a new thread, never the other's
    assert "alice (a2): Can you suggest a snack for me?\n  agent: Allergic to peanuts\n" in out
    assert "bob (b2): Can you suggest a snack for me?\n  agent: Vegetarian\n" in out
    snack_prompts = [p for p, seen in zip(model.system_prompts(), model.seen, strict=True)
                     if seen[-1].text == "Can you suggest a snack for me?"]
    assert [memory_lines(p) for p in snack_prompts] == [["Allergic to peanuts"],
                                                        ["Vegetarian"]]
    # the search tool reads the user's namespace through runtime.store
    assert "alice (a3): What do you know about my diet?\n  agent: search_memories: " \
           "Allergic to peanuts\n" in out


def test_the_langgraph_guide(real_engine: MemoryEngine,
                             capsys: pytest.CaptureFixture[str]) -> None:
    guide = example("langgraph_agent")
    model = ScriptedChatModel()
    store = guide.main(model, real_engine)
    assert [i.value for i in store.search(("memories", "alice"))] == [
        {"data": "my name is Alice and I cycle to work"}]
    assert [i.value for i in store.search(("memories", "bob"))] == [
        {"data": "my name is Bob and I drive a taxi"}]
    # threads 3 and 4 are new: one human message each, and the memory in the system prompt
    assert [sum(1 for m in seen if m.type == "human") for seen in model.seen[-2:]] == [1, 1]
    assert [memory_lines(p) for p in model.system_prompts()[-2:]] == [
        ["my name is Alice and I cycle to work"], ["my name is Bob and I drive a taxi"]]
    out = capsys.readouterr().out
    assert "alice (3): how do I get to work?\n  model: my name is Alice and I cycle to work" \
        in out
