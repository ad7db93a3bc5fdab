"""The one home of argument checks: tenant, text, numbers, times, ids, metadata and whole items.

The engine and the adapters call these before anything is written, so a bad value gets the
same typed error (a :class:`~mnemonia.errors.MnemoniaError` naming the value and what is
allowed) wherever it enters.
"""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia import entities as ent
from mnemonia.clock import ensure_aware, to_ts
from mnemonia.config import (
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    MAX_TEXT_CHARS,
    TENANT_PATTERN,
    MnemoniaConfig,
)
from mnemonia.errors import (
    FutureTimeError,
    InvalidImportanceError,
    InvalidInputError,
    InvalidTenantError,
    InvalidTextError,
    MnemoniaError,
    shown,
)
from mnemonia.models import KINDS
from mnemonia.scoring import modes

__all__ = [
    "ID_PATTERN",
    "ITEM_FIELDS",
    "MAX_INT",
    "PreparedMemory",
    "RecallArgs",
    "boolean",
    "callable_or_none",
    "entities",
    "evidence",
    "finite_unit",
    "id_set",
    "indexed_text",
    "item_filter",
    "item_key",
    "item_namespace",
    "item_space",
    "item_ttl",
    "json_safe",
    "memory_id",
    "metadata",
    "optional_int",
    "past_time",
    "positive_int",
    "prepare",
    "prepare_many",
    "recall_args",
    "row_embed_text",
    "row_speaker",
    "shown",
    "tenant",
    "tenant_name",
    "text",
    "unicode",
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
            f"tenant={shown(value)}: must be 1-64 characters of letters, digits, '_' or '-', "
            "starting and ending with a letter or digit"
        )
    return value


tenant = tenant_name


def unicode(value: str, name: str, exc: type[MnemoniaError] = InvalidInputError) -> str:
    """``value`` if it is valid Unicode text (no lone surrogate such as ``'\\ud800'``, which
    no store can encode), else ``exc``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise exc(f"{name} has a lone surrogate {value[e.start]!r} at position {e.start}: "
                  "text must be valid Unicode (encodable as UTF-8)") from None
    return value


def text(value: Any, name: str = "text", *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A non-blank string of at most ``max_chars`` characters of valid Unicode, or
    :class:`InvalidTextError`."""
    if not isinstance(value, str):
        raise InvalidTextError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidTextError(f"{name}={shown(value)}: must not be empty or whitespace only")
    if len(value) > max_chars:
        raise InvalidTextError(
            f"{name} has {len(value)} characters; the maximum is {max_chars} "
            "(config max_text_chars)"
        )
    return unicode(value, name, InvalidTextError)


