"""The one registry of maintenance jobs: :data:`JOBS`.

:func:`~mnemonia.maintenance.scheduler.maintain`, the :class:`~mnemonia.maintenance.Scheduler`
(its jobs, its default cadences) and ``mnemonia maintain JOB`` (the jobs it accepts, its help,
its table) all read it. A new job is its own module (a function of the runtime returning a
report), its report class in :mod:`~mnemonia.maintenance.reports` (with a field for it in
:class:`~mnemonia.maintenance.reports.TenantMaintenance` or
:class:`~mnemonia.maintenance.reports.MaintenanceReport`), its cadence in
:class:`~mnemonia.config.MnemoniaConfig`, and one :class:`Job` line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Literal, get_type_hints

from mnemonia.config import MnemoniaConfig
from mnemonia.errors import InvalidInputError, shown
from mnemonia.maintenance.consolidate import consolidate
from mnemonia.maintenance.enrich import enrich
from mnemonia.maintenance.evict import evict
from mnemonia.maintenance.expire import expire
from mnemonia.maintenance.reevaluate import reevaluate
from mnemonia.maintenance.reports import (
    ConsolidationReport,
    EnrichmentReport,
    EvictionReport,
    ExpiryReport,
    MaintenanceReport,
    ReevaluationReport,
    Report,
    ReviewReport,
    TenantMaintenance,
)
from mnemonia.maintenance.review import review
from mnemonia.runtime import Runtime

__all__ = ["JOBS", "JOB_NAMES", "MAINTAIN_ORDER", "Job", "Scope", "job", "report_field"]

Scope = Literal["tenant", "store"]
"""``tenant``: the job runs once per tenant; ``store``: once over the whole store."""

Run = Callable[[Runtime, "str | None", bool], Report]
"""``run(rt, tenant, explicit)``: ``tenant`` is ``None`` for a store-wide job; ``explicit`` is
True when the job was asked for by name (``mnemonia maintain evict``: eviction spends its full
budget, as ``engine.evict()`` does) and False in ``maintain()`` and the scheduler (eviction only
over ``max_memories``)."""


@dataclass(frozen=True)
class Job:
    """One maintenance job.

    Attributes:
        name: The job's name (scheduler, leases, logs, ``mnemonia maintain NAME``).
        scope: ``tenant`` (run per tenant) or ``store`` (run once for every tenant).
        interval_key: The :class:`~mnemonia.config.MnemoniaConfig` field holding its cadence
            (seconds between two runs in the scheduler).
        run: ``run(rt, tenant, explicit)`` runs it once and returns its report.
        report: The report class it returns; ``maintain()`` puts it in the field of that type
            of :class:`TenantMaintenance` (tenant jobs) or :class:`MaintenanceReport` (store
            jobs), the CLI shows its :meth:`~mnemonia.maintenance.reports.Report.summary`.
        maintain_first: ``maintain()`` runs it before every other job.
    """

    name: str
    scope: Scope
    interval_key: str
    run: Run
    report: type[Report]
    maintain_first: bool = False

    def __post_init__(self) -> None:
        if self.scope not in ("tenant", "store"):
            raise ValueError(f"job {self.name}: scope={self.scope!r}, must be tenant or store")
        if self.interval_key not in {f.name for f in fields(MnemoniaConfig)}:
            raise ValueError(f"job {self.name}: interval_key={self.interval_key!r} is not a "
                             "MnemoniaConfig field")


def _tenant(tenant: str | None) -> str:
    if tenant is None:
        raise InvalidInputError("a per-tenant maintenance job needs a tenant")
    return tenant


def _enrich(rt: Runtime, tenant: str | None, explicit: bool) -> Report:
    return enrich(rt, tenant=_tenant(tenant))


def _evict(rt: Runtime, tenant: str | None, explicit: bool) -> Report:
    return evict(rt, tenant=_tenant(tenant), force=explicit)


def _consolidate(rt: Runtime, tenant: str | None, explicit: bool) -> Report:
    return consolidate(rt, tenant=_tenant(tenant), summariser=rt.summariser)


def _review(rt: Runtime, tenant: str | None, explicit: bool) -> Report:
    return review(rt, tenant=_tenant(tenant))


def _reevaluate(rt: Runtime, tenant: str | None, explicit: bool) -> Report:
    return reevaluate(rt)


def _expire(rt: Runtime, tenant: str | None, explicit: bool) -> Report:
    return expire(rt)


JOBS: tuple[Job, ...] = (
    Job("enrich", "tenant", "enrich_interval", _enrich, EnrichmentReport),
    Job("evict", "tenant", "evict_interval", _evict, EvictionReport),
    Job("consolidate", "tenant", "consolidate_interval", _consolidate, ConsolidationReport),
    Job("review", "tenant", "review_interval", _review, ReviewReport),
    Job("reevaluate", "store", "reevaluation_interval", _reevaluate, ReevaluationReport),
    # first in maintain(): what expired is gone before the tick could promote it
    Job("expire", "store", "expire_interval", _expire, ExpiryReport, maintain_first=True),
)
"""Every maintenance job, in the order the scheduler runs the ones due."""

JOB_NAMES: tuple[str, ...] = tuple(j.name for j in JOBS)
"""The jobs' names, in :data:`JOBS` order."""

MAINTAIN_ORDER: tuple[Job, ...] = tuple(sorted(JOBS, key=lambda j: not j.maintain_first))
"""The order of ``maintain()``: the ``maintain_first`` jobs, then the others as in
:data:`JOBS` (``maintain()`` runs the store-wide ones first, then each tenant's)."""


def job(name: str) -> Job:
    """The job called ``name``.

    Raises:
        InvalidInputError: No job has that name (the message lists the jobs).
    """
    for j in JOBS:
        if j.name == name:
            return j
    raise InvalidInputError(
        f"unknown maintenance job {shown(name)}: the jobs are {', '.join(JOB_NAMES)}")


@cache
def report_field(j: Job) -> str:
    """The field of :class:`TenantMaintenance` (a tenant job) or :class:`MaintenanceReport` (a
    store job) that holds ``j``'s report: the one field of type ``j.report``."""
    whole = TenantMaintenance if j.scope == "tenant" else MaintenanceReport
    hints = get_type_hints(whole)
    found = [f.name for f in fields(whole) if hints[f.name] is j.report]
    if len(found) != 1:
        raise TypeError(f"job {j.name}: {whole.__name__} needs exactly one field of type "
                        f"{j.report.__name__} (found {found})")
    return found[0]
