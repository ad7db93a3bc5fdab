"""Export / import, format 2: a lossless round trip (every table, every Chroma collection,
recall), format-1 files, all-or-nothing imports (a failure in the middle, a bad last line),
``on_conflict``, and every refused file or path with the store left exactly as it was."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import tracemalloc
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mnemonia import transfer
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import (
    EmbeddingModelMismatchError,
    ImportConflictError,
    InvalidImportFileError,
    InvalidInputError,
    MnemoniaError,
)
from mnemonia.store import schema

from tests.reliability.transfer_helpers import (
    START,
    CountingEmbedder,
    build_rich_store,
    dump,
    first_differences,
    open_store,
    portable,
    recalls,
)

DATA = Path(__file__).with_name("data")
V1_FILE = DATA / "export-v1.jsonl"  # written by the format-1 exporter (see data/README.md)


@dataclass
class Rich:
    folder: Path
    now: datetime
    plain: Path  # export without vectors
    vectors: Path  # export with vectors
    dump: dict[str, Any]
    recalls: list[Any]


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Rich:
    base = tmp_path_factory.mktemp("rich")
    folder = base / "source"
    now = build_rich_store(folder)
    before = dump(folder)
    with open_store(folder, now) as e:
        assert e.export(base / "plain.jsonl") == 15
        assert e.export(base / "vectors.jsonl", with_vectors=True) == 15
    assert dump(folder) == before, "an export changed the store"
    return Rich(folder, now, base / "plain.jsonl", base / "vectors.jsonl", before,
                recalls(folder, now))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _fix_end(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make the end line's counts match the records (for files edited on purpose)."""
    body = [r for r in records if r.get("type") != "end"]
    count = {k: sum(1 for r in body if r.get("type") == t) for k, t in (
        ("memories", "memory"), ("relations", "relation"), ("events", "event"),
        ("accesses", "access"))}
    return [*body, {"type": "end", **count}]


# ---------------------------------------------------------------------------------------------
# the format
# ---------------------------------------------------------------------------------------------
def test_format_2_carries_every_stateful_column() -> None:
    """A column added to ``memories`` must be added to the export (or this fails)."""
    assert set(transfer.MEMORY_FIELDS) == {c.name for c in schema.memories.columns} - {"status"}


def test_export_layout(rich: Rich) -> None:
    plain, vectors = _lines(rich.plain), _lines(rich.vectors)
    assert plain[0] == {"type": "header", "format": 2, "embedding_model": "mnemonia/hashing-256",
                        "dimension": 256, "exported_at": rich.now.timestamp(),
                        "with_vectors": False, "tenants": ["alice", "bob", "carol"]}
    assert [r["tenant"] for r in plain if r["type"] == "tenant"] == ["alice", "bob", "carol"]
    kinds = [r["type"] for r in plain]
    assert kinds.count("memory") == 15 and kinds[-1] == "end"
    assert plain[-1] == {"type": "end", "memories": 15, "relations": kinds.count("relation"),
                         "events": kinds.count("event"), "accesses": kinds.count("access")}
    assert kinds.count("event") > 15 and kinds.count("access") > 0
    mem = {r["id"]: r for r in plain if r["type"] == "memory"}
    assert "vector" not in mem["a-tea"]
    assert mem["a-soft"]["deleted_at"] is not None and mem["a-meet1"]["superseded_by"] == "a-meet2"
    assert mem["a-deploy1"]["consolidated_into"].startswith("concept-")
    assert mem["a-tea"]["metadata"] == {"speaker": "Alice", "mood": "calm"}
    assert mem["a-cat"]["repetitions"] == 2 and mem["a-cat"]["pinned"] is True
    assert "a-gone" not in mem and "c-only" not in mem
    with_vec = {r["id"]: r for r in vectors if r["type"] == "memory"}
    assert len(base64.b64decode(with_vec["a-tea"]["vector"])) == 256 * 4
    assert {k: v for k, v in with_vec["a-tea"].items() if k != "vector"} == mem["a-tea"]


# ---------------------------------------------------------------------------------------------
# the round trip
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_vectors", [False, True], ids=["texts", "vectors"])
def test_round_trip_is_lossless(rich: Rich, tmp_path: Path, with_vectors: bool) -> None:
    source = rich.vectors if with_vectors else rich.plain
    target = tmp_path / "copy"
    embedder = CountingEmbedder()
    with open_store(target, rich.now, embedder) as e:
        assert e.import_(source) == 15
        assert e.tenants() == ["alice", "bob", "carol"]
        assert e.export(tmp_path / "again.jsonl", with_vectors=with_vectors) == 15
    # with vectors nothing is embedded again; without, every text (its speaker too) is
    assert embedder.texts == (0 if with_vectors else 15)
    found = first_differences(portable(rich.dump), portable(dump(target)))
    assert not found, "\n".join(found)
    assert recalls(target, rich.now) == rich.recalls
    # the copy exports to the very same file
    assert (tmp_path / "again.jsonl").read_bytes() == source.read_bytes()


