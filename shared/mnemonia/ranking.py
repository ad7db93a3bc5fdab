"""Priority over many memory rows: the exact formula of :mod:`mnemonia.scoring.priority` per
row, and a vectorised copy to shortlist before the exact computation (eviction, the snapshot,
consolidation's seed order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia.clock import from_ts
from mnemonia.config import MnemoniaConfig
from mnemonia.scoring import priority as prio
from mnemonia.scoring import retention as ret
from mnemonia.store.database import Connection
from mnemonia.store.repository import SideStore

__all__ = ["PRIORITY_COLUMNS", "USE_EVENTS", "UseRecord", "columns", "information_array",
           "priority_array",
           "priority_of", "retention_of", "shortlist", "use_record", "weights"]

SLACK = 1e-9
"""numpy and pure-Python priorities differ by far less than this."""
PRIORITY_COLUMNS = ("importance", "created_at", "accessed_at", "access_count", "stability")
"""The columns a priority is computed from."""


def weights(cfg: MnemoniaConfig) -> prio.PriorityWeights:
    """The configured priority weights."""
    return prio.PriorityWeights(importance=cfg.priority_weight_importance,
                                recency=cfg.priority_weight_recency,
                                access=cfg.priority_weight_access,
                                retention=cfg.priority_weight_retention)


def priority_of(cfg: MnemoniaConfig, r: Any, now: datetime,
                w: prio.PriorityWeights) -> float:
    """The exact priority (pure scoring core) of a memory row."""
    return prio.priority(importance=float(r.importance), created_at=from_ts(r.created_at),
                         accessed_at=from_ts(r.accessed_at), access_count=int(r.access_count),
                         stability=float(r.stability), now=now, weights=w,
                         half_life=cfg.retention_half_life)


def retention_of(cfg: MnemoniaConfig, r: Any, now: datetime) -> float:
    """The retention ``R`` (pure scoring core) of a memory row at ``now``."""
    return ret.retained((now - from_ts(r.accessed_at)).total_seconds(), r.importance,
                        r.stability, cfg.retention_half_life)


def columns(rows: Sequence[Any]) -> dict[str, tuple[Any, ...]]:
    """Column tuples of SQL rows, by column name (one pass; much faster than per-row access)."""
    if not rows:
        return {}
    return dict(zip(rows[0]._fields, zip(*rows, strict=True), strict=True))


def priority_array(cfg: MnemoniaConfig, cols: Mapping[str, Sequence[Any]], nowts: float,
                   w: prio.PriorityWeights) -> np.ndarray:
    """The same priority formula, vectorised, to shortlist before the exact computation.

    Agrees with :func:`mnemonia.scoring.priority.priority` to far better than ``SLACK``.
    """
    if not cols:
        return np.zeros(0)
    n = w.normalised()
    imp = np.asarray(cols["importance"], dtype=float)
    created = np.asarray(cols["created_at"], dtype=float)
    accessed = np.asarray(cols["accessed_at"], dtype=float)
    count = np.asarray(cols["access_count"], dtype=float)
    stab = np.asarray(cols["stability"], dtype=float)
    recency = 1.0 / (1.0 + np.maximum(0.0, (nowts - created) / 86400.0))
    access = np.minimum(1.0, count / prio.ACCESS_SATURATION)
    strength = cfg.retention_half_life * imp * stab
    elapsed = np.maximum(0.0, nowts - accessed)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        retention = np.where(imp == 0.0, 0.0, np.exp(-elapsed / np.where(strength > 0, strength,
                                                                         1.0)))
    value = n.importance * imp + n.recency * recency + n.access * access + n.retention * retention
    return np.clip(value, 0.0, 1.0)


def information_array(cols: Mapping[str, Sequence[Any]], words: np.ndarray, nowts: float
                      ) -> np.ndarray:
    """:func:`mnemonia.scoring.priority.information` vectorised (``importance * content words
    * (1 + recency)``), to shortlist before the exact computation; ``words`` holds each row's
    content words. Agrees with the pure function to far better than ``SLACK``."""
    if not cols:
        return np.zeros(0)
    imp = np.asarray(cols["importance"], dtype=float)
    created = np.asarray(cols["created_at"], dtype=float)
    recency = 1.0 / (1.0 + np.maximum(0.0, (nowts - created) / 86400.0))
    value: np.ndarray = imp * np.asarray(words, dtype=float) * (1.0 + recency)
    return value


def shortlist(values: np.ndarray, mask: np.ndarray, n: int, *, lowest: bool) -> np.ndarray:
    """Indices (within ``mask``) of the ``n`` lowest (or highest) values plus every near-tie."""
    idx = np.nonzero(mask)[0]
    if n <= 0 or idx.size == 0:
        return idx[:0]
    if idx.size <= n:
        return idx
    vals = values[idx]
    if lowest:
        cut = float(np.partition(vals, n - 1)[n - 1])
        return np.asarray(idx[vals <= cut + SLACK])
    cut = float(-np.partition(-vals, n - 1)[n - 1])
    return np.asarray(idx[vals >= cut - SLACK])


USE_EVENTS = ("feedback", "used")
"""Events that count as use (``used``; ``feedback`` 4-5) or failed use (``feedback`` 0-2)."""


@dataclass
class UseRecord:
    """A tenant's use: how often each memory was used or failed, and the use cues
    ``(memory id, query)`` in the order they were recorded."""

    uses: dict[str, int] = field(default_factory=dict)
    fails: dict[str, int] = field(default_factory=dict)
    cues: list[tuple[str, str]] = field(default_factory=list)


def use_record(sql: SideStore, conn: Connection, tenant: str) -> UseRecord:
    """Read a tenant's use from its ``used`` and ``feedback`` events (recall's lifecycle
    prior and eviction order both follow it)."""
    out = UseRecord()
    for mid, event, after in sql.events.use_events(conn, tenant, USE_EVENTS):
        quality = after.get("quality")
        if event == "feedback" and isinstance(quality, int) and quality <= 2:
            out.fails[mid] = out.fails.get(mid, 0) + 1
            continue
        if event == "feedback" and not (isinstance(quality, int) and quality >= 4):
            continue
        out.uses[mid] = out.uses.get(mid, 0) + 1
        query = after.get("query")
        if isinstance(query, str) and query.strip():
            out.cues.append((mid, query))
    return out

