"""Property-based sweep of every bad input (issue 13): every public method of ``MemoryEngine``
and every command of the ``mnemonia`` CLI, called with arbitrary values (None, bools, ints
huge and negative, floats with NaN and infinity, strings empty, blank, with lone surrogates,
emoji, rich markup or 17000 characters, bytes, lists, dicts nested 2000 deep or containing
themselves, naive and aware datetimes, plain objects) mixed with plausible ones (real ids,
tenants and texts, so the checks deep inside are reached too).

The invariant: the call succeeds, or it raises a :class:`MnemoniaError` that is not a
``StoreError`` (the store is healthy, so a store failure means a check is missing) AND a
sorted dump of every side-store table and of the Chroma collections and ids is unchanged:
nothing was written. For the CLI: exit 0, or exit 2 with a message and nothing written,
never a traceback.

Deterministic (``derandomize=True``) and bounded. Each test adds to a tally printed at the end
of the module (run with ``-s`` to see it): calls tried, successes, typed errors with nothing
written, by method.
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import MnemoniaError, StoreError

from tests.conftest import START

TALLY: Counter[tuple[str, bool, str]] = Counter()
"""(method or command, any arbitrary value in the call, outcome) -> calls; the outcome is
``ok`` or ``typed`` (a typed error, nothing written); anything else fails the test."""

ENGINE_EXAMPLES = 12  # per method: 25 methods
CLI_EXAMPLES = 6  # per command: 12 commands

FUZZ = settings(max_examples=ENGINE_EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


# -- arbitrary values --------------------------------------------------------------------------
def _deep(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cur = out
    for _ in range(levels):
        cur["k"] = {}
        cur = cur["k"]
    return out


def _self_containing() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


class _Opaque:
    """An object of the caller's own, with a repr that fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


STRINGS = st.one_of(
    st.text(max_size=24),
    st.text(st.characters(categories=("Cs", "Lu", "Ll", "Nd", "So", "Zs", "Cc", "Po", "Ps")),
            max_size=12),
    st.sampled_from(["", " ", "\t\n ", "\ud800", "ok\udfff", "🙂", "???", "[/x] [bold]",
                     "x" * 17_000, "a\x00b", "'; DROP TABLE memories; --", "../etc/passwd",
                     "person:", ":", "tool:redis", "supersedes", "implies"]),
)
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.sampled_from([0, -1, 1, 5, 6, 2**63, -(2**63) - 1, 10**20, 10**400]),
    st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 0.5, 1e308, -0.0, 5e-324]),
    STRINGS,
    st.binary(max_size=12),
    st.datetimes(),  # naive
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=14)),
                                            timezone(timedelta(hours=-14))])),
    st.sampled_from([datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC),
                     datetime.max.replace(tzinfo=timezone(timedelta(hours=-14))),
                     datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
                     datetime(2024, 12, 31, 23, 59)]),
    st.builds(object), st.builds(_Opaque),
)
ANY = st.one_of(
    st.recursive(SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner),
        st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=6),
    st.sampled_from(["deep", "loop"]).map(lambda k: _deep(2000) if k == "deep"
                                          else _self_containing()),
    st.builds(dict, blob=st.just("x" * 70_000)),
)


@dataclass(frozen=True)
class Param:
    """One argument: plausible values (real ids, tenants, texts; some of them still refused,
    e.g. another tenant's id) and arbitrary ones."""

    good: st.SearchStrategy[Any]
    bad: st.SearchStrategy[Any] = ANY


def _or_any(*plausible: Any) -> Param:
    return Param(st.sampled_from(plausible))


# Plausible values. "@x" stands for the id of seeded memory x, filled in at call time.
TENANT = _or_any("alice", "bob", "carol")
ID = _or_any("@a", "@b", "@c", "@d", "nope")
TEXT = _or_any("Alice plays the violin", "tea", "🙂", "Bob collects stamps")
UNIT = _or_any(0.0, 0.3, 1.0)
BOOL = _or_any(True, False)
COUNT = _or_any(None, 1, 3, 2**31, 2**63 - 1)
LABEL = _or_any(None, "music", "s1")
ENTITIES = _or_any(None, ["person:alice"], ["tool:redis", "place:lisbon"])
META = _or_any(None, {}, {"source": "chat", "n": 1}, {"tags": ["a", "b"]})
AT = _or_any(None, START - timedelta(days=3), START, datetime.min.replace(tzinfo=UTC))
EMBEDDING = _or_any(None, [0.1] * 256, [1.0] * 3)
ADD_FIELDS = {"importance": UNIT, "kind": _or_any("episode", "fact", "concept"),
              "topic": LABEL, "entities": ENTITIES, "session_id": LABEL, "metadata": META,
              "at": AT, "pinned": BOOL, "speaker": _or_any(None, "Alice"),
              "id": _or_any(None, "m-1", "@a", "@c")}
