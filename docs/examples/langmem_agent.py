"""LangMem's memory tools over Mnemonia, in a LangGraph agent (docs/langmem.md).

    pip install "langchain-mnemonia[langgraph]" langmem langchain langchain-openai
    OPENAI_API_KEY=... python langmem_agent.py       # any LangChain chat model will do

The test suite runs main() with a scripted chat model instead of an LLM
(tests/langchain/test_guides.py).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_mnemonia import MnemoniaStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config, get_store
from langgraph.prebuilt import create_react_agent
from langmem import create_manage_memory_tool, create_search_memory_tool
from mnemonia import MemoryEngine

# One namespace per user: LangMem fills {langgraph_user_id} from the run's config.
NAMESPACE = ("memories", "{langgraph_user_id}")


def prompt(state: dict[str, Any]) -> list[AnyMessage]:
    """LangMem's prompt-time search: on every turn, the user's memories most like the latest
    message go into the system message."""
    user = get_config()["configurable"]["langgraph_user_id"]
    found = get_store().search(("memories", user), query=state["messages"][-1].text, limit=3)
    memories = "\n".join(f"- {item.value['content']}" for item in found)
    return [SystemMessage(f"You are a helpful assistant.\n## Memories\n{memories}"),
            *state["messages"]]


def build_agent(model: BaseChatModel, store: MnemoniaStore) -> Any:
    """LangMem's tools (the agent decides what to store, update, delete and search) in
    LangGraph's prebuilt agent, with the Mnemonia store and a checkpointer for threads."""
    return create_react_agent(
        model,
        prompt=prompt,
        tools=[create_manage_memory_tool(namespace=NAMESPACE),
               create_search_memory_tool(namespace=NAMESPACE)],
        store=store,
        checkpointer=InMemorySaver(),
    )


def chat(agent: Any, text: str, *, user: str, thread: str) -> str:
    """One user turn; the agent's last message."""
    config = {"configurable": {"langgraph_user_id": user, "thread_id": thread}}
    out = agent.invoke({"messages": [{"role": "user", "content": text}]}, config=config)
    reply = str(out["messages"][-1].text)
    print(f"{user} ({thread}): {text}\n  agent: {reply}")
    return reply


def main(model: BaseChatModel, engine: MemoryEngine) -> MnemoniaStore:
    # LangGraph's index config, as LangMem's docs give it to InMemoryStore: the bundled
    # all-MiniLM-L6-v2 makes 384-dimensional vectors of each memory's "content".
    store = MnemoniaStore(engine=engine, index={"dims": 384, "fields": ["content"]})
    agent = build_agent(model, store)
    chat(agent, "Remember that my cat is called Miso.", user="alice", thread="a1")
    chat(agent, "Remember that my dog is called Rex.", user="bob", thread="b1")
    # New threads start with an empty conversation: what the agent knows comes from the store,
    # and each user sees only their own namespace.
    chat(agent, "What is my pet called?", user="alice", thread="a2")
    chat(agent, "What is my pet called?", user="bob", thread="b2")
    return store


if __name__ == "__main__":
    from langchain.chat_models import init_chat_model

    with MemoryEngine.open("./memory") as engine:
        main(init_chat_model("openai:gpt-4.1-mini"), engine)
