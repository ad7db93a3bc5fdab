"""Each tenant's entity document counts and active memories are kept by the database on every
write (migration 17, ``mnemonia.store.kept_counts``), so recall's entity index reads one row
an entity instead of counting the whole tenant (issue 35 point 3). After every kind of
write the kept counts equal the counts of the rows themselves; the migration counts an older
store in. The same script runs on PostgreSQL in ``test_postgres.py``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mnemonia import MemoryEngine

pytestmark = pytest.mark.integration


def counted(engine: MemoryEngine) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """The counts of the rows themselves: ``{(tenant, entity): linked memories not
    deleted}``, ``{tenant: committed memories not deleted}``."""
    with engine.sql.connect() as conn:
        docs = {(t, e): int(n) for t, e, n in conn.exec_driver_sql(
            "SELECT me.tenant, me.entity, count(*) FROM memory_entities AS me "
            "JOIN memories AS m ON m.id = me.memory_id WHERE m.deleted_at IS NULL "
            "GROUP BY me.tenant, me.entity")}
        sizes = {t: int(n) for t, n in conn.exec_driver_sql(
            "SELECT tenant, count(*) FROM memories WHERE deleted_at IS NULL "
            "AND status = 'committed' GROUP BY tenant")}
    return docs, sizes


def kept(engine: MemoryEngine) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """The kept counts (no row at 0: a tenant or an entity whose every memory went has
    none, as after an import of what is left)."""
    with engine.sql.connect() as conn:
        docs = {(t, e): int(n) for t, e, n in conn.exec_driver_sql(
            "SELECT tenant, entity, docs FROM entity_docs")}
        sizes = {t: int(n) for t, n in conn.exec_driver_sql(
            "SELECT tenant, active FROM tenant_sizes")}
    assert all(n > 0 for n in docs.values()) and all(n > 0 for n in sizes.values())
    return docs, sizes


def check_kept_counts(opened: Callable[[], MemoryEngine], folder: Path) -> None:
    """Adds, an enrichment sweep, a replace, soft deletes and a restore, purges, an
    eviction, consolidation and an import over stored ids: after each the kept counts equal
    the rows' own; then migration 17 counts a store made before it in."""
    with opened() as eng:
        def same(step: str) -> None:
            assert kept(eng) == counted(eng), step

        a = eng.add_many([
            {"text": "Priya reviews the quarterly budget", "entities": ["person:priya"]},
            {"text": "Omar keeps the budget spreadsheet", "entities": ["person:omar",
                                                                       "topic:budget"]},
            {"text": "Lena Park met Omar in Lisbon"},
            {"text": "Lena Park moved to Porto"},
            {"text": "The parking lot closes at nine", "importance": 0.0,
             "entities": ["topic:parking"]},
        ], tenant="a")
        b = eng.add("Ben feeds the cat salmon on Sundays", tenant="b", entities=["person:ben"])
        same("adds")
        assert counted(eng)[1] == {"a": 5, "b": 1}
        eng.enrich(tenant="a")
        same("enrichment")
        assert counted(eng)[0][("a", "name:lena park")] == 2
        eng.add_many([{"id": a[1].id, "text": "Omar keeps the budget in Porto",
                       "entities": ["person:omar", "place:porto"]}], tenant="a", replace=True)
        same("replace")
        eng.forget(a[0].id, tenant="a")
        same("soft delete")
        eng.restore(a[0].id, tenant="a")
        same("restore")
        eng.forget(a[0].id, tenant="a")
        eng.forget(a[0].id, tenant="a", hard=True)  # deleted, then purged
        eng.forget(b.id, tenant="b", hard=True)  # purged while active
        same("purges")
        assert ("a", "person:priya") not in kept(eng)[0] and "b" not in kept(eng)[1]
        eng.add_many([{"text": f"The weekly team sync is on Monday in room {r}",
                       "entities": ["room:b", f"team:t{j}"], "importance": 0.9}
                      for j, r in enumerate("BBC")]
                     + [{"text": f"Old note {j} about the parking lot", "importance": 0.0,
                         "entities": [f"lot:{j}", "topic:parking"]} for j in range(6)],
                     tenant="a")
        assert eng.evict(tenant="a").ids
        same("eviction")
        eng.consolidate(tenant="a")
        same("consolidation")
        eng.export(folder / "a.jsonl", tenant="a")
        eng.import_(folder / "a.jsonl", on_conflict="replace")
        same("import over stored ids")
        before = kept(eng)
        assert before[1]["a"] > 0
        with eng.sql.begin() as conn:  # the store as it was before migration 17
            for name in ("entity_docs", "tenant_sizes"):
                conn.exec_driver_sql(f"DROP TABLE {name}")
            conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 17")
    with opened() as eng:
        assert kept(eng) == before == counted(eng)
        eng.add("Priya is back from Lisbon", tenant="a", entities=["person:priya"])
        assert kept(eng) == counted(eng) and kept(eng)[0][("a", "person:priya")] == 1


def test_the_counts_are_kept_on_every_write_on_sqlite(tmp_path: Path) -> None:
    from mnemonia import MnemoniaConfig
    from mnemonia.embeddings import HashingEmbedder

    config = MnemoniaConfig.load(env={}, maintenance="manual")
    check_kept_counts(lambda: MemoryEngine.open(tmp_path / "store", config=config,
                                                embedder=HashingEmbedder()), tmp_path)