def test_round_trip_keeps_forgotten_and_superseded_out_of_recall(rich: Rich,
                                                                  tmp_path: Path) -> None:
    with open_store(tmp_path / "copy", rich.now) as e:
        e.import_(rich.plain)
        assert "a-soft" not in e.recall("Alice lived in Berlin", tenant="alice", k=10,
                                        min_activation=0, touch=False).ids
        hits = e.recall("which day is the team meeting", tenant="alice", k=10,
                        min_activation=0, touch=False).ids
        assert "a-meet1" not in hits and "a-meet2" in hits
        assert e.get("a-soft", tenant="alice").deleted
        assert [ev.event for ev in e.history("a-back", tenant="alice")][:3] == [
            "created", "deleted", "restored"]
        # nothing the source did not have (the gatekeeper and enrichment do not run again)
        types = {r.type for r in e.relations("a-ok", tenant="alice")}
        with open_store(rich.folder, rich.now) as src:
            assert types == {r.type for r in src.relations("a-ok", tenant="alice")}


def test_a_store_not_yet_enriched_recalls_the_same_after_a_round_trip(tmp_path: Path) -> None:
    """Word vectors (recall's keyword expansion) are stored by enrichment: an import stores
    those of the memories the source had enriched, and enrichment the others later, as it
    would have in the source; so the copy recalls like the source, before and after."""
    texts = {"alice": ["notes about garden garden"],
             "bob": ["notes about river python", "notes about forest forest"]}
    query = "notes about garden piano"

    def answer(e: Any) -> list[Any]:
        return [(h.id, h.score, h.explanation.keyword)
                for h in e.recall(query, tenant="bob", k=4, min_activation=0,
                                  touch=False).memories]

    embedder = CountingEmbedder()
    with open_store(tmp_path / "source", START) as src, \
            open_store(tmp_path / "copy", START, embedder) as copy:
        for tenant, group in texts.items():
            for text in group:
                src.add(text, tenant=tenant)
        src.export(tmp_path / "backup.jsonl")
        copy.import_(tmp_path / "backup.jsonl")
        assert embedder.words == 0  # nothing enriched yet: no word vectors either
        assert answer(copy) == answer(src)
        src.enrich(tenant="bob")
        copy.enrich(tenant="bob")
        assert embedder.words > 0
        assert answer(copy) == answer(src)


def test_single_tenant_export_and_import(rich: Rich, tmp_path: Path) -> None:
    with open_store(rich.folder, rich.now) as e:
        assert e.export(tmp_path / "bob.jsonl", tenant="bob") == 2
    with open_store(tmp_path / "copy", rich.now) as e:
        assert e.import_(tmp_path / "bob.jsonl") == 2
        assert e.tenants() == ["bob"]
        assert [m.id for m in e.list(tenant="bob")] == ["b-bike", "b-allergy"]


# ---------------------------------------------------------------------------------------------
# format 1
# ---------------------------------------------------------------------------------------------
def _v1_records() -> list[dict[str, Any]]:
    return _lines(V1_FILE)


def test_format_1_imports_with_its_vectors(tmp_path: Path) -> None:
    records = _v1_records()
    embedder = CountingEmbedder(32)
    with open_store(tmp_path / "s", datetime.fromisoformat("2025-03-02T00:00:00+00:00"),
                    embedder) as e:
        assert e.import_(V1_FILE) == 7
        assert embedder.texts == 0  # the file's vectors, same model
        by_id = {r["id"]: r for r in records if r["type"] == "memory"}
        for mid, rec in by_id.items():
            m = e.get(mid, tenant=rec["tenant"])
            got = {k: v for k, v in m.to_dict().items() if k not in ("embedding_model",)}
            want = {k: v for k, v in rec.items() if k not in ("type", "embedding",
                                                             "embedding_model")}
            assert got == want, mid
        assert e.get("a5", tenant="alice").deleted  # format 1 kept it; it stays forgotten
        assert e.get("a3", tenant="alice").superseded_by == "a4"
        assert [ev.event for ev in e.history("a1", tenant="alice")] == ["created"]
        rels = sorted((r.src, r.type, r.dst) for t in ("alice", "bob")
                      for m in e.list(tenant=t) for r in e.relations(m.id, tenant=t))
        assert sorted(set(rels)) == [("a1", "part_of", "a2"), ("a4", "supersedes", "a3"),
                                     ("b1", "implies", "b2")]
        vec = e.vectors.get_vectors(e.runtime.collection("alice", create=False), ["a1"])["a1"]
        want_vec = by_id["a1"]["embedding"]
        assert max(abs(a - b) for a, b in zip(vec, want_vec, strict=True)) < 1e-5


