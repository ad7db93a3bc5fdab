"""Moving memories in and out of a store, and keeping its two halves in agreement: JSONL
export / import, the embedding-model check at open, and the repair of writes a crash left
half-done (DESIGN section 3).

Export format 2 (one JSON object a line, UTF-8; times are float seconds since the epoch, UTC,
exactly as stored):

- ``header``: ``format`` (2), ``embedding_model``, ``dimension``, ``exported_at``,
  ``with_vectors``, ``tenants``;
- per tenant, ``tenant`` (its ``collections`` row: ``created_at``, ``next_seq``, model and
  dimension), then one ``memory`` per memory, deleted ones too: every column of the
  ``memories`` table but ``status`` (:data:`MEMORY_FIELDS`), ``links`` (its
  ``memory_entities`` rows) and, with ``with_vectors``, ``vector`` (the float32 little-endian
  bytes, base64); then its ``relation`` (``src``, ``dst``, ``rel_type``, ``strength``,
  ``created_at``), ``event`` (the audit trail, oldest first) and ``access`` (the access log,
  which re-evaluation and review read) records;
- ``end``: the number of memory, relation, event and access records, so a file cut short at
  a line boundary is refused too.

Import reads the file twice (three times with relations), line by line: first it checks every
line and collects the ids (conflicts with the store, references), and writes nothing if
anything is wrong; then it writes in batches of :data:`BATCH` memories, rows staged with the
status ``i:<import id>`` that no read shows, vectors into Chroma, and one SQL transaction
makes the whole import visible at once. A crash before that commit is undone whole by
:func:`repair` at the next open; one after it is finished. Memory use grows with the number
of memories (their ids), never with the texts or vectors. Format-1 files (the first export:
``Memory.to_dict()`` lines with ``embedding``) still import.

At open, Chroma and the side-store are compared per tenant (counts first), rebuilt where
Chroma lost vectors, and reported (``doctor``) or refused where Chroma holds vectors the
side-store does not know.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np

from mnemonia import validation as check
from mnemonia.clock import to_ts
from mnemonia.config import TENANT_PATTERN
from mnemonia.errors import (
    EmbeddingModelMismatchError,
    ImportConflictError,
    InvalidImportFileError,
    InvalidInputError,
    MnemoniaError,
    StoreError,
    StoreInconsistentError,
)
from mnemonia.keywords import store_term_vectors
from mnemonia.models import KINDS
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring.reevaluation import IMMEDIATE, STATES
from mnemonia.store.repository import chunks
from mnemonia.validation import row_embed_text

__all__ = ["BATCH", "CONFLICT_MODES", "FORMAT", "MEMORY_FIELDS", "DoctorReport", "Progress",
           "TenantHealth", "check_models", "close_store", "doctor", "export", "import_file",
           "open_store", "repair", "repair_imports", "verify"]

log = logging.getLogger("mnemonia")

FORMAT = 2
"""The export format :func:`export` writes (:func:`import_file` reads 1 and 2)."""
BATCH = 256
"""Memories read, embedded and written per batch by export and import."""
CONFLICT_MODES = ("error", "skip", "replace")
"""What an import does with a memory id the store already has."""
JOURNAL = "import:"
"""``kv`` key prefix of the imports under way (``import:<id>``, ``import:<id>:r<n>``)."""

Progress = Callable[[str, int, int], None]
"""``(stage, done, total)``: ``export`` (memories), ``check`` (bytes read), ``write``
(memories written), ``commit`` (0 then 1)."""

MEMORY_FIELDS = (
    "id", "tenant", "seq", "text", "kind", "topic", "entities", "importance", "created_at",
    "accessed_at", "access_count", "stability", "easiness", "interval_days", "repetitions",
    "next_review", "last_quality", "utility", "state", "pinned", "deleted_at",
    "superseded_by", "consolidated_into", "session_id", "metadata", "embedding_model",
    "enriched_at", "last_reviewed_at", "last_reevaluated_at", "heat_counter", "heat_at",
)
"""The ``memories`` columns a format-2 memory record carries (all but ``status``)."""


def check_models(rt: Runtime) -> None:
    """Refuse a store whose tenants were embedded with another model than ``rt.embedder``."""
    with rt.reading() as conn:
        rows = rt.sql.collections(conn)
    for row in rows:
        if row.embedding_model != rt.embedder.name:
            raise EmbeddingModelMismatchError(
                f"tenant {row.tenant!r} was embedded with {row.embedding_model!r} "
                f"(dimension {row.dimension}) but this engine uses {rt.embedder.name!r}. "
                "Open it with the original embedder, or re-embed: engine.export(path) with "
                "the old embedder, then MemoryEngine.open(new_path, embedder=new)"
                ".import_(path, reembed=True)"
            )


def repair(rt: Runtime, *, mine: bool = False) -> None:
    """Finish or undo writes a crash left half-done: an import not committed is undone whole
    (one committed is finished), a pending memory whose vector reached Chroma is committed,
    one whose vector did not is removed, a hard delete is completed.

    Only abandoned writes are touched: those whose writer (``memory_writers``) holds no
    unexpired writer lease, i.e. its process is gone. A live process's writes under way are
    left alone, whatever it is doing. ``mine``: this engine's own unfinished writes instead
    (on close: a write that failed half-way and was not retried)."""
    if not mine:
        repair_imports(rt)
    now = time.time()
    with rt.reading() as conn:
        rows = rt.sql.unfinished(conn)
        live = set() if mine else rt.sql.live_writers(conn, now=now)
    if mine:
        rows = [r for r in rows if r.writer == rt.writer]
    else:
        rows = [r for r in rows if r.writer is None or r.writer not in live]
        with rt.sql.begin() as conn:  # the leases of processes that are gone
            rt.sql.drop_expired_writers(conn, now=now)
    if not rows:
        return
    by_tenant: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        by_tenant.setdefault(r.tenant, []).append((r.id, r.status))
    for tenant, items in by_tenant.items():
        col = rt.collection(tenant, create=False)
        ids = [i for i, _ in items]
        present = rt.vectors.existing(col, ids) if col is not None else set()
        finish = [i for i, st in items if st == "pending" and i in present]
        undo = [i for i, st in items if st == "pending" and i not in present]
        with rt.sql.begin() as conn:
            finished = rt.sql.mark_committed(conn, finish) if finish else 0
            # compare-and-set: a row its writer committed meanwhile stays committed
            claimed = rt.sql.take_over(conn, undo, rt.writer, to_ts(rt.now())) if undo else []
        deleting = [i for i, st in items if st == "deleting"] + claimed
        if col is not None and deleting:
            rt.vectors.delete(col, deleting)
        with rt.sql.begin() as conn:
            gone = rt.sql.purge_deleting(conn, tenant, deleting)
        if gone:
            rt.forget_indexes(tenant)
        log.info("repaired tenant %s: %d finished, %d undone, %d deletions completed",
                 tenant, finished, len(claimed), len(gone) - len(claimed))


def close_store(rt: Runtime) -> None:
    """Finish this engine's own writes that failed half-way and were not retried (best
    effort: a store that does not answer leaves them to the next open), then close."""
    if not rt.closed:
        try:
            repair(rt, mine=True)
        except MnemoniaError as e:
            log.warning("closing: could not finish this engine's unfinished writes (%s); the "
                        "next open does", e)
    rt.close()

# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------
def _export_target(path: Any) -> Path:
    """The file to export to: its folder must exist and it must not be a folder itself."""
    try:
        target = Path(os.fspath(path)).expanduser()
    except TypeError as e:
        raise InvalidInputError(f"path={path!r}: must be a file path (str or Path)") from e
    if target.is_dir():
        raise InvalidInputError(
            f"cannot export to {str(target)!r}: it is a folder; give a file path such as "
            f"{str(target / 'memories.jsonl')!r}")
    if not target.parent.is_dir():
        raise InvalidInputError(
            f"cannot export to {str(target)!r}: the folder {str(target.parent)!r} does not "
            "exist (create it first)")
    return target


# -- doctor: Chroma, the side-store and the keyword index compared ------------------------------
REBUILD_BATCH = 1000
"""Memories written back to Chroma (or indexed again) per batch by a repair."""


@dataclass(frozen=True, kw_only=True)
class TenantHealth:
    """One tenant's stores compared by :func:`doctor`: counts as found, then what a repair did.

    Attributes:
        tenant: The tenant.
        memories: Its committed memories in the side-store (soft-deleted ones included: they
            keep their vectors so that they can be restored).
        active: Those not soft-deleted.
        chroma_vectors: Vectors in its Chroma collection (0 when the collection is missing).
        side_vectors: Its memories' vectors kept in the side-store (table ``memory_vectors``).
        keyword_rows: Its rows in the SQLite keyword index (``memories_kw``); ``None`` where
            the index is a generated column of ``memories`` (PostgreSQL) and cannot disagree.
        missing: Memories with no vector in Chroma.
        orphans: Vectors in Chroma of no memory the side-store knows.
        side_missing: Memories with no side-store vector (e.g. stores made before it kept
            them; recall then reads those vectors from Chroma).
        keyword_off: Memories the keyword index lacks or holds more than once (``None``: n/a).
        repaired: Whether a repair ran on what was found.
        rebuilt: Vectors written back to Chroma from the side-store.
        reembedded: Vectors embedded again from the memory's text (none was kept anywhere).
        orphans_removed: Orphan vectors deleted from Chroma.
        side_restored: Side-store vectors copied back from Chroma.
        keyword_reindexed: Memories indexed again.
    """

    tenant: str
    memories: int
    active: int
    chroma_vectors: int
    side_vectors: int
    keyword_rows: int | None
    missing: int = 0
    orphans: int = 0
    side_missing: int = 0
    keyword_off: int | None = None
    repaired: bool = False
    rebuilt: int = 0
    reembedded: int = 0
    orphans_removed: int = 0
    side_restored: int = 0
    keyword_reindexed: int = 0

    @property
    def problems(self) -> int:
        """How many things were found out of step (before any repair)."""
        return self.missing + self.orphans + self.side_missing + (self.keyword_off or 0)

    @property
    def consistent(self) -> bool:
        """Nothing was out of step, or the repair put all of it right."""
        return self.problems == 0 or self.repaired


@dataclass(frozen=True, kw_only=True)
class DoctorReport:
    """What :func:`doctor` found in a store, per tenant, and what it repaired.

    Attributes:
        tenants: One :class:`TenantHealth` per tenant the side-store or Chroma knows.
        keyword_index: Which keyword index the store has and whether it was checked.
        stray_side_vectors: Side-store vectors of no memory.
        stray_keyword_rows: Keyword-index rows of no memory (``None``: n/a).
        repair: Whether this run repaired what it found.
    """

    tenants: tuple[TenantHealth, ...]
    keyword_index: str
    stray_side_vectors: int = 0
    stray_keyword_rows: int | None = None
    repair: bool = False

    @property
    def problems(self) -> int:
        """Everything found out of step, over every tenant and the strays."""
        return (sum(t.problems for t in self.tenants) + self.stray_side_vectors
                + (self.stray_keyword_rows or 0))

    @property
    def consistent(self) -> bool:
        """The store is consistent now: nothing was out of step, or all of it was repaired."""
        return self.problems == 0 or self.repair

    def tenant(self, name: str) -> TenantHealth:
        """The health of one tenant (``KeyError`` if it was not examined)."""
        for t in self.tenants:
            if t.tenant == name:
                return t
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-safe dict (with ``problems`` and ``consistent``)."""
        out = asdict(self)
        out["tenants"] = [{**asdict(t), "problems": t.problems, "consistent": t.consistent}
                          for t in self.tenants]
        return {**out, "problems": self.problems, "consistent": self.consistent}


