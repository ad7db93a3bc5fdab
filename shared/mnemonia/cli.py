"""The ``mnemonia`` command line: add, recall, forget, restore, feedback, relate,
unsupersede, stats, mcp (the MCP server), maintain, doctor, export, import, demo, bench and ui
(the memory inspector).

The store folder comes from ``--path`` (or ``MNEMONIA_PATH``; default ``./memory``).

A user error never prints a traceback: every command runs inside :func:`user_errors`, which
turns a :class:`~mnemonia.errors.MnemoniaError` into its message and exit status 2.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mnemonia.errors import InvalidInputError, MnemoniaError
from mnemonia.maintenance.jobs import JOB_NAMES, JOBS, report_field
from mnemonia.maintenance.jobs import job as job_named
from mnemonia.validation import positive_int
from mnemonia.validation import tenant as check_tenant

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Mnemonia: long-term memory for LLM applications.")
console = Console()

PathOpt = Annotated[Path, typer.Option("--path", envvar="MNEMONIA_PATH",
                                       help="Embedded store folder.")]
TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="Tenant (whose memory).")]


def _open(path: Path | None, **kwargs: Any) -> Any:
    from mnemonia.engine import MemoryEngine

    return MemoryEngine.open(path, **kwargs)


def _fail(e: Exception) -> None:
    # The message may carry user text ("[/x]" in a memory): print it literally, one line.
    console.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    raise typer.Exit(2)


@contextmanager
def user_errors() -> Iterator[None]:
    """A :class:`MnemoniaError` inside becomes ``error: <message>`` and exit status 2, never
    a traceback. Also a decorator: ``@app.command()`` then ``@user_errors()``."""
    try:
        yield
    except MnemoniaError as e:
        _fail(e)


def hits_table(result: Any, title: str | None = None) -> Table:
    """A readable table of recall hits with their explanations."""
    table = Table(title=escape(title or f"recall: {result.query!r}"), show_lines=False)
    for col, kw in (("#", {"justify": "right"}), ("memory", {"max_width": 58}),
                    ("cos", {"justify": "right"}), ("kw", {"justify": "right"}),
                    ("via", {"max_width": 28}), ("R", {"justify": "right"}),
                    ("util", {"justify": "right"}), ("score", {"justify": "right"})):
        table.add_column(col, **kw)
    for rank, h in enumerate(result.memories, start=1):
        e = h.explanation
        if e.path:
            via = f"{e.path[1]} <- {e.path[0][:6]}"
        elif e.entity:
            via = f"entity {e.entity}"
        else:
            via = "seed"
        text = h.memory.text
        if h.supersedes:
            text += " [updates older]"
        if h.contradictions:
            text += " [contradicted]"
        table.add_row(str(rank), escape(text), "-" if e.cosine is None else f"{e.cosine:.2f}",
                      "-" if e.keyword is None else f"{e.keyword:.2f}", escape(via),
                      f"{e.retention:.3f}", f"{e.utility:.2f}", f"{e.score:.3f}")
    return table


@app.command()
@user_errors()
def add(text: str, path: PathOpt = Path("memory"), tenant: TenantOpt = "default",
        importance: float = 0.5, kind: str = "episode", topic: str | None = None,
        entity: Annotated[list[str] | None, typer.Option(help="type:name, repeatable")] = None,
        session: str | None = None) -> None:
    """Store one memory."""
    with _open(path) as engine:
        mem = engine.add(text, tenant=tenant, importance=importance, kind=kind, topic=topic,
                         entities=entity or None, session_id=session)
    console.print(f"added {escape(mem.id)} (state {mem.state})")


@app.command()
@user_errors()
def recall(query: Annotated[str, typer.Argument(help="what to recall for ('' with --entity)")]
           = "", path: PathOpt = Path("memory"), tenant: TenantOpt = "default",
           k: Annotated[int, typer.Option("-k", "--k")] = 3,
           entity: Annotated[str | None, typer.Option(help="type:name")] = None,
           episode_k: int | None = None, mode: str | None = None, topic: str | None = None,
           as_table: Annotated[bool, typer.Option("--table", help="explanation table")] = False,
           as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Recall memories for QUERY: the RELEVANT EPISODES / RELEVANT MEMORY sections (--table for
    the explanations, --json for machines)."""
    with _open(path) as engine:
        res = engine.recall(query, tenant=tenant, k=k, entity=entity, episode_k=episode_k,
                            mode=mode, topic=topic)
    if as_json:
        console.print_json(json.dumps({
            "query": res.query, "tenant": res.tenant, "mode": res.mode,
            "memories": [{"id": h.memory.id, "text": h.memory.text, "score": h.score,
                          **h.explanation.to_dict()} for h in res.memories],
            "episodes": [{"id": h.memory.id, "text": h.memory.text, "score": h.score}
                         for h in res.episodes]}))
    elif as_table:
        console.print(hits_table(res))
    else:
        console.print(res.render() or "(nothing recalled)", markup=False, highlight=False)