GOOD_ITEM = st.fixed_dictionaries({"text": TEXT.good}, optional={
    **{k: v.good for k, v in ADD_FIELDS.items()}, "embedding": EMBEDDING.good})
BAD_ITEM = st.one_of(
    st.fixed_dictionaries({"text": TEXT.bad}, optional={k: v.good for k, v in ADD_FIELDS.items()}),
    st.fixed_dictionaries({"text": TEXT.good}, optional={
        **{k: v.bad for k, v in ADD_FIELDS.items()}, "embedding": EMBEDDING.bad, "colour": ANY}),
    ANY)
ITEMS = Param(st.lists(GOOD_ITEM, min_size=1, max_size=3),
              st.one_of(st.tuples(st.lists(GOOD_ITEM, max_size=2), BAD_ITEM).map(
                  lambda t: [*t[0], t[1]]), ANY))
IDS = Param(st.lists(ID.good, max_size=3), st.one_of(st.lists(ID.bad, min_size=1, max_size=2),
                                                     ANY))
SUMMARISER = Param(st.sampled_from([None, lambda texts: " / ".join(texts)]))
ON_STEP = Param(st.sampled_from([None, lambda job, tenant: None]))


@st.composite
def _draw_call(draw: Any, positional: tuple[Param, ...], required: dict[str, Param],
               optional: dict[str, Param]) -> tuple[tuple[Any, ...], dict[str, Any], bool]:
    """``(args, kwargs, arbitrary)``: every argument plausible ("clean"), exactly one
    arbitrary ("one"), or each arbitrary with even odds ("chaos"); ``arbitrary`` says whether
    any arbitrary value went in."""
    chosen = {k: p for k, p in optional.items() if draw(st.booleans())}
    names: list[Any] = [*range(len(positional)), *required, *chosen]
    mode = draw(st.sampled_from(["clean", "one", "one", "chaos"]))
    if mode == "one" and names:
        bad = {draw(st.sampled_from(names))}
    elif mode == "chaos":
        bad = {n for n in names if draw(st.booleans())}
    else:
        bad = set()
    params = {**dict(enumerate(positional)), **required, **chosen}
    values = {n: draw(params[n].bad if n in bad else params[n].good) for n in names}
    args = tuple(values[i] for i in range(len(positional)))
    return args, {k: v for k, v in values.items() if isinstance(k, str)}, bool(bad)


def _call(*positional: Param, required: dict[str, Param] | None = None,
          optional: dict[str, Param] | None = None) -> st.SearchStrategy[Any]:
    return _draw_call(positional, required or {}, optional or {})


