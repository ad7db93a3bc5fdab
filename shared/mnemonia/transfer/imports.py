"""Import of a JSONL export (format 1 or 2), whole or not at all.

Import reads the file twice (three times with relations), line by line: first it checks every
line and collects the ids (conflicts with the store, references), and writes nothing if
anything is wrong; then it writes in batches of :data:`~mnemonia.transfer.format.BATCH`
memories, rows staged with the status ``i:<import id>`` that no read shows, vectors into
Chroma, and one SQL transaction makes the whole import visible at once. A crash before that
commit is undone whole by :func:`repair_imports` at the next open; one after it is finished.
Memory use grows with the number of memories (their ids), never with the texts or vectors.
An import under way in a live process (its journal names its writer, who holds a writer
lease) is left alone by other processes' repair.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mnemonia import validation as check
from mnemonia.caches import Changes
from mnemonia.clock import to_ts
from mnemonia.errors import (
    EmbeddingModelMismatchError,
    ImportConflictError,
    InvalidImportFileError,
    InvalidInputError,
    MnemoniaError,
)
from mnemonia.keywords import store_label_vectors, store_term_vectors
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.store.statements import chunks
from mnemonia.transfer import format as fmt
from mnemonia.transfer.format import (
    FORMAT,
    MEMORY_FIELDS,
    OPTIONAL,
    SPECS,
    Progress,
    check_fields,
    decode_vector,
    from_v1,
)
from mnemonia.validation import row_embed_text

__all__ = ["CONFLICT_MODES", "JOURNAL", "import_file", "repair_imports"]

log = logging.getLogger("mnemonia")

CONFLICT_MODES = ("error", "skip", "replace")
"""What an import does with a memory id the store already has."""
JOURNAL = "import:"
"""``kv`` key prefix of the imports under way (``import:<id>``, ``import:<id>:r<n>``)."""


class _Source:
    """The import file, read line by line (each pass hashes it, to notice a change)."""

    def __init__(self, path: Any) -> None:
        try:
            self.path = Path(os.fspath(path)).expanduser()
        except TypeError as e:
            raise InvalidImportFileError(f"path={path!r}: must be a file path") from e
        if self.path.is_dir():
            raise InvalidImportFileError(f"{str(self.path)!r} is a folder, not an export file")
        try:
            self.size = self.path.stat().st_size
        except OSError as e:
            raise InvalidImportFileError(
                f"cannot read {str(self.path)!r}: {e.strerror or e}") from e
        self.digest = ""

    def _open(self) -> BinaryIO:
        try:
            return open(self.path, "rb")
        except OSError as e:
            raise InvalidImportFileError(
                f"cannot read {str(self.path)!r}: {e.strerror or e}") from e

    def lines(self) -> Iterator[tuple[int, dict[str, Any], int]]:
        """``(line number, record, bytes read so far)`` of every non-blank line."""
        sha = hashlib.sha256()
        done = 0
        with self._open() as fh:
            for n, raw in enumerate(fh, start=1):
                sha.update(raw)
                done += len(raw)
                if not raw.strip():
                    continue
                yield n, self._parse(n, raw), done
        digest = sha.hexdigest()
        if self.digest and digest != self.digest:
            raise InvalidImportFileError(
                f"{str(self.path)!r} changed while it was being imported; nothing was written")
        self.digest = digest

    @staticmethod
    def _parse(n: int, raw: bytes) -> dict[str, Any]:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidImportFileError(f"is not UTF-8 text ({e.reason} at byte {e.start})",
                                         line=n) from e
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            if not raw.endswith(b"\n"):
                raise InvalidImportFileError(
                    "is cut short: the file is truncated (its last line is not complete JSON)",
                    line=n) from e
            raise InvalidImportFileError(f"is not JSON ({e.msg} at column {e.colno})",
                                         line=n) from e
        if not isinstance(rec, dict):
            raise InvalidImportFileError(
                f"is not a JSON object (got {type(rec).__name__})", line=n)
        return rec


# ---------------------------------------------------------------------------------------------
# import: the checking pass
# ---------------------------------------------------------------------------------------------
@dataclass
class _Tenant:
    created_at: float | None = None
    next_seq: int = 0
    line: int = 0
    new: int = 0  # memories of the tenant the import adds (not replaces)


@dataclass
class _Plan:
    """What the checking pass learnt; the writing passes follow it."""

    iid: str
    version: int
    dimension: int
    use_vectors: bool
    on_conflict: str
    tenants: dict[str, _Tenant] = field(default_factory=dict)
    # id -> (tenant, line, action): "new", "skip", "gone" (skipped: taken by another
    # tenant) or the staging id of a replacement ("#...")
    ids: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    unchecked: list[str] = field(default_factory=list)  # ids to look up in the store
    # references (line, what, tenant, target) to look up in the store, then the ones that
    # must be in the rest of the file (``store`` False: only a memory of the file will do)
    lookups: list[tuple[int, str, str, str]] = field(default_factory=list)
    forward: list[tuple[int, str, str, str, bool]] = field(default_factory=list)
    conflicts: list[tuple[str, int]] = field(default_factory=list)
    taken: list[tuple[str, int]] = field(default_factory=list)
    end: int = 0  # line of the end record
    last: int = 0

    @property
    def status(self) -> str:
        return f"i:{self.iid}"

    @property
    def writes(self) -> int:
        return sum(1 for _, _, a in self.ids.values() if a == "new" or a.startswith("#"))


def _header(rt: Runtime, n: int, rec: Mapping[str, Any], reembed: bool, on_conflict: str,
            source: _Source) -> _Plan:
    if rec.get("type") != "header":
        raise InvalidImportFileError(
            f"the first line must be the header ({{\"type\": \"header\", \"format\": {FORMAT}"
            f", \"embedding_model\": ..., \"dimension\": ...}}), got a {rec.get('type')!r} "
            "record", line=n)
    version = rec.get("format", 1)
    if version not in (1, 2):
        raise InvalidImportFileError(
            f"export format {version!r} is not supported; this version reads formats 1 and "
            f"{FORMAT}", line=n)
    spec = SPECS["header"] if version == 2 else {k: SPECS["header"][k] for k in (
        "embedding_model", "dimension")}
    head = check_fields(n, "header", rec, spec, OPTIONAL["header"] if version == 2 else {"format"})
    same = head["embedding_model"] == rt.embedder.name
    if not same and not reembed:
        raise EmbeddingModelMismatchError(
            f"{str(source.path)!r} was exported with {head['embedding_model']!r}; this engine "
            f"uses {rt.embedder.name!r}: pass reembed=True to embed the texts again")
    if same and not reembed and head["dimension"] != rt.embedder.dimension:
        raise InvalidImportFileError(
            f"the header says dimension {head['dimension']} for {head['embedding_model']!r}, "
            f"but this engine's embedder has dimension {rt.embedder.dimension}", line=n)
    return _Plan(iid=uuid.uuid4().hex[:12], version=version, dimension=head["dimension"],
                 use_vectors=same and not reembed, on_conflict=on_conflict)


def _clean(rt: Runtime, plan: _Plan, n: int, rec: Mapping[str, Any],
           v1_seq: Counter[str]) -> tuple[str, dict[str, Any]]:
    """``(type, checked fields)`` of one record after the header (format 1 converted)."""
    kind = rec.get("type")
    if plan.end and n > plan.end:
        raise InvalidImportFileError(f"a {kind!r} record after the end line (line "
                                     f"{plan.end})", line=n)
    allowed = ("memory", "relation") if plan.version == 1 else tuple(SPECS)[1:]
    if kind not in allowed:
        what = "no 'type' field" if kind is None else f"unknown record type {kind!r}"
        raise InvalidImportFileError(f"{what}; a format-{plan.version} file has "
                                     f"{', '.join(allowed)} records", line=n)
    if plan.version == 1 and kind == "memory":
        tenant = rec.get("tenant")
        name = tenant if isinstance(tenant, str) else ""
        rec = from_v1(n, rec, v1_seq[name], plan.dimension)
        v1_seq[name] += 1
    elif plan.version == 1:
        rec = {**rec, "created_at": to_ts(rt.now())}
    out = check_fields(n, str(kind), rec, SPECS[str(kind)], OPTIONAL.get(str(kind), set()))
    try:
        if kind == "memory":
            check.text(out["text"], max_chars=rt.config.max_text_chars)
            if "vector" in out and plan.version == 2:
                out["vector"] = decode_vector(n, out["vector"], plan.dimension)
        elif kind == "relation":
            act.relation_weight(out["rel_type"], rt.type_weights or None)
            act.validate_strength(out["strength"])
            if out["src"] == out["dst"]:
                raise InvalidInputError(f"a memory cannot relate to itself (id {out['src']!r})")
    except MnemoniaError as e:
        raise InvalidImportFileError(f"{kind} record: {e}", line=n) from e
    return str(kind), out


def _note_memory(rt: Runtime, plan: _Plan, conn: Any, n: int, m: dict[str, Any]) -> None:
    tenant, mid = m["tenant"], m["id"]
    t = plan.tenants.get(tenant)
    if t is None:
        if plan.version == 2:
            raise InvalidImportFileError(
                f"memory {mid!r} of tenant {tenant!r} comes before that tenant's 'tenant' "
                "record", line=n)
        t = plan.tenants[tenant] = _Tenant(line=n)
    if plan.version == 1:
        t.next_seq = m["seq"] + 1
    elif m["seq"] >= t.next_seq:
        raise InvalidImportFileError(
            f"memory {mid!r} has seq {m['seq']}, not below its tenant's next_seq "
            f"{t.next_seq} (line {t.line})", line=n)
    seen = plan.ids.get(mid)
    if seen is not None:
        raise InvalidImportFileError(f"memory id {mid!r} already appeared on line {seen[1]}",
                                     line=n)
    plan.ids[mid] = (tenant, n, "new")
    plan.unchecked.append(mid)
    for what in ("superseded_by", "consolidated_into"):
        if m[what] is not None:
            _reference(rt, plan, conn, n, f"{what} {m[what]!r} of memory {mid!r}", tenant,
                       m[what])
    if len(plan.unchecked) >= 500:
        _look_up_ids(rt, plan, conn)


def _look_up_ids(rt: Runtime, plan: _Plan, conn: Any) -> None:
    """Decide, for the ids read since the last call, what the import does with each."""
    ids, plan.unchecked = plan.unchecked, []
    owners = rt.sql.memories.owners(conn, ids)
    for mid in ids:
        owner = owners.get(mid)
        if owner is None:
            continue
        tenant, line, _ = plan.ids[mid]
        if plan.on_conflict == "error":
            plan.conflicts.append((mid, line))  # the same words whoever owns it
        elif plan.on_conflict == "skip":
            plan.ids[mid] = (tenant, line, "skip" if owner == tenant else "gone")
        elif owner == tenant:
            plan.ids[mid] = (tenant, line, f"#{plan.iid}#{line}")
        else:
            plan.taken.append((mid, line))


def _reference(rt: Runtime, plan: _Plan, conn: Any, n: int, what: str, tenant: str,
               target: str, *, store: bool = True) -> None:
    """Check that ``target`` is a memory of ``tenant``: in the file (now or, for a forward
    reference, by the end) or, with ``store``, in the store."""
    seen = plan.ids.get(target)
    if seen is not None:
        if seen[0] != tenant:
            raise InvalidImportFileError(
                f"{what} of tenant {tenant!r} points at memory {target!r} of tenant "
                f"{seen[0]!r} (line {seen[1]}): relations across tenants are refused", line=n)
        return
    if store:
        plan.lookups.append((n, what, tenant, target))
    else:
        plan.forward.append((n, what, tenant, target, False))
    if len(plan.lookups) >= 500:
        _look_up_references(rt, plan, conn)


def _look_up_references(rt: Runtime, plan: _Plan, conn: Any) -> None:
    refs, plan.lookups = plan.lookups, []
    found = rt.sql.memories.columns_of(conn, sorted({r[3] for r in refs}), ["tenant"],
                                       committed=True)
    for ref in refs:
        row = found.get(ref[3])
        if row is None or row.tenant != ref[2]:
            plan.forward.append((*ref, True))  # it may still come later in the file


def _note(rt: Runtime, plan: _Plan, conn: Any, n: int, kind: str, rec: dict[str, Any]) -> None:
    """The checking pass's bookkeeping for one record."""
    plan.counts[kind] += 1
    if kind == "tenant":
        if rec["tenant"] in plan.tenants:
            raise InvalidImportFileError(f"tenant {rec['tenant']!r} already had its record "
                                         f"on line {plan.tenants[rec['tenant']].line}", line=n)
        plan.tenants[rec["tenant"]] = _Tenant(rec["created_at"], rec["next_seq"], n)
    elif kind == "memory":
        _note_memory(rt, plan, conn, n, rec)
    elif kind == "relation":
        for end in ("src", "dst"):
            _reference(rt, plan, conn, n, f"relation {rec['src']!r} -{rec['rel_type']}-> "
                       f"{rec['dst']!r}", rec["tenant"], rec[end])
    elif kind in ("event", "access"):
        _reference(rt, plan, conn, n, f"{kind} record of memory {rec['memory_id']!r}",
                   rec["tenant"], rec["memory_id"], store=False)
    elif kind == "end":
        plan.end = n
        said = {"memory": rec["memories"], "relation": rec["relations"],
                "event": rec["events"], "access": rec["accesses"]}
        for k, v in said.items():
            if plan.counts[k] != v:
                raise InvalidImportFileError(
                    f"the end line says {v} {k} record(s) but the file has {plan.counts[k]}:"
                    " lines are missing or were added", line=n)