@app.command()
@user_errors()
def forget(memory_id: str, path: PathOpt = Path("memory"), tenant: TenantOpt = "default",
           hard: bool = False) -> None:
    """Soft-delete a memory (or remove it for good with --hard)."""
    with _open(path) as engine:
        engine.forget(memory_id, tenant=tenant, hard=hard)
    console.print(f"{'removed' if hard else 'forgot'} {escape(memory_id)}")


@app.command()
@user_errors()
def restore(memory_id: str, path: PathOpt = Path("memory"),
            tenant: TenantOpt = "default") -> None:
    """Bring back a soft-deleted memory."""
    with _open(path) as engine:
        engine.restore(memory_id, tenant=tenant)
    console.print(f"restored {escape(memory_id)}")


@app.command()
@user_errors()
def feedback(memory_id: str, quality: int, path: PathOpt = Path("memory"),
             tenant: TenantOpt = "default",
             query: Annotated[str | None, typer.Option(
                 help="the question the memory answered (4-5: recall lifts it for similar "
                      "questions)")] = None) -> None:
    """Review a memory with QUALITY 0..5 (SM-2); 4-5 count as a use, 0-2 as a failed one."""
    with _open(path) as engine:
        mem = engine.feedback(memory_id, quality, tenant=tenant, query=query)
    console.print(f"next review in {mem.sm2.interval_days} day(s); utility {mem.utility:.2f}")


@app.command()
@user_errors()
def relate(src: str, dst: str, rel_type: str, path: PathOpt = Path("memory"),
           tenant: TenantOpt = "default", strength: float = 1.0) -> None:
    """Add a typed relation SRC -> DST (implies, part_of, related_to, ...)."""
    with _open(path) as engine:
        engine.relate(src, dst, rel_type, tenant=tenant, strength=strength)
    console.print(escape(f"{src} -{rel_type}-> {dst}"))


@app.command()
@user_errors()
def unsupersede(old_id: str, path: PathOpt = Path("memory"),
                tenant: TenantOpt = "default") -> None:
    """Undo the supersession of OLD_ID: it comes back to recall, and the pair is never
    superseded automatically again."""
    with _open(path) as engine:
        new_id = engine.get(old_id, tenant=tenant).superseded_by
        engine.unsupersede(old_id, tenant=tenant)
    console.print(escape(f"{old_id} is no longer superseded by {new_id} (kept apart)"))


@app.command()
@user_errors()
def stats(path: PathOpt = Path("memory"), tenant: Annotated[str | None, typer.Option()] = None
          ) -> None:
    """Counts of memories, states, relations and accesses."""
    with _open(path) as engine:
        data = engine.stats(tenant)
    console.print_json(json.dumps(data))


@app.command("mcp")
@user_errors()
def mcp_cmd(path: PathOpt = Path("memory"),
            tenant: Annotated[str | None, typer.Option(
                "--tenant", "-t", help="Default tenant of the tools (a call may name its own; "
                "without either a call is refused).")] = None,
            http: Annotated[bool, typer.Option(
                "--http", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of "
                "stdio.")] = False,
            host: Annotated[str, typer.Option(help="With --http: the address to bind.")]
            = "127.0.0.1",
            port: Annotated[int, typer.Option(help="With --http: the port.")] = 8000) -> None:
    """Serve the store to MCP clients: remember, recall, forget, restore, feedback, relate,
    stats (stdio by default: register the command in the client's config)."""
    from mnemonia.mcp import serve

    serve(path, tenant=tenant, http=http, host=host, port=port)