def finite_unit(value: Any, name: str, exc: type[MnemoniaError] = InvalidInputError) -> float:
    """A finite number in [0, 1] (not a bool), or ``exc``."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0.0 <= value <= 1.0 or not math.isfinite(value):
        raise exc(f"{name}={shown(value)}: must be a finite number in [0, 1]")
    return float(value)


MAX_INT = 2**63 - 1
"""The largest integer a store column holds (SQLite and PostgreSQL ``BIGINT``)."""


def positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """An int (not a bool) of at least ``minimum`` and at most :data:`MAX_INT`, or
    :class:`InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{name}={shown(value)}: must be an integer >= {minimum}")
    if value > MAX_INT:
        raise InvalidInputError(f"{name}={shown(value)}: must be an integer <= {MAX_INT}")
    return value


def optional_int(value: Any, name: str, default: int, *, minimum: int = 1) -> int:
    """``default`` for ``None``, else :func:`positive_int`."""
    return default if value is None else positive_int(value, name, minimum=minimum)


def boolean(value: Any, name: str) -> bool:
    """``True`` or ``False`` exactly, or :class:`InvalidInputError`."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name}={shown(value)}: must be True or False")
    return value


def callable_or_none(value: Any, name: str) -> Any:
    """``None`` or a callable, or :class:`InvalidInputError`."""
    if value is not None and not callable(value):
        raise InvalidInputError(f"{name}={shown(value)}: must be None or a callable")
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


def memory_id(value: Any, name: str = "id") -> str:
    """An id to look a memory up by: a non-empty string of valid Unicode."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{name}={shown(value)}: must be a non-empty string")
    return unicode(value, name)


def new_id(value: Any) -> str:
    """An explicit id for a new memory (:data:`ID_PATTERN`), or a fresh UUID for ``None``."""
    if value is None:
        return uuid.uuid4().hex
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise InvalidInputError(
            f"id={shown(value)}: must be 1-64 characters of letters, digits, '_', '.', ':', '-'")
    return value


def metadata(value: Any, *, max_bytes: int = MAX_METADATA_BYTES,
             max_depth: int = MAX_METADATA_DEPTH) -> dict[str, Any]:
    """A JSON-safe copy of a metadata dict (``None`` is ``{}``) within the size and depth
    limits, or :class:`InvalidInputError`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata={shown(value)}: must be a dict")
    return json_safe(value, max_bytes=max_bytes, max_depth=max_depth)


def _too_deep_or_big(value: Any, max_depth: int, max_nodes: int) -> str | None:
    """Why ``value`` cannot be metadata without serialising it: dicts and lists nested deeper
    than ``max_depth`` (a container inside itself too), or more than ``max_nodes`` values
    (each takes at least one byte of JSON). Iterative, so no depth hits the recursion limit."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"has more than {max_nodes} values; the maximum is {max_nodes} bytes " \
                   "of JSON (config max_metadata_bytes)"
        if isinstance(node, Mapping):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > max_depth:
            return f"is nested more than {max_depth} levels deep (or contains itself); the " \
                   f"maximum is {max_depth} (config max_metadata_depth)"
        stack.extend((child, depth + 1) for child in children)
    return None


def json_safe(value: Mapping[str, Any], *, max_bytes: int = MAX_METADATA_BYTES,
              max_depth: int = MAX_METADATA_DEPTH, name: str = "metadata") -> dict[str, Any]:
    """A JSON round trip of ``value`` (no NaN, valid Unicode, at most ``max_bytes`` of UTF-8
    JSON nested at most ``max_depth`` deep), or :class:`InvalidInputError` (its message names
    the value ``name``)."""
    problem = _too_deep_or_big(value, max_depth, max_bytes)
    if problem:
        raise InvalidInputError(f"{name} {problem}")
    try:
        dumped = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{name} is not JSON-safe: {e}") from e
    unicode(dumped, f"{name} (as JSON)")
    size = len(dumped.encode("utf-8"))
    if size > max_bytes:
        raise InvalidInputError(f"{name} is {size} bytes as JSON; the maximum is {max_bytes} "
                                "(config max_metadata_bytes)")
    out: dict[str, Any] = json.loads(dumped)
    return out


def evidence(value: Any, *, max_bytes: int = MAX_METADATA_BYTES,
             max_depth: int = MAX_METADATA_DEPTH) -> dict[str, Any]:
    """A JSON-safe copy of a supersession's evidence dict, within the metadata limits, or
    :class:`InvalidInputError`."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"evidence={shown(value)}: must be a dict (JSON-safe) or None")
    return json_safe(value, max_bytes=max_bytes, max_depth=max_depth, name="evidence")


def metadata_patch(value: Any, *, max_bytes: int = MAX_METADATA_BYTES,
                   max_depth: int = MAX_METADATA_DEPTH) -> dict[str, Any]:
    """A JSON-safe metadata update; ``speaker`` (part of the embedded text) is refused."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata={shown(value)}: must be a dict")
    if "speaker" in value:
        raise InvalidInputError(
            "metadata key 'speaker' is part of the embedded text and cannot be updated")
    return json_safe(value, max_bytes=max_bytes, max_depth=max_depth)


def namespace(value: Any) -> str:
    """A Chroma collection-name prefix: 1-64 letters, digits, ``_`` or ``-``."""
    if not isinstance(value, str) or not TENANT_PATTERN.match(value):
        raise InvalidInputError(
            f"namespace={shown(value)}: must be 1-64 letters, digits, '_' or '-'")
    return value


def optional_label(value: Any, name: str, max_chars: int, *, strip: bool) -> str | None:
    """``None`` or a string of 1..``max_chars`` characters (non-blank with ``strip``)."""
    if value is None:
        return None
    if not isinstance(value, str) or not (value.strip() if strip else value) \
            or len(value) > max_chars:
        raise InvalidInputError(
            f"{name}={shown(value)}: must be None or a 1-{max_chars} char string")
    return unicode(value, name)


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

    @property
    def indexed_text(self) -> str:
        """The text the keyword index holds: :func:`embed_text` with the speaker kept in
        the metadata, which :func:`row_embed_text` reads back from the stored row (the
        same as ``embed_text`` unless a speaker came in ``metadata`` alone)."""
        return indexed_text(self.text, self.metadata)


def embed_text(text: str, speaker: str | None) -> str:
    """What the embedder sees for a turn: ``Speaker said, "text"`` (or the bare text)."""
    return f'{speaker} said, "{text}"' if speaker else text


def indexed_text(text: str, metadata: Mapping[str, Any]) -> str:
    """:func:`embed_text` of a memory's ``text`` with the speaker its ``metadata`` keeps
    (a string, else none), as :func:`row_embed_text` reads it from the stored row."""
    speaker = metadata.get("speaker")
    return embed_text(text, speaker if isinstance(speaker, str) else None)


def row_speaker(row: Any) -> str | None:
    """The speaker of a stored ``memories`` row (kept in its metadata), or None."""
    return None if row.metadata == "{}" else _speaker_in(row.metadata)


@functools.lru_cache(maxsize=4096)
def _speaker_in(stored: str) -> str | None:
    """The speaker in a row's stored metadata (the same few strings recur across a chat)."""
    speaker = json.loads(stored).get("speaker")
    return speaker if isinstance(speaker, str) else None


def row_embed_text(row: Any) -> str:
    """:func:`embed_text` of a stored ``memories`` row (the speaker is in its metadata)."""
    return embed_text(row.text, row_speaker(row))


def _vector(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    try:
        if isinstance(value, str | bytes | Mapping):
            raise TypeError(type(value).__name__)
        with np.errstate(over="ignore"):
            vector = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidInputError(
            f"embedding={shown(value)}: must be a finite 1-d vector of numbers ({e})") from None
    if vector.ndim != 1 or not np.all(np.isfinite(vector)):
        raise InvalidInputError("embedding must be a finite 1-d vector")
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _speaker(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"speaker={shown(value)}: must be a non-empty string")
    return unicode(value, "speaker")


def entities(value: Any) -> list[str]:
    """Explicit ``type:name`` entities, normalised (:func:`mnemonia.entities.normalise_entities`)
    and valid Unicode."""
    return [unicode(e, "entity") for e in ent.normalise_entities(value)]


def _limits(config: MnemoniaConfig | None, max_chars: int | None) -> tuple[int, int, int]:
    """``(max_text_chars, max_metadata_bytes, max_metadata_depth)`` of ``config`` (defaults
    without one); ``max_chars`` overrides the first."""
    if config is None:
        chars, size, depth = MAX_TEXT_CHARS, MAX_METADATA_BYTES, MAX_METADATA_DEPTH
    else:
        chars, size = config.max_text_chars, config.max_metadata_bytes
        depth = config.max_metadata_depth
    return (chars if max_chars is None else max_chars), size, depth


def _fields(item: Mapping[str, Any], now: datetime, limits: tuple[int, int, int]
            ) -> PreparedMemory:
    max_chars, max_bytes, max_depth = limits
    body = text(item.get("text"), max_chars=max_chars)
    importance = finite_unit(item.get("importance", 0.5), "importance", InvalidImportanceError)
    kind = item.get("kind", "episode")
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidInputError(f"kind={shown(kind)}: must be one of {', '.join(KINDS)}")
    topic = optional_label(item.get("topic"), "topic", 128, strip=True)
    session_id = optional_label(item.get("session_id"), "session_id", 256, strip=False)
    meta = metadata(item.get("metadata"), max_bytes=max_bytes, max_depth=max_depth)
    speaker = _speaker(item.get("speaker"))
    if speaker is not None:
        meta = {**meta, "speaker": speaker}
    pinned = boolean(item.get("pinned", False), "pinned")
    mid = new_id(item.get("id"))
    names = entities(item.get("entities"))
    at = past_time(item.get("at"), now)
    vector = _vector(item.get("embedding"))
    return PreparedMemory(id=mid, text=body, embed_text=embed_text(body, speaker), kind=kind,
                          topic=topic, entities=names, importance=importance, at=at,
                          session_id=session_id, metadata=meta, pinned=pinned, vector=vector)


def prepare(item: Mapping[str, Any], now: datetime, index: int | None = None, *,
            config: MnemoniaConfig | None = None, max_chars: int | None = None
            ) -> PreparedMemory:
    """Check one ``add_many`` item against the limits of ``config`` (the defaults without one;
    ``max_chars`` overrides its ``max_text_chars``); errors of item ``index`` say which item
    it was."""
    where = "" if index is None else f"item {index}: "
    unknown = [k for k in item if k not in ITEM_FIELDS]
    if unknown:
        raise InvalidInputError(f"{where}unknown field(s) {shown(sorted(map(str, unknown)))}; "
                                f"allowed: {sorted(ITEM_FIELDS)}")
    try:
        return _fields(item, now, _limits(config, max_chars))
    except MnemoniaError as e:
        if where:
            raise type(e)(f"{where}{e}") from e
        raise


def prepare_many(items: Any, now: datetime, *, config: MnemoniaConfig | None = None,
                 max_chars: int | None = None) -> list[PreparedMemory]:
    """Check ``add_many``'s list of item dicts, item by item (limits as in :func:`prepare`)."""
    if isinstance(items, Mapping | str | bytes) or not isinstance(items, Sequence):
        raise InvalidInputError("add_many takes a list of dicts, e.g. [{'text': '...'}]")
    prepared = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"item {i}: expected a dict with 'text', got {shown(item)}")
        prepared.append(prepare(item, now, i, config=config, max_chars=max_chars))
    return prepared


@dataclass(frozen=True)
class RecallArgs:
    """``recall``'s checked arguments (:func:`recall_args`)."""

    query: str
    tenant: str
    k: int
    topic: str | None
    entity: str | None
    episode_k: int
    mode: str
    weights: modes.Mode
    floor: float
    touch: bool
    user_id: str | None
    include_superseded: bool
    exclude_ids: frozenset[str]


def recall_args(cfg: MnemoniaConfig, *, query: Any, tenant: Any, k: Any, topic: Any,
                entity: Any, episode_k: Any, mode: Any, min_activation: Any, touch: Any,
                user_id: Any, include_superseded: Any = False, exclude_ids: Any = None
                ) -> RecallArgs:
    """``recall``'s arguments checked, with the config defaults filled in (what
    :meth:`mnemonia.recall.RecallRequest.of` builds a request from). With an ``entity``, the
    query may be ``None`` or blank (entity-only recall: ``query`` becomes ``""``)."""
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
        raise InvalidInputError(f"topic={shown(topic)}: must be None or a non-empty string")
    if topic is not None:
        unicode(topic, "topic")
    if entity is not None:
        entity = entities([entity])[0]
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidInputError(f"user_id={shown(user_id)}: must be None or a string")
    if user_id is not None:
        unicode(user_id, "user_id")
    return RecallArgs(query=query, tenant=tenant, k=k, topic=topic, entity=entity,
                      episode_k=episode_k, mode=mode_name, weights=weights, floor=floor,
                      touch=boolean(touch, "touch"), user_id=user_id,
                      include_superseded=boolean(include_superseded, "include_superseded"),
                      exclude_ids=id_set(exclude_ids, "exclude_ids"))


def id_set(value: Any, name: str) -> frozenset[str]:
    """``None`` or an iterable of memory ids (not one string), as a frozenset."""
    if value is None:
        return frozenset()
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidInputError(f"{name}={shown(value)}: must be None or an iterable of memory "
                                "ids (e.g. a list of strings), not a single string")
    ids = list(value)
    bad = [i for i in ids if not isinstance(i, str)]
    if bad:
        raise InvalidInputError(f"{name}: every id must be a string; got {shown(bad[0])}")
    return frozenset(ids)


# -- keyed items (mnemonia.items) -------------------------------------------------------------
MAX_ITEM_KEY_CHARS = 1024
"""Longest key (and longest namespace label) of a keyed item."""
MAX_FILTER_VALUES = 2000
"""Most values (operands, list elements, fields) one item filter may name."""
FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
"""The operators of an item value filter (LangGraph's, plus ``$in`` / ``$nin``)."""
_SPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,19}$")


def item_space(value: Any) -> str:
    """An item space (the prefix of its tenants' names): 1-20 letters, digits, ``-`` or
    ``_``, starting with a letter or digit."""
    if not isinstance(value, str) or not _SPACE.match(value):
        raise InvalidInputError(f"space={shown(value)}: must be 1-20 letters, digits, '-' or "
                                "'_', starting with a letter or digit")
    return value


def _label(value: Any, what: str, *, empty: bool) -> str:
    if not isinstance(value, str) or (not value and not empty) \
            or len(value) > MAX_ITEM_KEY_CHARS or "\x00" in value:
        size = "" if empty else "non-empty "
        raise InvalidInputError(f"{what}={shown(value)}: must be a {size}string of at most "
                                f"{MAX_ITEM_KEY_CHARS} characters without NUL")
    return unicode(value, what)


def item_namespace(value: Any, *, empty: bool = False) -> tuple[str, ...]:
    """A namespace: a tuple (or list) of non-empty labels; ``()`` only with ``empty`` (a
    search or listing prefix)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInputError(f"namespace={shown(value)}: must be a tuple of strings, "
                                "e.g. ('users', 'alice')")
    if not value and not empty:
        raise InvalidInputError("namespace=(): an item's namespace has at least one label")
    return tuple(_label(x, f"namespace label in {shown(tuple(value))}", empty=False)
                 for x in value)


def item_key(value: Any) -> str:
    """An item key: a string (it may be empty) of at most 1024 characters without NUL."""
    return _label(value, "key", empty=True)


def item_ttl(value: Any) -> float | None:
    """A time to live in minutes: ``None`` (never expires) or a finite number > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"ttl={shown(value)}: must be None or minutes > 0")
    return float(value)


def _filter_problems(value: Any, where: str, count: list[int], out: list[str]) -> None:
    count[0] += 1
    if count[0] > MAX_FILTER_VALUES:
        if count[0] == MAX_FILTER_VALUES + 1:
            out.append(f"the filter names more than {MAX_FILTER_VALUES} values")
        return
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int | float):
        if not math.isfinite(value):
            out.append(f"{where}: {shown(value)} is not a finite number")
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _filter_problems(v, f"{where}[{i}]", count, out)
        return
    if not isinstance(value, Mapping):
        out.append(f"{where}: {shown(value)} is not a JSON value (None, bool, number, string, "
                   "list or dict)")
        return
    ops = any(isinstance(k, str) and k.startswith("$") for k in value)
    for k, v in value.items():
        if not isinstance(k, str) or '"' in k:
            out.append(f"{where}: field {shown(k)} must be a string without '\"'")
        elif ops and k not in FILTER_OPERATORS:
            out.append(f"{where}: unsupported filter operator {k!r}; use "
                       f"{', '.join(FILTER_OPERATORS)}")
        elif k in ("$in", "$nin") and not isinstance(v, list | tuple):
            out.append(f"{where}: {k} takes a list, got {shown(v)}")
        else:
            _filter_problems(v, f"{where}.{k}" if not ops else f"{where} {k}", count, out)


def item_filter(value: Any) -> dict[str, Any]:
    """A value filter of a keyed-item search: ``{field: value}`` (equality; a dict matches
    the fields it names, a list element by element) or ``{field: {op: value}}`` with the
    operators of :data:`FILTER_OPERATORS`. A dotted field (``"meta.lang"``) reaches into
    nested dicts when the value has no such field. Every problem is reported in one
    :class:`InvalidInputError` (a ``ValueError``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"filter={shown(value)}: must be a dict of field -> value")
    problems: list[str] = []
    count = [0]
    for k, v in value.items():
        if not isinstance(k, str) or '"' in k:
            problems.append(f"filter field {shown(k)} must be a string without '\"'")
        else:
            _filter_problems(v, f"filter[{k!r}]", count, problems)
    if problems:
        raise InvalidInputError("; ".join(problems))
    return dict(value)
