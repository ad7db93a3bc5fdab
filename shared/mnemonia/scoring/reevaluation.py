"""Ingest gatekeeper and heat-based re-evaluation: memories that suddenly matter get promoted.

Lifecycle states, lowest first: ``skipped`` (stored, not enriched), ``batched`` (enriched at the
next sweep), ``immediate`` (enriched at once). Promotion only ever moves up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from mnemonia.errors import InvalidImportanceError, InvalidInputError, shown
from mnemonia.scoring._common import (
    clamp,
    require_aware,
    require_finite,
    require_int,
    require_str,
    require_unit,
)

__all__ = [
    "BATCHED",
    "DEFAULT_BATCH_THRESHOLD",
    "DEFAULT_COOLDOWN",
    "DEFAULT_IMMEDIATE_THRESHOLD",
    "DEFAULT_PER_TENANT_CAP",
    "DEFAULT_WINDOW",
    "IMMEDIATE",
    "RECALL_SATURATION",
    "SKIPPED",
    "STATES",
    "TOKEN_SATURATION",
    "USER_SATURATION",
    "AccessRow",
    "Candidate",
    "HeatInputs",
    "PromotionEvent",
    "aggregate",
    "gatekeeper_score",
    "gatekeeper_state",
    "heat",
    "promote",
    "select_candidates",
    "state_rank",
    "validate_state",
]

SKIPPED = "skipped"
BATCHED = "batched"
IMMEDIATE = "immediate"
STATES: tuple[str, ...] = (SKIPPED, BATCHED, IMMEDIATE)
"""Every lifecycle state, lowest first."""

DEFAULT_IMMEDIATE_THRESHOLD = 0.7
DEFAULT_BATCH_THRESHOLD = 0.35
DEFAULT_WINDOW = timedelta(hours=1)
DEFAULT_COOLDOWN = timedelta(minutes=5)
DEFAULT_PER_TENANT_CAP = 100
TOKEN_SATURATION = 20.0
RECALL_SATURATION = 20.0  # ln(1 + 20) / ln(21) = 1
USER_SATURATION = 5.0

_RANK = {name: index for index, name in enumerate(STATES)}


def validate_state(state: object) -> str:
    """Return ``state`` if it is one of :data:`STATES`.

    Raises:
        InvalidInputError: Naming the allowed states.
    """
    if not isinstance(state, str) or state not in _RANK:
        raise InvalidInputError(f"state must be one of {', '.join(STATES)}; got {shown(state)}")
    return state


def state_rank(state: str) -> int:
    """Return the position of ``state`` in :data:`STATES` (skipped 0, batched 1, immediate 2).

    Raises:
        InvalidInputError: ``state`` is not a lifecycle state.
    """
    return _RANK[validate_state(state)]


def _check_thresholds(batch_threshold: float, immediate_threshold: float) -> tuple[float, float]:
    batch = require_unit(batch_threshold, "batch_threshold")
    immediate = require_unit(immediate_threshold, "immediate_threshold")
    if batch > immediate:
        raise InvalidInputError(
            f"batch_threshold must be <= immediate_threshold, got batch_threshold={shown(batch)} "
            f"and immediate_threshold={shown(immediate)}"
        )
    return batch, immediate


def gatekeeper_score(*, importance: float, novelty: float, distinct_tokens: int) -> float:
    """Return the ingest gatekeeper score, in ``[0, 1]``.

    ``g = .5*importance + .3*novelty + .2*min(1, distinct_tokens/20)``, novelty clamped to
    ``[0, 1]`` (it is ``1 - max cosine``, which may leave that range).

    Raises:
        InvalidImportanceError: ``importance`` is not a finite number in ``[0, 1]``.
        InvalidInputError: ``novelty`` is not finite or ``distinct_tokens`` not an int >= 0.
    """
    imp = require_unit(importance, "importance", InvalidImportanceError)
    nov = clamp(require_finite(novelty, "novelty"), 0.0, 1.0)
    tokens = require_int(distinct_tokens, "distinct_tokens", minimum=0)
    return 0.5 * imp + 0.3 * nov + 0.2 * min(1.0, tokens / TOKEN_SATURATION)


def gatekeeper_state(
    score: float,
    *,
    immediate_threshold: float = DEFAULT_IMMEDIATE_THRESHOLD,
    batch_threshold: float = DEFAULT_BATCH_THRESHOLD,
) -> str:
    """Return the ingest state for a gatekeeper score.

    ``immediate`` at ``score >= immediate_threshold``, ``batched`` at
    ``score >= batch_threshold``, else ``skipped``.

    Raises:
        InvalidInputError: ``score`` not finite, or thresholds outside ``[0, 1]`` or inverted.
    """
    value = require_finite(score, "score")
    batch, immediate = _check_thresholds(batch_threshold, immediate_threshold)
    if value >= immediate:
        return IMMEDIATE
    if value >= batch:
        return BATCHED
    return SKIPPED


@dataclass(frozen=True, kw_only=True)
class AccessRow:
    """One ``access_log`` row: a memory returned at ``rank`` (1-based) by a recall for ``k``.

    Raises:
        InvalidInputError: ``rank`` or ``k`` is not an int >= 1, or an id is not a str.
        NaiveDatetimeError: ``at`` has no timezone.
    """

    memory_id: str
    tenant: str
    user_id: str | None
    rank: int
    k: int
    at: datetime

    def __post_init__(self) -> None:
        require_str(self.memory_id, "memory_id")
        require_str(self.tenant, "tenant")
        if self.user_id is not None:
            require_str(self.user_id, "user_id")
        require_int(self.rank, "rank", minimum=1)
        require_int(self.k, "k", minimum=1)
        object.__setattr__(self, "at", require_aware(self.at, "at"))


@dataclass(frozen=True, kw_only=True)
class HeatInputs:
    """Per-memory aggregates of the recent access log.

    Attributes:
        recalls: Rows in the window.
        users: Distinct non-None users in the window.
        mean_rank_share: Mean over the rows of ``(rank-1)/max(1, k-1)``, in ``[0, 1]``
            (0 = always first).
    """

    recalls: int
    users: int
    mean_rank_share: float

    def __post_init__(self) -> None:
        require_int(self.recalls, "recalls", minimum=0)
        require_int(self.users, "users", minimum=0)
        object.__setattr__(
            self, "mean_rank_share", require_unit(self.mean_rank_share, "mean_rank_share")
        )


def _require_positive_delta(value: object, name: str) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidInputError(f"{name} must be a positive timedelta, got {shown(value)}")
    return value


def aggregate(
    rows: Iterable[AccessRow],
    *,
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
) -> dict[str, HeatInputs]:
    """Aggregate access-log rows in ``(now - window, now]`` per memory id.

    A row's rank share ``(rank-1)/max(1, k-1)`` is capped at 1 (a row ranked beyond its ``k``,
    e.g. an extra episode hit, counts as last).

    Args:
        rows: Access-log rows of any memories and tenants.
        now: End of the window (inclusive), timezone-aware.
        window: Window length, a positive timedelta.

    Returns:
        ``{memory_id: HeatInputs}`` for every memory with at least one row in the window.

    Raises:
        InvalidInputError: ``window`` is not a positive timedelta or a row is not an AccessRow.
        NaiveDatetimeError: ``now`` has no timezone.
    """
    end = require_aware(now, "now")
    start = end - _require_positive_delta(window, "window")
    counts: dict[str, int] = {}
    users: dict[str, set[str]] = {}
    shares: dict[str, float] = {}
    for row in rows:
        if not isinstance(row, AccessRow):
            raise InvalidInputError(f"rows must be AccessRow objects, got {shown(row)}")
        if not start < row.at <= end:
            continue
        mid = row.memory_id
        counts[mid] = counts.get(mid, 0) + 1
        seen = users.setdefault(mid, set())
        if row.user_id is not None:
            seen.add(row.user_id)
        shares[mid] = shares.get(mid, 0.0) + min(1.0, (row.rank - 1) / max(1, row.k - 1))
    return {
        mid: HeatInputs(
            recalls=count,
            users=len(users[mid]),
            mean_rank_share=clamp(shares[mid] / count, 0.0, 1.0),
        )
        for mid, count in counts.items()
    }


def heat(inputs: HeatInputs) -> float:
    """Return a memory's heat, in ``[0, 1]``.

    ``h = .5*min(1, ln(1+recalls)/ln(21)) + .3*min(1, users/5) + .2*(1 - m)`` over the
    window's exact aggregates (twenty recalls saturate the first term). A memory with no
    recalls has heat 0.

    Raises:
        InvalidInputError: ``inputs`` is not a :class:`HeatInputs`.
    """
    if not isinstance(inputs, HeatInputs):
        raise InvalidInputError(f"inputs must be a HeatInputs, got {shown(inputs)}")
    if inputs.recalls == 0:
        return 0.0
    recall_term = min(1.0, math.log1p(inputs.recalls) / math.log1p(RECALL_SATURATION))
    user_term = min(1.0, inputs.users / USER_SATURATION)
    return clamp(
        0.5 * recall_term + 0.3 * user_term + 0.2 * (1.0 - inputs.mean_rank_share), 0.0, 1.0
    )


@dataclass(frozen=True, kw_only=True)
class PromotionEvent:
    """A promotion: ``reevaluation_promoted`` with the old and the new state."""

    memory_id: str
    old_state: str
    new_state: str
    heat: float
    at: datetime


def promote(
    memory_id: str,
    state: str,
    h: float,
    *,
    now: datetime,
    batch_threshold: float = DEFAULT_BATCH_THRESHOLD,
    immediate_threshold: float = DEFAULT_IMMEDIATE_THRESHOLD,
) -> tuple[str, PromotionEvent | None]:
    """Promote a memory by heat; never demote.

    skipped -> batched at ``h >= batch_threshold``; -> immediate at ``h >= immediate_threshold``
    (a skipped memory can climb both in one call). ``immediate`` stays.

    Returns:
        The new state and a :class:`PromotionEvent`, or the same state and ``None``.

    Raises:
        InvalidInputError: Bad state, heat or thresholds.
        NaiveDatetimeError: ``now`` has no timezone.
    """
    mid = require_str(memory_id, "memory_id")
    current = validate_state(state)
    value = require_finite(h, "heat")
    at = require_aware(now, "now")
    batch, immediate = _check_thresholds(batch_threshold, immediate_threshold)
    if value >= immediate:
        target = IMMEDIATE
    elif value >= batch:
        target = BATCHED
    else:
        target = SKIPPED
    if _RANK[target] <= _RANK[current]:
        return current, None
    return target, PromotionEvent(
        memory_id=mid, old_state=current, new_state=target, heat=value, at=at
    )


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A memory considered by a re-evaluation tick."""

    memory_id: str
    tenant: str
    state: str
    heat: float
    last_reevaluated_at: datetime | None

    def __post_init__(self) -> None:
        require_str(self.memory_id, "memory_id")
        require_str(self.tenant, "tenant")
        validate_state(self.state)
        object.__setattr__(self, "heat", require_finite(self.heat, "heat"))
        if self.last_reevaluated_at is not None:
            object.__setattr__(
                self,
                "last_reevaluated_at",
                require_aware(self.last_reevaluated_at, "last_reevaluated_at"),
            )


