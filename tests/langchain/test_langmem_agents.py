"""LangMem's memory tools over MnemoniaStore, wired as LangMem's docs wire them: in LangGraph's
``create_react_agent`` and LangChain v1's ``create_agent`` (``store=``, per-user namespaces
from ``config["configurable"]["langgraph_user_id"]``), and LangMem's prompt-time search. The
chat model is a deterministic fake that emits the tool calls an LLM would (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_mnemonia import MnemoniaStore
from langgraph.checkpoint.memory import InMemorySaver
from mnemonia import MemoryEngine
from mnemonia.embeddings import HashingEmbedder

from tests.langchain.fakes import ScriptedToolChatModel

langmem = pytest.importorskip("langmem", reason="LangMem is a dev dependency (scripts/setup.sh)")
from langmem import create_manage_memory_tool, create_search_memory_tool  # noqa: E402

NAMESPACE = ("memories", "{langgraph_user_id}")


def _react_agent(model: Any, tools: list[Any], store: MnemoniaStore, **kw: Any) -> Any:
    import warnings

    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        # LangMem's docs still use create_react_agent, deprecated in LangGraph 1.0 in favour
        # of langchain.agents.create_agent (tested beside it); the wiring is what is tested.
        warnings.filterwarnings("ignore", "create_react_agent has been moved",
                                DeprecationWarning)
        return create_react_agent(model, tools=tools, store=store,
                                  checkpointer=InMemorySaver(), **kw)


def _create_agent(model: Any, tools: list[Any], store: MnemoniaStore, **kw: Any) -> Any:
    from langchain.agents import create_agent

    prompt = kw.pop("prompt", None)
    if prompt is not None:
        from langchain.agents.middleware import dynamic_prompt

        @dynamic_prompt
        def memory_prompt(request: Any) -> str:
            return prompt(request.state["messages"])
        kw["middleware"] = [memory_prompt]
    return create_agent(model, tools=tools, store=store, checkpointer=InMemorySaver(), **kw)


BUILDERS = {"create_react_agent": _react_agent, "create_agent": _create_agent}


@pytest.fixture
def store(engine: MemoryEngine, hashing_embedder: HashingEmbedder) -> MnemoniaStore:
    # As LangMem's docs configure InMemoryStore: index={"dims": ..., "embed": ...}.
    return MnemoniaStore(engine=engine, index={"dims": hashing_embedder.dimension,
                                               "embed": hashing_embedder})


@pytest.fixture(params=sorted(BUILDERS))
def build(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return BUILDERS[request.param]  # type: ignore[no-any-return]


def _tools() -> list[Any]:
    return [create_manage_memory_tool(namespace=NAMESPACE),
            create_search_memory_tool(namespace=NAMESPACE)]


def _config(user: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user, "thread_id": thread}}


def _say(agent: Any, text: str, user: str, thread: str) -> str:
    out = agent.invoke({"messages": [{"role": "user", "content": text}]},
                       config=_config(user, thread))
    return str(out["messages"][-1].text)


def _found(reply: str) -> list[str]:
    """The memory contents a search_memory result shows."""
    assert reply.startswith("Tool said: "), reply
    return [m["value"]["content"] for m in json.loads(reply[len("Tool said: "):])]


def test_store_then_search_from_a_new_thread(build: Callable[..., Any],
                                             store: MnemoniaStore) -> None:
    model = ScriptedToolChatModel()
    agent = build(model, _tools(), store)
    reply = _say(agent, "remember: Alice's cat is called Miso", "alice", "t1")
    assert model.bound == ["manage_memory", "search_memory"]  # the agent bound LangMem's tools
    assert reply.startswith("Tool said: created memory ")
    _say(agent, "remember: Alice works night shifts at the hospital", "alice", "t1")
    items = store.search(("memories", "alice"))
    assert sorted(i.value["content"] for i in items) == [
        "Alice works night shifts at the hospital", "Alice's cat is called Miso"]
    found = _found(_say(agent, "recall: what is my cat called?", "alice", "t2"))
    assert found[0] == "Alice's cat is called Miso"
    # The new thread started empty: the memory came from the store, not the conversation.
    assert sum(1 for m in model.seen[-2] if m.type == "human") == 1


def test_users_do_not_see_each_others_memories(build: Callable[..., Any],
                                               store: MnemoniaStore) -> None:
    agent = build(ScriptedToolChatModel(), _tools(), store)
    _say(agent, "remember: My cat is called Miso", "alice", "a1")
    _say(agent, "remember: My dog is called Rex", "bob", "b1")
    assert _found(_say(agent, "recall: cat", "bob", "b2")) == ["My dog is called Rex"]
    assert _found(_say(agent, "recall: dog", "alice", "a2")) == ["My cat is called Miso"]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "alice"),
                                                           ("memories", "bob")]


def test_update_and_delete_by_the_id_the_agent_was_given(build: Callable[..., Any],
                                                         store: MnemoniaStore) -> None:
    agent = build(ScriptedToolChatModel(), _tools(), store)
    created = _say(agent, "remember: The team meeting is on Monday", "alice", "t1")
    memory_id = created.rsplit(" ", 1)[1]
    assert store.get(("memories", "alice"), memory_id) is not None
    updated = _say(agent, f"update {memory_id}: The team meeting moved to Tuesday",
                   "alice", "t1")
    assert updated == f"Tool said: updated memory {memory_id}"
    item = store.get(("memories", "alice"), memory_id)
    assert item is not None and item.value == {"content": "The team meeting moved to Tuesday"}
    assert _found(_say(agent, "recall: team meeting", "alice", "t2")) == [
        "The team meeting moved to Tuesday"]
    assert _say(agent, f"forget {memory_id}", "alice", "t2") == \
        f"Tool said: Deleted memory {memory_id}"
    assert store.get(("memories", "alice"), memory_id) is None
    assert _found(_say(agent, "recall: team meeting", "alice", "t3")) == []


def test_a_bad_tool_call_is_an_error_message_and_writes_nothing(
        build: Callable[..., Any], store: MnemoniaStore) -> None:
    agent = build(ScriptedToolChatModel(), _tools(), store)
    reply = _say(agent, "update not-a-uuid: something", "alice", "t1")
    assert "Error" in reply and "id" in reply
    assert store.search(("memories", "alice")) == []


async def test_the_async_api(build: Callable[..., Any], store: MnemoniaStore) -> None:
    agent = build(ScriptedToolChatModel(), _tools(), store)

    async def say(text: str, user: str, thread: str) -> str:
        out = await agent.ainvoke({"messages": [{"role": "user", "content": text}]},
                                  config=_config(user, thread))
        return str(out["messages"][-1].text)

    created = await say("remember: Alice is allergic to peanuts", "alice", "t1")
    memory_id = created.rsplit(" ", 1)[1]
    await say("remember: Bob is allergic to shellfish", "bob", "t1")
    assert _found(await say("recall: allergies", "alice", "t2")) == [
        "Alice is allergic to peanuts"]
    await say(f"update {memory_id}: Alice is allergic to peanuts and cashews", "alice", "t2")
    assert _found(await say("recall: allergies", "alice", "t3")) == [
        "Alice is allergic to peanuts and cashews"]
    await say(f"forget {memory_id}", "alice", "t3")
    assert _found(await say("recall: allergies", "alice", "t4")) == []
    assert _found(await say("recall: allergies", "bob", "t4")) == [
        "Bob is allergic to shellfish"]


def test_prompt_time_search(build: Callable[..., Any], store: MnemoniaStore) -> None:
    """LangMem's pattern: the prompt searches the store for the user's memories on every turn
    and puts them in the system message (``get_store()`` inside the graph)."""
    from langgraph.config import get_config, get_store

    def prompt(messages: list[AnyMessage]) -> str:
        user = get_config()["configurable"]["langgraph_user_id"]
        memories = get_store().search(("memories", user), query=messages[-1].text, limit=1)
        lines = "\n".join(f"- {m.value['content']}" for m in memories)
        return f"You are a helpful assistant.\n## Memories\n{lines}"

    def react_prompt(state: dict[str, Any]) -> list[BaseMessage]:
        from langchain_core.messages import SystemMessage

        return [SystemMessage(prompt(state["messages"])), *state["messages"]]

    model = ScriptedToolChatModel()
    kw: dict[str, Any] = {"prompt": react_prompt if build is _react_agent else prompt}
    agent = build(model, _tools(), store, **kw)
    _say(agent, "remember: Alice prefers green tea in the morning", "alice", "t1")
    _say(agent, "remember: Alice flies to Lisbon in May", "alice", "t1")
    _say(agent, "remember: Bob prefers green tea with honey", "bob", "t1")
    answer = _say(agent, "Which tea do I like?", "alice", "t2")
    assert answer == "Alice prefers green tea in the morning"
    system = [m.text for m in model.seen[-1] if m.type == "system"]
    assert len(system) == 1 and "Alice prefers green tea" in system[0]
    assert "Bob" not in system[0]
    assert _say(agent, "Which tea do I like?", "carol", "t3") == "I don't know."
