"""Export: every memory of a store (or a tenant) with all of its state, its relations, audit
trail and access log, streamed from one consistent snapshot as JSONL format 2
(:mod:`mnemonia.transfer.format`)."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from mnemonia import validation as check
from mnemonia.clock import to_ts
from mnemonia.errors import (
    InvalidInputError,
    StoreError,
)
from mnemonia.runtime import Runtime
from mnemonia.store.vectors import VectorCollection
from mnemonia.transfer import format as fmt
from mnemonia.transfer.format import FORMAT, Progress, memory_record, side_record

__all__ = ["export"]

log = logging.getLogger("mnemonia")

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


def _vector_bytes(rt: Runtime, conn: Any, col: VectorCollection | None, ids: Sequence[str]
                  ) -> dict[str, bytes]:
    """The stored float32 bytes of each of ``ids`` (side-store first, then Chroma)."""
    out = rt.sql.vectors.vectors_get(conn, ids)
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
    coll = rt.sql.collections.collection_row(conn, tenant)
    if coll is None:
        return
    out.put({"type": "tenant", "tenant": tenant, "embedding_model": coll.embedding_model,
             "dimension": coll.dimension, "created_at": coll.created_at,
             "next_seq": coll.next_seq})
    col = rt.collection(tenant, create=False) if with_vectors else None
    after: tuple[int, str] | None = None
    while rows := rt.sql.staging.memory_page(conn, tenant, after, fmt.BATCH):
        ids = [r.id for r in rows]
        links = rt.sql.graph.entity_links(conn, ids)
        vectors = _vector_bytes(rt, conn, col, ids) if with_vectors else {}
        for r in rows:
            out.put(memory_record(r, links.get(r.id, []), vectors.get(r.id)), "memories")
        out.progress()
        after = (rows[-1].seq, rows[-1].id)
    for kind, count in (("relations", "relations"), ("events", "events"),
                        ("access", "accesses")):
        for r in rt.sql.staging.stream_tenant(conn, kind, tenant):
            out.put(side_record(kind, r), count)


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
            names = names if names is not None else rt.sql.collections.tenants(conn)
            out = _Out(fh, rt.sql.staging.memory_count(conn, names), on_progress)
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