@app.command()
@user_errors()
def maintain(job: Annotated[str, typer.Argument(
                 help=f"{'|'.join(JOB_NAMES)}|all (every job once)")]
             = "all", path: PathOpt = Path("memory"),
             tenant: Annotated[str | None, typer.Option()] = None,
             every: Annotated[str | None, typer.Option(
                 help="run every job on this cadence as a process of its own, until Ctrl-C "
                      "(e.g. 30s, 10m, 1h)")] = None,
             rounds: Annotated[int | None, typer.Option(
                 help="with --every: stop after this many rounds")] = None,
             dry_run: Annotated[bool, typer.Option(
                 "--dry-run", help="evict only: list what eviction takes next, each "
                 "memory's signals and why it goes before the next; change nothing")] = False,
             limit: Annotated[int, typer.Option(help="with --dry-run: rows per tenant")] = 20
             ) -> None:
    """Run maintenance jobs, with a progress bar (or, with --every, keep running them)."""
    seconds = None if every is None else parse_duration(every)
    if dry_run and (job != "evict" or seconds is not None):
        raise InvalidInputError(f"--dry-run: only for `maintain evict` without --every, got "
                                f"job={job!r}{' with --every' if seconds else ''}")
    positive_int(limit, "limit")
    with _open(path, maintenance="manual") as engine:
        if dry_run:
            _evict_dry_run(engine, tenant, limit)
        elif seconds is None:
            run_maintenance(engine, job=job, tenant=tenant, console=console)
        else:
            _maintain_every(engine, seconds, tenant, rounds)


def _evict_dry_run(engine: Any, tenant: str | None, limit: int) -> None:
    """Per tenant, what eviction takes next (``*``: in the next explicit run), the signals
    its policy reads and why each goes before the next; nothing is written."""
    from mnemonia.inspection import fading

    for t in [check_tenant(tenant)] if tenant is not None else engine.tenants():
        f = fading(engine.runtime, t, limit=limit)
        table = Table(title=escape(f"evict --dry-run {t}: policy {f.policy}, one run takes "
                                   f"{f.next_run} of {f.active} active"))
        for col in ("#", "id", "memory", "state", "uses", "words", "info", "priority",
                    "goes before the next because"):
            table.add_column(col, max_width=40 if col == "memory" else None)
        for n, i in enumerate(f.items, start=1):
            table.add_row(f"{n}{'*' if i.next_run else ''}", escape(i.memory.id),
                          escape(i.memory.text), i.memory.state, str(i.uses),
                          str(i.content_words), f"{i.information:.3g}", f"{i.priority:.4f}",
                          escape(i.reason))
        console.print(table)


def parse_duration(text: str) -> float:
    """Seconds of ``30s``, ``10m``, ``1h`` or ``1.5h``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh])\s*", text or "")
    if m is None or float(m.group(1)) <= 0:
        raise InvalidInputError(
            f"--every={text!r}: must be a positive duration like 30s, 10m or 1h")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def _maintain_every(engine: Any, seconds: float, tenant: str | None,
                    rounds: int | None) -> None:
    """``mnemonia maintain --every``: the background scheduler as a foreground process."""
    from mnemonia.maintenance import Scheduler

    if rounds is not None and rounds < 1:
        raise InvalidInputError(f"--rounds={rounds!r}: must be an integer >= 1")
    scheduler = Scheduler(engine, intervals=dict.fromkeys(JOB_NAMES, seconds),
        tenants=None if tenant is None else [tenant])
    console.print(f"maintaining {engine.path} every {seconds:g} s (Ctrl-C stops)")
    done_rounds = 0
    try:
        while rounds is None or done_rounds < rounds:
            done = scheduler.run_pending()
            if done:
                done_rounds += 1
                console.print(f"{engine.clock.now():%Y-%m-%d %H:%M:%S} round {done_rounds}: "
                              f"ran {', '.join(done)}; runs so far {scheduler.runs}")
            if rounds is None or done_rounds < rounds:
                time.sleep(min(1.0, seconds))
    except KeyboardInterrupt:
        console.print("stopped")


_STAGES = {"export": "export", "check": "check the file", "write": "write memories",
           "commit": "commit"}


@contextmanager
def _progress(out: Console) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar per stage of an export or import, fed by ``on_progress``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=out, transient=False)
    tasks: dict[str, Any] = {}

    def update(stage: str, done: int, total: int) -> None:
        if not tasks:
            bar.start()  # on the first report: a command that fails early prints no bar
        if stage not in tasks:
            tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=max(total, 1))
        bar.update(tasks[stage], completed=done, total=max(total, 1))

    try:
        yield update
    finally:
        if tasks:
            bar.stop()


def _found(t: Any) -> str:
    """What a tenant's health row found (or had repaired), in words."""
    found = [f"{n} {what}" for n, what in (
        (t.missing, "missing in Chroma"), (t.orphans, "orphan(s) in Chroma"),
        (t.side_missing, "missing in the side-store"),
        (t.keyword_off or 0, "off in the keyword index")) if n]
    if not found:
        return "ok"
    return ("repaired: " if t.repaired else "") + ", ".join(found)


