"""A store with every kind of state, built by the UI tests (and the screenshots): forgotten,
superseded, consolidated, pinned, each gatekeeper state (skipped, batched, immediate),
relations, accesses over time, reviews, maintenance reports, user text that looks like HTML,
and a second tenant whose memories must never show on the first one's pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from mnemonia import ManualClock, MemoryEngine

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_META = '"><script>alert(2)</script>'
SECRET = "Bob's locker code is 4711"


@dataclass
class Store:
    engine: MemoryEngine
    clock: ManualClock
    ids: dict[str, str] = field(default_factory=dict)


def build(engine: MemoryEngine, clock: ManualClock) -> Store:
    """Fill ``engine`` (tenants ``alice`` and ``bob``); returns the notable ids by name."""
    s = Store(engine=engine, clock=clock)
    add = engine.add
    t = "alice"
    s.ids["immediate"] = add(
        "Alice's production database is PostgreSQL 16 on the db-01 host, backed up nightly "
        "to the offsite bucket with point-in-time recovery enabled", tenant=t, importance=0.95,
        kind="fact", topic="ops", entities=["tool:postgresql"]).id
    s.ids["batched"] = add("Alice prefers green tea in the afternoon instead of coffee",
                           tenant=t, importance=0.5, kind="fact", topic="food").id
    s.ids["skipped_src"] = add("ok thanks", tenant=t, importance=0.4).id
    s.ids["skipped"] = add("ok thanks", tenant=t, importance=0.0).id
    clock.advance(timedelta(hours=2))
    s.ids["old_plan"] = add("The team offsite is planned for Lisbon in May", tenant=t,
                            importance=0.6, topic="travel").id
    s.ids["new_plan"] = add("The team offsite moved from Lisbon to Porto, still in May",
                            tenant=t, importance=0.7, topic="travel").id
    engine.supersede(s.ids["old_plan"], s.ids["new_plan"], tenant=t)
    s.ids["dup1"] = add("The deploy runs every Friday at noon", tenant=t, importance=0.5).id
    s.ids["dup2"] = add("the deploy runs every friday at noon.", tenant=t, importance=0.5).id
    s.ids["pinned"] = add("Alice's daughter is called Maya", tenant=t, importance=0.6,
                          kind="fact").id
    engine.pin(s.ids["pinned"], tenant=t)
    s.ids["forgotten"] = add("Alice once tried a keto diet for a week", tenant=t,
                             importance=0.2).id
    s.ids["xss"] = add(XSS_SCRIPT, tenant=t, importance=0.5,
                       metadata={"note": XSS_META, "html": XSS_IMG}).id
    s.ids["xss_img"] = add(f"Look at this {XSS_IMG} picture", tenant=t, importance=0.5).id
    engine.relate(s.ids["immediate"], s.ids["pinned"], "related_to", strength=0.6, tenant=t)
    engine.relate(s.ids["xss"], s.ids["batched"], "implies", strength=0.9, tenant=t)
    engine.forget(s.ids["forgotten"], tenant=t)
    engine.add(SECRET, tenant="bob", importance=0.9, kind="fact")
    _use(s)
    return s


def _use(s: Store) -> None:
    """Time passes, recalls touch memories, maintenance runs (and keeps its reports)."""
    engine, clock, t = s.engine, s.clock, "alice"
    engine.maintain(t)  # enrich the batched ones, consolidate dup1 + dup2
    for day in range(3):
        clock.advance(timedelta(days=1, hours=day))
        engine.recall("what does Alice drink in the afternoon?", tenant=t, k=3)
    engine.feedback(s.ids["batched"], 5, tenant=t)
    engine.feedback(s.ids["immediate"], 2, tenant=t)
    clock.advance(timedelta(days=2))
    engine.maintain()
    concept = engine.get(s.ids["dup1"], tenant=t).consolidated_into
    if concept is not None:
        s.ids["concept"] = concept