MANUAL = MnemoniaConfig.load(env={}, maintenance="manual")  # maintenance run by hand
CALLS: dict[str, st.SearchStrategy[Any]] = {
    "add": _call(TEXT, required={"tenant": TENANT}, optional=ADD_FIELDS),
    "add_many": _call(ITEMS, required={"tenant": TENANT}, optional={"replace": BOOL}),
    "get": _call(ID, required={"tenant": TENANT}),
    "list": _call(required={"tenant": TENANT},
                  optional={"session_id": LABEL, "include_deleted": BOOL, "limit": COUNT}),
    "history": _call(ID, required={"tenant": TENANT}),
    "relations": _call(ID, required={"tenant": TENANT}),
    "stats": _call(optional={"tenant": _or_any(None, "alice")}),
    "recall": _call(TEXT, required={"tenant": TENANT},
                    optional={"k": COUNT, "topic": LABEL, "entity": _or_any(None, "person:alice"),
                              "episode_k": _or_any(None, 0, 2), "mode": _or_any(None, "general"),
                              "min_activation": _or_any(None, 0.0), "touch": BOOL,
                              "user_id": _or_any(None, "u1")}),
    "feedback": _call(ID, _or_any(0, 3, 5), required={"tenant": TENANT}),
    "relate": _call(ID, ID, _or_any("implies", "related_to", "supersedes"),
                    required={"tenant": TENANT}, optional={"strength": UNIT}),
    "supersede": _call(ID, ID, required={"tenant": TENANT}),
    "unsupersede": _call(_or_any("@e", "@a", "@c", "nope"), required={"tenant": TENANT}),
    "forget": _call(ID, required={"tenant": TENANT}, optional={"hard": BOOL}),
    "restore": _call(ID, required={"tenant": TENANT}),
    "pin": _call(ID, required={"tenant": TENANT}, optional={"pinned": BOOL}),
    "update_metadata": _call(ID, required={"tenant": TENANT, "metadata": META}),
    "evict": _call(required={"tenant": TENANT}, optional={"force": BOOL}),
    "consolidate": _call(required={"tenant": TENANT}, optional={"summariser": SUMMARISER}),
    "review": _call(required={"tenant": TENANT}),
    "enrich": _call(required={"tenant": TENANT}),
    "reevaluate": _call(),
    "maintain": _call(_or_any(None, "alice"), optional={"on_step": ON_STEP}),
    "snapshot": _call(TENANT, optional={"limit": COUNT}),
    "report_use": _call(TEXT, IDS, required={"tenant": TENANT}),
    "doctor": _call(optional={"repair": BOOL}),
}


def test_every_public_method_is_fuzzed() -> None:
    """The sweep covers the whole front door: a new public method must join CALLS."""
    public = {n for n in dir(MemoryEngine) if not n.startswith("_") and callable(
        getattr(MemoryEngine, n)) and not isinstance(getattr(MemoryEngine, n), property)}
    not_fuzzed = {"open", "shared", "close", "tenants",  # opening, closing, no argument
                  "aadd", "aadd_many", "arecall",  # async twins of add, add_many, recall
                  "export", "import_"}  # files: the format-v2 change owns their errors
    assert public - not_fuzzed == set(CALLS)


# -- the store, dumped -------------------------------------------------------------------------
def dump(folder: Path) -> tuple[Any, ...]:
    """Every row of every side-store table and every Chroma collection with its ids, sorted."""
    db = sqlite3.connect(f"file:{folder / 'mnemonia.sqlite3'}?mode=ro", uri=True)
    try:
        names = sorted(r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"))
        tables = tuple((n, tuple(sorted(map(repr, db.execute(f'SELECT * FROM "{n}"')))))
                       for n in names)
    finally:
        db.close()
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(folder / "chroma"), settings=Settings(
        anonymized_telemetry=False, allow_reset=False))  # the engine's settings: one system
    collections = tuple(sorted((c.name, tuple(sorted(c.get(include=[])["ids"])))
                               for c in client.list_collections()))
    return tables, collections


