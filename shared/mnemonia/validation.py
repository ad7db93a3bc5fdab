"""The one home of argument checks: tenant, text, numbers, times, ids, metadata and whole items.

The engine and the adapters call these before anything is written, so a bad value gets the
same typed error (a :class:`~mnemonia.errors.MnemoniaError` naming the value and what is
allowed) wherever it enters.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia import entities as ent
from mnemonia.clock import ensure_aware, to_ts
from mnemonia.config import MAX_TEXT_CHARS, TENANT_PATTERN, MnemoniaConfig
from mnemonia.errors import (
    FutureTimeError,
    InvalidImportanceError,
    InvalidInputError,
    InvalidTenantError,
    InvalidTextError,
    MnemoniaError,
)
from mnemonia.models import KINDS
from mnemonia.scoring import modes

__all__ = [
    "ID_PATTERN",
    "ITEM_FIELDS",
    "PreparedMemory",
    "boolean",
    "finite_unit",
    "memory_id",
    "metadata",
    "optional_int",
    "past_time",
    "positive_int",
    "prepare",
    "prepare_many",
    "recall_args",
    "row_embed_text",
    "tenant",
    "tenant_name",
    "text",
]

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
"""Explicit memory ids: 1-64 letters, digits, ``_``, ``.``, ``:`` or ``-``."""

ITEM_FIELDS = frozenset({"text", "importance", "kind", "topic", "entities", "session_id",
                         "metadata", "at", "pinned", "id", "speaker", "embedding"})
"""The fields an ``add_many`` item may carry."""


def tenant_name(value: Any) -> str:
    """A valid tenant name, or :class:`InvalidTenantError`."""
    if not isinstance(value, str) or not TENANT_PATTERN.match(value):
        raise InvalidTenantError(
            f"tenant={value!r}: must be 1-64 characters of letters, digits, '_' or '-', "
            "starting and ending with a letter or digit"
        )
    return value


tenant = tenant_name


def text(value: Any, name: str = "text", *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A non-blank string of at most ``max_chars`` characters, or :class:`InvalidTextError`."""
    if not isinstance(value, str):
        raise InvalidTextError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidTextError(f"{name}={value!r}: must not be empty or whitespace only")
    if len(value) > max_chars:
        raise InvalidTextError(
            f"{name} has {len(value)} characters; the maximum is {max_chars} "
            "(config max_text_chars)"
        )
    return value