def test_format_1_with_another_model_and_reembed(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", datetime.fromisoformat("2025-03-02T00:00:00+00:00")) as e:
        with pytest.raises(EmbeddingModelMismatchError, match="reembed=True"):
            e.import_(V1_FILE)
        assert e.tenants() == []
        assert e.import_(V1_FILE, reembed=True) == 7
        emb = HashingEmbedder()
        stored = e.sql.vectors.vectors_get(e.sql.db.engine.connect(), ["a1"])["a1"]
        import numpy as np

        want = emb.embed_documents(['Alice said, "Alice prefers green tea in the morning"'])[0]
        assert np.allclose(np.frombuffer(stored, "<f4"), want)
        assert e.recall("green tea", tenant="alice", k=1, touch=False).ids == ["a1"]


def test_format_1_bad_last_line_writes_nothing_and_the_good_file_then_imports(
        tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(V1_FILE.read_text() + json.dumps(
        {"type": "relation", "tenant": "bob", "src": "b1", "dst": "zz", "rel_type": "implies",
         "strength": 1.0}) + "\n")
    store = tmp_path / "s"
    now = datetime.fromisoformat("2025-03-02T00:00:00+00:00")
    with open_store(store, now, HashingEmbedder(32)) as e:
        e.add("something already there", tenant="zed", id="z1")
    before = dump(store)
    with open_store(store, now, HashingEmbedder(32)) as e, pytest.raises(
            InvalidImportFileError, match="line 12: relation 'b1' -implies-> 'zz': memory 'zz' "
            "is neither in the file nor in tenant 'bob' of the store"):
        e.import_(bad)
    assert dump(store) == before
    with open_store(store, now, HashingEmbedder(32)) as e:
        assert e.import_(V1_FILE) == 7
        assert e.stats()["memories"] == 8


# ---------------------------------------------------------------------------------------------
# all or nothing
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def small_store(tmp_path: Path, rich: Rich) -> Path:
    """A store with one tenant of its own (zed) and one memory that is also in alice's
    namespace of ids nowhere else."""
    store = tmp_path / "target"
    with open_store(store, rich.now) as e:
        e.add("Zed waters the plants on Sundays", tenant="zed", id="z-1")
        e.add("Zed has a red kayak", tenant="zed", id="z-2")
        e.relate("z-1", "z-2", "related_to", tenant="zed", strength=0.5)
    return store


def test_bad_last_relation_writes_nothing(rich: Rich, small_store: Path, tmp_path: Path) -> None:
    records = _lines(rich.plain)
    records.insert(-1, {"type": "relation", "tenant": "bob", "src": "b-bike", "dst": "nobody",
                        "rel_type": "implies", "strength": 1.0, "created_at": 1.0})
    bad = _write(tmp_path / "bad.jsonl", _fix_end(records))
    before = dump(small_store)
    with open_store(small_store, rich.now) as e, pytest.raises(InvalidImportFileError) as info:
        e.import_(bad)
    assert info.value.line == len(records) - 1
    assert "'nobody' is neither in the file nor in tenant 'bob'" in str(info.value)
    assert dump(small_store) == before
    with open_store(small_store, rich.now) as e:  # nothing is left to clash with
        assert e.import_(rich.plain) == 15
        assert e.tenants() == ["alice", "bob", "carol", "zed"]


@pytest.mark.parametrize("fail_on_call", [1, 3])
def test_failure_inside_a_batch_leaves_nothing(rich: Rich, small_store: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               fail_on_call: int) -> None:
    monkeypatch.setattr(transfer.format, "BATCH", 4)  # 4 batches of memories
    before = dump(small_store)
    failing = CountingEmbedder(fail_on_call=fail_on_call)
    with open_store(small_store, rich.now, failing) as e:
        with pytest.raises(RuntimeError, match="injected"):
            e.import_(rich.plain)
        assert e.tenants() == ["zed"]
    assert failing.calls == fail_on_call
    assert dump(small_store) == before  # the staged batches, their vectors, the new collections
    with open_store(small_store, rich.now) as e:
        assert e.import_(rich.plain) == 15


def test_failure_during_a_replace_leaves_the_stored_version(rich: Rich, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    store = tmp_path / "store"
    shutil.copytree(rich.folder, store)
    records = _lines(rich.plain)
    for r in records:
        if r["type"] == "memory":
            r["text"] = r["text"] + " (edited)"
    edited = _write(tmp_path / "edited.jsonl", records)
    monkeypatch.setattr(transfer.format, "BATCH", 4)
    before = dump(store)
    with open_store(store, rich.now, CountingEmbedder(fail_on_call=3)) as e, pytest.raises(
            RuntimeError, match="injected"):
        e.import_(edited, on_conflict="replace")
    assert dump(store) == before


def test_a_file_changed_during_the_import_is_refused_at_the_commit(rich: Rich,
                                                                    tmp_path: Path) -> None:
    """The file is hashed on every pass: changed between the check and the commit (here in
    the middle of a replace, its swaps already done in the commit transaction), the commit
    is rolled back and the staged rows removed."""
    store = tmp_path / "store"
    shutil.copytree(rich.folder, store)
    records = _lines(rich.plain)
    for r in records:
        if r["type"] == "memory":
            r["text"] = r["text"] + " (edited)"
    edited = _write(tmp_path / "edited.jsonl", records)

    def tamper(stage: str, done: int, total: int) -> None:
        if stage == "commit" and done == 0:
            with edited.open("a") as fh:
                fh.write("\n")

    with open_store(store, rich.now) as e, pytest.raises(
            InvalidImportFileError, match="changed while it was being imported"):
        e.import_(edited, on_conflict="replace", on_progress=tamper)
    assert dump(store) == rich.dump


# ---------------------------------------------------------------------------------------------
# on_conflict
# ---------------------------------------------------------------------------------------------
def test_conflicts_are_refused_by_default(rich: Rich, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(rich.folder, store)
    with open_store(store, rich.now) as e, pytest.raises(ImportConflictError) as info:
        e.import_(rich.plain)
    assert "15 memory id(s) of the file already exist in the store: 'a-tea' (line 3)" in str(
        info.value)
    assert "on_conflict='skip'" in str(info.value) and info.value.ids[0] == "a-tea"
    assert dump(store) == rich.dump


def test_skip_twice_changes_nothing(rich: Rich, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with open_store(store, rich.now) as e:
        assert e.import_(rich.vectors) == 15
    once = dump(store)
    with open_store(store, rich.now) as e:
        assert e.import_(rich.vectors, on_conflict="skip") == 0
        assert e.import_(rich.plain, on_conflict="skip") == 0
    assert dump(store) == once  # every table, every collection, ids and all


def test_skip_adds_only_what_is_missing(rich: Rich, tmp_path: Path) -> None:
    records = _lines(rich.plain)
    bob_only = _write(tmp_path / "bob.jsonl", _fix_end(
        [r for r in records if r.get("tenant", "bob") == "bob" or r["type"] == "header"]))
    store = tmp_path / "store"
    with open_store(store, rich.now) as e:
        assert e.import_(bob_only) == 2
        e.forget("b-bike", tenant="bob")  # a change of the stored copy that skip must keep
        assert e.import_(rich.plain, on_conflict="skip") == 13
        assert e.get("b-bike", tenant="bob").deleted
        assert e.stats()["memories"] == 15


def test_replace_takes_the_files_version(rich: Rich, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(rich.folder, store)
    records = _lines(rich.plain)
    tea = next(r for r in records if r.get("id") == "a-tea")
    tea.update(text="Alice switched to black coffee", deleted_at=None, access_count=99,
               state="batched", links=["drink:coffee"], entities=["drink:coffee"])
    records = [r for r in records if not (r.get("memory_id") == "a-tea" and r["type"] in (
        "event", "access"))]
    records.insert(-1, {"type": "event", "tenant": "alice", "memory_id": "a-tea",
                        "event": "created", "at": 5.0, "before": None, "after": {"x": 1}})
    edited = _write(tmp_path / "edited.jsonl", _fix_end(records))
    with open_store(store, rich.now) as e:
        e.relate("a-tea", "a-umbrella", "related_to", tenant="alice", strength=0.2)
        assert e.import_(edited, on_conflict="replace") == 15
        m = e.get("a-tea", tenant="alice")
        assert (m.text, m.access_count, m.state, m.entities) == (
            "Alice switched to black coffee", 99, "batched", ("drink:coffee",))
        assert [(ev.event, ev.after) for ev in e.history("a-tea", tenant="alice")] == [
            ("created", {"x": 1})]
        assert "a-umbrella" in {r.dst for r in e.relations("a-tea", tenant="alice")}
        assert e.recall("black coffee", tenant="alice", k=1, touch=False).ids == ["a-tea"]
        col = e.runtime.collection("alice", create=False)
        doc = col.get(ids=["a-tea"], include=["documents"])["documents"][0]
        assert doc == 'Alice said, "Alice switched to black coffee"'
        assert e.list(tenant="alice")[0].id == "a-tea"  # its place in the tenant is kept


def test_an_id_of_another_tenant_is_a_conflict_like_any(rich: Rich, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with open_store(store, rich.now) as e:
        e.add("secret of the other tenant", tenant="intruder", id="a-cat")
        e.add("a memory alice also has", tenant="alice", id="a-ok")
    before = dump(store)
    with open_store(store, rich.now) as e:
        with pytest.raises(ImportConflictError) as info:
            e.import_(rich.plain)
        message = str(info.value)
        assert "'a-ok' (line 5), 'a-cat' (line 4)" not in message
        assert "2 memory id(s) of the file already exist in the store: 'a-cat' (line 4), " \
               "'a-ok' (line 5);" in message
        assert "intruder" not in message and "secret" not in message
        with pytest.raises(ImportConflictError) as info:
            e.import_(rich.plain, on_conflict="replace")
        assert "'a-cat' (line 4)" in str(info.value) and "intruder" not in str(info.value)
    assert dump(store) == before
    with open_store(store, rich.now) as e:
        assert e.import_(rich.plain, on_conflict="skip") == 13
        assert e.get("a-cat", tenant="intruder").text == "secret of the other tenant"
        with pytest.raises(MnemoniaError):
            e.get("a-cat", tenant="alice")
        # the file's relations to it are left out, never written across tenants
        assert all(r.dst != "a-cat" and r.src != "a-cat"
                   for r in e.relations("a-tea", tenant="alice"))


# ---------------------------------------------------------------------------------------------
# refused files and paths
# ---------------------------------------------------------------------------------------------
def _edit_memory(field: str, value: Any = None, *, drop: bool = False) -> Any:
    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rec = records[2]  # the first memory (line 3)
        if drop:
            del rec[field]
        else:
            rec[field] = value
        return records
    return edit


def _relation(**changes: Any) -> Any:
    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        records.insert(-1, {"type": "relation", "tenant": "alice", "src": "a-tea",
                            "dst": "a-cat", "rel_type": "implies", "strength": 0.5,
                            "created_at": 1.0, **changes})
        return _fix_end(records)
    return edit


def _raw(fn: Any) -> Any:
    """Mark an edit of the file's bytes (the others edit its parsed records)."""
    fn.raw = True
    return fn


BAD_FILES: list[tuple[str, Any, type[MnemoniaError], str]] = [
    ("empty file", b"", InvalidImportFileError, "the file is empty: no header line"),
    ("blank lines only", b"\n\n  \n", InvalidImportFileError, "the file is empty"),
    ("not JSON", _raw(lambda raw: raw.replace(raw.splitlines(keepends=True)[4], b"{not json\n")),
     InvalidImportFileError, "line 5: is not JSON"),
    ("not a JSON object", _raw(lambda raw: raw.replace(raw.splitlines(keepends=True)[4],
                                                  b"[1, 2]\n")),
     InvalidImportFileError, "line 5: is not a JSON object (got list)"),
    ("not UTF-8", _raw(lambda raw: raw.replace(b"Alice prefers", b"Alice \xff prefers")),
     InvalidImportFileError, "line 3: is not UTF-8"),
    ("truncated in the last line", _raw(lambda raw: raw[:-20]), InvalidImportFileError,
     "is cut short: the file is truncated"),
    ("truncated at a line end", _raw(lambda raw: b"".join(raw.splitlines(keepends=True)[:40])),
     InvalidImportFileError, "the file is truncated: it stops after line 40 without the end"),
    ("header missing", lambda r: r[1:], InvalidImportFileError,
     "line 1: the first line must be the header"),
    ("other model", lambda r: [{**r[0], "embedding_model": "other/model"}, *r[1:]],
     EmbeddingModelMismatchError, "exported with 'other/model'; this engine uses "
     "'mnemonia/hashing-256': pass reembed=True"),
    ("format 3", lambda r: [{**r[0], "format": 3}, *r[1:]], InvalidImportFileError,
     "line 1: export format 3 is not supported"),
    ("missing field", _edit_memory("importance", drop=True), InvalidImportFileError,
     "line 3: memory record misses field(s) 'importance'"),
    ("wrong type", _edit_memory("importance", "high"), InvalidImportFileError,
     "line 3: memory record: field 'importance' = 'high' must be a finite number in [0, 1]"),
    ("wrong state", _edit_memory("state", "frozen"), InvalidImportFileError,
     "field 'state' = 'frozen' must be one of skipped, batched, immediate"),
    ("unknown field", _edit_memory("colour", "red"), InvalidImportFileError,
     "line 3: memory record has unknown field(s) 'colour'"),
    ("bad id", _edit_memory("id", "#1"), InvalidImportFileError, "field 'id' = '#1' must be"),
    ("empty text", _edit_memory("text", "  "), InvalidImportFileError,
     "line 3: memory record: text='  ': must not be empty"),
    ("dangling superseded_by", _edit_memory("superseded_by", "nobody"), InvalidImportFileError,
     "line 3: superseded_by 'nobody' of memory 'a-tea': memory 'nobody' is neither in the "
     "file nor in tenant 'alice' of the store"),
    ("unknown record type", lambda r: [*r[:3], {"type": "note"}, *r[3:]],
     InvalidImportFileError, "line 4: unknown record type 'note'"),
    ("no type", lambda r: [*r[:3], {"id": "x"}, *r[3:]], InvalidImportFileError,
     "line 4: no 'type' field"),
    ("memory before its tenant", lambda r: [r[0], *r[2:]], InvalidImportFileError,
     "line 2: memory 'a-tea' of tenant 'alice' comes before that tenant's 'tenant' record"),
    ("duplicate id", lambda r: _fix_end([*r[:3], r[2], *r[3:]]), InvalidImportFileError,
     "line 4: memory id 'a-tea' already appeared on line 3"),
    ("end count wrong", lambda r: [x for x in r if x.get("event") != "restored"],
     InvalidImportFileError, "the end line says"),
    ("record after the end", lambda r: [*r, r[2]], InvalidImportFileError,
     "a 'memory' record after the end line"),
    ("relation to an unknown id", _relation(dst="nobody"), InvalidImportFileError,
     "memory 'nobody' is neither in the file nor in tenant 'alice' of the store"),
    ("relation to another tenant's stored memory", _relation(dst="z-1"), InvalidImportFileError,
     "memory 'z-1' is neither in the file nor in tenant 'alice' of the store"),
    ("relation across tenants", _relation(dst="b-bike"), InvalidImportFileError,
     "points at memory 'b-bike' of tenant 'bob' (line"),
    ("relation of an unknown type", _relation(rel_type="blocks"), InvalidImportFileError,
     "relation record: unknown relation type"),
    ("relation strength 0", _relation(strength=0), InvalidImportFileError,
     "strength must be in (0, 1]"),
    ("relation to itself", _relation(dst="a-tea"), InvalidImportFileError,
     "cannot relate to itself"),
    ("event of a memory not in the file", lambda r: _fix_end([*r, {
        "type": "event", "tenant": "alice", "memory_id": "z-1", "event": "created",
        "at": 1.0, "before": None, "after": None}]), InvalidImportFileError,
     "line 133: event record of memory 'z-1': memory 'z-1' is not in the file"),
    ("lone surrogate", _edit_memory("text", "Alice \ud800 tea"), InvalidImportFileError,
     "line 3: memory record: field 'text' = 'Alice \\ud800 tea' must be valid Unicode"),
]


def _bad_file(tmp_path: Path, source: Path, make: Any) -> Path:
    if isinstance(make, bytes):
        data = make
    elif getattr(make, "raw", False):
        data = make(source.read_bytes())
    else:
        data = "".join(json.dumps(r) + "\n" for r in make(_lines(source))).encode()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("case", "make", "error", "message"), BAD_FILES,
                         ids=[c[0] for c in BAD_FILES])
def test_refused_file_writes_nothing(rich: Rich, small_store: Path, tmp_path: Path, case: str,
                                     make: Any, error: type[MnemoniaError], message: str) -> None:
    bad = _bad_file(tmp_path, rich.plain, make)
    before = dump(small_store)
    with open_store(small_store, rich.now) as e, pytest.raises(error) as info:
        e.import_(bad, on_conflict="skip")
    assert message in str(info.value), str(info.value)
    assert dump(small_store) == before


def test_a_bad_vector_is_refused(rich: Rich, small_store: Path, tmp_path: Path) -> None:
    records = _lines(rich.vectors)
    records[2]["vector"] = records[2]["vector"][:-8]
    bad = _write(tmp_path / "bad.jsonl", records)
    with open_store(small_store, rich.now) as e:
        with pytest.raises(InvalidImportFileError, match="line 3: memory record: field "
                           "'vector' must be the base64 of 256 finite float32"):
            e.import_(bad)
        assert e.tenants() == ["zed"]


def test_the_line_number_is_an_attribute(rich: Rich, small_store: Path, tmp_path: Path) -> None:
    bad = _bad_file(tmp_path, rich.plain, _edit_memory("seq", -1))
    with open_store(small_store, rich.now) as e, pytest.raises(InvalidImportFileError) as info:
        e.import_(bad)
    assert info.value.line == 3 and isinstance(info.value, ValueError)


def test_bad_arguments_and_paths(rich: Rich, small_store: Path, tmp_path: Path) -> None:
    before = dump(small_store)
    with open_store(small_store, rich.now) as e:
        with pytest.raises(InvalidInputError, match="on_conflict='merge': must be one of "
                           "error, skip, replace"):
            e.import_(rich.plain, on_conflict="merge")
        with pytest.raises(InvalidInputError, match="reembed='yes'"):
            e.import_(rich.plain, reembed="yes")  # type: ignore[arg-type]
        with pytest.raises(InvalidImportFileError, match=r"cannot read .*No such file"):
            e.import_(tmp_path / "missing.jsonl")
        with pytest.raises(InvalidImportFileError, match="is a folder, not an export file"):
            e.import_(tmp_path)
        with pytest.raises(InvalidInputError, match=r"the folder .*nowhere' does not exist"):
            e.export(tmp_path / "nowhere" / "x.jsonl")
        with pytest.raises(InvalidInputError, match="it is a folder; give a file path"):
            e.export(tmp_path)
        with pytest.raises(InvalidInputError, match="with_vectors=1"):
            e.export(tmp_path / "x.jsonl", with_vectors=1)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="tenant='bad tenant'"):
            e.export(tmp_path / "x.jsonl", tenant="bad tenant")
    assert dump(small_store) == before
    assert not (tmp_path / "x.jsonl").exists()


def test_a_failed_export_keeps_the_previous_file(rich: Rich, tmp_path: Path) -> None:
    out = tmp_path / "backup.jsonl"
    out.write_text("the previous backup\n")

    def stop(stage: str, done: int, total: int) -> None:
        if done > 0:
            raise KeyboardInterrupt

    with open_store(rich.folder, rich.now) as e:
        with pytest.raises(KeyboardInterrupt):
            e.export(out, on_progress=stop)
        assert out.read_text() == "the previous backup\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl"]
        seen: list[tuple[str, int, int]] = []
        assert e.export(out, on_progress=lambda *a: seen.append(a)) == 15
    assert seen[0] == ("export", 0, 15) and seen[-1] == ("export", 15, 15)
    assert out.read_bytes() == rich.plain.read_bytes()


def test_writes_during_an_export_do_not_reach_it(rich: Rich, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The export reads one snapshot: what is written while it runs (a memory, a relation to
    it, a hard delete of a memory not exported yet, counted recalls) is not in the file, and
    the file is the one the store gave before."""
    store = tmp_path / "store"
    shutil.copytree(rich.folder, store)
    monkeypatch.setattr(transfer.format, "BATCH", 4)
    with open_store(store, rich.now) as e:

        def write_meanwhile(stage: str, done: int, total: int) -> None:
            if done == 4:  # alice's first page is out
                e.add("A late memory about Alice's tea", tenant="alice", id="late")
                e.relate("late", "a-tea", "implies", tenant="alice")
                e.forget("a-past", tenant="alice", hard=True)
                e.recall("green tea", tenant="alice", user_id="u9")

        assert e.export(tmp_path / "x.jsonl", on_progress=write_meanwhile) == 15
        assert e.get("late", tenant="alice").text.startswith("A late")
    assert (tmp_path / "x.jsonl").read_bytes() == rich.plain.read_bytes()


def test_an_export_does_not_block_writers(rich: Rich, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(rich.folder, store)
    started, written = threading.Event(), threading.Event()
    result: list[Any] = []

    def pause(stage: str, done: int, total: int) -> None:
        if done and not started.is_set():
            started.set()
            if not written.wait(30):
                raise TimeoutError("the writer stayed blocked while the export ran")

    with open_store(store, rich.now) as e:
        worker = threading.Thread(target=lambda: result.append(
            e.export(tmp_path / "x.jsonl", on_progress=pause)))
        worker.start()
        assert started.wait(30)
        e.add("written while the export runs", tenant="alice", id="during")
        e.recall("green tea", tenant="alice")
        written.set()
        worker.join(60)
    assert result == [15]


def test_import_progress(rich: Rich, tmp_path: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    with open_store(tmp_path / "s", rich.now) as e:
        e.import_(rich.plain, on_progress=lambda *a: seen.append(a))
    size = rich.plain.stat().st_size
    assert seen[0][0] == "check" and ("check", size, size) in seen
    assert ("write", 15, 15) in seen and seen[-1] == ("commit", 1, 1)


def test_an_engine_closed_is_refused(rich: Rich, tmp_path: Path) -> None:
    e = open_store(tmp_path / "s", rich.now)
    e.close()
    with pytest.raises(MnemoniaError, match="closed"):
        e.import_(rich.plain)
    with pytest.raises(MnemoniaError, match="closed"):
        e.export(tmp_path / "x.jsonl")


# ---------------------------------------------------------------------------------------------
# a real crash: SIGKILL in the middle of an import, then the next open repairs it
# ---------------------------------------------------------------------------------------------
WRITER = Path(__file__).with_name("_import_writer.py")


def _kill_writer_at(store: Path, source: Path, on_conflict: str, call: int, when: str,
                    now: datetime) -> None:
    """Run the import in another process and SIGKILL it at the chosen Chroma upsert."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(WRITER), str(store), str(source), on_conflict,
                             str(call), when, now.isoformat()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = proc.stdout.readline() if proc.stdout else ""
    if first.strip() != "HANG":
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"the writer did not reach the crash point: {first!r} {err[-3000:]}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.integration
@pytest.mark.parametrize("when", ["before", "after"])
def test_sigkill_while_staging_is_undone_whole(rich: Rich, small_store: Path,
                                               when: str) -> None:
    """Killed at the third batch (its rows staged; its vectors not yet / already in Chroma):
    the next open removes every staged row, vector and collection of the import."""
    before = dump(small_store)
    _kill_writer_at(small_store, rich.plain, "error", 3, when, rich.now)
    with open_store(small_store, rich.now) as e:  # the open repairs
        assert e.tenants() == ["zed"]
    assert dump(small_store) == before
    with open_store(small_store, rich.now) as e:  # and the same file imports whole
        assert e.import_(rich.plain) == 15
        assert e.stats()["memories"] == 17


@pytest.mark.integration
def test_sigkill_after_the_commit_is_finished(rich: Rich, tmp_path: Path) -> None:
    """Killed after the commit of a replace, before the replaced vectors reached Chroma: the
    next open writes them, and the store equals one where the import ran uninterrupted."""
    records = _lines(rich.plain)
    for r in records:
        if r["type"] == "memory":
            r["text"] = r["text"] + " (edited)"
    edited = _write(tmp_path / "edited.jsonl", records)
    crashed, reference = tmp_path / "crashed", tmp_path / "reference"
    shutil.copytree(rich.folder, crashed)
    shutil.copytree(rich.folder, reference)
    _kill_writer_at(crashed, edited, "replace", 1, "before", rich.now)
    with open_store(crashed, rich.now) as e:
        assert e.get("a-tea", tenant="alice").text.endswith("(edited)")
    with open_store(reference, rich.now) as e:
        assert e.import_(edited, on_conflict="replace") == 15
    found = first_differences(dump(reference), dump(crashed))
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------------------------
# streaming: memory use does not grow with the file
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_memory_use_does_not_grow_with_the_file(tmp_path: Path) -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(1200, 256)).astype(np.float32)
    sizes, peaks = {}, {}
    with open_store(tmp_path / "source", START) as e:
        for start in range(0, 1200, 300):
            e.add_many([{"id": f"m{i}", "text": f"memory {i} " + "lorem ipsum dolor sit " * 50,
                         "embedding": vectors[i]} for i in range(start, start + 300)],
                       tenant="t")
            if start == 0:
                e.export(tmp_path / "small.jsonl", with_vectors=True)
        for name in ("small", "big"):
            if name == "big":
                tracemalloc.start()
                e.export(tmp_path / "big.jsonl", with_vectors=True)
                peaks["export"] = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            sizes[name] = (tmp_path / f"{name}.jsonl").stat().st_size
    for name in ("small", "big"):
        with open_store(tmp_path / name, START) as e:
            tracemalloc.start()
            assert e.import_(tmp_path / f"{name}.jsonl") == (300 if name == "small" else 1200)
            peaks[name] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    # a 4x larger file (about 4 MB) costs the import the ids it keeps (about 200 bytes a
    # memory), not its texts and vectors; the export keeps one batch at a time
    assert peaks["big"] - peaks["small"] < 0.15 * (sizes["big"] - sizes["small"]), (peaks, sizes)
    assert peaks["big"] < sizes["big"] and peaks["export"] < sizes["big"] / 2, (peaks, sizes)


# ---------------------------------------------------------------------------------------------
# the command line (the bundled model: the CLI has no embedder option)
# ---------------------------------------------------------------------------------------------
@pytest.mark.integration
def test_cli_export_import_with_progress_and_typed_errors(tmp_path: Path) -> None:
    from mnemonia.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()

    def _text(result: Any) -> str:  # rich wraps long lines
        return " ".join(result.output.split())

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    out = runner.invoke(app, ["import", str(V1_FILE), "--path", a, "--reembed"])
    assert out.exit_code == 0, _text(out)
    assert "imported 7 memories" in _text(out) and "write memories" in _text(out)
    dump_file = tmp_path / "backup.jsonl"
    out = runner.invoke(app, ["export", str(dump_file), "--path", a, "--with-vectors"])
    assert out.exit_code == 0, _text(out)
    assert "exported 7 memories" in _text(out) and "export" in _text(out)
    assert _lines(dump_file)[0]["with_vectors"] is True
    for expected in ("imported 7 memories", "imported 0 memories"):
        out = runner.invoke(app, ["import", str(dump_file), "--path", b, "--on-conflict",
                                  "skip"])
        assert out.exit_code == 0 and expected in _text(out), _text(out)
    out = runner.invoke(app, ["import", str(dump_file), "--path", b])
    assert out.exit_code == 2 and "already exist in the store" in _text(out)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(dump_file.read_bytes()[:-10])
    out = runner.invoke(app, ["import", str(cut), "--path", b, "--on-conflict", "skip"])
    assert out.exit_code == 2 and "truncated" in _text(out), _text(out)
    assert "Traceback" not in _text(out) and isinstance(out.exception, SystemExit)
    out = runner.invoke(app, ["export", str(tmp_path / "no" / "x.jsonl"), "--path", b])
    assert out.exit_code == 2 and "does not exist" in _text(out)
    out = runner.invoke(app, ["import", str(dump_file), "--path", b, "--on-conflict", "merge"])
    assert out.exit_code == 2 and "must be one of error, skip, replace" in _text(out)
