"""The enrichment sweep: batched memories get entities, automatic relations and their SM-2
schedule (``immediate`` ones were enriched at ingest; ``skipped`` ones never are)."""

from __future__ import annotations

import logging

from mnemonia import ingest
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.reports import EnrichmentReport
from mnemonia.runtime import Runtime
from mnemonia.scoring import reevaluation as reeval

__all__ = ["enrich"]

log = logging.getLogger("mnemonia.maintenance")


def enrich(rt: Runtime, *, tenant: str) -> EnrichmentReport:
    """The enrichment sweep: every active ``batched`` (or ``immediate``) memory not enriched
    yet gets entities, automatic relations and its SM-2 schedule. ``skipped`` never does."""
    rt.check_open()
    with rt.reading() as conn:
        pending = rt.sql.memories.unenriched(conn, tenant, reeval.SKIPPED)
    added = ingest.enrich_ids(rt, tenant, pending)
    with rt.reading() as conn:
        left = len(rt.sql.memories.select_ids(conn, pending, enriched=False))
    report = EnrichmentReport(tenant=tenant, pending=len(pending),
                              enriched=len(pending) - left, relations_added=added)
    log.info("enrich tenant=%s pending=%d enriched=%d relations_added=%d", tenant,
             report.pending, report.enriched, added,
             extra={"mnemonia": {"job": "enrich", **report.as_dict()}})
    remember(rt, "enrich", report, tenant)
    return report
