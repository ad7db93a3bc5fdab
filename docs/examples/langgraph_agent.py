"""A LangGraph graph with long-term memory in Mnemonia, as LangGraph's memory docs build it:
a node reads and writes the store the graph was compiled with (docs/langgraph-agents.md).

    pip install "langchain-mnemonia[langgraph]" langchain langchain-openai
    OPENAI_API_KEY=... python langgraph_agent.py     # any LangChain chat model will do

The test suite runs main() with a scripted chat model instead of an LLM
(tests/langchain/test_guides.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_mnemonia import MnemoniaStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from mnemonia import MemoryEngine


@dataclass
class Context:
    user_id: str


def build_graph(model: BaseChatModel, store: MnemoniaStore) -> Any:
    def call_model(state: MessagesState, runtime: Runtime[Context]) -> dict[str, Any]:
        namespace = ("memories", runtime.context.user_id)
        last = state["messages"][-1].text
        # Recall: the user's memories most like the latest message, into the system prompt.
        found = runtime.store.search(namespace, query=last, limit=3)
        memories = "\n".join(f"- {item.value['data']}" for item in found)
        system = f"You are a helpful assistant. What you remember about the user:\n{memories}"
        # Store: what the user asks to remember, under a new key of their namespace.
        if last.lower().startswith("remember: "):
            runtime.store.put(namespace, str(uuid.uuid4()), {"data": last[len("remember: "):]})
        reply = model.invoke([{"role": "system", "content": system}, *state["messages"]])
        return {"messages": [reply]}

    builder = StateGraph(MessagesState, context_schema=Context)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "call_model")
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def chat(graph: Any, text: str, *, user: str, thread: str) -> str:
    """One user turn; the model's reply."""
    out = graph.invoke({"messages": [{"role": "user", "content": text}]},
                       config={"configurable": {"thread_id": thread}},
                       context=Context(user_id=user))
    reply = str(out["messages"][-1].text)
    print(f"{user} ({thread}): {text}\n  model: {reply}")
    return reply


def main(model: BaseChatModel, engine: MemoryEngine) -> MnemoniaStore:
    store = MnemoniaStore(engine=engine, index_fields=["data"])   # embed each value's "data"
    graph = build_graph(model, store)
    chat(graph, "remember: my name is Alice and I cycle to work", user="alice", thread="1")
    chat(graph, "remember: my name is Bob and I drive a taxi", user="bob", thread="2")
    # Another thread of the same user: the checkpointer's conversation is new, the store's
    # memories are not.
    chat(graph, "how do I get to work?", user="alice", thread="3")
    chat(graph, "how do I get to work?", user="bob", thread="4")
    return store


if __name__ == "__main__":
    from langchain.chat_models import init_chat_model

    with MemoryEngine.open("./memory") as engine:
        main(init_chat_model("openai:gpt-4.1-mini"), engine)
