"""Keeping a store's two halves in agreement: the embedding-model check at open, the repair
of writes a crash left half-done (DESIGN section 3), and the comparison of Chroma with the
side-store (``doctor``, and the cheap ``verify`` at open).

At open, Chroma and the side-store are compared per tenant (counts first), rebuilt where
Chroma lost vectors, and reported (``doctor``) or refused where Chroma holds vectors the
side-store does not know. Repair takes only abandoned writes: those of processes whose writer
lease ran out, never a live process's write under way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mnemonia.caches import Changes
from mnemonia.clock import to_ts
from mnemonia.errors import (
    EmbeddingModelMismatchError,
    MnemoniaError,
    StoreInconsistentError,
)
from mnemonia.runtime import Runtime
from mnemonia.store.statements import chunks
from mnemonia.transfer.imports import repair_imports
from mnemonia.validation import row_embed_text

__all__ = ["DoctorReport", "TenantHealth", "check_models", "close_store", "doctor", "open_store",
           "repair", "verify"]

log = logging.getLogger("mnemonia")

def check_models(rt: Runtime) -> None:
    """Refuse a store whose tenants were embedded with another model than ``rt.embedder``."""
    with rt.reading() as conn:
        rows = rt.sql.collections.collections(conn)
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
    # Writer leases exist only where other processes may open the store (an engine holds
    # one there); an embedded store's folder lock already says no other writer lives.
    shared = rt.lease is not None and not mine
    now = time.time()
    with rt.reading() as conn:
        rows = rt.sql.memories.unfinished(conn)
        live = rt.sql.kv.live_writers(conn, now=now) if shared else set()
    if mine:
        rows = [r for r in rows if r.writer == rt.writer]
    else:
        rows = [r for r in rows if r.writer is None or r.writer not in live]
    if shared:
        with rt.sql.begin() as conn:  # the leases of processes that are gone
            rt.sql.kv.drop_expired_writers(conn, now=now)
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
            finished = rt.sql.memories.mark_committed(conn, finish) if finish else 0
            # compare-and-set: a row its writer committed meanwhile stays committed
            claimed = rt.sql.memories.take_over(conn, undo, rt.writer,
                                                to_ts(rt.now())) if undo else []
        deleting = [i for i, st in items if st == "deleting"] + claimed
        if col is not None and deleting:
            rt.vectors.delete(col, deleting)
        with rt.changing(Changes.wholesale(tenant)), rt.sql.begin() as conn:
            gone = rt.sql.memories.purge_deleting(conn, tenant, deleting)
        log.info("repaired tenant %s: %d finished, %d undone, %d deletions completed",
                 tenant, finished, len(claimed), len(gone) - len(claimed))


def close_store(rt: Runtime) -> None:
    """Finish this engine's own writes that failed half-way and were not retried (best
    effort: a store that does not answer leaves them to the next open), then close."""
    if not rt.closed:
        try:
            repair(rt, mine=True)
        except MnemoniaError as e:
            rt.write_failed = True  # (no clean-close mark: the next open compares the stores)
            log.warning("closing: could not finish this engine's unfinished writes (%s); the "
                        "next open does", e)
    rt.close()


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
        rows = rt.sql.inspect.tenant_memories(conn, tenant)
        side = rt.sql.inspect.side_vector_ids(conn, tenant)
    found = _Findings(
        tenant=tenant, known=known, rows={r.id for r in rows},
        committed={r.id for r in rows if r.status == "committed"},
        active=sum(1 for r in rows if r.status == "committed" and r.deleted_at is None),
        chroma=chroma, side=side, postings=postings)
    if found.orphans and col is not None:
        still = rt.vectors.existing(col, sorted(found.orphans))
        with rt.reading() as conn:
            known_now = set(rt.sql.memories.existing_ids(conn, sorted(still)))
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
            rows = rt.sql.memories.rows(conn, tenant, chunk)
            stored = rt.sql.vectors.vectors_get(conn, chunk)
        order = [i for i in chunk if i in rows]
        vecs = {i: np.frombuffer(stored[i], dtype="<f4") for i in order if i in stored}
        todo = [i for i in order if i not in vecs or vecs[i].shape[0] != dim]
        if todo:
            fresh = rt.embedder.embed_documents([row_embed_text(rows[i]) for i in todo])
            vecs.update(zip(todo, np.asarray(fresh, dtype=np.float32), strict=True))
            with rt.writing() as conn:
                rt.sql.vectors.vectors_put(conn, [(i, vecs[i]) for i in todo], replace=True)
        if order:
            rt.vectors.upsert(col, order, np.stack([vecs[i] for i in order]).astype(np.float32),
                              [row_embed_text(rows[i]) for i in order],
                              [{"kind": rows[i].kind} for i in order])
            # a memory deleted by another process meanwhile must not get its vector back
            with rt.reading() as conn:
                now_committed = {i for i, st in rt.sql.memories.statuses(conn, order).items()
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
            rt.sql.vectors.vectors_put(conn, list(got.items()), replace=True)
        restored += len(got)
    return restored


def _reindex(rt: Runtime, tenant: str, ids: Sequence[str]) -> int:
    """Index ``ids`` again in the keyword index (their old rows, if any, removed first)."""
    done = 0
    for chunk in chunks(list(ids), REBUILD_BATCH):
        with rt.writing() as conn:
            rows = rt.sql.memories.rows(conn, tenant, chunk)
            rt.sql.keywords.fts_delete(conn, chunk)
            rt.sql.keywords.fts_insert(conn, [(i, tenant, row_embed_text(rows[i]))
                                              for i in chunk if i in rows])
        done += len(chunk)
    return done


def _repair_tenant(rt: Runtime, f: _Findings, *, at_open: bool) -> TenantHealth:
    with rt.changing(Changes.wholesale(f.tenant)):
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
            known = set(rt.sql.collections.tenants(conn))
            postings = rt.sql.inspect.keyword_postings(conn) if keyword else None
            stray_kw = rt.sql.inspect.stray_keyword_ids(conn) if postings is not None else None
            stray_vec = rt.sql.inspect.stray_vector_ids(conn) if tenants is None else []
        names = sorted(known | set(rt.vectors.tenants())) if tenants is None else list(tenants)
        found = [_examine(rt, t, t in known, postings) for t in names]
        if at_open and any(f.orphans for f in found):
            raise StoreInconsistentError(_orphan_message(rt, found))
        if repair:
            healths = [_repair_tenant(rt, f, at_open=at_open) if f.health().problems
                       else f.health() for f in found]
            with rt.writing() as conn:
                rt.sql.vectors.vectors_delete(conn, stray_vec)
                if stray_kw:
                    rt.sql.keywords.fts_delete(conn, stray_kw)
                if stray_kw or any(h.keyword_reindexed for h in healths) \
                        or not rt.sql.keywords.table:
                    # (PostgreSQL: its counts are not compared with anything here, and a
                    # process of an older version writes without keeping them: counted again)
                    rt.sql.keywords.recount_keyword_terms(conn)
        else:
            healths = [f.health() for f in found]
    index = rt.sql.keywords.description
    if rt.sql.keywords.table and postings is None:
        index += ", not checked (its row count matched)"
    report = DoctorReport(tenants=tuple(healths), keyword_index=index,
                          stray_side_vectors=len(stray_vec),
                          stray_keyword_rows=None if stray_kw is None else len(stray_kw),
                          repair=repair)
    if tenants is None and keyword and report.consistent:
        # every tenant and the index compared, and they agree now: as good as the open's
        # check for the clean-close mark (mnemonia.store.closing)
        rt.consistent = True
    return report


def verify(rt: Runtime) -> DoctorReport | None:
    """The check at open, cheap when all is well: per tenant, the side-store's memory count
    against the Chroma collection's, and the keyword index's row count against all memories.
    Where a count differs, the ids are compared (:func:`doctor`): vectors Chroma lost are
    rebuilt (from the side-store, or embedded again) and the keyword index is rebuilt,
    logged with counts; vectors Chroma holds of no memory stop the open with
    :class:`StoreInconsistentError` and nothing changed. Returns the repair report, or
    ``None`` when the counts agreed."""
    with rt.reading() as conn:
        counts = rt.sql.inspect.row_counts(conn)  # after repair(): every row is committed
        known = rt.sql.collections.tenants(conn)
        kw_rows = rt.sql.inspect.keyword_count(conn)
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
    writes, and (``verify_stores``) :func:`verify`, unless the store's last close vouched for
    both stores (:mod:`mnemonia.store.closing`: an embedded store closed cleanly, its files
    untouched since). The runtime is closed if any fails."""
    try:
        check_models(rt)
        repair(rt)
        if verify_stores and not rt.consistent:
            verify(rt)
            rt.consistent = True  # compared (and repaired where they differed)
    except BaseException:
        rt.close()
        raise
    return rt