@dataclass
class _Findings:
    """The id sets one tenant's comparison reads."""

    tenant: str
    known: bool  # the side-store has the tenant
    rows: set[str]  # its memory rows, in any state
    committed: set[str]
    active: int
    chroma: set[str]
    side: set[str]
    postings: dict[str, int] | None
    missing: set[str] = field(init=False)
    orphans: set[str] = field(init=False)
    side_missing: set[str] = field(init=False)
    keyword_off: set[str] | None = field(init=False)

    def __post_init__(self) -> None:
        self.missing = self.committed - self.chroma
        self.orphans = self.chroma - self.rows
        self.side_missing = self.committed - self.side
        p = self.postings
        self.keyword_off = None if p is None else {
            i for i in self.committed if p.get(i, 0) != 1}

    def health(self, **repairs: Any) -> TenantHealth:
        p = self.postings
        return TenantHealth(
            tenant=self.tenant, memories=len(self.committed), active=self.active,
            chroma_vectors=len(self.chroma), side_vectors=len(self.side & self.committed),
            keyword_rows=None if p is None else sum(p.get(i, 0) for i in self.committed),
            missing=len(self.missing), orphans=len(self.orphans),
            side_missing=len(self.side_missing),
            keyword_off=None if self.keyword_off is None else len(self.keyword_off),
            **repairs)


