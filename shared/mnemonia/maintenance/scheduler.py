"""Running maintenance: :func:`maintain` (every job once) and the background
:class:`Scheduler` (each job at its own cadence)."""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from mnemonia.config import MnemoniaConfig
from mnemonia.errors import InvalidInputError, MnemoniaError, shown
from mnemonia.maintenance.jobs import JOB_NAMES, JOBS, MAINTAIN_ORDER, report_field
from mnemonia.maintenance.jobs import job as job_named
from mnemonia.maintenance.reports import MaintenanceReport, TenantMaintenance
from mnemonia.runtime import Runtime
from mnemonia.validation import callable_or_none
from mnemonia.validation import tenant as check_tenant

__all__ = ["DEFAULT_INTERVALS", "HasRuntime", "Scheduler", "maintain"]

log = logging.getLogger("mnemonia.maintenance")

DEFAULT_INTERVALS: Mapping[str, float | None] = {
    j.name: getattr(MnemoniaConfig, j.interval_key) for j in JOBS}
"""Seconds between two runs of each job in a :class:`Scheduler` by default: the config's
cadences (each job's ``interval_key``: ``enrich_interval``, ...); overridable per job."""


class HasRuntime(Protocol):
    """What the scheduler drives: anything with a ``runtime`` (a ``MemoryEngine``)."""

    @property
    def runtime(self) -> Runtime: ...


def _tenants(rt: Runtime, tenant: str | None) -> list[str]:
    return [tenant] if tenant is not None else rt.tenants()


def maintain(rt: Runtime, tenant: str | None = None, *,
             on_step: Callable[[str, str | None], None] | None = None) -> MaintenanceReport:
    """Run every job of :data:`~mnemonia.maintenance.jobs.JOBS` once, in
    :data:`~mnemonia.maintenance.jobs.MAINTAIN_ORDER`: the store-wide ones (the TTL sweep of
    expired items, one re-evaluation tick), then per tenant the others (the enrichment sweep,
    automatic eviction (only over ``max_memories``), consolidation, the SM-2 review pass).

    Args:
        rt: The store's runtime.
        tenant: One tenant, or ``None`` for all.
        on_step: Called as ``on_step(job, tenant)`` after each step (progress bars).
    """
    rt.check_open()
    callable_or_none(on_step, "on_step")

    def step(job: str, t: str | None) -> None:
        if on_step is not None:
            on_step(job, t)

    whole: dict[str, Any] = {}
    for j in MAINTAIN_ORDER:
        if j.scope == "store":
            whole[report_field(j)] = j.run(rt, None, False)
            step(j.name, None)
    done: list[TenantMaintenance] = []
    for t in _tenants(rt, tenant):
        mine: dict[str, Any] = {}
        for j in MAINTAIN_ORDER:
            if j.scope == "tenant":
                mine[report_field(j)] = j.run(rt, t, False)
                step(j.name, t)
        done.append(TenantMaintenance(tenant=t, **mine))
    report = MaintenanceReport(tenants=tuple(done), **whole)
    log.info("maintain %s", " ".join(f"{k}={v}" for k, v in report.counts.items()),
             extra={"mnemonia": {"job": "maintain", **report.counts}})
    return report


def _intervals(rt: Runtime, intervals: Mapping[str, float | None] | None,
               poll_interval: Any) -> dict[str, float | None]:
    """The default cadences with ``intervals`` over them; every bad value in one error."""
    problems: list[str] = []
    cfg = rt.config
    merged: dict[str, float | None] = {j.name: getattr(cfg, j.interval_key) for j in JOBS}
    for job, value in (intervals or {}).items():
        if job not in JOB_NAMES:
            problems.append(f"unknown job {shown(job)} (jobs: {', '.join(JOB_NAMES)})")
        elif value is not None and (isinstance(value, bool)
                                    or not isinstance(value, int | float)
                                    or not math.isfinite(value) or value <= 0):
            problems.append(
                f"interval of {shown(job)} = {shown(value)}: must be seconds > 0 or None")
        else:
            merged[job] = None if value is None else float(value)
    if isinstance(poll_interval, bool) or not isinstance(poll_interval, int | float) \
            or not math.isfinite(poll_interval) or poll_interval <= 0:
        problems.append(f"poll_interval={shown(poll_interval)}: must be seconds > 0")
    if problems:
        raise InvalidInputError("; ".join(problems))
    return merged


