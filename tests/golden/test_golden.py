"""Golden reference: recall, maintenance and both stores on a shipped corpus, pinned exactly.

The test builds the corpus of :mod:`tests.golden.corpus` (3 tenants, 150 memories) into a fresh
embedded store (real Chroma, real SQLite, the deterministic :class:`HashingEmbedder`, a
:class:`ManualClock`), runs a fixed script through the public API only (ingest, relations,
feedback, forget/restore, pin, metadata, recalls in every mode with topics, entities and
floors, counted recalls from several users, re-evaluation, two ``maintain()`` runs days apart,
explicit evict/consolidate/review, export/import, error messages) and records everything it
sees: hit ids, scores and explanations, rendered text, reports, stats, snapshots, histories,
relations, then every side-store table (SQLite, read with the stdlib ``sqlite3``) and every
Chroma collection. Floats are rounded to 9 decimals, vectors and BLOBs are compared by hash.
Nothing recorded depends on paths, the wall clock or unordered iteration; the one wall-clock
value in the store (``schema_migrations.applied_at``) is masked.

The record is compared with ``tests/golden/reference.json`` section by section (one test per
section: a recall query, a maintenance report, a table, a collection...); a failure names the
section and the first differing value. The point is a refactor that must not change behaviour:
if this test fails, the refactor changed behaviour.

Regenerating the reference:

    pytest tests/golden --regen-golden

rewrites ``reference.json`` from the current code. Do it only for an intended behaviour change,
and put the reason (what changed and why the new values are right) in the commit message that
carries the new reference. Without the flag a missing reference is a failure, never written.
The reference was first generated at 194e3a3 (before the engine was split into modules).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig, MnemoniaError
from mnemonia.embeddings import HashingEmbedder

from tests.golden.corpus import LIFECYCLE, MEMORIES, QUERIES, TENANTS, USAGE, CorpusMemory

REFERENCE = Path(__file__).with_name("reference.json")
START = datetime.fromisoformat("2025-01-01T09:00:00+00:00")
MODES = ("agent_memory", "general", "belief", "procedural", "relevance")
DIGITS = 9  # floats are compared rounded to this many decimals
# ... and equal within this relative tolerance: values computed in float32 (cosines with a
# concept's mean vector) differ in the 7th significant digit from one CPU's BLAS kernels to
# another's (on an AMD EPYC, 2026-11-28: 0.950968981 against the reference's 0.950969934)
FLOAT32_REL = 1e-5
FLOAT32_ABS = 1e-7
"""Absolute slack for a float near zero: a cosine of unit float32 vectors carries rounding of
about this size whatever its value (one near 0 differs in sign with the product's summation
order, e.g. -4e-09 and 4e-09 after the exact search's vectors went one per column)."""
EMBEDDING_DIGITS = 6  # Chroma embeddings are hashed rounded to this many decimals
# Values that depend on the wall clock, not on the engine's clock: masked in the table dump.
VOLATILE_COLUMNS = {("schema_migrations", "applied_at")}
FTS5_SHADOW_SUFFIXES = ("_data", "_idx", "_docsize", "_config", "_content")
MASKED = "<wall clock: not compared>"
_MISSING = "<reference missing>"

# Queries re-run after each maintenance run (consolidation and eviction change what they find).
AFTER_MAINTENANCE_QIDS = ("q01", "q03", "q07", "q11", "q13", "q14", "q17", "q23", "q27", "q28")
AFTER_MAINTENANCE_VARIANTS: tuple[dict[str, Any], ...] = (
    {"mode": "relevance"}, {"mode": "general"}, {"mode": "agent_memory"},
    {"k": 6, "min_activation": 0},
)
HISTORY_IDS = ("dev-001", "dev-003", "dev-004", "dev-013", "dev-024", "dev-046", "dev-047",
               "hh-001", "hh-014", "hh-021", "hh-046", "hh-048", "tv-003", "tv-009", "tv-021",
               "tv-041", "tv-045")
RELATION_IDS = ("dev-003", "dev-019", "dev-045", "hh-001", "hh-012", "tv-006", "tv-012",
                "tv-021")


# ----------------------------------------------------------------------------------------
# canonical, JSON-safe values
# ----------------------------------------------------------------------------------------
def canon(value: Any) -> Any:
    """``value`` as plain JSON data: floats rounded, times as ISO strings, bytes hashed."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float | np.floating):
        value = float(value)
        if not math.isfinite(value):
            return repr(value)
        rounded = round(value, DIGITS)
        return 0.0 if rounded == 0 else rounded  # no -0.0
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return {"sha256": hashlib.sha256(bytes(value)).hexdigest()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return canon({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, Mapping):
        return {str(k): canon(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canon(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(canon(v) for v in value)
    raise TypeError(f"no canonical form for {type(value).__name__}: {value!r}")


def _hash_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _memory(m: Any) -> dict[str, Any]:
    return canon(m.to_dict())


def _hit(h: Any) -> dict[str, Any]:
    m = h.memory
    return {
        "id": m.id, "score": h.score, "kind": m.kind, "topic": m.topic, "state": m.state,
        "explanation": h.explanation, "contradictions": list(h.contradictions),
        "supersedes": list(h.supersedes), "superseded_by": h.superseded_by,
        "memory": {"access_count": m.access_count, "stability": m.stability,
                   "accessed_at": m.accessed_at, "consolidated_into": m.consolidated_into,
                   "deleted_at": m.deleted_at, "pinned": m.pinned},
    }


def _recall(res: Any) -> dict[str, Any]:
    return {"query": res.query, "tenant": res.tenant, "mode": res.mode, "ids": res.ids,
            "scores": [h.score for h in res.memories],
            "hits": [_hit(h) for h in res.memories],
            "episodes": [_hit(h) for h in res.episodes], "render": res.render()}


def _variant_name(kwargs: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={kwargs[k]}" for k in sorted(kwargs)) or "default"


# ----------------------------------------------------------------------------------------
# the scenario
# ----------------------------------------------------------------------------------------
class _Record:
    def __init__(self) -> None:
        self.sections: dict[str, Any] = {}

    def __setitem__(self, name: str, value: Any) -> None:
        assert name not in self.sections, f"section {name!r} recorded twice"
        self.sections[name] = canon(value)


def _ingest(engine: MemoryEngine, clock: ManualClock) -> dict[str, list[Any]]:
    """Ingest the corpus in its order: runs of one ``batch`` label via ``add_many``."""
    chunks: list[list[CorpusMemory]] = []
    for m in MEMORIES:
        last = chunks[-1][-1] if chunks else None
        if m.batch is not None and last is not None and (last.tenant, last.batch) == (
                m.tenant, m.batch):
            chunks[-1].append(m)
        else:
            chunks.append([m])
    added: dict[str, list[Any]] = {t: [] for t in TENANTS}
    for chunk in chunks:
        clock.advance(timedelta(minutes=1))
        tenant = chunk[0].tenant
        if chunk[0].batch is None:
            item = chunk[0].item()
            added[tenant].append(engine.add(item.pop("text"), tenant=tenant, **item))
        else:
            added[tenant] += engine.add_many([m.item() for m in chunk], tenant=tenant)
    return added


def _lifecycle(engine: MemoryEngine, clock: ManualClock) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {t: [] for t in TENANTS}
    for op, tenant, args, kwargs in LIFECYCLE:
        clock.advance(timedelta(minutes=1))
        result = getattr(engine, op)(*args, tenant=tenant, **kwargs)
        if hasattr(result, "to_dict"):
            result = result.to_dict()
        out[tenant].append({"op": op, "args": list(args), "kwargs": kwargs, "result": result})
    return out


def _query_variants(index: int, topic: str | None, entity: str | None
                    ) -> list[dict[str, Any]]:
    variants: list[dict[str, Any]] = [{"mode": m} for m in MODES]
    if topic is not None:
        variants.append({"topic": topic})
    if entity is not None:
        variants.append({"entity": entity, "k": 5})
    variants.append([
        {"k": 6, "min_activation": 0, "mode": "general"},
        {"k": 1, "episode_k": 0, "mode": "belief"},
        {"k": 10, "min_activation": 0, "episode_k": 2, "mode": "agent_memory", "topic": topic},
    ][index % 3])
    return variants


def _run_queries(engine: MemoryEngine, record: _Record, prefix: str,
                 qids: tuple[str, ...] | None = None,
                 variants: tuple[dict[str, Any], ...] | None = None) -> None:
    for i, q in enumerate(QUERIES):
        if qids is not None and q.qid not in qids:
            continue
        runs = list(variants) if variants is not None else _query_variants(i, q.topic, q.entity)
        section = {}
        for kwargs in runs:
            res = engine.recall(q.text, tenant=q.tenant, touch=False, **kwargs)
            section[_variant_name(kwargs)] = _recall(res)
        record[f"{prefix}/{q.qid}"] = {"tenant": q.tenant, "query": q.text, "runs": section}


def _usage(engine: MemoryEngine, clock: ManualClock, record: _Record, prefix: str,
           phase: int) -> None:
    """Counted recalls (``touch=True``) by several users: the access log, heat, review input."""
    for n, (tenant, query, users, *rounds) in enumerate(USAGE, start=1):
        if not rounds[phase]:
            continue
        asks = []
        for _ in range(rounds[phase]):
            for user in users:
                clock.advance(timedelta(seconds=30))
                res = engine.recall(query, tenant=tenant, user_id=user)
                asks.append({"user": user, "ids": res.ids, "scores": [h.score for h in res],
                             "hits": [_hit(h) for h in res.memories]})
        record[f"{prefix}/{n:02d}"] = {"tenant": tenant, "query": query, "asks": asks}


def _states(engine: MemoryEngine) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tenant in TENANTS:
        by_state: dict[str, list[str]] = {}
        for m in engine.list(tenant=tenant, include_deleted=True):
            by_state.setdefault(m.state, []).append(m.id)
        out[tenant] = by_state
    return out


def _overview(engine: MemoryEngine, record: _Record, prefix: str) -> None:
    record[f"{prefix}/stats"] = {"all": engine.stats(),
                                 **{t: engine.stats(tenant=t) for t in TENANTS}}
    record[f"{prefix}/states"] = _states(engine)
    record[f"{prefix}/snapshots"] = {t: engine.snapshot(t) for t in TENANTS}


def _errors(engine: MemoryEngine, clock: ManualClock) -> dict[str, Any]:
    calls: dict[str, Callable[[], Any]] = {
        "recall unknown mode": lambda: engine.recall("x", tenant="acme-dev", mode="nope"),
        "recall k=0": lambda: engine.recall("x", tenant="acme-dev", k=0),
        "recall empty query": lambda: engine.recall("  ", tenant="acme-dev"),
        "recall bad tenant": lambda: engine.recall("x", tenant="bad tenant!"),
        "recall min_activation=2": lambda: engine.recall("x", tenant="hearth",
                                                         min_activation=2),
        "relate across tenants": lambda: engine.relate("dev-001", "hh-001", "implies",
                                                       tenant="acme-dev"),
        "relate unknown type": lambda: engine.relate("dev-001", "dev-002", "blocks",
                                                     tenant="acme-dev"),
        "relate to itself": lambda: engine.relate("dev-001", "dev-001", "implies",
                                                  tenant="acme-dev"),
        "add in the future": lambda: engine.add("x", tenant="acme-dev",
                                                at=clock.now() + timedelta(days=1)),
        "add duplicate id": lambda: engine.add("x", tenant="acme-dev", id="dev-001"),
        "add importance 1.5": lambda: engine.add("x", tenant="acme-dev", importance=1.5),
        "add unknown kind": lambda: engine.add("x", tenant="acme-dev", kind="note"),
        "add_many unknown field": lambda: engine.add_many([{"text": "x", "colour": "red"}],
                                                          tenant="acme-dev"),
        "feedback quality 6": lambda: engine.feedback("dev-003", 6, tenant="acme-dev"),
        "get missing id": lambda: engine.get("nope", tenant="hearth"),
        "get another tenant's id": lambda: engine.get("dev-001", tenant="hearth"),
        "supersede itself": lambda: engine.supersede("tv-001", "tv-001", tenant="wayfare"),
        "update_metadata speaker": lambda: engine.update_metadata(
            "hh-003", tenant="hearth", metadata={"speaker": "Ben"}),
    }
    out: dict[str, Any] = {}
    for name, call in calls.items():
        try:
            call()
        except MnemoniaError as e:
            out[name] = {"error": type(e).__name__, "message": str(e)}
        else:
            out[name] = {"error": None}
    return out


def _export(engine: MemoryEngine, folder: Path, tenant: str | None) -> tuple[Path, Any]:
    path = folder / f"export-{tenant or 'all'}.jsonl"
    count = engine.export(path, tenant=tenant)
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if "embedding" in rec:
            rec["embedding"] = {"sha256": _hash_json(rec["embedding"])}
        records.append(rec)
    return path, {"count": count, "records": records}


def _config() -> MnemoniaConfig:
    """The defaults; maintenance runs only where the scenario calls it."""
    return MnemoniaConfig.load(env={}, maintenance="manual")


def build(folder: Path) -> dict[str, Any]:
    """Run the whole scenario in ``folder`` and return the record, section by section."""
    record = _Record()
    clock = ManualClock(START)
    store = folder / "store"
    engine = MemoryEngine.open(store, config=_config(), clock=clock,
                               embedder=HashingEmbedder())
    try:
        added = _ingest(engine, clock)
        for tenant in TENANTS:
            record[f"ingest/{tenant}"] = [_memory(m) for m in added[tenant]]
        record["ingest/states"] = _states(engine)
        for tenant, steps in _lifecycle(engine, clock).items():
            record[f"lifecycle/{tenant}"] = steps
        record["errors"] = _errors(engine, clock)
        _overview(engine, record, "after-lifecycle")

        # untouched recalls: every query in every mode, with topic, entity, k and floors
        clock.advance(timedelta(minutes=5))
        _run_queries(engine, record, "recall")

        # counted recalls, then a re-evaluation tick over them
        _usage(engine, clock, record, "usage", 0)
        clock.advance(timedelta(minutes=5))
        record["reevaluate/after-usage"] = engine.reevaluate().as_dict()
        record["enrich/wayfare"] = engine.enrich(tenant="wayfare").as_dict()
        _overview(engine, record, "after-usage")

        # two days later: everything, then each job by hand
        clock.advance(timedelta(days=2))
        record["maintain/1"] = engine.maintain().as_dict()
        for tenant in TENANTS:
            record[f"maintain/1/evict/{tenant}"] = engine.evict(tenant=tenant).as_dict()
            record[f"maintain/1/consolidate/{tenant}"] = engine.consolidate(
                tenant=tenant).as_dict()
            record[f"maintain/1/review/{tenant}"] = engine.review(tenant=tenant).as_dict()
        record["maintain/1/reevaluate"] = engine.reevaluate().as_dict()
        _overview(engine, record, "after-maintain-1")
        _run_queries(engine, record, "recall-after-maintain-1", AFTER_MAINTENANCE_QIDS,
                     AFTER_MAINTENANCE_VARIANTS)
        restored = {}
        for tenant in TENANTS:
            evicted = record.sections[f"maintain/1/evict/{tenant}"]["ids"]
            if evicted:
                clock.advance(timedelta(minutes=1))
                restored[tenant] = engine.restore(evicted[0], tenant=tenant).to_dict()
        record["maintain/1/restore-first-evicted"] = restored

        # ten days later: fresh counted recalls, then everything again
        clock.advance(timedelta(days=10))
        _usage(engine, clock, record, "usage-2", 1)
        clock.advance(timedelta(minutes=5))
        record["maintain/2"] = engine.maintain().as_dict()
        for tenant in TENANTS:
            record[f"maintain/2/evict/{tenant}"] = engine.evict(tenant=tenant).as_dict()
        _overview(engine, record, "after-maintain-2")
        _run_queries(engine, record, "recall-after-maintain-2", AFTER_MAINTENANCE_QIDS,
                     AFTER_MAINTENANCE_VARIANTS)

        tenant_of = {m.id: t for t in TENANTS for m in engine.list(tenant=t,
                                                                   include_deleted=True)}
        concepts = sorted(m.id for t in TENANTS for m in engine.list(tenant=t)
                          if m.kind == "concept")
        for mid in (*HISTORY_IDS, *concepts[:3]):
            record[f"history/{mid}"] = engine.history(mid, tenant=tenant_of[mid])
        for mid in (*RELATION_IDS, *concepts[:3]):
            record[f"relations/{mid}"] = engine.relations(mid, tenant=tenant_of[mid])
        for tenant in TENANTS:
            record[f"list/{tenant}"] = {
                "active": [m.id for m in engine.list(tenant=tenant)],
                "all": [m.id for m in engine.list(tenant=tenant, include_deleted=True)],
                "session release-4.2": [m.id for m in engine.list(tenant=tenant,
                                                                  session_id="release-4.2")]}
            record[f"export/{tenant}"] = _export(engine, folder, tenant)[1]
        export_all, _ = _export(engine, folder, None)
        final_now = clock.now()
    finally:
        engine.close()

    # the export, imported into a fresh store
    clock2 = ManualClock(final_now)
    with MemoryEngine.open(folder / "imported", config=_config(),
                           clock=clock2, embedder=HashingEmbedder()) as other:
        count = other.import_(export_all)
        record["import"] = {
            "count": count, "stats": other.stats(), "states": _states(other),
            "recalls": {q.qid: _recall(other.recall(q.text, tenant=q.tenant, touch=False,
                                                    mode="general"))
                        for q in QUERIES[::5]}}

    for name, value in _dump_sqlite(store / "mnemonia.sqlite3").items():
        record[f"sqlite/{name}"] = value
    for name, value in _dump_chroma(store / "chroma").items():
        record[f"chroma/{name}"] = value
    return record.sections


# ----------------------------------------------------------------------------------------
# the stores, read directly
# ----------------------------------------------------------------------------------------
def _cell(table: str, column: str, value: Any) -> Any:
    if (table, column) in VOLATILE_COLUMNS:
        return MASKED
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return {"json": canon(json.loads(value))}
        except ValueError:
            pass
    return canon(value)


def _dump_sqlite(path: Path) -> dict[str, Any]:
    """Every table of the side-store, rows sorted; FTS5 tables by their logical rows."""
    assert path.exists(), f"no side-store at {path.name}"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        master = con.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        virtual = {name for kind, name, _, sql in master
                   if kind == "table" and (sql or "").upper().startswith("CREATE VIRTUAL TABLE")}
        shadow = {v + s for v in virtual for s in FTS5_SHADOW_SUFFIXES}
        out: dict[str, Any] = {"schema": [list(row) for row in master]}
        for kind, name, _, _ in master:
            if kind != "table" or name in shadow:
                continue
            select = f'SELECT rowid, * FROM "{name}"' if name in virtual \
                else f'SELECT * FROM "{name}"'
            cur = con.execute(select)
            columns = [d[0] for d in cur.description]
            rows = [[_cell(name, c, v) for c, v in zip(columns, row, strict=True)]
                    for row in cur.fetchall()]
            rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
            out[name] = {"columns": columns, "count": len(rows),
                         "rows": [dict(zip(columns, r, strict=True)) for r in rows]}
        return out
    finally:
        con.close()


def _dump_chroma(path: Path) -> dict[str, Any]:
    """Every collection: metadata, ids with their metadatas and documents, embeddings hash."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False))
    try:
        out: dict[str, Any] = {}
        for col in sorted(client.list_collections(), key=lambda c: c.name):
            got = col.get(include=["embeddings", "metadatas", "documents"])
            order = sorted(range(len(got["ids"])), key=lambda i: got["ids"][i])
            vectors = [[round(float(x), EMBEDDING_DIGITS) for x in got["embeddings"][i]]
                       for i in order]
            same: dict[tuple[float, ...], list[str]] = {}
            for i, v in zip(order, vectors, strict=True):
                same.setdefault(tuple(v), []).append(got["ids"][i])
            ties = [ids for ids in same.values() if len(ids) > 1]
            # Chroma orders exactly tied neighbours arbitrarily: with equal vectors, which one
            # fills the last candidate slot of a recall would change from run to run.
            assert not ties, f"{col.name}: memories with identical vectors {ties}; make " \
                "their texts differ as bags of words (see tests/golden/corpus.py)"
            out[col.name] = {
                "metadata": dict(col.metadata or {}), "count": col.count(),
                "items": [{"id": got["ids"][i], "metadata": got["metadatas"][i],
                           "document": got["documents"][i]} for i in order],
                "embeddings_sha256": _hash_json(vectors)}
        return out
    finally:
        client.close()


# ----------------------------------------------------------------------------------------
# comparison
# ----------------------------------------------------------------------------------------
_ROW_KEYS = ("id", "memory_id", "qid", "rowid", "term", "key", "version", "tenant")


def _label(item: Any) -> str:
    if isinstance(item, dict):
        for key in _ROW_KEYS:
            if isinstance(item.get(key), str | int) and not isinstance(item.get(key), bool):
                extra = ""
                if key == "tenant" and {"src", "dst", "type"} <= set(item):
                    extra = f" {item['src']}-{item['type']}->{item['dst']}"
                return f" {key}={item[key]}{extra}"
    return ""


def differences(expected: Any, actual: Any, path: str) -> Iterator[str]:
    """Every place where ``actual`` differs from ``expected``, in document order."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                yield f"{sub}: missing now (expected {_short(expected[key])})"
            elif key not in expected:
                yield f"{sub}: new (now {_short(actual[key])})"
            else:
                yield from differences(expected[key], actual[key], sub)
        return
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            yield from differences(e, a, f"{path}[{i}{_label(e)}]")
        if len(expected) > len(actual):
            yield (f"{path}: {len(expected)} items expected, {len(actual)} now (first one "
                   f"missing: {_short(expected[len(actual)])})")
        elif len(actual) > len(expected):
            yield (f"{path}: {len(expected)} items expected, {len(actual)} now (first new "
                   f"one: {_short(actual[len(expected)])})")
        return
    if type(expected) is float and type(actual) is float and math.isclose(
            expected, actual, rel_tol=FLOAT32_REL, abs_tol=FLOAT32_ABS):
        return
    if type(expected) is not type(actual) or expected != actual:
        yield f"{path}: expected {_short(expected)}, got {_short(actual)}"


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


@cache
def _load_reference() -> dict[str, Any] | None:
    try:
        return json.loads(REFERENCE.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except FileNotFoundError:
        return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "section" in metafunc.fixturenames:
        reference = _load_reference()
        metafunc.parametrize("section", sorted(reference) if reference else [_MISSING])


@pytest.fixture(scope="module")
def golden(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(reference, actual). With ``--regen-golden`` the reference is rewritten first."""
    regen = bool(request.config.getoption("--regen-golden"))
    if not regen and _load_reference() is None:
        pytest.fail(f"{REFERENCE.name} is missing: generate it with `pytest tests/golden "
                    "--regen-golden` (and say why in the commit message)")
    actual = json.loads(json.dumps(build(tmp_path_factory.mktemp("golden"))))
    if regen:
        REFERENCE.write_text(json.dumps(actual, indent=1, sort_keys=True, ensure_ascii=False)
                             + "\n", encoding="utf-8")
        return actual, actual
    reference = _load_reference()
    assert reference is not None
    return reference, actual


def test_golden_sections(golden: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The same sections are recorded as in the reference."""
    reference, actual = golden
    missing = sorted(set(reference) - set(actual))
    new = sorted(set(actual) - set(reference))
    assert not missing and not new, (
        f"sections differ from {REFERENCE.name}: missing now {missing[:20]}, new {new[:20]}")


def test_golden_section(golden: tuple[dict[str, Any], dict[str, Any]], section: str,
                        request: pytest.FixtureRequest) -> None:
    """One section of the record equals the reference (the first difference is reported)."""
    reference, actual = golden
    if section == _MISSING or (section not in actual
                               and request.config.getoption("--regen-golden")):
        pytest.skip("the reference was just regenerated; run again to compare")
    found = list(differences(reference[section], actual[section], section)) \
        if section in actual else [f"{section}: not recorded any more"]
    if found:
        more = f"\n  (and {len(found) - 1} more differences in this section)" \
            if len(found) > 1 else ""
        pytest.fail(f"golden section {section!r} changed:\n  {found[0]}{more}\n"
                    f"If the change is intended, regenerate {REFERENCE.name} with "
                    "--regen-golden and give the reason in the commit message.",
                    pytrace=False)