def doctor_table(report: Any) -> Table:
    """A table of a :class:`~mnemonia.consistency.DoctorReport`: one row per tenant."""
    table = Table(title="mnemonia doctor" + (" --repair" if report.repair else ""))
    table.add_column("tenant")
    for col in ("memories", "active", "chroma vectors", "side-store vectors",
                "keyword rows"):
        table.add_column(col, justify="right")
    table.add_column("status")
    for t in report.tenants:
        table.add_row(t.tenant, str(t.memories), str(t.active), str(t.chroma_vectors),
                      str(t.side_vectors),
                      "n/a" if t.keyword_rows is None else str(t.keyword_rows), _found(t))
    kw = "n/a" if report.stray_keyword_rows is None else str(report.stray_keyword_rows)
    table.caption = (f"keyword index: {report.keyword_index}; of no memory: "
                     f"{report.stray_side_vectors} side-store vectors, {kw} keyword rows"
                     + ("" if report.tenants else "; no tenants"))
    return table


@app.command()
def doctor(path: PathOpt = Path("memory"),
           repair: Annotated[bool, typer.Option(
               "--repair", help="Rebuild what is missing and delete vectors of no memory.")]
           = False) -> None:
    """Compare Chroma, the side-store and the keyword index per tenant (--repair fixes them).

    Exit code 0 when the store is consistent (or was repaired), 1 when problems remain.
    """
    try:
        with _open(path, verify=False) as engine:
            report = engine.doctor(repair=repair)
    except MnemoniaError as e:
        _fail(e)
    console.print(doctor_table(report))
    for t in report.tenants:  # the findings again, one unwrapped line per tenant
        if _found(t) != "ok":
            console.print(f"{t.tenant}: {_found(t)}", markup=False, highlight=False)
    if report.consistent:
        console.print("[green]repaired: the store is consistent[/green]" if report.problems
                      else "[green]consistent[/green]")
        return
    console.print(f"[yellow]{report.problems} problem(s) found; run `mnemonia doctor --repair "
                  f"--path {path}` to fix them[/yellow]")
    raise typer.Exit(1)


@app.command("export")
def export_cmd(out: Path, path: PathOpt = Path("memory"),
               tenant: Annotated[str | None, typer.Option()] = None,
               with_vectors: Annotated[bool, typer.Option(
                   "--with-vectors", help="Also write the vectors (no re-embedding on import "
                   "with the same model).")] = False) -> None:
    """Export memories with all their state, relations, audit trail and access log as JSONL
    (format 2, with the embedding model and dimension)."""
    try:
        with _open(path) as engine, _progress(console) as report:
            n = engine.export(out, tenant=tenant, with_vectors=with_vectors,
                              on_progress=report)
    except MnemoniaError as e:
        _fail(e)
    console.print(f"exported {n} memories to {out}")


@app.command("import")
def import_cmd(src: Path, path: PathOpt = Path("memory"), reembed: bool = False,
               on_conflict: Annotated[str, typer.Option(
                   "--on-conflict", help="Ids the store already has: error (refuse), skip "
                   "(keep the stored memory) or replace (take the file's).")] = "error") -> None:
    """Import a JSONL export whole or not at all (``--reembed`` for another embedding
    model)."""
    try:
        with _open(path) as engine, _progress(console) as report:
            n = engine.import_(src, reembed=reembed, on_conflict=on_conflict,
                               on_progress=report)
    except MnemoniaError as e:
        _fail(e)
    console.print(f"imported {n} memories")


def _int_fields(data: Mapping[str, Any]) -> dict[str, int]:
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