def _finish_check(rt: Runtime, plan: _Plan, conn: Any) -> None:
    _look_up_ids(rt, plan, conn)
    _look_up_references(rt, plan, conn)
    for n, what, tenant, target, store in plan.forward:
        seen = plan.ids.get(target)
        if seen is None and not store:
            raise InvalidImportFileError(
                f"{what}: memory {target!r} is not in the file (an export carries the events "
                "and access rows of its own memories only)", line=n)
        if seen is None:  # missing and another tenant's memory read alike: nothing leaks
            raise InvalidImportFileError(
                f"{what}: memory {target!r} is neither in the file nor in tenant {tenant!r} "
                "of the store", line=n)
        if seen[0] != tenant:
            raise InvalidImportFileError(
                f"{what} of tenant {tenant!r} points at memory {target!r} of tenant "
                f"{seen[0]!r} (line {seen[1]}): relations across tenants are refused", line=n)
    if plan.version == 2 and not plan.end:
        raise InvalidImportFileError(
            f"the file is truncated: it stops after line {plan.last} without the end line "
            "that closes a format-2 export")
    if plan.conflicts:
        shown = ", ".join(f"{i!r} (line {n})" for i, n in plan.conflicts[:5])
        raise ImportConflictError(
            f"{len(plan.conflicts)} memory id(s) of the file already exist in the store: "
            f"{shown}; pass on_conflict='skip' to keep the stored memories or 'replace' to "
            "overwrite them with the file's", ids=[i for i, _ in plan.conflicts[:20]])
    if plan.taken:
        shown = ", ".join(f"{i!r} (line {n})" for i, n in plan.taken[:5])
        raise ImportConflictError(
            f"{len(plan.taken)} memory id(s) of the file are taken in the store by memories "
            f"this import cannot replace: {shown}; choose other ids",
            ids=[i for i, _ in plan.taken[:20]])