def _chroma(rt: Runtime, tenant: str) -> Any:
    """The tenant's Chroma collection if it exists (whatever the side-store says)."""
    return rt.vectors.collection(tenant, model=rt.embedder.name, dimension=0, create=False)


def _examine(rt: Runtime, tenant: str, known: bool, postings: dict[str, int] | None
             ) -> _Findings:
    rt.vectors.drop_cached(tenant)  # a fresh handle: the collection may have been removed
    col = _chroma(rt, tenant)
    # Other processes may be writing (server mode). Chroma is read first, then the side-
    # store in one snapshot: an add writes its row before its vector and a delete removes
    # its vector before its row, so a vector read here whose row is not in the snapshot is
    # either an orphan or a delete that finished in between, which the second look below
    # tells apart (its vector is gone by then).
    chroma = set(rt.vectors.all_ids(col)) if col is not None else set()
    with rt.sql.snapshot() as conn:
        rows = rt.sql.tenant_memories(conn, tenant)
        side = rt.sql.side_vector_ids(conn, tenant)
    found = _Findings(
        tenant=tenant, known=known, rows={r.id for r in rows},
        committed={r.id for r in rows if r.status == "committed"},
        active=sum(1 for r in rows if r.status == "committed" and r.deleted_at is None),
        chroma=chroma, side=side, postings=postings)
    if found.orphans and col is not None:
        still = rt.vectors.existing(col, sorted(found.orphans))
        with rt.reading() as conn:
            known_now = set(rt.sql.existing_ids(conn, sorted(still)))
        found.chroma -= found.orphans - still
        found.rows |= known_now
        found.orphans = still - known_now
    return found


def _rebuild(rt: Runtime, tenant: str, ids: Sequence[str]) -> tuple[int, int]:
    """Write the vectors of ``ids`` back to Chroma: the side-store's copy, or the memory's
    text embedded again (kept in the side-store too); returns (rebuilt, re-embedded)."""
    col = rt.collection(tenant, create=True)
    dim = rt.embedder.dimension
    rebuilt = reembedded = 0
    for chunk in chunks(list(ids), REBUILD_BATCH):
        with rt.reading() as conn:
            rows = rt.sql.rows(conn, tenant, chunk)
            stored = rt.sql.vectors_get(conn, chunk)
        order = [i for i in chunk if i in rows]
        vecs = {i: np.frombuffer(stored[i], dtype="<f4") for i in order if i in stored}
        todo = [i for i in order if i not in vecs or vecs[i].shape[0] != dim]
        if todo:
            fresh = rt.embedder.embed_documents([row_embed_text(rows[i]) for i in todo])
            vecs.update(zip(todo, np.asarray(fresh, dtype=np.float32), strict=True))
            with rt.writing() as conn:
                rt.sql.vectors_put(conn, [(i, vecs[i]) for i in todo], replace=True)
        if order:
            rt.vectors.upsert(col, order, np.stack([vecs[i] for i in order]).astype(np.float32),
                              [row_embed_text(rows[i]) for i in order],
                              [{"kind": rows[i].kind} for i in order])
            # a memory deleted by another process meanwhile must not get its vector back
            with rt.reading() as conn:
                now_committed = {i for i, st in rt.sql.statuses(conn, order).items()
                                 if st == "committed"}
            if len(now_committed) < len(order):
                rt.vectors.delete(col, [i for i in order if i not in now_committed])
        rebuilt += len(order) - len(todo)
        reembedded += len(todo)
    rt.known_tenants.add(tenant)
    return rebuilt, reembedded


def _restore_side(rt: Runtime, tenant: str, ids: Sequence[str]) -> int:
    """Copy the Chroma vectors of ``ids`` into the side-store."""
    col = _chroma(rt, tenant)
    restored = 0
    for chunk in chunks(list(ids), REBUILD_BATCH):
        got = rt.vectors.get_vectors(col, chunk)
        with rt.writing() as conn:
            rt.sql.vectors_put(conn, list(got.items()), replace=True)
        restored += len(got)
    return restored


def _reindex(rt: Runtime, tenant: str, ids: Sequence[str]) -> int:
    """Index ``ids`` again in the keyword index (their old rows, if any, removed first)."""
    done = 0
    for chunk in chunks(list(ids), REBUILD_BATCH):
        with rt.writing() as conn:
            rows = rt.sql.rows(conn, tenant, chunk)
            rt.sql.fts_delete(conn, chunk)
            rt.sql.fts_insert(conn, [(i, tenant, row_embed_text(rows[i]))
                                     for i in chunk if i in rows])
        done += len(chunk)
    return done


