"""The MCP server: Mnemonia's memory as Model Context Protocol tools (``mnemonia mcp``).

Thin over the engine, on the official ``mcp`` SDK (the ``mnemonia[mcp]`` extra): the tools
``remember``, ``recall``, ``forget``, ``restore``, ``feedback``, ``relate``, ``unsupersede``
and ``stats``, served over stdio (the default; stdout carries the protocol only, logs go to
stderr) or streamable HTTP (``--http``, at ``http://HOST:PORT/mcp``).

Every tool takes a ``tenant``; without one it uses the server's default (``--tenant``), and
with neither the call is a tool error that says so. A bad argument is a tool error
(``isError``) carrying the :class:`~mnemonia.errors.MnemoniaError` message; the server keeps
serving. Each result has a text part for the model (for ``recall`` the ``RELEVANT ...``
sections) and the same data as structured content (for ``recall`` every hit with its id,
text, score and explanation).

Example:
    >>> import asyncio, tempfile
    >>> from mnemonia.embeddings import HashingEmbedder
    >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder(),
    ...                            maintenance="manual")
    >>> sorted(t.name for t in asyncio.run(build_server(engine, tenant="alice").list_tools()))
    ['feedback', 'forget', 'recall', 'relate', 'remember', 'restore', 'stats', 'unsupersede']
    >>> engine.close()
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import Field

from mnemonia import validation as check
from mnemonia.engine import MemoryEngine
from mnemonia.errors import (
    InvalidInputError,
    InvalidTenantError,
    MissingDependencyError,
    MnemoniaError,
)
from mnemonia.models import Hit, Memory
from mnemonia.runtime import store_folder

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, TextContent
except ImportError as e:  # pragma: no cover - the extra is installed by the project's setup
    raise MissingDependencyError(
        "the MCP server needs the official MCP SDK: pip install 'mnemonia[mcp]'") from e

__all__ = ["MnemoniaTools", "build_server", "serve"]

INSTRUCTIONS = (
    "Long-term memory. `recall` before answering anything that may depend on what the user "
    "said before; `remember` what is worth keeping (facts with kind='fact'); `feedback` 0-5 "
    "on a recalled memory after using it; `forget` what is wrong or unwanted.")

Tenant = Annotated[str | None, Field(
    description="Whose memory; default: the server's --tenant.")]
MemoryId = Annotated[str, Field(description="A memory id (from remember or recall).")]


def _tool_errors(fn: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
    """A :class:`MnemoniaError` becomes a tool error with its message (``isError``), not a
    failed request; anything else is left to the SDK (a generic tool error, logged)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return fn(*args, **kwargs)
        except MnemoniaError as e:
            return CallToolResult(content=[TextContent(type="text", text=str(e))],
                                  is_error=True)
    return call


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    """``text`` for the model, then ``data`` as JSON text and as structured content."""
    return CallToolResult(content=[TextContent(type="text", text=text),
                                   TextContent(type="text", text=json.dumps(data))],
                          structured_content=data)


def _memory(m: Memory) -> dict[str, Any]:
    d = m.to_dict()
    return {k: d[k] for k in ("id", "tenant", "text", "kind", "topic", "entities",
                              "importance", "state", "pinned", "session_id", "created_at",
                              "accessed_at", "access_count", "utility", "deleted_at",
                              "superseded_by", "metadata")}


def _hit(h: Hit) -> dict[str, Any]:
    m = h.memory
    return {"id": m.id, "text": m.text, "score": h.score, "kind": m.kind, "topic": m.topic,
            "created_at": m.created_at.isoformat(), "why": str(h.explanation),
            "explanation": h.explanation.to_dict()}


