"""Enrichment and ingest at scale keep their answers: the sweep's relation count is the rows it
inserted (no COUNT(*) of the tenant's relations per chunk), ``follows`` breaks a tie of
creation times by insertion order, and the ingest gatekeeper sees every earlier item of a
large batch (the top neighbours are selected, not all pairs listed)."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from maint_helpers import row, set_rows
from mnemonia import MemoryEngine
from mnemonia.ingest import ENRICH_BATCH, NEIGHBOURS
from mnemonia.store import sql as S

AT = datetime(2024, 12, 1, 12, tzinfo=UTC)


def _relation_rows(engine: MemoryEngine, tenant: str) -> set[tuple[str, str, str]]:
    with engine.sql.connect() as conn:
        return {(r.src, r.dst, r.type) for r in conn.execute(
            sa.select(S.relations).where(S.relations.c.tenant == tenant))}


def test_the_sweep_counts_the_relations_it_inserted(engine: MemoryEngine) -> None:
    # another tenant with relations of its own: they are not counted for "t"
    engine.add_many([{"text": f"Caroline chat {i}", "session_id": "x", "importance": 0.5}
                     for i in range(5)], tenant="u")
    engine.enrich(tenant="u")
    n = ENRICH_BATCH + 40  # two chunks
    mems = engine.add_many([{"text": f"Melanie talked about pottery class number {i}",
                             "session_id": f"s{i // 10}", "importance": 0.5,
                             "entities": [f"name:topic{i % 7}"]} for i in range(n)],
                           tenant="t")
    set_rows(engine, [m.id for m in mems], state="batched", enriched_at=None)
    with engine.sql.begin() as conn:  # what ingest enriched at once: keep a part of it
        conn.execute(S.relations.delete().where(S.relations.c.tenant == "t",
                                                S.relations.c.type != "follows"))
    before_u = _relation_rows(engine, "u")
    before_t = _relation_rows(engine, "t")
    report = engine.enrich(tenant="t")
    after_t = _relation_rows(engine, "t")
    assert report.enriched == n
    assert report.relations_added == len(after_t) - len(before_t) > n  # follows + same_entity
    assert _relation_rows(engine, "u") == before_u
    assert engine.enrich(tenant="t").relations_added == 0


def test_follows_breaks_a_tie_of_times_by_insertion_order(engine: MemoryEngine) -> None:
    mems = engine.add_many([{"text": f"turn {w} of the evening chat", "session_id": "s",
                             "at": AT, "importance": 0.5} for w in ("one", "two", "three")],
                           tenant="t")
    later = engine.add("a last remark of the evening chat", tenant="t", session_id="s",
                       at=datetime(2024, 12, 1, 13, tzinfo=UTC), importance=0.5)
    with engine.sql.begin() as conn:
        conn.execute(S.relations.delete())
    engine.enrich(tenant="t")
    follows = {(s, d) for s, d, t in _relation_rows(engine, "t") if t == "follows"}
    a, b, c = (m.id for m in mems)
    assert follows == {(a, b), (b, c), (c, later.id)}


def test_the_gatekeeper_sees_a_duplicate_far_back_in_the_batch(engine: MemoryEngine) -> None:
    words = ["harbour", "violin", "glacier", "tax", "compiler", "orchid", "saddle", "lantern",
             "walnut", "comet", "ferry", "basil", "quartz", "meadow"]
    assert len(words) > 2 * NEIGHBOURS
    first = "Caroline restored an old wooden sailing boat with her grandfather last summer"
    items = [{"text": first, "importance": 0.0}]
    items += [{"text": f"{w} {w}-thing and more {w} stuff", "importance": 0.0} for w in words]
    items.append({"text": first, "importance": 0.0})  # a duplicate of item 0, far back
    mems = engine.add_many(items, tenant="t")
    assert mems[0].state != "skipped"
    assert mems[-1].state == "skipped"  # novelty 0 against the first item
    assert row(engine, mems[-1].id).state == "skipped"
