"""Moving memories in and out of a store, and keeping its two halves in agreement: JSONL
export / import, the embedding-model check at open, and the repair of writes a crash left
half-done (DESIGN section 3).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia.errors import EmbeddingModelMismatchError
from mnemonia.models import Memory
from mnemonia.runtime import Runtime
from mnemonia.store.repository import chunks

__all__ = ["check_models", "export", "import_records", "read_export", "repair"]

log = logging.getLogger("mnemonia")

EXPORT_BATCH = 1000
"""Vectors read from Chroma per call while exporting."""


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


def repair(rt: Runtime) -> None:
    """Finish or undo writes a crash left half-done: a pending memory whose vector reached
    Chroma is committed, one whose vector did not is removed, a hard delete is completed."""
    with rt.reading() as conn:
        rows = rt.sql.unfinished(conn)
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
        deleting = [i for i, st in items if st == "deleting"]
        if col is not None and deleting:
            rt.vectors.delete(col, deleting)
        with rt.sql.begin() as conn:
            if finish:
                rt.sql.mark_committed(conn, finish)
            rt.sql.purge(conn, tenant, undo + deleting)
            if undo + deleting:
                rt.forget_entities(tenant)
        log.info("repaired tenant %s: %d finished, %d undone, %d deletions completed",
                 tenant, len(finish), len(undo), len(deleting))


def export(rt: Runtime, path: str | os.PathLike[str], tenants: Sequence[str],
           memories_of: Callable[[str], list[Memory]]) -> int:
    """Write the memories (``memories_of(tenant)``, deleted ones too) and relations of
    ``tenants`` as JSONL with embeddings, model and dimension; returns the memory count."""
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "header", "embedding_model": rt.embedder.name,
                             "dimension": rt.embedder.dimension}) + "\n")
        for t in tenants:
            mems = memories_of(t)
            col = rt.collection(t, create=False)
            vecs: dict[str, np.ndarray] = {}
            for chunk in chunks([m.id for m in mems], EXPORT_BATCH):
                vecs.update(rt.vectors.get_vectors(col, chunk))
            for m in mems:
                rec = {"type": "memory", **m.to_dict(),
                       "embedding": [round(float(x), 7) for x in vecs[m.id]]}
                fh.write(json.dumps(rec) + "\n")
                count += 1
            with rt.reading() as conn:
                for r in rt.sql.tenant_relations(conn, t):
                    fh.write(json.dumps({"type": "relation", "tenant": t, "src": r.src,
                                         "dst": r.dst, "rel_type": r.type,
                                         "strength": r.strength}) + "\n")
    return count


def read_export(rt: Runtime, path: str | os.PathLike[str], *, reembed: bool
                ) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The ``add_many`` items per tenant and the relation records of a JSONL export."""
    with open(path, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    header = records[0] if records and records[0].get("type") == "header" else {}
    same = header.get("embedding_model") == rt.embedder.name
    if not same and not reembed:
        raise EmbeddingModelMismatchError(
            f"{str(path)!r} was exported with {header.get('embedding_model')!r}; this engine "
            f"uses {rt.embedder.name!r}: pass reembed=True to embed the texts again")
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    rels = []
    for rec in records:
        if rec.get("type") == "memory":
            item = {"id": rec["id"], "text": rec["text"], "importance": rec["importance"],
                    "kind": rec["kind"], "topic": rec["topic"],
                    "entities": rec["entities"], "session_id": rec["session_id"],
                    "metadata": {k: v for k, v in rec["metadata"].items() if k != "speaker"},
                    "at": datetime.fromisoformat(rec["created_at"]),
                    "pinned": rec["pinned"], "speaker": rec["metadata"].get("speaker")}
            if same and not reembed:
                item["embedding"] = rec["embedding"]
            by_tenant.setdefault(rec["tenant"], []).append(item)
        elif rec.get("type") == "relation":
            rels.append(rec)
    return by_tenant, rels


def import_records(path: str | os.PathLike[str], rt: Runtime, *, reembed: bool,
                   add_many: Callable[[list[dict[str, Any]], str], list[Memory]],
                   relate: Callable[[dict[str, Any]], object]) -> int:
    """Load a JSONL export through ``add_many(items, tenant)`` and ``relate(record)``."""
    by_tenant, rels = read_export(rt, path, reembed=reembed)
    count = 0
    for tenant, items in by_tenant.items():
        count += len(add_many(items, tenant))
    for rec in rels:
        relate(rec)
    return count