class MnemoniaTools:
    """The tools, over one engine; ``tenant`` is the default tenant (``None``: each call
    must name one). Sync methods: the SDK runs them on worker threads, off the event loop."""

    def __init__(self, engine: MemoryEngine | Future[MemoryEngine],
                 tenant: str | None = None) -> None:
        self._engine = engine
        self.tenant = None if tenant is None else check.tenant(tenant)

    @property
    def engine(self) -> MemoryEngine:
        """The engine; one still opening (a ``Future``) is waited for, and an error of its
        opening is raised here, so each tool call reports it."""
        if isinstance(self._engine, Future):
            return self._engine.result()
        return self._engine

    def _tenant(self, tenant: str | None) -> str:
        chosen = tenant if tenant is not None else self.tenant
        if chosen is None:
            raise InvalidTenantError(
                "tenant: none given; pass the `tenant` argument, or start the server with "
                "--tenant NAME for a default")
        return chosen

    @_tool_errors
    def remember(self, text: Annotated[str, Field(description="What to remember.")],
                 importance: Annotated[float, Field(description="0..1; 0.5 is ordinary.")]
                 = 0.5,
                 topic: Annotated[str | None, Field(description="Optional topic.")] = None,
                 entities: Annotated[list[str] | None, Field(
                     description="type:name strings, e.g. ['person:alice']")] = None,
                 session: Annotated[str | None, Field(description="Conversation id.")] = None,
                 kind: Annotated[str, Field(description="episode (a turn or event) or fact")]
                 = "episode", tenant: Tenant = None) -> CallToolResult:
        """Store one memory; returns it with its id."""
        mem = self.engine.add(text, tenant=self._tenant(tenant), importance=importance,
                              topic=topic, entities=entities, session_id=session, kind=kind)
        return _result(f"remembered {mem.id} (state {mem.state})", {"memory": _memory(mem)})

    @_tool_errors
    def recall(self, query: Annotated[str, Field(
                   description="What to recall for; may be empty with `entity`.")] = "",
               k: Annotated[int | None, Field(description="How many memories.")] = None,
               topic: Annotated[str | None, Field(
                   description="Keep this topic (and untopiced memories).")] = None,
               entity: Annotated[str | None, Field(
                   description="Only memories linked to this type:name entity.")] = None,
               mode: Annotated[str | None, Field(
                   description="lifecycle, agent_memory, general, belief, procedural or "
                               "relevance; default the store's.")] = None,
               tenant: Tenant = None) -> CallToolResult:
        """Recall memories by spreading activation: the RELEVANT EPISODES / RELEVANT MEMORY
        sections, and each hit with its id, score and explanation."""
        res = self.engine.recall(query, tenant=self._tenant(tenant), k=k, topic=topic,
                                 entity=entity, mode=mode)
        return _result(res.render() or "(nothing recalled)", {
            "query": res.query, "tenant": res.tenant, "mode": res.mode,
            "rendered": res.render(), "memories": [_hit(h) for h in res.memories],
            "episodes": [_hit(h) for h in res.episodes]})

    @_tool_errors
    def forget(self, id: MemoryId, hard: Annotated[bool, Field(
                   description="Remove for good (else restorable).")] = False,
               tenant: Tenant = None) -> CallToolResult:
        """Forget a memory: soft-delete it (restorable), or remove it with hard=true."""
        self.engine.forget(id, tenant=self._tenant(tenant), hard=hard)
        return _result(f"{'removed' if hard else 'forgot'} {id}",
                       {"id": id, "forgotten": True, "hard": hard})

    @_tool_errors
    def restore(self, id: MemoryId, tenant: Tenant = None) -> CallToolResult:
        """Bring back a forgotten (soft-deleted) memory."""
        mem = self.engine.restore(id, tenant=self._tenant(tenant))
        return _result(f"restored {mem.id}", {"memory": _memory(mem)})

    @_tool_errors
    def feedback(self, id: MemoryId, quality: Annotated[int, Field(
                     description="0..5: 4-5 it helped, 0-2 it was wrong or useless.")],
                 query: Annotated[str | None, Field(
                     description="The question it answered.")] = None,
                 tenant: Tenant = None) -> CallToolResult:
        """Rate a recalled memory 0..5 (one spaced-repetition review; 4-5 count as a use)."""
        mem = self.engine.feedback(id, quality, tenant=self._tenant(tenant), query=query)
        return _result(f"next review of {mem.id} in {mem.sm2.interval_days} day(s); utility "
                       f"{mem.utility:.2f}", {"memory": _memory(mem)})

    @_tool_errors
    def relate(self, src: MemoryId, dst: MemoryId, relation: Annotated[str, Field(
                   description="implies, part_of, causes, follows, related_to, contradicts, "
                               "supersedes, ...")],
               strength: Annotated[float, Field(description="(0, 1].")] = 1.0,
               tenant: Tenant = None) -> CallToolResult:
        """Link two memories with a typed relation src -> dst (recall spreads along it)."""
        rel = self.engine.relate(src, dst, relation, tenant=self._tenant(tenant),
                                 strength=strength)
        return _result(f"{rel.src} -{rel.type}-> {rel.dst}", {
            "src": rel.src, "dst": rel.dst, "type": rel.type, "strength": rel.strength})

    @_tool_errors
    def unsupersede(self, id: Annotated[str, Field(
                        description="The id of a superseded memory (the older one).")],
                    tenant: Tenant = None) -> CallToolResult:
        """Undo a supersession that was wrong: the older memory comes back to recall, and the
        two are never superseded automatically again."""
        tenant = self._tenant(tenant)
        new_id = self.engine.get(id, tenant=tenant).superseded_by
        mem = self.engine.unsupersede(id, tenant=tenant)
        return _result(f"{mem.id} is no longer superseded by {new_id} (kept apart)",
                       {"memory": _memory(mem), "kept_apart": new_id})

    @_tool_errors
    def stats(self, tenant: Tenant = None) -> CallToolResult:
        """Counts of the tenant's memories, states, relations and accesses."""
        data = self.engine.stats(self._tenant(tenant))
        return _result(", ".join(f"{k} {v}" for k, v in data.items()
                                 if isinstance(v, int)), data)


