"""Spreading reads a memory's relations only when something could pass along them: a
relation carries at most its type's weight (a strength is at most 1), so a seed whose
activation times the strongest spreading type's weight cannot reach the spread bound
(the least activation that can still change the answer) spreads along nothing, and its
edges are not read. Where the bound lets it, spreading still reaches the linked memory."""

from __future__ import annotations

from typing import Any

import pytest
from mnemonia import MemoryEngine

QUERY = "the lighthouse keeper paints the red door every spring"


def _linked(engine: MemoryEngine) -> tuple[str, str]:
    a = engine.add(QUERY, tenant="t").id
    b = engine.add("an invoice for copper pipes arrived on Tuesday", tenant="t").id
    engine.relate(a, b, "related_to", tenant="t")
    return a, b


def _spy(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    graph = engine.runtime.sql.graph
    asked: list[list[str]] = []
    read = graph.edges_around

    def edges_around(conn: Any, tenant: str, ids: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(sorted(ids))
        return read(conn, tenant, ids, *args, **kwargs)

    monkeypatch.setattr(graph, "edges_around", edges_around)
    return asked


def test_a_seed_that_cannot_pass_the_bound_along_any_relation_reads_none(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    a, _ = _linked(engine)
    asked = _spy(engine, monkeypatch)
    # k=1: the bound is what the best seed itself scores; along a relation (weight at most
    # 0.9, related_to 0.6) it passes on less, so nothing it links to can take its place
    got = engine.recall(QUERY, tenant="t", k=1, touch=False)
    assert got.ids == [a]
    assert asked == []


def test_where_the_bound_lets_it_spreading_reads_the_edges_and_reaches_the_link(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _linked(engine)
    asked = _spy(engine, monkeypatch)
    got = engine.recall(QUERY, tenant="t", k=5, min_activation=0.0, touch=False)
    assert a in asked[0]
    hit = {h.memory.id: h for h in got.memories}
    assert hit[b].explanation.path == (a, "related_to")