def finite_unit(value: Any, name: str, exc: type[MnemoniaError] = InvalidInputError) -> float:
    """A finite number in [0, 1] (not a bool), or ``exc``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0.0 <= float(value) <= 1.0:
        raise exc(f"{name}={value!r}: must be a finite number in [0, 1]")
    return float(value)


def positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """An int (not a bool) of at least ``minimum``, or :class:`InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name}={value!r}: must be an integer >= {minimum}")
    return value


def optional_int(value: Any, name: str, default: int, *, minimum: int = 1) -> int:
    """``default`` for ``None``, else :func:`positive_int`."""
    return default if value is None else positive_int(value, name, minimum=minimum)


def boolean(value: Any, name: str) -> bool:
    """``True`` or ``False`` exactly, or :class:`InvalidInputError`."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name}={value!r}: must be True or False")
    return value


def past_time(at: Any, now: datetime) -> float:
    """Epoch seconds of ``at`` (``now`` when ``None``); an aware datetime not after ``now``."""
    if at is None:
        return to_ts(now)
    value = ensure_aware(at, "at")
    if value > now:
        raise FutureTimeError(
            f"at={value.isoformat()} is in the future (now is {now.isoformat()}); "
            "only past or present times are allowed"
        )
    return to_ts(value)


def memory_id(value: Any) -> str:
    """An id to look a memory up by: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"id={value!r}: must be a non-empty string")
    return value


def new_id(value: Any) -> str:
    """An explicit id for a new memory (:data:`ID_PATTERN`), or a fresh UUID for ``None``."""
    if value is None:
        return uuid.uuid4().hex
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise InvalidInputError(
            f"id={value!r}: must be 1-64 characters of letters, digits, '_', '.', ':', '-'")
    return value


def metadata(value: Any) -> dict[str, Any]:
    """A JSON-safe copy of a metadata dict (``None`` is ``{}``)."""
    value = value or {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"metadata={value!r}: must be a dict")
    return json_safe(value)


def json_safe(value: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON round trip of ``value`` (no NaN), or :class:`InvalidInputError`."""
    try:
        out: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"metadata is not JSON-safe: {e}") from e
    return out


def metadata_patch(value: Any) -> dict[str, Any]:
    """A JSON-safe metadata update; ``speaker`` (part of the embedded text) is refused."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata={value!r}: must be a dict")
    if "speaker" in value:
        raise InvalidInputError(
            "metadata key 'speaker' is part of the embedded text and cannot be updated")
    return json_safe(value)


def namespace(value: Any) -> str:
    """A Chroma collection-name prefix: 1-64 letters, digits, ``_`` or ``-``."""
    if not isinstance(value, str) or not TENANT_PATTERN.match(value):
        raise InvalidInputError(
            f"namespace={value!r}: must be 1-64 letters, digits, '_' or '-'")
    return value


def optional_label(value: Any, name: str, max_chars: int, *, strip: bool) -> str | None:
    """``None`` or a string of 1..``max_chars`` characters (non-blank with ``strip``)."""
    if value is None:
        return None
    if not isinstance(value, str) or not (value.strip() if strip else value) \
            or len(value) > max_chars:
        raise InvalidInputError(f"{name}={value!r}: must be None or a 1-{max_chars} char string")
    return value


@dataclass
class PreparedMemory:
    """One validated memory waiting to be written (or re-enriched)."""

    id: str
    text: str
    embed_text: str
    kind: str
    topic: str | None
    entities: list[str]
    importance: float
    at: float
    session_id: str | None
    metadata: dict[str, Any]
    pinned: bool
    vector: np.ndarray | None = None


def embed_text(text: str, speaker: str | None) -> str:
    """What the embedder sees for a turn: ``Speaker said, "text"`` (or the bare text)."""
    return f'{speaker} said, "{text}"' if speaker else text


def row_embed_text(row: Any) -> str:
    """:func:`embed_text` of a stored ``memories`` row (the speaker is in its metadata)."""
    speaker = json.loads(row.metadata).get("speaker") if row.metadata != "{}" else None
    return embed_text(row.text, speaker)


def _vector(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    vector = np.asarray(value, dtype=np.float32)
    if vector.ndim != 1 or not np.all(np.isfinite(vector)):
        raise InvalidInputError("embedding must be a finite 1-d vector")
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _speaker(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidInputError(f"speaker={value!r}: must be a non-empty string")
    return value


def _fields(item: Mapping[str, Any], now: datetime, max_chars: int) -> PreparedMemory:
    body = text(item.get("text"), max_chars=max_chars)
    importance = finite_unit(item.get("importance", 0.5), "importance", InvalidImportanceError)
    kind = item.get("kind", "episode")
    if kind not in KINDS:
        raise InvalidInputError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")
    topic = optional_label(item.get("topic"), "topic", 128, strip=True)
    session_id = optional_label(item.get("session_id"), "session_id", 256, strip=False)
    meta = metadata(item.get("metadata"))
    speaker = _speaker(item.get("speaker"))
    if speaker is not None:
        meta = {**meta, "speaker": speaker}
    pinned = boolean(item.get("pinned", False), "pinned")
    mid = new_id(item.get("id"))
    entities = ent.normalise_entities(item.get("entities"))
    at = past_time(item.get("at"), now)
    vector = _vector(item.get("embedding"))
    return PreparedMemory(id=mid, text=body, embed_text=embed_text(body, speaker), kind=kind,
                          topic=topic, entities=entities, importance=importance, at=at,
                          session_id=session_id, metadata=meta, pinned=pinned, vector=vector)


def prepare(item: Mapping[str, Any], now: datetime, index: int | None = None, *,
            max_chars: int = MAX_TEXT_CHARS) -> PreparedMemory:
    """Check one ``add_many`` item; errors of item ``index`` say which item it was."""
    where = "" if index is None else f"item {index}: "
    unknown = set(item) - ITEM_FIELDS
    if unknown:
        raise InvalidInputError(
            f"{where}unknown field(s) {sorted(unknown)}; allowed: {sorted(ITEM_FIELDS)}")
    try:
        return _fields(item, now, max_chars)
    except MnemoniaError as e:
        if where:
            raise type(e)(f"{where}{e}") from e
        raise


def prepare_many(items: Any, now: datetime, *, max_chars: int = MAX_TEXT_CHARS
                 ) -> list[PreparedMemory]:
    """Check ``add_many``'s list of item dicts, item by item."""
    if isinstance(items, Mapping | str) or not isinstance(items, Sequence):
        raise InvalidInputError("add_many takes a list of dicts, e.g. [{'text': '...'}]")
    prepared = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"item {i}: expected a dict with 'text', got {item!r}")
        prepared.append(prepare(item, now, i, max_chars=max_chars))
    return prepared


def recall_args(cfg: MnemoniaConfig, *, query: Any, tenant: Any, k: Any, topic: Any,
                entity: Any, episode_k: Any, mode: Any, min_activation: Any, touch: Any,
                user_id: Any, include_superseded: Any = False) -> dict[str, Any]:
    """``recall``'s arguments checked, with the config defaults filled in: the fields of
    :class:`mnemonia.recall.RecallRequest` but ``now``. With an ``entity``, the query may be
    ``None`` or blank (entity-only recall: ``query`` becomes ``""``)."""
    tenant = tenant_name(tenant)
    if entity is not None and (query is None or (isinstance(query, str) and not query.strip())):
        query = ""
    else:
        query = text(query, "query", max_chars=cfg.max_text_chars)
    k = optional_int(k, "k", cfg.default_k)
    episode_k = optional_int(episode_k, "episode_k", cfg.episode_k, minimum=0)
    mode_name = cfg.default_mode if mode is None else mode
    weights = modes.mode_weights(mode_name)
    floor = cfg.min_activation if min_activation is None else finite_unit(
        min_activation, "min_activation")
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise InvalidInputError(f"topic={topic!r}: must be None or a non-empty string")
    if entity is not None:
        entity = ent.normalise_entities([entity])[0]
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidInputError(f"user_id={user_id!r}: must be None or a string")
    return dict(query=query, tenant=tenant, k=k, topic=topic, entity=entity,
                episode_k=episode_k, mode=mode_name, weights=weights, floor=floor,
                touch=boolean(touch, "touch"), user_id=user_id,
                include_superseded=boolean(include_superseded, "include_superseded"))
