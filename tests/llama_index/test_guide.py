"""The LlamaIndex agents guide's example runs as written (docs/examples/llamaindex_agent.py,
included whole in docs/llamaindex-agents.md): its main() with LlamaIndex's own
MockFunctionCallingLLM, scripted to answer from the memory lines of its prompt (no network),
on an engine with the real bundled model. What the guide says: a turn of Monday's session
reaches the prompt of Friday's new session, and never another user's prompt."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from mnemonia import MemoryEngine

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "llamaindex_agent.py"
EMMA = "My daughter Emma starts at Riverside Primary in September."

pytestmark = pytest.mark.integration


async def test_the_llamaindex_agents_guide(real_engine: MemoryEngine, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("guide_llamaindex_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    guide = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guide)
    prompts: list[str] = []

    def answer(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
        prompt = "\n".join(m.content or "" for m in messages)
        prompts.append(prompt)
        lines = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content="; ".join(lines) if lines else "I don't know.")

    await guide.main(MockFunctionCallingLLM(response_generator=answer), real_engine,
                     f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}")
    assert len(prompts) == 4
    monday_alice, monday_bob, friday_alice, friday_bob = prompts
    # Friday's session starts empty: Monday's turn came from Alice's long-term memory
    assert "<long_term_memory>" in friday_alice and f"- {EMMA}" in friday_alice
    assert friday_alice.count("Which school will Emma go to?") == 1
    # and never into Bob's prompt, nor into Monday's
    assert "Riverside" not in friday_bob and "Emma starts" not in monday_bob
    assert "<long_term_memory>" not in monday_alice
    out = capsys.readouterr().out
    assert f"alice/friday: Which school will Emma go to?\n  agent: {EMMA}\n" in out
    assert "bob/friday: Which school will Emma go to?\n  agent: I don't know.\n" in out
    # each turn was stored as it was said (the block does not wait for Memory's flush)
    stored = [m.text for m in real_engine.list(tenant="alice")]
    assert EMMA in stored and "Which school will Emma go to?" in stored
    assert [m.text for m in real_engine.list(tenant="bob") if "Emma starts" in m.text] == []
    # the sessions' chat is in the SQLite file, one session per user and day
    import sqlite3

    with sqlite3.connect(tmp_path / "chats.db") as db:
        keys = sorted(k for (k,) in db.execute("select distinct key from llama_index_memory"))
    assert keys == ["alice/friday", "alice/monday", "bob/friday", "bob/monday"]
