"""A LangChain v1 agent (create_agent) with long-term memory in Mnemonia
(docs/langchain-agents.md).

    pip install "langchain-mnemonia[langgraph]" langchain langchain-openai
    OPENAI_API_KEY=... python langchain_agent.py     # any LangChain chat model will do

The test suite runs main() with a scripted chat model instead of an LLM
(tests/langchain/test_guides.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, dynamic_prompt
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models import BaseChatModel
from langchain_mnemonia import MnemoniaStore
from langgraph.checkpoint.memory import InMemorySaver
from mnemonia import MemoryEngine


@dataclass
class Context:
    """Who the agent is talking to: passed with each call, read by the tools and the prompt."""

    user_id: str


@tool
def save_memory(fact: str, runtime: ToolRuntime[Context]) -> str:
    """Save a fact about the user, to remember it in later conversations."""
    key = str(uuid.uuid4())
    runtime.store.put(("memories", runtime.context.user_id), key, {"text": fact})
    return f"saved {key}"


@tool
def search_memories(query: str, runtime: ToolRuntime[Context]) -> str:
    """Search what you remember about the user."""
    found = runtime.store.search(("memories", runtime.context.user_id), query=query, limit=3)
    return "\n".join(item.value["text"] for item in found) or "nothing found"


@dynamic_prompt
def with_memories(request: ModelRequest) -> str:
    """Before each model call, recall the user's memories for their latest message."""
    question = next(m.text for m in reversed(request.state["messages"]) if m.type == "human")
    user = request.runtime.context.user_id
    found = request.runtime.store.search(("memories", user), query=question, limit=3)
    memories = "\n".join(f"- {item.value['text']}" for item in found)
    return f"You are a helpful assistant. What you remember about the user:\n{memories}"


def build_agent(model: BaseChatModel, store: MnemoniaStore) -> Any:
    return create_agent(
        model,
        tools=[save_memory, search_memories],
        middleware=[with_memories],
        context_schema=Context,
        store=store,
        checkpointer=InMemorySaver(),
    )


def chat(agent: Any, text: str, *, user: str, thread: str) -> str:
    """One user turn; the agent's last message."""
    out = agent.invoke({"messages": [{"role": "user", "content": text}]},
                       config={"configurable": {"thread_id": thread}},
                       context=Context(user_id=user))
    reply = str(out["messages"][-1].text)
    print(f"{user} ({thread}): {text}\n  agent: {reply}")
    return reply


def main(model: BaseChatModel, engine: MemoryEngine) -> MnemoniaStore:
    store = MnemoniaStore(engine=engine)       # embeds each value's "text"
    agent = build_agent(model, store)
    chat(agent, "Please remember that I am allergic to peanuts.", user="alice", thread="a1")
    chat(agent, "Please remember that I am vegetarian.", user="bob", thread="b1")
    # A new thread: the conversation is empty, the memories come from the store.
    chat(agent, "Can you suggest a snack for me?", user="alice", thread="a2")
    chat(agent, "Can you suggest a snack for me?", user="bob", thread="b2")
    chat(agent, "What do you know about my diet?", user="alice", thread="a3")
    return store


if __name__ == "__main__":
    from langchain.chat_models import init_chat_model

    with MemoryEngine.open("./memory") as engine:
        main(init_chat_model("openai:gpt-4.1-mini"), engine)