def build_server(engine: MemoryEngine | Future[MemoryEngine], *,
                 tenant: str | None = None) -> MCPServer:
    """An MCP server with the Mnemonia tools over ``engine`` (not started); ``engine`` may
    be a ``Future`` still opening it: the tools wait for it on their first call."""
    tools = MnemoniaTools(engine, tenant)
    server: MCPServer = MCPServer("mnemonia", instructions=INSTRUCTIONS,
                                  log_level="WARNING")
    for fn in (tools.remember, tools.recall, tools.forget, tools.restore, tools.feedback,
               tools.relate, tools.unsupersede, tools.stats):
        server.add_tool(fn, structured_output=False)
    return server


def serve(path: str | os.PathLike[str] | None = None, *, tenant: str | None = None,
          http: bool = False, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Open the store at ``path`` and serve it until the client goes (stdio) or Ctrl-C
    (HTTP, at ``http://HOST:PORT/mcp``); the store is closed on the way out."""
    if tenant is not None:
        check.tenant(tenant)
    if http and not (isinstance(port, int) and 1 <= port <= 65535):
        raise InvalidInputError(f"port={port!r}: must be an integer in 1..65535")
    # The store opens (and the model loads) on a thread of its own while the server starts
    # and the client says hello: `initialize` and `tools/list` never wait for it, the first
    # tool call waits only for what is left (figures: docs/mcp.md).
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemonia-open")
    opening = pool.submit(_open_warm, path)
    try:
        server = build_server(opening, tenant=tenant)
        where = f"http://{host}:{port}/mcp" if http else "stdio"
        print(f"mnemonia mcp: serving the store {store_folder(path)} on {where}",
              file=sys.stderr, flush=True)
        with _sigterm_exits():
            if http:
                server.run("streamable-http", host=host, port=port)
            else:
                server.run("stdio")
    finally:
        pool.shutdown(wait=True)
        if opening.exception() is None:
            opening.result().close()
            print("mnemonia mcp: stopped, the store is closed", file=sys.stderr, flush=True)
        else:
            print(f"mnemonia mcp: stopped; the store could not be opened: "
                  f"{opening.exception()}", file=sys.stderr, flush=True)


def _open_warm(path: str | os.PathLike[str] | None) -> MemoryEngine:
    """Open the store and run the model once, so the first recall finds it loaded."""
    engine = MemoryEngine.open(path)
    try:
        engine.embedder.embed_query("warm up")
    except Exception:
        engine.close()
        raise
    return engine


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM (``docker stop``, systemd, a client ending its server) stops serving the way
    Ctrl-C does, so the store is closed on the way out (uvicorn shuts down first, then sends
    the signal on to this handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