def _check_file(rt: Runtime, source: _Source, *, reembed: bool, on_conflict: str,
                on_progress: Progress | None) -> _Plan:
    """The first pass: every line checked, ids and references resolved; nothing written."""
    plan: _Plan | None = None
    v1_seq: Counter[str] = Counter()
    with rt.reading() as conn:
        for n, rec, done in source.lines():
            if plan is None:
                plan = _header(rt, n, rec, reembed, on_conflict, source)
            else:
                kind, clean = _clean(rt, plan, n, rec, v1_seq)
                _note(rt, plan, conn, n, kind, clean)
            plan.last = n
            if on_progress is not None and (n % 1000 == 0 or done == source.size):
                on_progress("check", done, source.size)
        if plan is None:
            raise InvalidImportFileError(
                f"{str(source.path)!r}: the file is empty: no header line")
        _finish_check(rt, plan, conn)
    if on_progress is not None:
        on_progress("check", source.size, source.size)
    return plan


# ---------------------------------------------------------------------------------------------
# import: the writing passes
# ---------------------------------------------------------------------------------------------
def _stage_memories(rt: Runtime, plan: _Plan, batch: list[dict[str, Any]],
                    base: Mapping[str, int]) -> None:
    """Write one batch of memories staged (invisible), then their vectors to Chroma."""
    texts = [check.embed_text(m["text"], m["metadata"].get("speaker")) for m in batch]
    todo = {i for i, m in enumerate(batch) if not (plan.use_vectors and "vector" in m)}
    vectors: list[Any] = [None if i in todo else np.frombuffer(m["vector"], "<f4")
                          for i, m in enumerate(batch)]
    if todo:
        order = sorted(todo)
        for i, v in zip(order, rt.embedder.embed_documents([texts[i] for i in order]),
                        strict=True):
            vectors[i] = np.asarray(v, dtype=np.float32)
    ids = [plan.ids[m["id"]][2] if plan.ids[m["id"]][2].startswith("#") else m["id"]
           for m in batch]
    rows = [_staged_row(rt, plan, m, sid, base) for m, sid in zip(batch, ids, strict=True)]
    with rt.sql.begin() as conn:
        rt.sql.memories.insert_memories(conn, rows)
        rt.sql.vectors.vectors_put(conn, list(zip(ids, vectors, strict=True)))
        rt.sql.keywords.fts_insert(conn, [(sid, m["tenant"],
                                           check.indexed_text(m["text"], m["metadata"]))
                                          for sid, m in zip(ids, batch, strict=True)])
        rt.sql.graph.link_entities(conn, [dict(tenant=m["tenant"], entity=e, memory_id=sid)
                                          for sid, m in zip(ids, batch, strict=True)
                                          for e in dict.fromkeys(m["links"])])
        if plan.version == 1:  # format 1 kept no audit trail: the creation, as ingest writes
            rt.sql.events.insert_events(conn, [rt.sql.events.event_row(
                m["tenant"], sid, "created", m["created_at"], None,
                {"state": m["state"], "importance": m["importance"], "kind": m["kind"]})
                for sid, m in zip(ids, batch, strict=True)])
    for tenant in dict.fromkeys(m["tenant"] for m in batch):
        new = [i for i, m in enumerate(batch) if m["tenant"] == tenant
               and not ids[i].startswith("#")]
        if new:  # a replacement reaches Chroma only once the import is committed
            rt.vectors.upsert(rt.collection(tenant, create=True), [ids[i] for i in new],
                              np.stack([vectors[i] for i in new]).astype(np.float32),
                              [texts[i] for i in new], [{"kind": batch[i]["kind"]} for i in new])