def _repair_tenant(rt: Runtime, f: _Findings, *, at_open: bool) -> TenantHealth:
    rebuilt, reembedded = _rebuild(rt, f.tenant, sorted(f.missing)) if f.missing else (0, 0)
    if f.orphans and not f.rows and not f.known:
        rt.vectors.delete_collection(f.tenant)  # a tenant the side-store never heard of
    elif f.orphans:
        col = _chroma(rt, f.tenant)
        for chunk in chunks(sorted(f.orphans), REBUILD_BATCH):
            rt.vectors.delete(col, chunk)
    # a memory missing from both stores was embedded again and kept in both by _rebuild
    restored = _restore_side(rt, f.tenant, sorted(f.side_missing - f.missing))
    reindexed = _reindex(rt, f.tenant, sorted(f.keyword_off)) if f.keyword_off else 0
    rt.forget_indexes(f.tenant)
    health = f.health(repaired=True, rebuilt=rebuilt, reembedded=reembedded,
                      orphans_removed=len(f.orphans), side_restored=restored,
                      keyword_reindexed=reindexed)
    # at open nobody else hears of it; doctor(repair=True) returns the report as well
    log.log(logging.WARNING if at_open else logging.INFO,
            "%s tenant %s: %d memories; Chroma held %d vectors (%d missing: %d rebuilt from "
            "the side-store, %d embedded again; %d orphans removed); %d side-store vectors "
            "restored; %d keyword-index entries rebuilt",
            "opening the store repaired" if at_open else "doctor repaired", f.tenant,
            health.memories, health.chroma_vectors, health.missing, rebuilt, reembedded,
            health.orphans, restored, reindexed)
    return health


def _orphan_message(rt: Runtime, found: Sequence[_Findings]) -> str:
    where = ", ".join(f"tenant {f.tenant!r}: {len(f.orphans)} of {len(f.chroma)}"
                      for f in found if f.orphans)
    folder = f" --path {rt.path}" if rt.path is not None else ""
    return (
        f"Chroma holds vectors of memories the side-store ({rt.sql.where}) does not know "
        f"({where}). The side-store may have been deleted, replaced or restored from an older "
        "copy: if so, put the right one back. Otherwise `mnemonia doctor"
        f"{folder}` shows the details and `mnemonia doctor --repair{folder}` deletes those "
        "vectors (in code: MemoryEngine.open(..., verify=False).doctor(repair=True)). Nothing "
        "was changed.")


def doctor(rt: Runtime, *, repair: bool, tenants: Sequence[str] | None = None,
           keyword: bool = True, at_open: bool = False) -> DoctorReport:
    """Compare, per tenant, the side-store's memories with the Chroma collection's ids, the
    side-store's vectors and the keyword index (all of it, or ``tenants`` and the index only
    when ``keyword``); with ``repair``, rebuild what Chroma or the indexes lack and delete
    what Chroma holds of no memory. ``at_open`` (:func:`verify`): raise
    :class:`StoreInconsistentError` instead of touching a store where Chroma holds vectors
    the side-store does not know (the side-store may be the wrong file), and log repairs as
    warnings."""
    with rt.exclusive():
        with rt.reading() as conn:
            known = set(rt.sql.tenants(conn))
            postings = rt.sql.keyword_postings(conn) if keyword else None
            stray_kw = rt.sql.stray_keyword_ids(conn) if postings is not None else None
            stray_vec = rt.sql.stray_vector_ids(conn) if tenants is None else []
        names = sorted(known | set(rt.vectors.tenants())) if tenants is None else list(tenants)
        found = [_examine(rt, t, t in known, postings) for t in names]
        if at_open and any(f.orphans for f in found):
            raise StoreInconsistentError(_orphan_message(rt, found))
        if repair:
            healths = [_repair_tenant(rt, f, at_open=at_open) if f.health().problems
                       else f.health() for f in found]
            with rt.writing() as conn:
                rt.sql.vectors_delete(conn, stray_vec)
                if stray_kw:
                    rt.sql.fts_delete(conn, stray_kw)
                if stray_kw or any(h.keyword_reindexed for h in healths):
                    rt.sql.recount_keyword_terms(conn)
        else:
            healths = [f.health() for f in found]
    index = ("n/a: PostgreSQL full-text search reads a generated column of memories"
             if rt.sql.dialect == "postgresql" else
             "sqlite fts5 (memories_kw)" if rt.sql.dialect == "sqlite" else "none")
    if rt.sql.dialect == "sqlite" and postings is None:
        index += ", not checked (its row count matched)"
    return DoctorReport(tenants=tuple(healths), keyword_index=index,
                        stray_side_vectors=len(stray_vec),
                        stray_keyword_rows=None if stray_kw is None else len(stray_kw),
                        repair=repair)


def verify(rt: Runtime) -> DoctorReport | None:
    """The check at open, cheap when all is well: per tenant, the side-store's memory count
    against the Chroma collection's, and the keyword index's row count against all memories.
    Where a count differs, the ids are compared (:func:`doctor`): vectors Chroma lost are
    rebuilt (from the side-store, or embedded again) and the keyword index is rebuilt,
    logged with counts; vectors Chroma holds of no memory stop the open with
    :class:`StoreInconsistentError` and nothing changed. Returns the repair report, or
    ``None`` when the counts agreed."""
    with rt.reading() as conn:
        counts = rt.sql.row_counts(conn)  # after repair(): every row is committed
        known = rt.sql.tenants(conn)
        kw_rows = rt.sql.keyword_count(conn)
    off = []
    for t in sorted(set(known) | set(rt.vectors.tenants())):
        col = _chroma(rt, t)
        if (0 if col is None else rt.vectors.count(col)) != counts.get(t, 0):
            off.append(t)
    keyword_off = kw_rows is not None and kw_rows != sum(counts.values())
    if not off and not keyword_off:
        return None
    tenants = sorted(set(off) | (set(known) if keyword_off else set()))
    return doctor(rt, repair=True, tenants=tenants, keyword=keyword_off, at_open=True)


