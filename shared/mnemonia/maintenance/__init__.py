"""Maintenance: eviction, consolidation, the SM-2 review worker, enrichment, re-evaluation,
the TTL sweep of expired keyed items, the snapshot, use reports, and a background
:class:`Scheduler` (DESIGN section 5).

One module per job, listed once in the registry :data:`JOBS` (:mod:`.jobs`: name, scope,
config key of its cadence, how to run it, its report), which :func:`maintain`, the
:class:`Scheduler` and ``mnemonia maintain JOB`` read. Each job takes the store's
:class:`~mnemonia.runtime.Runtime` (the engine's public methods ``engine.evict``,
``engine.consolidate``, ... call them) and returns a
frozen report dataclass with counts (``report.as_dict()`` for JSON or tables), logging one
structured line on the ``mnemonia.maintenance`` logger. Scoring comes from the pure
:mod:`mnemonia.scoring` core; time always comes from the runtime's clock.

Example:
    >>> import tempfile
    >>> from datetime import datetime, timezone
    >>> from mnemonia import ManualClock, MemoryEngine
    >>> from mnemonia.embeddings import HashingEmbedder
    >>> clock = ManualClock(datetime(2025, 1, 1, tzinfo=timezone.utc))
    >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder(),
    ...                        clock=clock) as engine:
    ...     _ = engine.add_many([{"text": "The deploy runs every Friday at noon"},
    ...                          {"text": "the deploy runs every friday at noon."}],
    ...                         tenant="ops")
    ...     engine.consolidate(tenant="ops").concepts_created
    1
"""

from __future__ import annotations

from mnemonia.maintenance.consolidate import (
    LSH_RECALL_AT_THRESHOLD,
    MINHASH_PERMUTATIONS,
    concept_id,
    concept_item,
    consolidate,
    lsh_params,
)
from mnemonia.maintenance.enrich import enrich
from mnemonia.maintenance.evict import evict
from mnemonia.maintenance.expire import expire
from mnemonia.maintenance.jobs import JOB_NAMES, JOBS, Job, job
from mnemonia.maintenance.reevaluate import (
    DEFERRED_KEY,
    LAST_ROW_KEY,
    LAST_TICK_KEY,
    reevaluate,
    window_inputs,
)
from mnemonia.maintenance.reports import (
    ConsolidationReport,
    EnrichmentReport,
    EvictionReport,
    ExpiryReport,
    MaintenanceReport,
    Promotion,
    ReevaluationReport,
    ReviewReport,
    TenantMaintenance,
)
from mnemonia.maintenance.review import (
    echoes,
    estimate_quality,
    quality_from_rank,
    report_use,
    review,
)
from mnemonia.maintenance.scheduler import DEFAULT_INTERVALS, Scheduler, maintain
from mnemonia.maintenance.snapshot import snapshot

__all__ = [
    "DEFAULT_INTERVALS",
    "DEFERRED_KEY",
    "JOBS",
    "JOB_NAMES",
    "LAST_ROW_KEY",
    "LAST_TICK_KEY",
    "LSH_RECALL_AT_THRESHOLD",
    "MINHASH_PERMUTATIONS",
    "ConsolidationReport",
    "EnrichmentReport",
    "EvictionReport",
    "ExpiryReport",
    "Job",
    "MaintenanceReport",
    "Promotion",
    "ReevaluationReport",
    "ReviewReport",
    "Scheduler",
    "TenantMaintenance",
    "concept_id",
    "concept_item",
    "consolidate",
    "echoes",
    "enrich",
    "estimate_quality",
    "evict",
    "expire",
    "job",
    "lsh_params",
    "maintain",
    "quality_from_rank",
    "reevaluate",
    "report_use",
    "review",
    "snapshot",
    "window_inputs",
]
