"""The MCP server (``mnemonia mcp``), driven by the official SDK's own client: in process on
the hashing embedder for the tools' behaviour, and as a real subprocess (bundled model, real
Chroma and SQLite) over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import MnemoniaError
from mnemonia.mcp import build_server

TOOLS = {"remember", "recall", "forget", "restore", "feedback", "relate", "unsupersede", "stats"}


def text_of(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


# -- in process: the tools ---------------------------------------------------------------------
async def test_tools_and_their_arguments(engine: MemoryEngine) -> None:
    async with Client(build_server(engine, tenant="alice")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert all("tenant" in t.input_schema["properties"] for t in tools.values())
    props = tools["recall"].input_schema["properties"]
    assert {"query", "k", "topic", "entity", "mode"} <= set(props)
    assert props["k"]["anyOf"][0] == {"type": "integer"}
    remember = tools["remember"].input_schema
    assert {"text", "importance", "topic", "entities", "session"} <= set(remember["properties"])
    assert remember["required"] == ["text"]


async def test_a_round_of_every_tool(engine: MemoryEngine) -> None:
    async with Client(build_server(engine, tenant="alice")) as client:
        tea = await client.call_tool("remember", {
            "text": "Alice drinks green tea every morning", "importance": 0.8,
            "topic": "food", "entities": ["person:alice"], "session": "s1"})
        cat = await client.call_tool("remember", {"text": "Alice has a cat called Miso",
                                                  "kind": "fact"})
        assert not tea.is_error and not cat.is_error
        tea_id = tea.structured_content["memory"]["id"]  # type: ignore[index]
        cat_id = cat.structured_content["memory"]["id"]  # type: ignore[index]
        assert text_of(tea).startswith(f"remembered {tea_id}")
        stored = engine.get(tea_id, tenant="alice")
        assert (stored.topic, stored.session_id, stored.importance) == ("food", "s1", 0.8)
        assert "person:alice" in stored.entities
        assert engine.get(cat_id, tenant="alice").kind == "fact"

        found = await client.call_tool("recall", {"query": "what does Alice drink", "k": 1,
                                                  "topic": "food"})
        data: dict[str, Any] = found.structured_content  # type: ignore[assignment]
        same = engine.recall("what does Alice drink", tenant="alice", k=1, topic="food",
                             touch=False)
        assert text_of(found) == data["rendered"] == same.render()
        assert [h["id"] for h in data["memories"]] == same.ids == [tea_id]
        hit = data["memories"][0]
        assert hit["text"] == "Alice drinks green tea every morning"
        assert hit["explanation"]["cosine"] > 0 and hit["score"] == pytest.approx(
            hit["explanation"]["score"])
        assert "score=" in hit["why"] and data["mode"] == engine.config.default_mode

        rated = await client.call_tool("feedback", {"id": tea_id, "quality": 5,
                                                    "query": "what does Alice drink"})
        assert rated.structured_content["memory"]["utility"] > 0.5  # type: ignore[index]
        related = await client.call_tool("relate", {"src": tea_id, "dst": cat_id,
                                                    "relation": "related_to",
                                                    "strength": 0.7})
        assert related.structured_content == {"src": tea_id, "dst": cat_id,
                                              "type": "related_to", "strength": 0.7}
        assert [r.type for r in engine.relations(tea_id, tenant="alice")] == ["related_to"]

        gone = await client.call_tool("forget", {"id": cat_id})
        assert not gone.is_error and engine.get(cat_id, tenant="alice").deleted
        after = await client.call_tool("recall", {"query": "Alice cat Miso", "k": 5})
        assert cat_id not in [h["id"] for h in after.structured_content["memories"]]  # type: ignore[index]
        back = await client.call_tool("restore", {"id": cat_id})
        assert not back.is_error and not engine.get(cat_id, tenant="alice").deleted

        stats = await client.call_tool("stats", {})
    assert stats.structured_content == engine.stats("alice")
    assert stats.structured_content["active"] == 2 and stats.structured_content["relations"]  # type: ignore[index]


async def test_unsupersede_brings_a_memory_back_and_keeps_the_pair_apart(
        engine: MemoryEngine) -> None:
    old = engine.add("Alice's dentist appointment is on May 3", tenant="alice")
    new = engine.add("Alice's dentist appointment moved to May 10", tenant="alice")
    engine.supersede(old.id, new.id, tenant="alice")
    async with Client(build_server(engine, tenant="alice")) as client:
        hidden = await client.call_tool("recall", {"query": "when is the dentist", "k": 5})
        undone = await client.call_tool("unsupersede", {"id": old.id})
        shown = await client.call_tool("recall", {"query": "when is the dentist", "k": 5})
        again = await client.call_tool("unsupersede", {"id": old.id})
    assert old.id not in [h["id"] for h in hidden.structured_content["memories"]]  # type: ignore[index]
    assert not undone.is_error, text_of(undone)
    assert text_of(undone) == f"{old.id} is no longer superseded by {new.id} (kept apart)"
    data: dict[str, Any] = undone.structured_content  # type: ignore[assignment]
    assert data["kept_apart"] == new.id and data["memory"]["id"] == old.id
    assert data["memory"]["superseded_by"] is None
    assert old.id in [h["id"] for h in shown.structured_content["memories"]]  # type: ignore[index]
    assert again.is_error and "is not superseded" in text_of(again)
    assert [e.event for e in engine.history(old.id, tenant="alice")
            if e.event != "recalled"][-1] == "unsuperseded"


async def test_the_tenant_comes_from_the_call_or_the_server(engine: MemoryEngine) -> None:
    async with Client(build_server(engine, tenant="alice")) as client:
        await client.call_tool("remember", {"text": "Alice bakes sourdough"})
        await client.call_tool("remember", {"text": "Bob bakes bagels", "tenant": "bob"})
        mine = await client.call_tool("recall", {"query": "who bakes", "k": 5})
        bobs = await client.call_tool("recall", {"query": "who bakes", "k": 5,
                                                 "tenant": "bob"})
    assert [h["text"] for h in mine.structured_content["memories"]] == [  # type: ignore[index]
        "Alice bakes sourdough"]
    assert [h["text"] for h in bobs.structured_content["memories"]] == [  # type: ignore[index]
        "Bob bakes bagels"]

    async with Client(build_server(engine)) as client:  # no default tenant
        refused = await client.call_tool("stats", {})
        named = await client.call_tool("stats", {"tenant": "bob"})
    assert refused.is_error and "pass the `tenant` argument" in text_of(refused)
    assert "--tenant" in text_of(refused)
    assert not named.is_error and named.structured_content["memories"] == 1  # type: ignore[index]


def engine_error(call: Any) -> str:
    with pytest.raises(MnemoniaError) as caught:
        call()
    return str(caught.value)


async def test_bad_arguments_are_tool_errors_with_the_engine_message(
        engine: MemoryEngine) -> None:
    mem = engine.add("Alice plays chess", tenant="alice")
    cases = [
        ("remember", {"text": "  "}, lambda: engine.add("  ", tenant="alice")),
        ("remember", {"text": "x", "importance": 1.5},
         lambda: engine.add("x", tenant="alice", importance=1.5)),
        ("remember", {"text": "x", "kind": "dream"},
         lambda: engine.add("x", tenant="alice", kind="dream")),
        ("remember", {"text": "x", "tenant": "no spaces"},
         lambda: engine.add("x", tenant="no spaces")),
        ("recall", {"query": "chess", "mode": "psychic"},
         lambda: engine.recall("chess", tenant="alice", mode="psychic")),
        ("recall", {"query": "chess", "k": 0}, lambda: engine.recall("chess", tenant="alice",
                                                                       k=0)),
        ("forget", {"id": "nope"}, lambda: engine.forget("nope", tenant="alice")),
        ("restore", {"id": "nope", "tenant": "bob"},
         lambda: engine.restore("nope", tenant="bob")),
        ("feedback", {"id": mem.id, "quality": 9},
         lambda: engine.feedback(mem.id, 9, tenant="alice")),
        ("relate", {"src": mem.id, "dst": mem.id, "relation": "loves"},
         lambda: engine.relate(mem.id, mem.id, "loves", tenant="alice")),
        ("unsupersede", {"id": mem.id}, lambda: engine.unsupersede(mem.id, tenant="alice")),
        ("unsupersede", {"id": "nope", "tenant": "bob"},
         lambda: engine.unsupersede("nope", tenant="bob")),
    ]
    before = engine.stats()
    async with Client(build_server(engine, tenant="alice")) as client:
        for tool, args, direct in cases:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args)
            assert text_of(result) == engine_error(direct), (tool, args)
        # a value of the wrong JSON type is refused by the tool's input schema
        typed = await client.call_tool("recall", {"query": "chess", "k": "three"})
        assert typed.is_error and "k" in text_of(typed) and "integer" in text_of(typed)
        # the session goes on
        ok = await client.call_tool("recall", {"query": "chess"})
    assert not ok.is_error and ok.structured_content["memories"][0]["id"] == mem.id  # type: ignore[index]
    after = engine.stats()
    assert {k: v for k, v in after.items() if k != "accesses"} == {
        k: v for k, v in before.items() if k != "accesses"}


class _FailingEmbedder(HashingEmbedder):
    """The hashing embedder, except that it fails (like a broken remote model) on 'boom'."""

    def embed_documents(self, texts: Any) -> np.ndarray:
        if any("boom" in t for t in texts):
            raise RuntimeError("the embedding service is down")
        return super().embed_documents(texts)


async def test_an_unexpected_failure_does_not_stop_the_server(
        tmp_path: Path, clock: ManualClock, config: MnemoniaConfig) -> None:
    with MemoryEngine.open(tmp_path / "store", config=config, clock=clock,
                           embedder=_FailingEmbedder()) as engine:
        async with Client(build_server(engine, tenant="alice")) as client:
            failed = await client.call_tool("remember", {"text": "boom goes the model"})
            fine = await client.call_tool("remember", {"text": "quiet afternoon"})
        assert failed.is_error and "remember" in text_of(failed)
        assert "embedding service" not in text_of(failed)  # a crash's text stays server-side
        assert not fine.is_error
        assert [m.text for m in engine.list(tenant="alice")] == ["quiet afternoon"]


# -- subprocesses: the real command over stdio and HTTP ----------------------------------------
def _server_env() -> dict[str, str]:
    keep = ("PYTHONPATH", "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM", "ANONYMIZED_TELEMETRY")
    return {k: os.environ[k] for k in keep if k in os.environ}


async def _session_round(session: ClientSession, tenant: dict[str, str]) -> dict[str, Any]:
    """initialize, list tools, remember, recall, a bad call, forget, recall again."""
    init = await session.initialize()
    assert init.server_info.name == "mnemonia"
    assert {t.name for t in (await session.list_tools()).tools} == TOOLS
    ids = {}
    for text in ("Maya is allergic to peanuts", "Maya's sister lives in Lisbon"):
        added = await session.call_tool("remember", {"text": text, "importance": 0.9,
                                                     **tenant})
        assert not added.is_error, text_of(added)
        ids[text] = added.structured_content["memory"]["id"]  # type: ignore[index]
    found = await session.call_tool("recall", {"query": "Can Maya eat peanut butter?",
                                               "k": 1, **tenant})
    hits = found.structured_content["memories"]  # type: ignore[index]
    assert [h["id"] for h in hits] == [ids["Maya is allergic to peanuts"]]
    assert hits[0]["explanation"]["cosine"] > 0.3
    assert "RELEVANT MEMORY\n- Maya is allergic to peanuts" in text_of(found)
    bad = await session.call_tool("feedback", {"id": hits[0]["id"], "quality": 9, **tenant})
    assert bad.is_error and "quality" in text_of(bad)
    gone = await session.call_tool("forget", {"id": hits[0]["id"], **tenant})
    assert not gone.is_error
    again = await session.call_tool("recall", {"query": "Can Maya eat peanut butter?",
                                               "k": 1, **tenant})
    assert hits[0]["id"] not in [h["id"] for h in again.structured_content["memories"]]  # type: ignore[index]
    return ids


def _check_store(path: Path, tenant: str, ids: dict[str, str], embedder: Any) -> None:
    """What the server wrote, read back by opening its store here (its lock is released)."""
    with MemoryEngine.open(path, embedder=embedder, maintenance="manual") as engine:
        assert engine.get(ids["Maya is allergic to peanuts"], tenant=tenant).deleted
        assert not engine.get(ids["Maya's sister lives in Lisbon"], tenant=tenant).deleted
        assert engine.doctor().problems == 0


@pytest.mark.integration
async def test_stdio_session_against_the_command(tmp_path: Path, real_embedder: Any) -> None:
    params = StdioServerParameters(
        command=sys.executable, env=_server_env(),
        args=["-m", "mnemonia.cli", "mcp", "--path", str(tmp_path / "store"),
              "--tenant", "maya"])
    not_protocol: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):  # a stdout line that is not JSON-RPC
            not_protocol.append(message)

    with (tmp_path / "server.log").open("w") as log:
        async with asyncio.timeout(300), stdio_client(params, errlog=log) as (read, write), \
                ClientSession(read, write, message_handler=on_message) as session:
            ids = await _session_round(session, {})
    assert not_protocol == []
    assert "serving the store" in (tmp_path / "server.log").read_text()
    _check_store(tmp_path / "store", "maya", ids, real_embedder)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """``mnemonia mcp --http`` on a free 127.0.0.1 port, no default tenant; stopped (SIGTERM)
    in teardown."""
    port = _free_port()
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mnemonia.cli", "mcp", "--http", "--port", str(port),
             "--path", str(tmp_path / "store")],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **_server_env()})
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 120
        try:
            while True:
                try:
                    httpx.get(url, timeout=1)  # any HTTP answer: uvicorn is up
                    break
                except httpx.HTTPError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"mnemonia mcp --http did not start: "
                                    f"{log_path.read_text()[-3000:]}")
                    time.sleep(0.2)
            yield url, proc, log_path
        finally:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.integration
async def test_http_session_against_the_command(
        http_server: tuple[str, subprocess.Popen[bytes], Path], tmp_path: Path,
        real_embedder: Any) -> None:
    url, proc, log_path = http_server
    async with asyncio.timeout(300), streamable_http_client(url) as (read, write), \
            ClientSession(read, write) as session:
        ids = await _session_round(session, {"tenant": "maya"})
        refused = await session.call_tool("stats", {})  # no tenant and no --tenant
        assert refused.is_error and "--tenant" in text_of(refused)
        # calls in flight at once on one session are all answered
        many = await asyncio.gather(*(session.call_tool(
            "recall", {"query": "Where does Maya's sister live?", "k": 1, "tenant": "maya"})
            for _ in range(8)))
        assert {h.structured_content["memories"][0]["id"] for h in many} == {  # type: ignore[index]
            ids["Maya's sister lives in Lisbon"]}
    proc.terminate()  # SIGTERM: uvicorn stops, then the store is closed
    assert proc.wait(timeout=60) == 0, log_path.read_text()[-3000:]
    assert "the store is closed" in log_path.read_text()
    _check_store(tmp_path / "store", "maya", ids, real_embedder)
