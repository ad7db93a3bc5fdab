"""Run by test_llama_index_agents.py in a process of its own: three turns of a FunctionAgent
whose Memory has LlamaIndex's defaults (the chat in an in-memory SQLite) and a
MnemoniaMemoryBlock; then the process ends without any flush or close of the Memory."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.memory.mnemonia import MnemoniaMemoryBlock
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

TURNS = ["My daughter Emma starts at Riverside Primary in September.",
         "Our dog Biscuit needs his vaccinations next Friday.",
         "I am training for the Lisbon half marathon."]


def reply(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
    last = [m for m in messages if m.role == MessageRole.USER][-1].content or ""
    return ChatMessage(role=MessageRole.ASSISTANT, content=f"Noted: {last.lower()}")


async def main(folder: str) -> None:
    engine = MemoryEngine.open(folder, embedder=HashingEmbedder(),
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    memory = Memory.from_defaults(session_id="monday", memory_blocks=[
        MnemoniaMemoryBlock(engine=engine, tenant="alice")])
    agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=reply))
    for turn in TURNS:
        await agent.run(user_msg=turn, memory=memory)
    engine.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
