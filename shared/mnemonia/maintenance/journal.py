"""The last report of each maintenance job, kept in the side-store (``kv``) so that another
process (the inspector, ``mnemonia ui``) can show what maintenance last did and when.

One row per job and tenant (re-evaluation: one row, it spans the tenants), overwritten by the
next run; long id lists are cut to their first :data:`KEPT_IDS`, with the full count beside.
"""

from __future__ import annotations

from typing import Any

from mnemonia.clock import to_ts
from mnemonia.maintenance.reports import Report
from mnemonia.runtime import Runtime

__all__ = ["KEPT_IDS", "LAST_REPORT_KEY", "last_reports", "remember"]

LAST_REPORT_KEY = "maintenance:last:"
"""``kv`` key prefix: ``maintenance:last:<job>`` or ``maintenance:last:<job>:<tenant>``."""
KEPT_IDS = 20
"""Ids kept of each id list of a report (``ids``, ``concept_ids``, ``promotions``)."""


def _trimmed(report: dict[str, Any]) -> dict[str, Any]:
    out = dict(report)
    for key in ("ids", "concept_ids", "promotions"):
        value = out.get(key)
        if isinstance(value, list) and len(value) > KEPT_IDS:
            out[key] = value[:KEPT_IDS]
            out[f"{key}_total"] = len(value)
    return out


def remember(rt: Runtime, job: str, report: Report, tenant: str | None = None) -> None:
    """Store ``report`` as the last one of ``job`` (for ``tenant``), with the run's time."""
    key = LAST_REPORT_KEY + job + ("" if tenant is None else f":{tenant}")
    entry = {"job": job, "tenant": tenant, "at": to_ts(rt.now()),
             "report": _trimmed(report.as_dict())}
    with rt.writing() as conn:
        rt.sql.kv.kv_set(conn, key, entry)


def last_reports(rt: Runtime, tenant: str | None = None) -> list[dict[str, Any]]:
    """The stored last reports (``job``, ``tenant``, ``at`` seconds, ``report``), newest
    first; with ``tenant``, that tenant's and the cross-tenant ones."""
    with rt.reading() as conn:
        entries = [v for _, v in rt.sql.kv.kv_items(conn, LAST_REPORT_KEY) if isinstance(v, dict)]
    if tenant is not None:
        entries = [e for e in entries if e.get("tenant") in (None, tenant)]
    return sorted(entries, key=lambda e: (-float(e.get("at", 0.0)), str(e.get("job")),
                                          str(e.get("tenant"))))
