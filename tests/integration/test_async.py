"""Async that does not block the event loop: every async method of the engine and the adapters
takes what its sync twin takes, and 50 concurrent ``arecall`` / ``aadd`` calls on one engine
(real Chroma, real SQLite, the hashing embedder) all get the right answer and leave a
consistent store."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import llama_index.memory.mnemonia as llama
from langchain_mnemonia import (
    MnemoniaChatMessageHistory,
    MnemoniaMemory,
    MnemoniaRetriever,
    MnemoniaStore,
)
from mnemonia import MemoryEngine
from mnemonia.recall import cue_index, entity_index
from mnemonia.recall import tenant as recall_tenant

CLASSES = [MemoryEngine, MnemoniaChatMessageHistory, MnemoniaMemory, MnemoniaRetriever,
           MnemoniaStore, llama.MnemoniaMemory, llama.MnemoniaMemoryBlock, llama.MnemoniaRetriever]


def async_twins(cls: type) -> list[tuple[str, Callable[..., Any], Callable[..., Any]]]:
    """``(name, sync, async)`` for every async method a class defines whose sync twin (the
    name without its ``a``) it has: ``aadd``/``add``, ``_aretrieve``/``_retrieve``, ..."""
    out = []
    for name, fn in vars(cls).items():
        if not inspect.iscoroutinefunction(fn):
            continue
        stripped = name.replace("a", "", 1) if name.lstrip("_").startswith("a") else None
        sync = getattr(cls, stripped, None) if stripped else None
        if inspect.isfunction(sync) and not inspect.iscoroutinefunction(sync):
            out.append((name, sync, fn))
    return out


def parity_gaps(sync: Callable[..., Any], coro: Callable[..., Any]) -> list[str]:
    """What the sync twin accepts that the async one does not (or takes with another
    default); a ``**kwargs`` of the async one passes every keyword on."""
    a = inspect.signature(coro).parameters
    passes_on = any(p.kind is p.VAR_KEYWORD for p in a.values())
    gaps = []
    for name, p in inspect.signature(sync).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name == "self":
            continue
        if name not in a:
            if not passes_on:
                gaps.append(f"{name} missing")
        elif a[name].default != p.default:
            gaps.append(f"{name} defaults to {a[name].default!r}, not {p.default!r}")
    return gaps


def test_every_async_method_takes_what_its_sync_twin_takes() -> None:
    pairs = {f"{cls.__module__.split('.')[0]}.{cls.__name__}.{name}": parity_gaps(sync, coro)
             for cls in CLASSES for name, sync, coro in async_twins(cls)}
    # the twins found include these (the check is not vacuous)
    assert {"mnemonia.MemoryEngine.aadd", "mnemonia.MemoryEngine.aadd_many",
            "mnemonia.MemoryEngine.arecall",
            "langchain_mnemonia.MnemoniaChatMessageHistory.aadd_messages",
            "langchain_mnemonia.MnemoniaStore.abatch",
            "langchain_mnemonia.MnemoniaMemory.asave_context",
            "langchain_mnemonia.MnemoniaRetriever._aget_relevant_documents",
            "llama_index.MnemoniaMemory.aput_messages", "llama_index.MnemoniaMemory.aget",
            "llama_index.MnemoniaRetriever._aretrieve"} <= set(pairs)
    assert {k: v for k, v in pairs.items() if v} == {}


def test_the_parity_check_catches_a_missing_keyword() -> None:
    def add_many(items: list[Any], *, tenant: str, replace: bool = False) -> None: ...

    async def aadd_many(items: list[Any], *, tenant: str) -> None: ...

    async def arecall(query: str, **kwargs: Any) -> None: ...

    def recall(query: str | None = None, *, tenant: str) -> None: ...

    assert parity_gaps(add_many, aadd_many) == ["replace missing"]
    assert parity_gaps(recall, arecall) == ["query defaults to <class 'inspect._empty'>, "
                                            "not None"]


async def test_aadd_many_replace_and_arecall_without_query(engine: MemoryEngine) -> None:
    first = await engine.aadd_many([{"text": "Maya walks the border collie", "id": "dog",
                                     "entities": ["animal:dog"]}], tenant="t")
    again = await engine.aadd_many([{"text": "Maya walks the greyhound", "id": "dog",
                                     "entities": ["animal:dog"]}], tenant="t", replace=True)
    assert [m.id for m in first] == [m.id for m in again] == ["dog"]
    assert engine.get("dog", tenant="t").text == "Maya walks the greyhound"
    assert [e.event for e in engine.history("dog", tenant="t")][-1] == "updated"
    by_entity = await engine.arecall(tenant="t", entity="animal:dog")  # no query, like recall
    assert by_entity.ids == ["dog"]


def _seed_texts() -> list[str]:
    topics = ["violin", "garden", "python", "marathon", "sourdough", "telescope", "kayak",
              "chess", "pottery", "beekeeping"]
    return [f"Member {i} practises {t} every weekend with zest{i}"
            for i, t in enumerate(topics)]


async def test_fifty_concurrent_recalls_and_adds_on_one_engine(engine: MemoryEngine) -> None:
    seeded = engine.add_many([{"text": t} for t in _seed_texts()], tenant="crowd")
    ticks = [0]
    stop = asyncio.Event()

    async def ticker() -> None:  # counts event-loop turns while the 50 calls run
        while not stop.is_set():
            ticks[0] += 1
            await asyncio.sleep(0.001)

    threads: set[int] = set()
    loop_turned: list[bool] = []
    real_recall = engine.recall

    def recall_watched(*args: Any, **kwargs: Any) -> Any:
        """The real recall, after seeing the event loop turn while this call is running
        (it could not if the call ran on the loop's thread)."""
        threads.add(threading.get_ident())
        seen, deadline = ticks[0], time.monotonic() + 5
        while ticks[0] == seen and time.monotonic() < deadline:
            time.sleep(0.001)
        loop_turned.append(ticks[0] != seen)
        return real_recall(*args, **kwargs)

    engine.recall = recall_watched  # type: ignore[method-assign]
    calls = []
    for i in range(25):
        calls.append(engine.arecall(f"zest{i % len(seeded)} weekend", tenant="crowd", k=1,
                                    min_activation=0))
        calls.append(engine.aadd(f"Visitor {i} brought quince{i} jam", tenant="crowd",
                                 importance=0.6, entities=[f"person:visitor{i}"]))
    tick = asyncio.create_task(ticker())
    try:
        results = await asyncio.gather(*calls)
    finally:
        stop.set()
        await tick
        engine.recall = real_recall  # type: ignore[method-assign]
    recalls, adds = results[0::2], results[1::2]

    # every result is the right one
    for i, res in enumerate(recalls):
        assert res.ids == [seeded[i % len(seeded)].id], (i, res.render())
    assert [m.text for m in adds] == [f"Visitor {i} brought quince{i} jam" for i in range(25)]
    assert len({m.id for m in adds}) == 25
    # the calls ran on worker threads, and the loop kept turning while they ran
    assert threading.get_ident() not in threads and len(threads) > 1
    assert loop_turned == [True] * 25

    # the store is consistent: counts, every added memory there and recallable, doctor clean
    stats = engine.stats("crowd")
    assert stats["memories"] == stats["active"] == 35
    assert stats["accesses"] == 25
    assert sum(engine.get(m.id, tenant="crowd").access_count for m in seeded) == 25
    for i, m in enumerate(adds):
        assert engine.get(m.id, tenant="crowd").entities == (f"person:visitor{i}",)
        assert engine.recall(f"quince{i} jam", tenant="crowd", k=1, touch=False).ids == [m.id]
        assert engine.recall(tenant="crowd", entity=f"person:visitor{i}",
                             touch=False).ids == [m.id]
    report = engine.doctor()
    assert report.problems == 0 and report.tenant("crowd").memories == 35


def test_an_add_during_an_entity_index_build_is_not_lost(engine: MemoryEngine) -> None:
    """A recall that builds the tenant's entity index from reads made before an add
    committed must not keep that index: it would miss the added memory's entity until the
    next write. Here the add lands exactly between the index's read and its caching."""
    rt = engine.runtime
    engine.add("Ravi repairs bicycles", tenant="e", entities=["person:ravi"])
    real_counts = rt.sql.graph.entity_counts
    added: list[str] = []

    def counts_then_an_add(conn: Any, tenant: str) -> Any:
        rows = real_counts(conn, tenant)
        if not added:  # another thread's add, committed after this read
            added.append(engine.add("Noor flies kites", tenant="e",
                                    entities=["person:noor"]).id)
        return rows

    rt.sql.graph.entity_counts = counts_then_an_add  # type: ignore[method-assign]
    try:
        engine.recall("who repairs bicycles", tenant="e", touch=False)
    finally:
        rt.sql.graph.entity_counts = real_counts  # type: ignore[method-assign]
    assert added
    with rt.reading() as conn:
        assert "person:noor" in entity_index(rt, conn, "e").names


def test_a_use_during_a_cue_index_build_is_not_lost(engine: MemoryEngine) -> None:
    """The same for the use-cue index: feedback recorded between the index's read and its
    caching is seen by the next recall."""
    rt = engine.runtime
    mem = engine.add("The office wifi password is on the fridge", tenant="c")
    real_record = recall_tenant.use_record
    fed: list[str] = []

    def record_then_feedback(sql: Any, conn: Any, tenant: str) -> Any:
        record = real_record(sql, conn, tenant)
        if not fed:
            fed.append(engine.feedback(mem.id, 5, tenant="c", query="where is the wifi "
                                       "password").id)
        return record

    recall_tenant.use_record = record_then_feedback
    try:
        engine.recall("wifi password", tenant="c", touch=False, mode="lifecycle")
    finally:
        recall_tenant.use_record = real_record
    assert fed
    with rt.reading() as conn:
        assert cue_index(rt, conn, "c").uses.get(mem.id, 0) >= 1