def open_store(rt: Runtime, *, verify_stores: bool) -> Runtime:
    """What opening a store runs: the embedding-model check, the repair of half-done
    writes, and (``verify_stores``) :func:`verify`. The runtime is closed if any fails."""
    try:
        check_models(rt)
        repair(rt)
        if verify_stores:
            verify(rt)
    except BaseException:
        rt.close()
        raise
    return rt




class _Out:
    """The export file: one JSON line per record, counted by type."""

    def __init__(self, fh: TextIO, total: int, on_progress: Progress | None) -> None:
        self.fh = fh
        self.total = total
        self.on_progress = on_progress
        self.counts = {"memories": 0, "relations": 0, "events": 0, "accesses": 0}

    def put(self, rec: Mapping[str, Any], count: str | None = None) -> None:
        try:
            line = json.dumps(rec, ensure_ascii=False, allow_nan=False)
        except ValueError as e:  # a NaN or infinity stored somewhere: refuse, do not corrupt
            raise StoreError(f"cannot export {rec.get('type')} record {rec.get('id', '')!r}:"
                             f" {e}") from e
        try:
            self.fh.write(line + "\n")
        except UnicodeEncodeError:  # a lone surrogate in metadata: keep it escaped
            self.fh.write(json.dumps(rec, allow_nan=False) + "\n")
        if count is not None:
            self.counts[count] += 1

    def progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress("export", self.counts["memories"], self.total)


