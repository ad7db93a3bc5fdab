"""The ``mnemonia`` command line: add, recall, forget, restore, feedback, relate, stats,
maintain, export, import, demo and bench.

The store folder comes from ``--path`` (or ``MNEMONIA_PATH``; default ``./memory``).

A user error never prints a traceback: every command runs inside :func:`user_errors`, which
turns a :class:`~mnemonia.errors.MnemoniaError` into its message and exit status 2.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
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
from mnemonia.validation import positive_int
from mnemonia.validation import tenant as check_tenant

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Mnemonia: long-term memory for LLM applications.")
console = Console()

PathOpt = Annotated[Path, typer.Option("--path", envvar="MNEMONIA_PATH",
                                       help="Embedded store folder.")]
TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="Tenant (whose memory).")]


def _open(path: Path, **kwargs: Any) -> Any:
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
def recall(query: str, path: PathOpt = Path("memory"), tenant: TenantOpt = "default",
           k: int = 3, mode: str | None = None, topic: str | None = None,
           as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Recall memories for QUERY, with explanations."""
    with _open(path) as engine:
        res = engine.recall(query, tenant=tenant, k=k, mode=mode, topic=topic)
    if as_json:
        console.print_json(json.dumps([{"id": h.memory.id, "text": h.memory.text,
                                        "score": h.score, **h.explanation.to_dict()}
                                       for h in res.memories]))
    else:
        console.print(hits_table(res))


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
             tenant: TenantOpt = "default") -> None:
    """Review a memory with QUALITY 0..5 (SM-2)."""
    with _open(path) as engine:
        mem = engine.feedback(memory_id, quality, tenant=tenant)
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
def stats(path: PathOpt = Path("memory"), tenant: Annotated[str | None, typer.Option()] = None
          ) -> None:
    """Counts of memories, states, relations and accesses."""
    with _open(path) as engine:
        data = engine.stats(tenant)
    console.print_json(json.dumps(data))


@app.command()
@user_errors()
def maintain(job: Annotated[str, typer.Argument(help="evict|consolidate|review|reevaluate|all")]
             = "all", path: PathOpt = Path("memory"),
             tenant: Annotated[str | None, typer.Option()] = None) -> None:
    """Run maintenance jobs, with a progress bar."""
    with _open(path) as engine:
        run_maintenance(engine, job=job, tenant=tenant, console=console)


@app.command("export")
def export_cmd(out: Path, path: PathOpt = Path("memory"),
               tenant: Annotated[str | None, typer.Option()] = None) -> None:
    """Export memories and relations as JSONL (with the embedding model and dimension)."""
    try:
        with _open(path) as engine:
            n = engine.export(out, tenant=tenant)
    except MnemoniaError as e:
        _fail(e)
    console.print(f"exported {n} memories to {out}")


@app.command("import")
def import_cmd(src: Path, path: PathOpt = Path("memory"), reembed: bool = False) -> None:
    """Import a JSONL export (``--reembed`` for another embedding model)."""
    try:
        with _open(path) as engine:
            n = engine.import_(src, reembed=reembed)
    except MnemoniaError as e:
        _fail(e)
    console.print(f"imported {n} memories")


_CLI_JOBS = ("evict", "consolidate", "review", "reevaluate", "enrich", "all")


def _int_fields(data: Mapping[str, Any]) -> dict[str, int]:
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


def run_maintenance(engine: Any, job: str = "all", *, tenant: str | None = None,
            progress: bool = True, console: Any = None) -> dict[str, Any]:
    """What ``mnemonia maintain [JOB] [--tenant T]`` runs: the job(s) with a rich progress
    bar (one step per tenant and job), then a summary table (one row per tenant, one column
    per count); returns the reports as a dict.

    Args:
        engine: The engine.
        job: ``evict`` (an explicit run: the full budget), ``consolidate``, ``review``,
            ``reevaluate``, ``enrich`` or ``all`` (:func:`maintain`: automatic eviction only
            over ``max_memories``).
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
    if job not in _CLI_JOBS:
        raise InvalidInputError(f"job={job!r}: must be one of {', '.join(_CLI_JOBS)}")
    if tenant is not None:
        tenant = check_tenant(tenant)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = console if console is not None else Console()
    tenants = [tenant] if tenant is not None else engine.tenants()
    per_tenant = {"all": 4, "reevaluate": 0}.get(job, 1)
    total = len(tenants) * per_tenant + (1 if job in ("all", "reevaluate") else 0)
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
            for tm in report.tenants:
                per_row[tm.tenant] = {
                    "enriched": tm.enrichment.enriched, "evicted": tm.eviction.evicted,
                    "concepts": tm.consolidation.concepts_created,
                    "consolidated": tm.consolidation.members_consolidated,
                    "reviewed": tm.review.reviewed}
            per_row["re-evaluation (all tenants)"] = {
                "scanned": report.reevaluation.scanned,
                "promoted": report.reevaluation.promoted}
        elif job == "reevaluate":
            rep = engine.reevaluate()
            step("reevaluate", None)
            data = rep.as_dict()
            result["reports"]["reevaluate"] = data
            result["counts"] = _int_fields(data)
            per_row["all tenants"] = result["counts"]
        else:
            fn = getattr(engine, job)  # evict (an explicit run), consolidate, review, enrich
            totals: dict[str, int] = {}
            for t in tenants:
                data = fn(tenant=t).as_dict()
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

    positive_int(n, "n")
    positive_int(queries, "queries")
    harness = Path(__file__).resolve().parents[2] / "benchmarks" / "speed_harness.py"
    if not harness.exists():
        _fail(InvalidInputError(
            f"the speed harness ships with the source checkout ({harness} is missing): clone "
            "the repository and run `python benchmarks/speed.py`"))
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
        if engine.get(old.id, tenant=tenant).superseded_by is None:
            engine.supersede(old.id, new.id, tenant=tenant)
        c.print("\nThe launch date changed in session s3, so the April 14th memory is "
                "superseded by the April 28th one.")

        clock.advance(timedelta(days=1))
        c.rule("Recall, with explanations")
        for q in data["questions"]:
            c.print(hits_table(engine.recall(q, tenant=tenant, k=3)))

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


def main() -> None:
    """Entry point of the ``mnemonia`` script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()


if __name__ == "__main__":
    main()