def run_maintenance(engine: Any, job: str = "all", *, tenant: str | None = None,
            progress: bool = True, console: Any = None) -> dict[str, Any]:
    """What ``mnemonia maintain [JOB] [--tenant T]`` runs: the job(s) with a rich progress
    bar (one step per tenant and job), then a summary table (one row per tenant, one column
    per count); returns the reports as a dict.

    Args:
        engine: The engine.
        job: A job of :data:`mnemonia.maintenance.JOBS` (``evict`` is an explicit run: the
            full budget) or ``all`` (:func:`maintain`: automatic eviction only over
            ``max_memories``).
        tenant: One tenant, or ``None`` for every tenant.
        progress: Show the progress bar and the table (on ``console``).
        console: A ``rich.console.Console`` to print to (default: a new one on stdout).

    Returns:
        ``{"job": job, "counts": {...}, "reports": {...}}``: the totals, and the full
        JSON-safe reports (per tenant; for ``all`` the :class:`MaintenanceReport`). The
        reports may be long (e.g. every evicted id); print ``counts`` for a summary.

    Raises:
        InvalidInputError: An unknown job or a bad tenant name.
    """
    if job not in (*JOB_NAMES, "all"):
        raise InvalidInputError(f"job={job!r}: must be one of {', '.join(JOB_NAMES)} or all")
    if tenant is not None:
        tenant = check_tenant(tenant)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = console if console is not None else Console()
    tenants = [tenant] if tenant is not None else engine.tenants()
    steps = JOBS if job == "all" else (job_named(job),)
    total = sum(len(tenants) if j.scope == "tenant" else 1 for j in steps)
    bar = Progress(TextColumn("[bold]maintain[/] {task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=out,
                   disable=not progress, transient=False)
    result: dict[str, Any] = {"job": job, "counts": {}, "reports": {}}
    per_row: dict[str, dict[str, int]] = {}  # table rows: tenant (or "all tenants") -> counts
    with bar:
        task = bar.add_task(job, total=max(1, total))

        def step(name: str, t: str | None) -> None:
            bar.update(task, advance=1, description=f"{name} {t or ''}".strip())

        if job == "all":
            report = engine.maintain(tenant, on_step=step)
            result["reports"] = report.as_dict()
            result["counts"] = report.counts
            for tm in report.tenants:  # one row per tenant: each tenant job's summary
                per_row[tm.tenant] = {k: v for j in JOBS if j.scope == "tenant"
                                      for k, v in getattr(tm, report_field(j)).summary().items()}
            for j in JOBS:  # one row per store-wide job
                if j.scope == "store":
                    rep = getattr(report, report_field(j))
                    per_row[f"{rep.TITLE} (all tenants)"] = rep.summary()
        elif steps[0].scope == "store":
            data = steps[0].run(engine.runtime, None, True).as_dict()
            step(job, None)
            result["reports"][job] = data
            result["counts"] = _int_fields(data)
            per_row["all tenants"] = result["counts"]
        else:
            totals: dict[str, int] = {}
            for t in tenants:  # an explicit run (evict: the full budget)
                data = steps[0].run(engine.runtime, t, True).as_dict()
                step(job, t)
                result["reports"][t] = data
                per_row[t] = _int_fields(data)
                for k, v in per_row[t].items():
                    totals[k] = totals.get(k, 0) + v
            result["counts"] = totals
        bar.update(task, completed=max(1, total))
    if progress:
        columns = list(dict.fromkeys(k for counts in per_row.values() for k in counts))
        table = Table(title=f"mnemonia maintain {job}")
        table.add_column("tenant")
        for c in columns:
            table.add_column(c, justify="right")
        for name, counts in per_row.items():
            table.add_row(name, *(str(counts[c]) if c in counts else "" for c in columns))
        if not per_row:
            table.caption = "no tenants"
        out.print(table)
    return result


run_cli = run_maintenance  # the name it had in mnemonia.maintenance


@app.command()
@user_errors()
def bench(n: Annotated[int, typer.Option(help="memories to ingest")] = 2000,
          queries: int = 100) -> None:
    """A quick speed comparison against bare Chroma kNN (benchmarks/speed.py of a checkout)."""
    import importlib.util
    import sys
    positive_int(n, "n")
    positive_int(queries, "queries")
    harness = Path(__file__).resolve().parents[2] / "benchmarks" / "speed_harness.py"
    if not harness.exists():
        _fail(InvalidInputError(f"the speed harness ships with the source checkout ({harness} "
                                "is missing): clone the repository, run benchmarks/speed.py"))
    sys.path.insert(0, str(harness.parent))  # the harness imports its sibling modules
    spec = importlib.util.spec_from_file_location("mnemonia_speed_harness", harness)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    module.run_speed([n], queries=queries, console=console)


@app.command()
@user_errors()
def demo(path: Annotated[Path | None, typer.Option(help="Keep the demo store here")] = None
         ) -> None:
    """A guided tour: a multi-session chat, explained recalls, forgetting, relations."""
    run_demo(path)


def _show_background(engine: Any, tenant: str, c: Console) -> None:
    """What the background maintenance did while the demo's clock moved: no maintain() call."""
    c.rule("Maintenance ran by itself (no maintain() call)")
    runs = engine.scheduler.runs if engine.scheduler is not None else {}
    mems = engine.list(tenant=tenant)
    kinds: dict[str, int] = {}
    for m in mems:
        for r in engine.relations(m.id, tenant=tenant):
            if r.src == m.id:
                kinds[r.type] = kinds.get(r.type, 0) + 1
    reviewed = [m for m in mems
                if any(e.event == "reviewed" for e in engine.history(m.id, tenant=tenant))]
    c.print(f"job runs so far: {', '.join(f'{j} {n}' for j, n in runs.items())}")
    c.print(f"relations made by the enrichment of batched turns: "
            f"{', '.join(f'{n} {t}' for t, n in sorted(kinds.items())) or 'none'}")
    c.print(f"{len(reviewed)} memories reviewed on their SM-2 schedule "
            f"(e.g. {reviewed[0].text[:50]!r}, next review in "
            f"{reviewed[0].sm2.interval_days} day(s))" if reviewed else "no review was due yet")


def run_demo(path: Path | None = None, out: Console | None = None) -> None:
    """Run the demo (also used by tests)."""
    from mnemonia.clock import ManualClock
    from mnemonia.engine import MemoryEngine
    from mnemonia.scoring.retention import retention

    c = out or console
    data = json.loads(resources.files("mnemonia").joinpath("data/demo_conversation.json")
                      .read_text(encoding="utf-8"))
    tenant = data["tenant"]
    folder = path or Path(tempfile.mkdtemp(prefix="mnemonia-demo-"))
    sessions = data["sessions"]
    clock = ManualClock(datetime.fromisoformat(sessions[0]["at"]))
    c.rule(f"[bold]Mnemonia demo[/bold]: {data['title']}")
    c.print(f"store: {escape(str(folder))} (embedded Chroma + SQLite, bundled all-MiniLM-L6-v2)")
    by_text: dict[str, Any] = {}
    with MemoryEngine.open(folder, clock=clock) as engine:
        existing = engine.stats(tenant)["memories"] > 0
        if existing:
            c.print("[yellow]the store already holds the demo; recalling only[/yellow]")
            by_text = {m.text: m for m in engine.list(tenant=tenant)}
        for s in sessions:
            start = datetime.fromisoformat(s["at"])
            clock.set(max(start + timedelta(minutes=len(s["turns"])), clock.now()))
            if existing:
                continue
            items = [{"text": t["text"], "speaker": t["speaker"], "importance": t["importance"],
                      "session_id": s["id"], "at": start + timedelta(minutes=i)}
                     for i, t in enumerate(s["turns"])]
            mems = engine.add_many(items, tenant=tenant)
            by_text.update({m.text: m for m in mems})
            c.print(f"session {s['id']} ({start:%d %b %Y}): stored {len(mems)} turns; "
                    f"gatekeeper states: {', '.join(m.state for m in mems)}")

        def find(fragment: str) -> Any:
            return next(m for t, m in by_text.items() if fragment in t)

        old, new = find("April 14th"), find("April 28th")
        by = engine.get(old.id, tenant=tenant).superseded_by
        c.print("\nThe launch date changed in session s3: the engine " + (
            "detected it, and the April 14th memory is superseded by the April 28th one."
            if by == new.id else "did not detect it (the April 14th memory is current)."))

        clock.advance(timedelta(days=1))
        _show_background(engine, tenant, c)
        c.rule("Recall, with explanations (k=3, the default floor)")
        for q in data["questions"]:
            res = engine.recall(q, tenant=tenant, k=3)
            c.print(hits_table(res))
            for h in res.memories:
                if h.explanation.path:
                    src = engine.get(h.explanation.path[0], tenant=tenant).text
                    c.print(f"[green]{h.memory.text[:48]!r} surfaced via "
                            f"{h.explanation.path[1]} from {src[:40]!r} (a relation the "
                            "background enrichment made)[/green]")

        c.rule("Spreading activation along a relation")
        trip, sitter = find("Dolomites."), find("Lena")
        q = "Tell me about the hiking trip"
        before = engine.recall(q, tenant=tenant, k=3, touch=False)
        c.print(hits_table(before, f"before relating: {q!r}"))
        engine.relate(trip.id, sitter.id, "context_of", tenant=tenant, strength=1.0)
        after = engine.recall(q, tenant=tenant, k=3, touch=False)
        c.print(hits_table(after, f"after relate(trip -context_of-> Lena): {q!r}"))
        surfaced = [h for h in after.memories if h.memory.id == sitter.id]
        if surfaced and surfaced[0].explanation.path:
            c.print(f"[green]Lena's memory surfaced via {surfaced[0].explanation.path[1]} from "
                    f"the trip memory[/green]")

        c.rule("Forgetting curve: days pass on a ManualClock")
        dog = find("border collie")
        table = Table(title="retention R = exp(-t/S) of two memories")
        for col in ("day", "event", "dog walk (imp .5)", "stability", "peanut allergy (imp .95)"):
            table.add_column(col)
        allergy = find("peanuts")
        base = clock.now()
        for day, event in ((0, ""), (1, ""), (2, "recall about the dog"), (3, ""), (5, ""),
                           (6, "recall about the dog"), (8, "")):
            clock.set(base + timedelta(days=day))
            if event:
                engine.recall("Does Maya have a dog that needs walks?", tenant=tenant, k=1)
            d = engine.get(dog.id, tenant=tenant)
            a = engine.get(allergy.id, tenant=tenant)
            now = clock.now()
            r_dog = retention(accessed_at=d.accessed_at, now=now, importance=d.importance,
                              stability=d.stability, half_life=engine.config.retention_half_life)
            r_all = retention(accessed_at=a.accessed_at, now=now, importance=a.importance,
                              stability=a.stability, half_life=engine.config.retention_half_life)
            table.add_row(str(day), event, f"{r_dog:.3f}", f"{d.stability:.2f}", f"{r_all:.3f}")
        c.print(table)
        c.print("Each recall resets the clock of the dog memory and multiplies its stability by "
                "1.5, so it fades more slowly afterwards; unused memories keep fading.")
        st = engine.stats(tenant)
        c.rule("Store")
        c.print(f"{st['active']} active memories, {st['relations']} relations, "
                f"{st['accesses']} recorded accesses, {st['superseded']} superseded")
    c.print(f"\nTry: mnemonia recall 'launch date' --path {escape(str(folder))} --tenant {tenant}")


@app.command()
@user_errors()
def ui(path: PathOpt = Path("memory"),
       chroma_url: Annotated[str | None, typer.Option(help="Chroma server (server mode)")] = None,
       sql_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL of the side-store")]
       = None,
       host: Annotated[str, typer.Option(help="Address to bind; other than 127.0.0.1 needs "
                                              "--token")] = "127.0.0.1",
       port: int = 8765,
       token: Annotated[str | None, typer.Option(envvar="MNEMONIA_UI_TOKEN",
                                                 help="Access token every request must carry")]
       = None,
       read_only: Annotated[bool, typer.Option("--read-only", help="No actions at all")]
       = False) -> None:
    """Serve the memory inspector (a local web app): what the memory holds, why it recalls,
    what it will forget. Needs the ui extra: pip install 'mnemonia[ui]'."""
    from mnemonia import ui as inspector

    inspector.require()
    from mnemonia.ui.server import check_binding

    check_binding(host, port, token)  # before the store and the model are opened
    with _open(path if chroma_url is None or path != Path("memory") else None,
               chroma_url=chroma_url, sql_url=sql_url, maintenance="manual") as engine:
        inspector.serve(engine, host=host, port=port, token=token, read_only=read_only)


def main() -> None:
    """Entry point of the ``mnemonia`` script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()


if __name__ == "__main__":
    main()
