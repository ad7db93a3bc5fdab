"""The frozen report dataclasses every maintenance job returns (``report.as_dict()`` gives
JSON for logs, tables and the CLI)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, ClassVar

__all__ = [
    "ConsolidationReport",
    "EnrichmentReport",
    "EvictionReport",
    "ExpiryReport",
    "MaintenanceReport",
    "Promotion",
    "ReevaluationReport",
    "Report",
    "ReviewReport",
    "TenantMaintenance",
]

def json_default(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


@dataclass(frozen=True, kw_only=True)
class Report:
    TITLE: ClassVar[str] = ""
    """What a job's report is called in tables (``re-evaluation``)."""
    SUMMARY: ClassVar[Mapping[str, str]] = {}
    """The counts a summary shows (``mnemonia maintain all``'s table): column -> field."""

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-safe dict."""
        return json.loads(json.dumps(asdict(self), default=json_default))  # type: ignore[no-any-return]

    def summary(self) -> dict[str, int]:
        """The headline counts (:attr:`SUMMARY`), ``{column: count}``."""
        return {column: getattr(self, name) for column, name in self.SUMMARY.items()}


@dataclass(frozen=True, kw_only=True)
class ExpiryReport(Report):
    """What one TTL sweep did: ``expired`` items removed, from ``tenants`` tenants."""

    TITLE = "TTL sweep"
    SUMMARY: ClassVar[Mapping[str, str]] = {"expired": "expired"}

    expired: int = 0
    tenants: int = 0


@dataclass(frozen=True, kw_only=True)
class EvictionReport(Report):
    """What one eviction run did.

    Attributes:
        tenant: The tenant.
        active: Active (not soft-deleted) memories before the run.
        protected: Active memories that may never be evicted (importance > 0.9, pinned,
            immediate).
        allowed: How many the run was allowed to evict (the budget, or fewer in automatic mode).
        evicted: How many were soft-deleted.
        ids: The evicted ids, in the order of ``eviction_policy`` (first to go first).
        reason: ``budget`` (explicit run), ``over_max_memories`` or ``not_over_max_memories``.
    """

    TITLE = "eviction"
    SUMMARY: ClassVar[Mapping[str, str]] = {"evicted": "evicted"}

    tenant: str
    active: int
    protected: int
    allowed: int
    evicted: int
    ids: tuple[str, ...] = ()
    reason: str = "budget"


@dataclass(frozen=True, kw_only=True)
class ConsolidationReport(Report):
    """What one consolidation run did.

    Attributes:
        scanned: Unconsolidated active memories considered.
        candidate_pairs: Pairs of distinct word sets proposed by MinHash LSH.
        verified_pairs: Those whose exact Jaccard meets the threshold.
        groups: Groups formed.
        concepts_created: New ``concept`` memories.
        members_consolidated: Memories marked as part of a concept.
        concept_ids: The concepts written by this run.
    """

    TITLE = "consolidation"
    SUMMARY: ClassVar[Mapping[str, str]] = {"concepts": "concepts_created",
                                            "consolidated": "members_consolidated"}

    tenant: str
    scanned: int
    candidate_pairs: int
    verified_pairs: int
    groups: int
    concepts_created: int
    members_consolidated: int
    concept_ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ReviewReport(Report):
    """What one SM-2 review pass did.

    Attributes:
        due: Enriched memories due for review.
        reviewed: Reviewed now (at most ``review_batch``).
        from_use: Qualities taken from reported use (the reply echoed the memory).
        from_recall: Qualities taken from recall ranks since the last review.
        estimated: Qualities estimated (no signal).
        ids: Reviewed ids, in review order.
    """

    TITLE = "review"
    SUMMARY: ClassVar[Mapping[str, str]] = {"reviewed": "reviewed"}

    tenant: str
    due: int
    reviewed: int
    from_use: int
    from_recall: int
    estimated: int
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EnrichmentReport(Report):
    """What one enrichment sweep did: ``pending`` memories waited, ``enriched`` were done."""

    TITLE = "enrichment"
    SUMMARY: ClassVar[Mapping[str, str]] = {"enriched": "enriched"}

    tenant: str
    pending: int
    enriched: int
    relations_added: int


@dataclass(frozen=True, kw_only=True)
class Promotion(Report):
    """One ``reevaluation_promoted`` change."""

    memory_id: str
    tenant: str
    old_state: str
    new_state: str
    heat: float


@dataclass(frozen=True, kw_only=True)
class ReevaluationReport(Report):
    """What one re-evaluation tick did (all tenants).

    Attributes:
        window_start: The last successful tick, or one hour back at most: the memories
            with access-log rows added since were looked at, each one's heat counting its
            whole last hour.
        window_end: The tick time.
        scanned: Access-log rows added since the last tick (stamped within the last hour).
        memories: Distinct memories among them (tenants with intelligence enabled).
        candidates: Of those, ``skipped``/``batched`` active memories.
        reevaluated: Candidates past the cooldown and within the per-tenant cap.
        promoted: Promotions made.
        disabled_tenants: Tenants left alone (``intelligence_disabled_tenants``).
        promotions: The promotions, per tenant hottest first.
        enriched: Memories promoted to ``immediate`` and enriched in the same tick.
        deferred: Candidates left out by the cap or the cooldown; they compete again in the
            next tick (see :data:`mnemonia.maintenance.reevaluate.DEFERRED_KEY`).
    """

    TITLE = "re-evaluation"
    SUMMARY: ClassVar[Mapping[str, str]] = {"scanned": "scanned", "promoted": "promoted"}

    window_start: datetime
    window_end: datetime
    scanned: int
    memories: int
    candidates: int
    reevaluated: int
    promoted: int
    disabled_tenants: tuple[str, ...] = ()
    promotions: tuple[Promotion, ...] = ()
    enriched: int = 0
    deferred: int = 0


@dataclass(frozen=True, kw_only=True)
class TenantMaintenance(Report):
    """The per-tenant part of :class:`MaintenanceReport`."""

    tenant: str
    enrichment: EnrichmentReport
    eviction: EvictionReport
    consolidation: ConsolidationReport
    review: ReviewReport


@dataclass(frozen=True, kw_only=True)
class MaintenanceReport(Report):
    """What :func:`maintain` did: one re-evaluation tick, then every tenant's jobs."""

    reevaluation: ReevaluationReport
    tenants: tuple[TenantMaintenance, ...] = ()
    expiry: ExpiryReport = ExpiryReport()

    @property
    def counts(self) -> dict[str, int]:
        """Totals over tenants: enriched, evicted, concepts, consolidated, reviewed, promoted."""
        t = self.tenants
        return {
            "tenants": len(t),
            "enriched": sum(x.enrichment.enriched for x in t) + self.reevaluation.enriched,
            "evicted": sum(x.eviction.evicted for x in t),
            "concepts_created": sum(x.consolidation.concepts_created for x in t),
            "members_consolidated": sum(x.consolidation.members_consolidated for x in t),
            "reviewed": sum(x.review.reviewed for x in t),
            "scanned": self.reevaluation.scanned,
            "promoted": self.reevaluation.promoted,
            "expired": self.expiry.expired,
        }

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out["counts"] = self.counts
        return out

