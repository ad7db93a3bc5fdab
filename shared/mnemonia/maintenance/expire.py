"""The TTL sweep: keyed items (:mod:`mnemonia.items`) whose time ran out are removed for
good, vectors, rows and logs, like a hard ``forget``. Expired items are already gone from
every read; the sweep frees their space. It runs on the scheduler's ``expire`` cadence
(``config.expire_interval``) and in :func:`~mnemonia.maintenance.maintain`."""

from __future__ import annotations

import logging

from mnemonia import lifecycle
from mnemonia.clock import to_ts
from mnemonia.maintenance.reports import ExpiryReport
from mnemonia.runtime import Runtime

__all__ = ["SWEEP_BATCH", "expire"]

log = logging.getLogger("mnemonia.maintenance")

SWEEP_BATCH = 500
"""Expired items read (then removed) per round of the sweep."""


def expire(rt: Runtime) -> ExpiryReport:
    """Remove every item that expired by now (on the runtime's clock)."""
    rt.check_open()
    now = to_ts(rt.now())
    total = 0
    tenants: set[str] = set()
    while True:
        with rt.reading() as conn:
            found = rt.sql.items.expired_items(conn, now, SWEEP_BATCH)
        by_tenant: dict[str, list[str]] = {}
        for memory_id, tenant in found:
            by_tenant.setdefault(tenant, []).append(memory_id)
        for tenant, ids in by_tenant.items():
            lifecycle.purge(rt, tenant, ids)
        total += len(found)
        tenants |= set(by_tenant)
        if len(found) < SWEEP_BATCH:
            break
    report = ExpiryReport(expired=total, tenants=len(tenants))
    log.info("expire expired=%d tenants=%d", total, len(tenants),
             extra={"mnemonia": {"job": "expire", **report.as_dict()}})
    return report
