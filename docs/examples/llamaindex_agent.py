"""A LlamaIndex agent with long-term memory in Mnemonia: a FunctionAgent whose Memory holds
a MnemoniaMemoryBlock (docs/llamaindex-agents.md).

    pip install llama-index-memory-mnemonia llama-index-llms-openai
    OPENAI_API_KEY=... python llamaindex_agent.py    # any function-calling LlamaIndex LLM

The test suite runs main() with a scripted LLM instead (tests/llama_index/test_guide.py).
"""

from __future__ import annotations

import asyncio

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.memory.mnemonia import MnemoniaMemoryBlock
from mnemonia import MemoryEngine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def session_memory(engine: MemoryEngine, chats: AsyncEngine, user: str, session: str
                   ) -> Memory:
    """One chat session: LlamaIndex's Memory keeps the session's chat (here in a SQLite file,
    so a session can go on after a restart); the Mnemonia block stores each turn in the
    user's long-term memory and recalls into the prompt what the latest messages call for."""
    return Memory.from_defaults(
        session_id=f"{user}/{session}",
        async_engine=chats,
        memory_blocks=[MnemoniaMemoryBlock(engine=engine, tenant=user, name="long_term_memory",
                                           k=3)],
    )


async def chat(agent: FunctionAgent, memory: Memory, text: str) -> str:
    reply = str(await agent.run(user_msg=text, memory=memory))
    print(f"{memory.session_id}: {text}\n  agent: {reply}")
    return reply


async def main(llm: FunctionCallingLLM, engine: MemoryEngine,
               chats_url: str = "sqlite+aiosqlite:///chats.db") -> None:
    chats = create_async_engine(chats_url)
    agent = FunctionAgent(tools=[], llm=llm, system_prompt="You are a helpful assistant.")
    try:
        # Monday: each user says something worth keeping.
        await chat(agent, session_memory(engine, chats, "alice", "monday"),
                   "My daughter Emma starts at Riverside Primary in September.")
        await chat(agent, session_memory(engine, chats, "bob", "monday"),
                   "My son Leo is learning the violin.")
        # Friday: new sessions, empty chats. What Alice said on Monday comes back from her
        # long-term memory; Bob's memory holds nothing about Emma.
        await chat(agent, session_memory(engine, chats, "alice", "friday"),
                   "Which school will Emma go to?")
        await chat(agent, session_memory(engine, chats, "bob", "friday"),
                   "Which school will Emma go to?")
    finally:
        await chats.dispose()      # closes the chat database's connections


if __name__ == "__main__":
    from llama_index.llms.openai import OpenAI

    with MemoryEngine.open("./memory") as engine:
        asyncio.run(main(OpenAI(model="gpt-4.1-mini"), engine))