class Scheduler:
    """Runs maintenance jobs in a background thread, each at its own cadence.

    When a job is due is judged on ``engine.clock`` (so a :class:`~mnemonia.ManualClock`
    drives it in tests); between checks the thread sleeps ``poll_interval`` real seconds.
    Every job is due once at start. Defaults: :data:`DEFAULT_INTERVALS` (re-evaluation every
    ``config.reevaluation_interval`` = 10 minutes). A failing job is logged and retried at its
    next turn; the thread keeps going. ``stop()`` lets the running job finish, then joins.

    Example:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder()) as engine:
        ...     with Scheduler(engine, intervals={"consolidate": None}) as scheduler:
        ...         pass  # the application runs; maintenance happens in the background
        ...     scheduler.running
        False
    """

    jobs: tuple[str, ...] = JOB_NAMES
    """The jobs a scheduler runs (:data:`~mnemonia.maintenance.jobs.JOBS`, each at its
    cadence; ``None`` in ``intervals`` turns one off)."""

    def __init__(self, engine: HasRuntime, *,
                 intervals: Mapping[str, float | None] | None = None,
                 poll_interval: float = 1.0, tenants: Sequence[str] | None = None,
                 run_at_start: bool = True, follow_clock: bool = False) -> None:
        rt = engine.runtime
        merged = _intervals(rt, intervals, poll_interval)
        self.engine = engine
        self._rt = rt
        self.intervals: dict[str, float | None] = merged
        self.poll_interval = float(poll_interval)
        self.tenants = None if tenants is None else [check_tenant(t) for t in tenants]
        self.runs: dict[str, int] = {job: 0 for job in JOB_NAMES}
        self.last_reports: dict[str, Any] = {}
        self.errors: list[tuple[str, BaseException]] = []
        first = rt.now()
        self._next: dict[str, datetime | None] = {
            job: None if run_at_start or merged[job] is None
            else first + timedelta(seconds=merged[job] or 0.0) for job in JOB_NAMES}
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._listening = False
        self.follow_clock = follow_clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._listening or (self._thread is not None and self._thread.is_alive())

    def _run(self, name: str) -> Any:
        """Run one job: its report (a store-wide job), or ``{tenant: report}``."""
        rt = self._rt
        j = job_named(name)
        if j.scope == "store":
            return j.run(rt, None, False)
        tenants = self.tenants if self.tenants is not None else rt.tenants()
        return {t: j.run(rt, t, False) for t in tenants}

    def run_pending(self) -> dict[str, Any]:
        """Run, now and in this thread, every job whose time has come; returns their reports."""
        done: dict[str, Any] = {}
        with self._lock:
            for job in JOB_NAMES:
                every = self.intervals[job]
                if every is None:
                    continue
                now = self._rt.now()
                due = self._next[job]
                if due is not None and now < due:
                    continue
                self._next[job] = now + timedelta(seconds=every)
                if not self._rt.sql.kv.acquire_lease(job, self.holder, now=time.time(),
                                                     seconds=self._rt.config.maintenance_lease_seconds):
                    log.info("maintenance job %s skipped: another process holds its lease", job,
                             extra={"mnemonia": {"job": job, "skipped": "lease held"}})
                    continue
                try:
                    done[job] = self._run(job)
                except Exception as e:  # a job failure must not kill the thread
                    if self._rt.closed:
                        raise
                    self.errors.append((job, e))
                    log.exception("maintenance job %s failed; it runs again in %g s", job,
                                  every)
                    continue
                finally:
                    self._rt.sql.kv.release_lease(job, self.holder)
                self.runs[job] += 1
                self.last_reports[job] = done[job]
        return done

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._rt.closed:
                log.info("scheduler stopping: the engine is closed")
                return
            try:
                self.run_pending()
            except Exception:  # only raised once the engine is closed
                log.info("scheduler stopping: the engine was closed during a job")
                return
            self._stop.wait(self.poll_interval)

    def _on_clock(self, now: datetime) -> None:
        """A :class:`~mnemonia.ManualClock` moved: run what is due, in the mover's thread."""
        if self._rt.closed:
            self.stop()
            return
        self.run_pending()

    def start(self) -> Scheduler:
        """Start running the jobs in the background (a no-op if it is running): a daemon
        thread checks every ``poll_interval`` real seconds. With ``follow_clock`` and a
        :class:`~mnemonia.ManualClock`, no thread: each ``advance()``/``set()`` runs the jobs
        that came due before it returns (deterministic, what the engine does in tests)."""
        if self.running:
            return self
        subscribe = getattr(self._rt.clock, "subscribe", None)
        if self.follow_clock and subscribe is not None:
            subscribe(self._on_clock)
            self._listening = True
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="mnemonia-scheduler",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Ask the thread to stop, let a running job finish, and join it."""
        if self._listening:
            self._rt.clock.unsubscribe(self._on_clock)
            self._listening = False
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise MnemoniaError(
                    f"the maintenance scheduler did not stop within {timeout} s (a job is "
                    "still running); call stop() again to keep waiting")
        self._thread = None

    def __enter__(self) -> Scheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{j}={v:g}s" for j, v in self.intervals.items() if v is not None)
        return f"Scheduler({jobs}, running={self.running})"
