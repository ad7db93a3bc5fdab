"""Helpers of the export / import tests: a store with every kind of state, dumps of both halves
of a store (the golden test's readers), and the per-store values a copy may differ in."""

from __future__ import annotations

import copy
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

from tests.golden.test_golden import _dump_chroma, _dump_sqlite, canon, differences

MANUAL = MnemoniaConfig.load(env={}, maintenance="manual")  # maintenance run by hand

START = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)

QUERIES = (
    ("alice", "what does Alice drink in the morning"),
    ("alice", "which day is the team meeting"),
    ("alice", "nightly deploy pipeline Slack"),
    ("alice", "cello orchestra"),
    ("alice", "umbrella near the door"),
    ("alice", "Berlin"),
    ("bob", "peanut allergy"),
    ("bob", "where is the bike"),
)

# What a copy of a store legitimately differs in (everything else must be identical):
# - the autoincrement ids of the two logs (``memory_events.id``, ``access_log.id``): an
#   import numbers its rows anew, tenant by tenant (each memory's order is kept);
# - the keyword index's ``rowid`` (an FTS5 document number);
# - ``kv``: the store's maintenance scheduler state (the last re-evaluation tick and the
#   candidates it deferred), which belongs to the store, not to its memories;
# - ``term_vectors``: word vectors recall's keyword expansion reads, a cache derived from the
#   words memories use (filled by enrichment, per embedding model), not memory content;
# - ``schema_migrations.applied_at`` (the wall clock; already masked by the dump).
PER_STORE_COLUMNS = {"memory_events": ("id",), "access_log": ("id",), "memories_kw": ("rowid",)}
PER_STORE_TABLES = ("kv", "term_vectors")


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the memory texts it embeds (and failing on a chosen
    call). Single words are the word vectors of recall's keyword expansion (a cache rebuilt
    after an import): counted in ``words``, not ``texts`` (the corpora's texts all have
    several words); entity labels (the label vectors of recall's entity index, also a cache,
    embedded by ``store_label_vectors`` or recall's ``_label_matrix``) in ``labels``."""

    def __init__(self, *args: Any, fail_on_call: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.texts = 0
        self.words = 0
        self.labels = 0
        self.fail_on_call = fail_on_call

    def embed_documents(self, texts: Any) -> Any:
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            raise RuntimeError(f"embedder failure injected at call {self.calls}")
        if sys._getframe(1).f_code.co_name in ("store_label_vectors", "_label_matrix"):
            self.labels += len(texts)
            return super().embed_documents(texts)
        words = sum(1 for t in texts if len(t.split()) == 1)
        self.words += words
        self.texts += len(texts) - words
        return super().embed_documents(texts)


def open_store(folder: Path, now: datetime, embedder: Any = None) -> MemoryEngine:
    return MemoryEngine.open(folder, config=MANUAL, clock=ManualClock(now),
                             embedder=embedder if embedder is not None else HashingEmbedder())


def build_rich_store(folder: Path) -> datetime:
    """Three tenants with every kind of state; returns the clock's final time."""
    clock = ManualClock(START)
    e = MemoryEngine.open(folder, config=MANUAL, clock=clock,
                          embedder=HashingEmbedder())
    try:
        e.add_many([
            {"id": "a-tea", "text": "Alice prefers green tea every morning before work",
             "importance": 0.9, "session_id": "s1", "speaker": "Alice",
             "entities": ["person:alice"]},
            {"id": "a-cat", "text": "Alice's cat Miso likes sleeping on the warm laptop",
             "importance": 0.8, "kind": "fact", "session_id": "s1", "speaker": "Alice"},
            {"id": "a-ok", "text": "ok", "importance": 0.05, "session_id": "s1",
             "speaker": "Bob"},
            {"id": "a-meet1", "text": "The weekly team meeting happens on Tuesday at ten",
             "topic": "work", "metadata": {"source": "calendar", "n": 3, "tags": ["x"]}},
            {"id": "a-meet2", "text": "The weekly team meeting moved to Thursday at eleven",
             "topic": "work"},
            {"id": "a-deploy1", "topic": "work",
             "text": "The nightly deploy pipeline runs on GitHub Actions and posts to Slack"},
            {"id": "a-deploy2", "topic": "work", "text": "The nightly deploy pipeline runs on "
             "GitHub Actions and posts results to Slack"},
            {"id": "a-deploy3", "topic": "work",
             "text": "Our nightly deploy pipeline runs on GitHub Actions and posts to Slack"},
            {"id": "a-gone", "text": "A memory that will be forgotten for good",
             "importance": 0.4},
            {"id": "a-soft", "text": "Alice once lived in Berlin for two years",
             "importance": 0.6},
            {"id": "a-back", "text": "Alice plays the cello in a community orchestra",
             "importance": 0.7},
            {"id": "a-umbrella", "text": "Umbrella near door", "importance": 0.0},
        ], tenant="alice")
        clock.advance(timedelta(minutes=5))
        e.add("Alice booked flights to Lisbon for the spring holiday", tenant="alice",
              id="a-past", at=START - timedelta(days=30), pinned=True, session_id="s2")
        e.add("Bob keeps his bike in the basement storage room", tenant="bob", id="b-bike",
              importance=0.7, session_id="b1", speaker="Bob")
        e.add("Bob is allergic to peanuts and carries an epipen", tenant="bob",
              id="b-allergy", importance=0.95, kind="fact")
        e.add("Carol's only memory, removed later", tenant="carol", id="c-only")
        clock.advance(timedelta(minutes=5))
        e.supersede("a-meet1", "a-meet2", tenant="alice")
        e.relate("a-tea", "a-cat", "context_of", tenant="alice", strength=0.4)
        e.relate("a-back", "a-tea", "implies", tenant="alice", strength=0.7)
        e.relate("b-bike", "b-allergy", "related_to", tenant="bob", strength=0.3)
        e.forget("a-soft", tenant="alice")
        e.forget("a-back", tenant="alice")
        clock.advance(timedelta(minutes=1))
        e.restore("a-back", tenant="alice")
        e.forget("a-gone", tenant="alice", hard=True)
        e.forget("c-only", tenant="carol", hard=True)  # carol: a tenant with no memory left
        e.pin("a-cat", tenant="alice")
        e.update_metadata("a-tea", tenant="alice", metadata={"mood": "calm"})
        e.feedback("a-cat", 5, tenant="alice")
        e.feedback("b-allergy", 2, tenant="bob")
        for i in range(6):  # counted recalls by several users: access log, heat
            clock.advance(timedelta(minutes=2))
            e.recall("what does Alice drink in the morning", tenant="alice", user_id=f"u{i % 3}")
            e.recall("Bob bike storage", tenant="bob", user_id="u1")
            e.recall("umbrella near the door", tenant="alice", user_id=f"u{i % 3}", k=1)
        report = e.reevaluate()
        assert report.promoted >= 1, report
        assert e.consolidate(tenant="alice").concepts_created == 1
        e.enrich(tenant="alice")
        clock.advance(timedelta(days=3))
        assert e.review(tenant="alice").reviewed > 0
        e.recall("team meeting day", tenant="alice", user_id="u2")
        clock.advance(timedelta(hours=1))
        return clock.now()
    finally:
        e.close()


def dump(folder: Path) -> dict[str, Any]:
    """Every side-store table and Chroma collection of a closed store, rows sorted."""
    out = {f"sqlite/{k}": v for k, v in _dump_sqlite(folder / "mnemonia.sqlite3").items()}
    out.update({f"chroma/{k}": v for k, v in _dump_chroma(folder / "chroma").items()})
    return out


def portable(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without what is per store (see :data:`PER_STORE_COLUMNS`)."""
    out = copy.deepcopy(d)
    for table in PER_STORE_TABLES:
        out.pop(f"sqlite/{table}", None)
    for table, columns in PER_STORE_COLUMNS.items():
        section = out.get(f"sqlite/{table}")
        if section is None:
            continue
        section["columns"] = [c for c in section["columns"] if c not in columns]
        rows = [{k: v for k, v in r.items() if k not in columns} for r in section["rows"]]
        section["rows"] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    return out


def first_differences(expected: dict[str, Any], actual: dict[str, Any], n: int = 8
                      ) -> list[str]:
    found: list[str] = []
    for diff in differences(expected, actual, ""):
        found.append(diff)
        if len(found) >= n:
            break
    return found


def recalls(folder: Path, now: datetime) -> list[Any]:
    """Untouched recalls of :data:`QUERIES` (ids, scores, explanations, rendering)."""
    with open_store(folder, now) as e:
        out = []
        for tenant, query in QUERIES:
            res = e.recall(query, tenant=tenant, touch=False, k=5, min_activation=0)
            out.append(canon({"ids": res.ids, "scores": [h.score for h in res.memories],
                              "explanations": [h.explanation for h in res.memories],
                              "render": res.render()}))
        return out