def _staged_row(rt: Runtime, plan: _Plan, m: Mapping[str, Any], sid: str,
                base: Mapping[str, int]) -> dict[str, Any]:
    row = {k: m[k] for k in MEMORY_FIELDS}
    row.update(id=sid, seq=base[m["tenant"]] + m["seq"], entities=json.dumps(m["entities"]),
               metadata=json.dumps(m["metadata"]), embedding_model=rt.embedder.name,
               status=plan.status)
    return row


def _side_row(plan: _Plan, kind: str, rec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``memory_events`` / ``access_log`` row of a record, on its memory's staged id
    (``None`` when its memory is skipped)."""
    action = plan.ids[rec["memory_id"]][2]
    if action in ("skip", "gone"):
        return None
    row = {k: v for k, v in rec.items() if k != "memory_id"}
    row["memory_id"] = action if action.startswith("#") else rec["memory_id"]
    if kind == "event":
        row["before"] = None if rec["before"] is None else json.dumps(rec["before"])
        row["after"] = None if rec["after"] is None else json.dumps(rec["after"])
    return row


def _stage(rt: Runtime, source: _Source, plan: _Plan, on_progress: Progress | None) -> None:
    """The second pass: memories, their vectors, events and access rows, staged."""
    with rt.reading() as conn:
        base = {t: 0 if (row := rt.sql.collections.collection_row(conn, t)) is None
                else row.next_seq for t in plan.tenants}
    total, done = plan.writes, 0
    memories: list[dict[str, Any]] = []
    side: dict[str, list[dict[str, Any]]] = {"event": [], "access": []}
    v1_seq: Counter[str] = Counter()

    def flush(final: bool = False) -> None:
        nonlocal done
        if memories and (final or len(memories) >= fmt.BATCH):
            _stage_memories(rt, plan, memories, base)
            done += len(memories)
            memories.clear()
            if on_progress is not None:
                on_progress("write", done, total)
        if any(side.values()) and (final or sum(map(len, side.values())) >= 500):
            with rt.sql.begin() as conn:
                rt.sql.events.insert_events(conn, side["event"])
                rt.sql.events.insert_access(conn, side["access"])
            side["event"].clear()
            side["access"].clear()

    for n, rec, _ in source.lines():
        if rec.get("type") in ("header", "tenant", "relation", "end"):
            continue
        kind, clean = _clean(rt, plan, n, rec, v1_seq)
        if kind == "memory":
            action = plan.ids[clean["id"]][2]
            if action == "new" or action.startswith("#"):
                memories.append(clean)
        elif (row := _side_row(plan, kind, clean)) is not None:
            side[kind].append(row)
        flush()
    flush(final=True)


def _relation_rows(rt: Runtime, source: _Source, plan: _Plan) -> Iterator[dict[str, Any]]:
    """The third pass: the relations to write (one whose end is a skipped id that another
    tenant holds is left out, like one already there)."""
    for n, rec, _ in source.lines():
        if rec.get("type") != "relation":
            continue
        _, r = _clean(rt, plan, n, rec, Counter())
        if any(plan.ids.get(r[e], ("", 0, ""))[2] == "gone" for e in ("src", "dst")):
            continue
        yield {"tenant": r["tenant"], "src": r["src"], "dst": r["dst"], "type": r["rel_type"],
               "strength": float(r["strength"]), "created_at": r["created_at"]}


def _commit(rt: Runtime, source: _Source, plan: _Plan) -> list[str]:
    """One SQL transaction: replacements swapped in, relations, tenants, every staged row
    committed. Returns the replaced ids (their Chroma vectors are written next)."""
    pairs = [(a, mid) for mid, (_, _, a) in plan.ids.items() if a.startswith("#")]
    now = to_ts(rt.now())
    with rt.changing(*(Changes.wholesale(t) for t in plan.tenants)), rt.sql.begin() as conn:
        for chunk in chunks(pairs):
            rt.sql.staging.swap_staged(conn, chunk)
        batch: list[dict[str, Any]] = []
        for row in _relation_rows(rt, source, plan):
            batch.append(row)
            if len(batch) >= 500:
                rt.sql.graph.put_relations(conn, batch, overwrite=plan.on_conflict == "replace")
                batch.clear()
        rt.sql.graph.put_relations(conn, batch, overwrite=plan.on_conflict == "replace")
        for tenant, _, action in plan.ids.values():
            if action == "new":
                plan.tenants[tenant].new += 1
        for tenant, t in plan.tenants.items():
            row = rt.sql.collections.collection_row(conn, tenant)
            if t.new or row is None:  # a tenant with no memory left is a tenant too
                rt.sql.collections.put_collection(
                    conn, tenant, model=rt.embedder.name, dimension=rt.embedder.dimension,
                    created_at=t.created_at if t.created_at is not None else now,
                    next_seq=(0 if row is None else row.next_seq) + t.next_seq)
        rt.sql.staging.commit_staged(conn, plan.status)
        replaced = [mid for _, mid in pairs]
        rt.sql.kv.kv_delete(conn, [JOURNAL + plan.iid])
        if replaced:
            rt.sql.kv.kv_set(conn, JOURNAL + plan.iid, {"state": "committed", "writer": rt.writer})
            for i, chunk in enumerate(chunks(replaced, 1000)):
                rt.sql.kv.kv_set(conn, f"{JOURNAL}{plan.iid}:r{i:06d}", list(chunk))
    return replaced


def _sync_vectors(rt: Runtime, ids: Sequence[str]) -> None:
    """Write the stored vector and text of ``ids`` (committed memories) to Chroma."""
    for chunk in chunks(list(ids)):
        with rt.reading() as conn:
            rows = rt.sql.memories.full_rows(conn, list(chunk))
            vecs = rt.sql.vectors.vectors_get(conn, list(chunk))
        by_tenant: dict[str, list[Any]] = {}
        for r in rows:
            by_tenant.setdefault(r.tenant, []).append(r)
        for tenant, group in by_tenant.items():
            rt.vectors.upsert(rt.collection(tenant, create=True), [r.id for r in group],
                              np.stack([np.frombuffer(vecs[r.id], "<f4") for r in group]),
                              [check.row_embed_text(r) for r in group],
                              [{"kind": r.kind} for r in group])


def _undo(rt: Runtime, status: str) -> int:
    """Remove every row an unfinished import staged with ``status``, their vectors and the
    Chroma collections it made; returns the rows removed."""
    with rt.reading() as conn:
        rows = rt.sql.staging.staged(conn, status)
    by_tenant: dict[str, list[str]] = {}
    for r in rows:
        by_tenant.setdefault(r.tenant, []).append(r.id)
    for tenant, ids in by_tenant.items():
        col = rt.vectors.collection(tenant, model=rt.embedder.name, dimension=0, create=False)
        if col is not None:
            rt.vectors.delete(col, [i for i in ids if not i.startswith("#")])
    with rt.changing(*(Changes.wholesale(t) for t in by_tenant)), rt.sql.begin() as conn:
        for tenant, ids in by_tenant.items():
            rt.sql.memories.purge(conn, tenant, ids)
        rt.sql.kv.kv_delete(conn, [k for k, _ in rt.sql.kv.kv_items(conn, JOURNAL + status[2:])])
        unknown = [t for t in by_tenant if rt.sql.collections.collection_row(conn, t) is None]
    for tenant in unknown:  # the import made this collection: nothing else is in it
        col = rt.vectors.collection(tenant, model=rt.embedder.name, dimension=0, create=False)
        if col is not None and rt.vectors.count(col) == 0:
            rt.vectors.delete_collection(tenant)
    return len(rows)


def repair_imports(rt: Runtime) -> None:
    """Undo, whole, every import a crash stopped before its commit; finish (the Chroma side of
    the replaced memories) every one stopped after it."""
    with rt.reading() as conn:
        journal = rt.sql.kv.kv_items(conn, JOURNAL)
        staged = {r.status for r in rt.sql.staging.staged(conn)}
        live = rt.sql.kv.live_writers(conn, now=time.time())
    heads = {k[len(JOURNAL):]: v for k, v in journal if ":" not in k[len(JOURNAL):]}
    # an import under way in a live process (its writer holds its lease) is left alone
    busy = {i for i, v in heads.items() if v.get("writer") in live}
    heads = {i: v for i, v in heads.items() if i not in busy}
    staged -= {f"i:{i}" for i in busy}
    for status in sorted(staged | {f"i:{i}" for i, v in heads.items()
                                   if v.get("state") != "committed"}):
        removed = _undo(rt, status)
        log.warning("undid the unfinished import %s: %d staged memories removed", status[2:],
                    removed)
    for iid, v in heads.items():
        if v.get("state") == "committed":
            keys = [k for k, _ in journal if k.startswith(f"{JOURNAL}{iid}")]
            ids = [i for k, chunk in journal if k in keys and isinstance(chunk, list)
                   for i in chunk]
            _sync_vectors(rt, ids)
            with rt.sql.begin() as conn:
                rt.sql.kv.kv_delete(conn, keys)
            log.warning("finished the import %s: %d replaced vectors written", iid, len(ids))


def _term_vectors(rt: Runtime, tenant: str) -> None:
    """Word vectors for the words of the tenant's enriched memories (recall's keyword
    expansion; a cache, not part of the file): after the import, outside its transaction.
    Enrichment stores them (ingest), so a memory it has not run on yet gets them when it
    does, as in the store the file came from: the imported store recalls like that one.
    And the label vectors of the tenant's entities (recall's entity index reads them)."""
    with rt.writing() as conn:
        ids = [r[0] for r in rt.sql.memories.active_rows(conn, tenant, ["id"], enriched=True)]
        for part in chunks(ids):
            rows = rt.sql.memories.rows(conn, tenant, list(part))
            store_term_vectors(rt, conn, [row_embed_text(r) for r in rows.values()])
        store_label_vectors(rt, conn, [e for e, _ in rt.sql.graph.entity_counts(conn, tenant)])


def import_file(rt: Runtime, path: str | os.PathLike[str], *, reembed: bool = False,
                on_conflict: str = "error", on_progress: Progress | None = None) -> int:
    """Load a JSONL export (format 1 or 2) whole or not at all; returns the memories written.

    Every line is checked first (nothing is written if one is wrong); ids already in the store
    follow ``on_conflict``: ``error`` (refused, listed), ``skip`` (the stored memory stays; the
    file's events and access rows of it are left out) or ``replace`` (the file's memory takes
    the place of the stored one of the same tenant: row, vector, entities, events and access
    rows; the stored relations stay, the file's are written over them)."""
    rt.check_open()
    reembed = check.boolean(reembed, "reembed")
    if on_conflict not in CONFLICT_MODES:
        raise InvalidInputError(
            f"on_conflict={on_conflict!r}: must be one of {', '.join(CONFLICT_MODES)}")
    source = _Source(path)
    with rt.exclusive():
        plan = _check_file(rt, source, reembed=reembed, on_conflict=on_conflict,
                           on_progress=on_progress)
        try:
            with rt.sql.begin() as conn:
                rt.sql.kv.kv_set(conn, JOURNAL + plan.iid, {
                    "state": "staging", "file": str(source.path), "started_at": to_ts(rt.now()),
                    "writer": rt.writer})
            _stage(rt, source, plan, on_progress)
            if on_progress is not None:
                on_progress("commit", 0, 1)
            replaced = _commit(rt, source, plan)
        except BaseException:
            try:
                _undo(rt, plan.status)
            except Exception:  # the next open undoes it (repair)
                log.exception("undoing the import %s failed; the next open will", plan.iid)
            raise
        for tenant in plan.tenants:
            rt.collection(tenant, create=True)  # a tenant without memories has one too
            _term_vectors(rt, tenant)
        if replaced:
            _sync_vectors(rt, replaced)
            with rt.sql.begin() as conn:
                rt.sql.kv.kv_delete(conn, [k for k, _ in rt.sql.kv.kv_items(conn,
                                                                            JOURNAL + plan.iid)])
        if on_progress is not None:
            on_progress("commit", 1, 1)
    return plan.writes