def _memory_record(r: Any, links: list[str], vector: bytes | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": "memory"}
    for name in MEMORY_FIELDS:
        rec[name] = getattr(r, name)
    rec["entities"] = json.loads(r.entities)
    rec["metadata"] = json.loads(r.metadata)
    rec["pinned"] = bool(r.pinned)
    rec["links"] = links
    if vector is not None:
        rec["vector"] = base64.b64encode(vector).decode("ascii")
    return rec


def _side_record(kind: str, r: Any) -> dict[str, Any]:
    if kind == "relations":
        return {"type": "relation", "tenant": r.tenant, "src": r.src, "dst": r.dst,
                "rel_type": r.type, "strength": r.strength, "created_at": r.created_at}
    if kind == "events":
        return {"type": "event", "tenant": r.tenant, "memory_id": r.memory_id,
                "event": r.event, "at": r.at,
                "before": None if r.before is None else json.loads(r.before),
                "after": None if r.after is None else json.loads(r.after)}
    return {"type": "access", "tenant": r.tenant, "memory_id": r.memory_id, "rank": r.rank,
            "k": r.k, "score": r.score, "user_id": r.user_id, "at": r.at}


def _vector_bytes(rt: Runtime, conn: Any, col: Any, ids: Sequence[str]) -> dict[str, bytes]:
    """The stored float32 bytes of each of ``ids`` (side-store first, then Chroma)."""
    out = rt.sql.vectors_get(conn, ids)
    missing = [i for i in ids if i not in out]
    if missing and col is not None:
        out.update((i, np.asarray(v, dtype="<f4").tobytes())
                   for i, v in rt.vectors.get_vectors(col, missing).items())
    lost = [i for i in ids if i not in out]
    if lost:
        raise StoreError(f"memories {lost[:5]} have no vector in either store; run the export "
                         "without with_vectors (the texts are embedded again on import)")
    return out


def _export_tenant(rt: Runtime, conn: Any, out: _Out, tenant: str, with_vectors: bool) -> None:
    coll = rt.sql.collection_row(conn, tenant)
    if coll is None:
        return
    out.put({"type": "tenant", "tenant": tenant, "embedding_model": coll.embedding_model,
             "dimension": coll.dimension, "created_at": coll.created_at,
             "next_seq": coll.next_seq})
    col = rt.collection(tenant, create=False) if with_vectors else None
    after: tuple[int, str] | None = None
    while rows := rt.sql.memory_page(conn, tenant, after, BATCH):
        ids = [r.id for r in rows]
        links = rt.sql.entity_links(conn, ids)
        vectors = _vector_bytes(rt, conn, col, ids) if with_vectors else {}
        for r in rows:
            out.put(_memory_record(r, links.get(r.id, []), vectors.get(r.id)), "memories")
        out.progress()
        after = (rows[-1].seq, rows[-1].id)
    for kind, count in (("relations", "relations"), ("events", "events"),
                        ("access", "accesses")):
        for r in rt.sql.stream_tenant(conn, kind, tenant):
            out.put(_side_record(kind, r), count)


def export(rt: Runtime, path: str | os.PathLike[str], tenant: str | None = None, *,
           with_vectors: bool = False, on_progress: Progress | None = None) -> int:
    """Write ``tenant``'s memories (every tenant's for ``None``) as JSONL format 2 and return
    how many. The store is read in one snapshot (a consistent copy, while writers go on); the
    file is written beside ``path`` and moved over it at the end, so a failed export never
    leaves a partial file (nor destroys an older one)."""
    rt.check_open()
    names = [check.tenant(tenant)] if tenant is not None else None
    with_vectors = check.boolean(with_vectors, "with_vectors")
    target = _export_target(path)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        fh = open(part, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as e:
        raise InvalidInputError(f"cannot write the export to {str(target)!r}: "
                                f"{e.strerror or e}") from e
    try:
        with fh, rt.sql.snapshot() as conn:
            names = names if names is not None else rt.sql.tenants(conn)
            out = _Out(fh, rt.sql.memory_count(conn, names), on_progress)
            out.put({"type": "header", "format": FORMAT, "embedding_model": rt.embedder.name,
                     "dimension": rt.embedder.dimension, "exported_at": to_ts(rt.now()),
                     "with_vectors": with_vectors, "tenants": names})
            out.progress()
            for t in names:
                _export_tenant(rt, conn, out, t, with_vectors)
            out.put({"type": "end", **out.counts})
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(part, target)
    except OSError as e:
        raise StoreError(f"writing the export to {str(target)!r} failed: "
                         f"{e.strerror or e}") from e
    finally:
        part.unlink(missing_ok=True)
    return out.counts["memories"]


# ---------------------------------------------------------------------------------------------
# import: reading and checking records
# ---------------------------------------------------------------------------------------------
class _Bad(Exception):
    """A field value that is not allowed (turned into an InvalidImportFileError)."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _Bad("must be a finite number")
    return float(v)


def _time(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _Bad("must be a time in seconds since the epoch (a finite number)")
    return float(v)


def _opt(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else fn(v)


def _count(least: int = 0, most: int | None = None) -> Callable[[Any], int]:
    def fn(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < least or (
                most is not None and v > most):
            raise _Bad(f"must be an integer >= {least}" + ("" if most is None
                                                             else f" and <= {most}"))
        return v
    return fn


def _at_least(low: float, *, strict: bool = False) -> Callable[[Any], float]:
    def fn(v: Any) -> float:
        x = _number(v)
        if x < low or (strict and x == low):
            raise _Bad(f"must be a finite number {'>' if strict else '>='} {low}")
        return x
    return fn


def _unit(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
        raise _Bad("must be a finite number in [0, 1]")
    return float(v)


def _string(most: int) -> Callable[[Any], str]:
    def fn(v: Any) -> str:
        if not isinstance(v, str) or not v or len(v) > most:
            raise _Bad(f"must be a string of 1-{most} characters")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise _Bad("must be valid Unicode text (it has a lone surrogate)") from e
        return v
    return fn


def _choice(options: Sequence[str]) -> Callable[[Any], str]:
    def fn(v: Any) -> str:
        if v not in options:
            raise _Bad(f"must be one of {', '.join(options)}")
        return str(v)
    return fn


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad("must be true or false")
    return v


def _ident(v: Any) -> str:
    if not isinstance(v, str) or not check.ID_PATTERN.match(v):
        raise _Bad("must be a memory id: 1-64 letters, digits, '_', '.', ':' or '-'")
    return v


def _tenant(v: Any) -> str:
    if not isinstance(v, str) or not TENANT_PATTERN.match(v):
        raise _Bad("must be a tenant name: 1-64 letters, digits, '_' or '-'")
    return v


def _entity_list(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(
            isinstance(e, str) and ":" in e and len(e) <= 256 for e in v):
        raise _Bad("must be a list of 'type:name' strings")
    return [_string(256)(e) for e in v]


def _tenant_list(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise _Bad("must be a list of tenant names")
    return [_tenant(t) for t in v]


def _json_object(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _Bad("must be a JSON object")
    try:
        return check.json_safe(v)
    except InvalidInputError as e:
        raise _Bad(str(e)) from e


Spec = Mapping[str, Callable[[Any], Any]]

_MEMORY: Spec = {
    "id": _ident, "tenant": _tenant, "seq": _count(), "text": _string(10**9),
    "kind": _choice(KINDS), "topic": _opt(_string(128)), "entities": _entity_list,
    "importance": _unit, "created_at": _time, "accessed_at": _time, "access_count": _count(),
    "stability": _at_least(0.0, strict=True), "easiness": _number, "interval_days": _count(),
    "repetitions": _count(), "next_review": _opt(_time), "last_quality": _count(0, 5),
    "utility": _number, "state": _choice(STATES), "pinned": _flag, "deleted_at": _opt(_time),
    "superseded_by": _opt(_ident), "consolidated_into": _opt(_ident),
    "session_id": _opt(_string(256)), "metadata": _json_object,
    "embedding_model": _string(256), "enriched_at": _opt(_time),
    "last_reviewed_at": _opt(_time), "last_reevaluated_at": _opt(_time),
    "heat_counter": _at_least(0.0), "heat_at": _opt(_time), "links": _entity_list,
}
_SPECS: dict[str, Spec] = {
    "header": {"format": _count(1), "embedding_model": _string(256), "dimension": _count(1),
               "exported_at": _opt(_time), "with_vectors": _flag,
               "tenants": _tenant_list},
    "tenant": {"tenant": _tenant, "embedding_model": _string(256), "dimension": _count(1),
               "created_at": _time, "next_seq": _count()},
    "memory": _MEMORY,
    "relation": {"tenant": _tenant, "src": _ident, "dst": _ident, "rel_type": _string(48),
                 "strength": _number, "created_at": _time},
    "event": {"tenant": _tenant, "memory_id": _ident, "event": _string(32), "at": _time,
              "before": _opt(_json_object), "after": _opt(_json_object)},
    "access": {"tenant": _tenant, "memory_id": _ident, "rank": _count(1), "k": _count(1),
               "score": _number, "user_id": _opt(_string(256)), "at": _time},
    "end": {"memories": _count(), "relations": _count(), "events": _count(),
            "accesses": _count()},
}
_OPTIONAL: dict[str, set[str]] = {
    "header": {"format", "exported_at", "with_vectors", "tenants"}, "memory": {"vector"},
}
_V1_MEMORY = ("id", "tenant", "text", "kind", "topic", "entities", "importance", "created_at",
              "accessed_at", "access_count", "stability", "sm2", "utility", "state", "pinned",
              "deleted_at", "superseded_by", "consolidated_into", "session_id", "metadata",
              "embedding_model")
_V1_SM2 = ("easiness", "interval_days", "repetitions", "next_review", "last_quality")


def _fields(n: int, kind: str, rec: Mapping[str, Any], spec: Spec,
            optional: Collection[str] = ()) -> dict[str, Any]:
    """The checked fields of one record (``type`` left out), or InvalidImportFileError."""
    missing = [k for k in spec if k not in rec and k not in optional]
    if missing:
        raise InvalidImportFileError(
            f"{kind} record misses field(s) {', '.join(map(repr, missing))}", line=n)
    unknown = sorted(set(rec) - set(spec) - set(optional) - {"type"})
    if unknown:
        raise InvalidImportFileError(
            f"{kind} record has unknown field(s) {', '.join(map(repr, unknown))}; a format-2 "
            f"{kind} record has {', '.join(sorted(set(spec) | set(optional)))}", line=n)
    out: dict[str, Any] = {}
    for name, value in rec.items():
        if name == "type":
            continue
        try:
            out[name] = spec[name](value) if name in spec else value
        except (_Bad, TypeError) as e:
            raise InvalidImportFileError(
                f"{kind} record: field {name!r} = {_short(value)} {e}", line=n) from e
    return out


def _iso(n: int, name: str, value: Any) -> float | None:
    """A format-1 ISO time (or null) as epoch seconds."""
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except (TypeError, ValueError) as e:
        raise InvalidImportFileError(
            f"memory record: field {name!r} = {_short(value)} must be an ISO 8601 time with "
            "a timezone", line=n) from e
    if dt.tzinfo is None:
        raise InvalidImportFileError(
            f"memory record: field {name!r} = {_short(value)} has no timezone", line=n)
    return to_ts(dt)


def _from_v1(n: int, rec: Mapping[str, Any], seq: int, dimension: int) -> dict[str, Any]:
    """A format-1 memory line as a format-2 record: what format 1 did not keep gets the value
    a fresh store would have (not enriched unless ``immediate``, no heat, never reviewed)."""
    missing = [k for k in (*_V1_MEMORY, "embedding") if k not in rec]
    if missing:
        raise InvalidImportFileError(
            f"memory record misses field(s) {', '.join(map(repr, missing))}", line=n)
    sm2 = rec["sm2"]
    if not isinstance(sm2, dict) or any(k not in sm2 for k in _V1_SM2):
        raise InvalidImportFileError(
            f"memory record: field 'sm2' must be an object with {', '.join(_V1_SM2)}", line=n)
    out = {k: rec[k] for k in _V1_MEMORY if k != "sm2"}
    out.update({k: sm2[k] for k in _V1_SM2})
    for name in ("created_at", "accessed_at", "deleted_at"):
        out[name] = _iso(n, name, rec[name])
    out["next_review"] = _iso(n, "sm2.next_review", sm2["next_review"])
    out.update(type="memory", seq=seq, links=rec["entities"], last_reviewed_at=None,
               last_reevaluated_at=None, heat_counter=0.0, heat_at=None,
               enriched_at=out["created_at"] if rec["state"] == IMMEDIATE else None)
    vector = rec["embedding"]
    if vector is not None:
        try:
            arr = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise InvalidImportFileError("memory record: field 'embedding' must be a list of "
                                         "numbers", line=n) from e
        if arr.shape != (dimension,) or not np.all(np.isfinite(arr)):
            raise InvalidImportFileError(
                f"memory record: field 'embedding' must be {dimension} finite numbers",
                line=n)
        norm = float(np.linalg.norm(arr))
        out["vector"] = (arr / norm if norm else arr).astype("<f4").tobytes()
    return out


def _decode_vector(n: int, value: Any, dimension: int) -> bytes:
    try:
        raw = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 4 * dimension or not np.all(np.isfinite(np.frombuffer(raw, "<f4"))):
        raise InvalidImportFileError(
            f"memory record: field 'vector' must be the base64 of {dimension} finite float32 "
            "numbers (little-endian)", line=n)
    return raw


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
    spec = _SPECS["header"] if version == 2 else {k: _SPECS["header"][k] for k in (
        "embedding_model", "dimension")}
    head = _fields(n, "header", rec, spec, _OPTIONAL["header"] if version == 2 else {"format"})
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
    allowed = ("memory", "relation") if plan.version == 1 else tuple(_SPECS)[1:]
    if kind not in allowed:
        what = "no 'type' field" if kind is None else f"unknown record type {kind!r}"
        raise InvalidImportFileError(f"{what}; a format-{plan.version} file has "
                                     f"{', '.join(allowed)} records", line=n)
    if plan.version == 1 and kind == "memory":
        tenant = rec.get("tenant")
        name = tenant if isinstance(tenant, str) else ""
        rec = _from_v1(n, rec, v1_seq[name], plan.dimension)
        v1_seq[name] += 1
    elif plan.version == 1:
        rec = {**rec, "created_at": to_ts(rt.now())}
    out = _fields(n, str(kind), rec, _SPECS[str(kind)], _OPTIONAL.get(str(kind), set()))
    try:
        if kind == "memory":
            check.text(out["text"], max_chars=rt.config.max_text_chars)
            if "vector" in out and plan.version == 2:
                out["vector"] = _decode_vector(n, out["vector"], plan.dimension)
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
    owners = rt.sql.owners(conn, ids)
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
    found = rt.sql.columns_of(conn, sorted({r[3] for r in refs}), ["tenant"], committed=True)
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
        rt.sql.insert_memories(conn, rows)
        rt.sql.vectors_put(conn, list(zip(ids, vectors, strict=True)))
        rt.sql.fts_insert(conn, [(sid, m["tenant"], text)
                                 for sid, m, text in zip(ids, batch, texts, strict=True)])
        rt.sql.link_entities(conn, [dict(tenant=m["tenant"], entity=e, memory_id=sid)
                                    for sid, m in zip(ids, batch, strict=True)
                                    for e in dict.fromkeys(m["links"])])
        if plan.version == 1:  # format 1 kept no audit trail: the creation, as ingest writes
            rt.sql.insert_events(conn, [rt.sql.event_row(
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
        base = {t: 0 if (row := rt.sql.collection_row(conn, t)) is None else row.next_seq
                for t in plan.tenants}
    total, done = plan.writes, 0
    memories: list[dict[str, Any]] = []
    side: dict[str, list[dict[str, Any]]] = {"event": [], "access": []}
    v1_seq: Counter[str] = Counter()

    def flush(final: bool = False) -> None:
        nonlocal done
        if memories and (final or len(memories) >= BATCH):
            _stage_memories(rt, plan, memories, base)
            done += len(memories)
            memories.clear()
            if on_progress is not None:
                on_progress("write", done, total)
        if any(side.values()) and (final or sum(map(len, side.values())) >= 500):
            with rt.sql.begin() as conn:
                rt.sql.insert_events(conn, side["event"])
                rt.sql.insert_access(conn, side["access"])
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
    with rt.sql.begin() as conn:
        for chunk in chunks(pairs):
            rt.sql.swap_staged(conn, chunk)
        batch: list[dict[str, Any]] = []
        for row in _relation_rows(rt, source, plan):
            batch.append(row)
            if len(batch) >= 500:
                rt.sql.put_relations(conn, batch, overwrite=plan.on_conflict == "replace")
                batch.clear()
        rt.sql.put_relations(conn, batch, overwrite=plan.on_conflict == "replace")
        for tenant, _, action in plan.ids.values():
            if action == "new":
                plan.tenants[tenant].new += 1
        for tenant, t in plan.tenants.items():
            row = rt.sql.collection_row(conn, tenant)
            if t.new or row is None:  # a tenant with no memory left is a tenant too
                rt.sql.put_collection(
                    conn, tenant, model=rt.embedder.name, dimension=rt.embedder.dimension,
                    created_at=t.created_at if t.created_at is not None else now,
                    next_seq=(0 if row is None else row.next_seq) + t.next_seq)
        rt.sql.commit_staged(conn, plan.status)
        replaced = [mid for _, mid in pairs]
        rt.sql.kv_delete(conn, [JOURNAL + plan.iid])
        if replaced:
            rt.sql.kv_set(conn, JOURNAL + plan.iid, {"state": "committed", "writer": rt.writer})
            for i, chunk in enumerate(chunks(replaced, 1000)):
                rt.sql.kv_set(conn, f"{JOURNAL}{plan.iid}:r{i:06d}", list(chunk))
    return replaced


def _sync_vectors(rt: Runtime, ids: Sequence[str]) -> None:
    """Write the stored vector and text of ``ids`` (committed memories) to Chroma."""
    for chunk in chunks(list(ids)):
        with rt.reading() as conn:
            rows = rt.sql.full_rows(conn, list(chunk))
            vecs = rt.sql.vectors_get(conn, list(chunk))
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
        rows = rt.sql.staged(conn, status)
    by_tenant: dict[str, list[str]] = {}
    for r in rows:
        by_tenant.setdefault(r.tenant, []).append(r.id)
    for tenant, ids in by_tenant.items():
        col = rt.vectors.collection(tenant, model=rt.embedder.name, dimension=0, create=False)
        if col is not None:
            rt.vectors.delete(col, [i for i in ids if not i.startswith("#")])
    with rt.sql.begin() as conn:
        for tenant, ids in by_tenant.items():
            rt.sql.purge(conn, tenant, ids)
        rt.sql.kv_delete(conn, [k for k, _ in rt.sql.kv_items(conn, JOURNAL + status[2:])])
        unknown = [t for t in by_tenant if rt.sql.collection_row(conn, t) is None]
    for tenant in by_tenant:
        rt.forget_indexes(tenant)
    for tenant in unknown:  # the import made this collection: nothing else is in it
        col = rt.vectors.collection(tenant, model=rt.embedder.name, dimension=0, create=False)
        if col is not None and rt.vectors.count(col) == 0:
            rt.vectors.delete_collection(tenant)
    return len(rows)


def repair_imports(rt: Runtime) -> None:
    """Undo, whole, every import a crash stopped before its commit; finish (the Chroma side of
    the replaced memories) every one stopped after it."""
    with rt.reading() as conn:
        journal = rt.sql.kv_items(conn, JOURNAL)
        staged = {r.status for r in rt.sql.staged(conn)}
        live = rt.sql.live_writers(conn, now=time.time())
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
                rt.sql.kv_delete(conn, keys)
            log.warning("finished the import %s: %d replaced vectors written", iid, len(ids))


def _term_vectors(rt: Runtime, tenant: str) -> None:
    """Word vectors for the words of the tenant's enriched memories (recall's keyword
    expansion; a cache, not part of the file): after the import, outside its transaction.
    Enrichment stores them (ingest), so a memory it has not run on yet gets them when it
    does, as in the store the file came from: the imported store recalls like that one."""
    with rt.writing() as conn:
        ids = [r[0] for r in rt.sql.active_rows(conn, tenant, ["id"], enriched=True)]
        for part in chunks(ids):
            rows = rt.sql.rows(conn, tenant, list(part))
            store_term_vectors(rt, conn, [row_embed_text(r) for r in rows.values()])


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
                rt.sql.kv_set(conn, JOURNAL + plan.iid, {
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
            rt.forget_indexes(tenant)
            rt.collection(tenant, create=True)  # a tenant without memories has one too
            _term_vectors(rt, tenant)
        if replaced:
            _sync_vectors(rt, replaced)
            with rt.sql.begin() as conn:
                rt.sql.kv_delete(conn, [k for k, _ in rt.sql.kv_items(conn,
                                                                      JOURNAL + plan.iid)])
        if on_progress is not None:
            on_progress("commit", 1, 1)
    return plan.writes