def select_candidates(
    candidates: Iterable[Candidate],
    *,
    now: datetime,
    cooldown: timedelta = DEFAULT_COOLDOWN,
    per_tenant_cap: int = DEFAULT_PER_TENANT_CAP,
) -> list[Candidate]:
    """Choose what one re-evaluation tick looks at.

    Only ``skipped``/``batched`` memories; none re-evaluated less than ``cooldown`` ago; per
    tenant at most ``per_tenant_cap``, hottest first (ties by memory id). Each tenant has its
    own cap, so one tenant's many hot memories never crowd out another tenant's.

    Returns:
        Candidates grouped by tenant (tenants in name order), hottest first within a tenant.

    Raises:
        InvalidInputError: ``cooldown`` negative, ``per_tenant_cap`` not an int >= 0.
        NaiveDatetimeError: ``now`` has no timezone.
    """
    current = require_aware(now, "now")
    if not isinstance(cooldown, timedelta) or cooldown < timedelta(0):
        raise InvalidInputError(f"cooldown must be a non-negative timedelta, got {shown(cooldown)}")
    cap = require_int(per_tenant_cap, "per_tenant_cap", minimum=0)
    by_tenant: dict[str, list[Candidate]] = {}
    for c in candidates:
        if not isinstance(c, Candidate):
            raise InvalidInputError(f"candidates must be Candidate objects, got {shown(c)}")
        if c.state == IMMEDIATE:
            continue
        if c.last_reevaluated_at is not None and current - c.last_reevaluated_at < cooldown:
            continue
        by_tenant.setdefault(c.tenant, []).append(c)
    selected: list[Candidate] = []
    for tenant in sorted(by_tenant):
        ranked = sorted(by_tenant[tenant], key=lambda c: (-c.heat, c.memory_id))
        selected.extend(ranked[:cap])
    return selected