def _resolve(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with the ``@x`` placeholders (alone, in a list, or as an item's ``id``) made
    the seeded ids; one level only (a value may contain itself)."""
    def one(v: Any) -> Any:
        return ids[v] if isinstance(v, str) and v in ids else v

    if isinstance(value, list):
        return [one(v) for v in value]
    if isinstance(value, dict) and "id" in value:
        return {**value, "id": one(value["id"])}
    return one(value)


def _seed(engine: MemoryEngine) -> dict[str, str]:
    a = engine.add("Alice plays the violin", tenant="alice", topic="music",
                   entities=["person:alice"], session_id="s1")
    b = engine.add("Alice drinks tea every morning", tenant="alice", session_id="s1")
    c = engine.add("Bob collects stamps", tenant="bob")
    d = engine.add("Alice once owned a cat", tenant="alice")
    e = engine.add("Alice played the viola before", tenant="alice")
    engine.forget(d.id, tenant="alice")
    engine.relate(a.id, b.id, "related_to", tenant="alice")
    engine.supersede(e.id, a.id, tenant="alice")
    engine.recall("violin", tenant="alice")
    return {"@a": a.id, "@b": b.id, "@c": c.id, "@d": d.id, "@e": e.id}


def summary() -> list[str]:
    """The tally as text: per surface (engine, CLI) and per method."""
    def count(prefix: bool | None = None, arbitrary: bool | None = None,
              outcome: str | None = None, name: str | None = None) -> int:
        return sum(n for (m, a, o), n in TALLY.items()
                   if (prefix is None or m.startswith("cli ") == prefix)
                   and (arbitrary is None or a == arbitrary)
                   and (outcome is None or o == outcome) and (name is None or m == name))

    lines = ["fuzz summary (every failure is a typed MnemoniaError with nothing written; an "
             "untyped error or a partial write fails the test):"]
    for label, cli in (("engine", False), ("CLI", True)):
        bad = count(cli, True)
        lines.append(
            f"  {label}: {count(cli)} calls; {bad} with arbitrary values: "
            f"{count(cli, True, 'typed')} typed errors with nothing written, "
            f"{count(cli, True, 'ok')} accepted; {count(cli, False)} with plausible values "
            f"only: {count(cli, False, 'ok')} ok, {count(cli, False, 'typed')} typed errors "
            "(unknown, foreign or deleted ids)")
    for name in sorted({m for m, _, _ in TALLY}):
        lines.append(f"    {name:18} {count(name=name):4} calls, "
                     f"{count(name=name, arbitrary=True):4}"
                     f" arbitrary, {count(name=name, outcome='typed'):4} typed errors")
    return lines


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    yield
    print("\n" + "\n".join(summary()))


@pytest.fixture
def fuzz_engine(tmp_path: Path) -> Iterator[tuple[MemoryEngine, dict[str, str]]]:
    engine = MemoryEngine.open(tmp_path / "store", config=MANUAL,
                               clock=ManualClock(START), embedder=HashingEmbedder())
    ids = _seed(engine)
    yield engine, ids
    engine.close()


def _shown(value: Any) -> str:
    try:
        return repr(value)[:300]
    except Exception:
        return f"<{type(value).__name__}>"


def check_call(name: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               folder: Path, arbitrary: bool) -> None:
    """Run one call: success, or a typed error with the store unchanged."""
    engine = getattr(target, "__self__", None)
    if isinstance(engine, MemoryEngine):
        # an earlier recall's accesses are written beside its answer: a read of this process
        # waits for them, so the dump (another connection) sees them before the call
        engine.tenants()
    before = dump(folder)
    call = f"{name}(*{_shown(args)}, **{_shown(kwargs)})"
    try:
        target(*args, **kwargs)
    except StoreError as e:
        pytest.fail(f"{call} -> StoreError on a healthy store (a missing check): {e}")
    except MnemoniaError:
        assert dump(folder) == before, f"{call} raised a typed error but wrote"
        TALLY[(name, arbitrary, "typed")] += 1
    else:
        TALLY[(name, arbitrary, "ok")] += 1


@pytest.mark.parametrize("method", sorted(CALLS))
@FUZZ
@given(data=st.data())
def test_engine_method_gives_a_typed_error_and_writes_nothing(
        fuzz_engine: tuple[MemoryEngine, dict[str, str]], method: str, data: st.DataObject
) -> None:
    engine, ids = fuzz_engine
    args, kwargs, arbitrary = data.draw(CALLS[method], label=method)
    args = tuple(_resolve(a, ids) for a in args)
    kwargs = {k: (_resolve(v, ids) if k != "metadata" else v) for k, v in kwargs.items()}
    if method == "add_many" and isinstance(args[0], list):
        args = ([_resolve(i, ids) if isinstance(i, dict) else i for i in args[0]],)
    engine.clock.advance(timedelta(minutes=1))  # type: ignore[attr-defined]
    assert engine.path is not None
    check_call(method, getattr(engine, method), args, kwargs, engine.path, arbitrary)


# -- the command line ----------------------------------------------------------------------------
def _cli_args(draw: Any, command: str, ids: dict[str, str], arbitrary: list[bool]
              ) -> list[str]:
    """The arguments of one command: plausible ones, and in a "chaos" call each argument
    arbitrary (any string, number text, rich markup, ...) with odds 1 in 3."""
    chaos = draw(st.booleans())

    def text(*plausible: str) -> str:
        if chaos and draw(st.integers(0, 2)) == 0:
            arbitrary.append(True)
            return str(draw(st.one_of(STRINGS, st.integers().map(str), st.floats().map(str))))
        value = draw(st.sampled_from(plausible))
        return ids.get(value, value)

    def options(**choices: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for flag, plausible in choices.items():
            if flag == "tenant" or draw(st.booleans()):  # without it: tenant "default"
                out += [f"--{flag.replace('_', '-')}", text(*plausible)]
        return out

    tenant = {"tenant": ("alice", "alice", "alice", "bob", "carol")}
    if command == "add":
        return [text("Alice plays the cello"), *options(
            **tenant, importance=("0.4", "1"), kind=("fact", "episode"), topic=("music",),
            entity=("person:alice",), session=("s2",))]
    if command == "recall":
        flags = ["--json"] if draw(st.booleans()) else []
        return [text("violin", "tea"), *flags, *options(
            **tenant, k=("2", "0"), mode=("general", "nope"), topic=("music",))]
    if command in ("forget", "restore"):
        flags = ["--hard"] if command == "forget" and draw(st.booleans()) else []
        return [text("@a", "@b", "@d", "@c", "nope"), *flags, *options(**tenant)]
    if command == "feedback":
        return [text("@a", "@b", "@c"), text("4", "5", "9"), *options(**tenant)]
    if command == "relate":
        return [text("@a", "@b", "@d"), text("@b", "@a", "@c"), text("implies", "loves"),
                *options(**tenant, strength=("0.5", "2"))]
    if command == "unsupersede":
        return [text("@e", "@a", "@c", "nope"), *options(**tenant)]
    if command == "stats":
        return options(**tenant)
    if command == "maintain":
        return [text("all", "evict", "review", "dance"), *options(**tenant)]
    if command == "doctor":  # on a consistent store: exit 0 (1 only with problems left)
        return ["--repair"] if draw(st.booleans()) else []
    if command == "demo":  # only paths that fail: a full demo is the integration test's
        arbitrary.append(True)
        return []
    if command == "bench":  # only sizes that fail: a real benchmark takes minutes
        arbitrary.append(True)
        return ["--n", text("0", "-5", "x"), "--queries", text("0", "-1")]
    raise AssertionError(command)


CLI_COMMANDS = ("add", "recall", "forget", "restore", "feedback", "relate", "unsupersede",
                "stats", "maintain", "doctor", "demo", "bench")


def test_every_cli_command_is_fuzzed() -> None:
    from mnemonia.cli import app

    names = {c.name or c.callback.__name__ for c in app.registered_commands}  # type: ignore[union-attr]
    # export/import: format v2 change; mcp serves until stopped (tests/integration/test_mcp.py
    # sends its tools bad arguments)
    assert names - {"export", "import", "mcp", "ui"} == set(CLI_COMMANDS)


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """A store built with the CLI's own (bundled) embedder, and a file to pass as a bad path."""
    root = tmp_path_factory.mktemp("cli-fuzz")
    with MemoryEngine.open(root / "store", config=MANUAL) as engine:
        ids = _seed(engine)
    (root / "a-file").write_text("not a store")
    return root / "store", ids, root / "a-file"


@pytest.mark.integration
@pytest.mark.parametrize("command", CLI_COMMANDS)
@settings(FUZZ, max_examples=CLI_EXAMPLES)
@given(data=st.data())
def test_cli_command_gives_a_message_and_writes_nothing(
        cli_store: tuple[Path, dict[str, str], Path], command: str, data: st.DataObject
) -> None:
    from mnemonia.cli import app
    from typer.testing import CliRunner

    store, ids, a_file = cli_store
    arbitrary: list[bool] = []
    args = _cli_args(data.draw, command, ids, arbitrary)
    where = data.draw(st.sampled_from(["store", "store", "store", "file"]), label="path")
    if command in ("demo", "bench") or where == "file":
        path = a_file / "sub" if command == "demo" and data.draw(st.booleans()) else a_file
        arbitrary.append(True)
    else:
        path = store
    if command != "bench":
        args = [*args, "--path", str(path)]
    before = dump(store)
    result = CliRunner().invoke(app, [command, *args], env={"COLUMNS": "200"})
    out = result.output
    assert "Traceback" not in out, out
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"mnemonia {command} {args!r:.400}: {result.exception!r}")
    assert result.exit_code in (0, 2), (result.exit_code, out)
    if result.exit_code == 2:
        assert dump(store) == before, f"mnemonia {command} {args!r:.400} failed but wrote"
        assert "error" in out.lower() or "usage" in out.lower(), out
        TALLY[(f"cli {command}", bool(arbitrary), "typed")] += 1
    else:
        TALLY[(f"cli {command}", bool(arbitrary), "ok")] += 1
