"""The export file's records, declared once and read by both directions: what a record of
each type carries (:data:`SPECS`, checked field by field on import), how a memory row and the
other rows become records (export), and format 1 read as format 2.

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

Format-1 files (the first export: ``Memory.to_dict()`` lines with ``embedding``) still import.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia import validation as check
from mnemonia.clock import to_ts
from mnemonia.config import TENANT_PATTERN
from mnemonia.errors import (
    InvalidImportFileError,
    InvalidInputError,
)
from mnemonia.models import KINDS
from mnemonia.scoring.reevaluation import IMMEDIATE, STATES

__all__ = ["BATCH", "FORMAT", "MEMORY_FIELDS", "OPTIONAL", "SPECS", "BadRecord", "Progress", "Spec",
           "check_fields", "decode_vector", "from_v1", "iso_time", "memory_record", "short_repr",
           "side_record"]

log = logging.getLogger("mnemonia")

FORMAT = 2
"""The export format :func:`~mnemonia.transfer.export` writes (import reads 1 and 2)."""
BATCH = 256
"""Memories read, embedded and written per batch by export and import."""

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


def memory_record(r: Any, links: list[str], vector: bytes | None) -> dict[str, Any]:
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


def side_record(kind: str, r: Any) -> dict[str, Any]:
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


class BadRecord(Exception):
    """A field value that is not allowed (turned into an InvalidImportFileError)."""


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise BadRecord("must be a finite number")
    return float(v)


def _time(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise BadRecord("must be a time in seconds since the epoch (a finite number)")
    return float(v)


def _opt(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else fn(v)


def _count(least: int = 0, most: int | None = None) -> Callable[[Any], int]:
    def fn(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < least or (
                most is not None and v > most):
            raise BadRecord(f"must be an integer >= {least}" + ("" if most is None
                                                             else f" and <= {most}"))
        return v
    return fn


def _at_least(low: float, *, strict: bool = False) -> Callable[[Any], float]:
    def fn(v: Any) -> float:
        x = _number(v)
        if x < low or (strict and x == low):
            raise BadRecord(f"must be a finite number {'>' if strict else '>='} {low}")
        return x
    return fn


def _unit(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
        raise BadRecord("must be a finite number in [0, 1]")
    return float(v)


def _string(most: int) -> Callable[[Any], str]:
    def fn(v: Any) -> str:
        if not isinstance(v, str) or not v or len(v) > most:
            raise BadRecord(f"must be a string of 1-{most} characters")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise BadRecord("must be valid Unicode text (it has a lone surrogate)") from e
        return v
    return fn


def _choice(options: Sequence[str]) -> Callable[[Any], str]:
    def fn(v: Any) -> str:
        if v not in options:
            raise BadRecord(f"must be one of {', '.join(options)}")
        return str(v)
    return fn


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise BadRecord("must be true or false")
    return v


def _ident(v: Any) -> str:
    if not isinstance(v, str) or not check.ID_PATTERN.match(v):
        raise BadRecord("must be a memory id: 1-64 letters, digits, '_', '.', ':' or '-'")
    return v


def _tenant(v: Any) -> str:
    if not isinstance(v, str) or not TENANT_PATTERN.match(v):
        raise BadRecord("must be a tenant name: 1-64 letters, digits, '_' or '-'")
    return v


def _entity_list(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(
            isinstance(e, str) and ":" in e and len(e) <= 256 for e in v):
        raise BadRecord("must be a list of 'type:name' strings")
    return [_string(256)(e) for e in v]


def _tenant_list(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise BadRecord("must be a list of tenant names")
    return [_tenant(t) for t in v]


def _json_object(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise BadRecord("must be a JSON object")
    try:
        return check.json_safe(v)
    except InvalidInputError as e:
        raise BadRecord(str(e)) from e


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
SPECS: dict[str, Spec] = {
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
OPTIONAL: dict[str, set[str]] = {
    "header": {"format", "exported_at", "with_vectors", "tenants"}, "memory": {"vector"},
}
_V1_MEMORY = ("id", "tenant", "text", "kind", "topic", "entities", "importance", "created_at",
              "accessed_at", "access_count", "stability", "sm2", "utility", "state", "pinned",
              "deleted_at", "superseded_by", "consolidated_into", "session_id", "metadata",
              "embedding_model")
_V1_SM2 = ("easiness", "interval_days", "repetitions", "next_review", "last_quality")


def check_fields(n: int, kind: str, rec: Mapping[str, Any], spec: Spec,
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
        except (BadRecord, TypeError) as e:
            raise InvalidImportFileError(
                f"{kind} record: field {name!r} = {short_repr(value)} {e}", line=n) from e
    return out


def iso_time(n: int, name: str, value: Any) -> float | None:
    """A format-1 ISO time (or null) as epoch seconds."""
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except (TypeError, ValueError) as e:
        raise InvalidImportFileError(
            f"memory record: field {name!r} = {short_repr(value)} must be an ISO 8601 time with "
            "a timezone", line=n) from e
    if dt.tzinfo is None:
        raise InvalidImportFileError(
            f"memory record: field {name!r} = {short_repr(value)} has no timezone", line=n)
    return to_ts(dt)


def from_v1(n: int, rec: Mapping[str, Any], seq: int, dimension: int) -> dict[str, Any]:
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
        out[name] = iso_time(n, name, rec[name])
    out["next_review"] = iso_time(n, "sm2.next_review", sm2["next_review"])
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


def decode_vector(n: int, value: Any, dimension: int) -> bytes:
    try:
        raw = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 4 * dimension or not np.all(np.isfinite(np.frombuffer(raw, "<f4"))):
        raise InvalidImportFileError(
            f"memory record: field 'vector' must be the base64 of {dimension} finite float32 "
            "numbers (little-endian)", line=n)
    return raw
