"""A store that cannot be opened or written is a typed error saying what to do, never a raw
OSError / sqlalchemy / chromadb exception, and the command line prints the message (exit 2)
without a traceback: a file given as the store folder, a read-only folder or file, a damaged
SQLite file, a damaged Chroma folder (defect 7 of issue 13)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.cli import app
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidInputError, StoreError
from typer.testing import CliRunner


def _open(path: object, clock: ManualClock) -> MemoryEngine:
    return MemoryEngine.open(path, config=MnemoniaConfig.load(env={}), clock=clock,  # type: ignore[arg-type]
                             embedder=HashingEmbedder())


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Path:
    """A closed store folder holding one memory of tenant ``t``."""
    folder = tmp_path / "store"
    with _open(folder, clock) as engine:
        engine.add("Alice plays the violin", tenant="t", id="m1")
    return folder


def _reopens_whole(folder: Path, clock: ManualClock) -> None:
    """Nothing was lost or half-written: the store opens and holds exactly its memory."""
    with _open(folder, clock) as engine:
        assert [m.id for m in engine.list(tenant="t")] == ["m1"]
        assert engine.recall("violin", tenant="t").ids == ["m1"]
        engine.add("a write works again", tenant="t")


@contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make ``paths`` read-only for the user running the tests. A normal user gets chmod; root
    ignores file modes (CAP_DAC_OVERRIDE), so there the immutable attribute is set instead
    (``chattr +i``, ext4/xfs/btrfs), which binds root too. Skips where neither holds."""
    root = os.geteuid() == 0
    modes = {p: p.stat().st_mode for p in paths}
    if root:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a path read-only")
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {done.stderr.decode()[:200]}")
    else:
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        probe = next(p for p in paths)
        try:  # the read-only state must really hold for us, or the test would prove nothing
            if probe.is_dir():
                (probe / ".probe").touch()
                (probe / ".probe").unlink()
            else:
                with open(probe, "ab"):
                    pass
        except PermissionError:
            pass
        else:
            pytest.skip("this file system does not enforce read-only paths for this user")
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
        else:
            for p, mode in modes.items():
                p.chmod(mode)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    out = result.output
    assert "Traceback" not in out, out
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    return result.exit_code, out


def test_path_that_is_a_file(tmp_path: Path, clock: ManualClock) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("not a store")
    with pytest.raises(InvalidInputError, match="is a file, not a folder"):
        _open(f, clock)
    with pytest.raises(InvalidInputError, match="a folder on the way is a file"):
        _open(f / "store", clock)
    assert f.read_text() == "not a store"
    code, out = _cli("stats", "--path", str(f))
    assert code == 2 and "error:" in out and "is a file, not a folder" in out


def test_path_of_the_wrong_type(clock: ManualClock) -> None:
    with pytest.raises(InvalidInputError, match=r"path=3: must be a folder path"):
        _open(3, clock)
    with pytest.raises(StoreError, match="cannot make the store folder"):
        _open("bad\x00name", clock)


def test_read_only_new_folder(tmp_path: Path, clock: ManualClock) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    with read_only(folder):
        with pytest.raises(StoreError, match="needs a folder it can write to"):
            _open(folder, clock)
        code, out = _cli("add", "hello", "--path", str(folder))
        assert code == 2 and "cannot use the store folder" in out
    assert list(folder.iterdir()) == []


def test_read_only_store_folder(store: Path, clock: ManualClock) -> None:
    with read_only(store):
        with pytest.raises(StoreError, match="cannot be written: make them writable"):
            _open(store, clock)
        code, out = _cli("recall", "violin", "--path", str(store), "--tenant", "t")
        assert code == 2 and "error: cannot open the SQL store" in out
    _reopens_whole(store, clock)


def test_read_only_sqlite_file(store: Path, clock: ManualClock) -> None:
    db = store / "mnemonia.sqlite3"
    before = db.read_bytes()
    with read_only(db):
        with pytest.raises(StoreError, match="attempt to write a readonly database") as info:
            _open(store, clock)
        assert "make them writable" in str(info.value)
        code, out = _cli("add", "hello", "--path", str(store), "--tenant", "t")
        assert code == 2 and "readonly database" in out
    assert db.read_bytes() == before
    _reopens_whole(store, clock)


def test_read_only_chroma_folder(store: Path, clock: ManualClock) -> None:
    chroma = store / "chroma"
    paths = [chroma, *sorted(chroma.rglob("*"))]
    with read_only(*paths):
        for _ in range(2):  # a second try gets the same clear error, not chromadb's leftovers
            with pytest.raises(StoreError, match="cannot open the Chroma folder"):
                _open(store, clock)
    _reopens_whole(store, clock)  # ... and once writable the folder opens as before


def test_damaged_sqlite_file(store: Path, clock: ManualClock) -> None:
    db = store / "mnemonia.sqlite3"
    for leftover in store.glob("mnemonia.sqlite3-*"):  # a closed store has no WAL left
        leftover.unlink()
    garbage = os.urandom(4096)
    db.write_bytes(garbage)
    with pytest.raises(StoreError, match=r"file is not a database\. The file is damaged or "
                                         r"not a Mnemonia store: restore it from a backup"):
        _open(store, clock)
    assert db.read_bytes() == garbage  # the failed open changed nothing
    code, out = _cli("recall", "violin", "--path", str(store), "--tenant", "t")
    assert code == 2 and "file is not a database" in out
    with pytest.raises(StoreError):  # and the lock was released: the same error again
        _open(store, clock)


def test_damaged_chroma_folder(store: Path, clock: ManualClock) -> None:
    (store / "chroma" / "chroma.sqlite3").write_bytes(os.urandom(8192))
    with pytest.raises(StoreError, match=r"cannot open the Chroma folder .*file is not a "
                                         r"database.*restore the folder from a backup"):
        _open(store, clock)
    code, out = _cli("stats", "--path", str(store))
    assert code == 2 and "cannot open the Chroma folder" in out


COMMANDS_WITH_A_PATH = [
    ["add", "hello"], ["recall", "hello"], ["forget", "m1"], ["restore", "m1"],
    ["feedback", "m1", "4"], ["relate", "m1", "m2", "implies"], ["stats"], ["maintain"],
    ["export", "out.jsonl"], ["import", "in.jsonl"], ["demo"],
]


@pytest.mark.parametrize("args", COMMANDS_WITH_A_PATH, ids=lambda a: a[0])
def test_every_command_reports_a_bad_store_without_a_traceback(tmp_path: Path,
                                                                args: list[str]) -> None:
    f = tmp_path / "a-file"
    f.write_text("x")
    code, out = _cli(*args, "--path", str(f))
    assert code == 2 and "\nerror: " in f"\n{out}" and "is a file, not a folder" in out


def test_bench_checks_its_sizes() -> None:
    code, out = _cli("bench", "--n", "0")
    assert code == 2 and "error: n=0: must be an integer >= 1" in out


def test_cli_prints_user_text_literally(tmp_path: Path) -> None:
    """Rich markup in user text ("[/x]" closes no tag: a MarkupError before) is printed as
    typed, in results and in error messages alike."""
    store = str(tmp_path / "s")
    with MemoryEngine.open(store, config=MnemoniaConfig.load(env={})) as engine:
        engine.add("notes on [/x] and [bold]tags[/bold]", tenant="t")
    code, out = _cli("recall", "[/x] tags", "--path", store, "--tenant", "t")
    assert code == 0 and "notes on [/x] and [bold]tags[/bold]" in out
    code, out = _cli("recall", "x", "--path", store, "--tenant", "t", "--mode", "[/x]")
    assert code == 2 and "unknown recall mode '[/x]'" in out
    code, out = _cli("forget", "[/nope]", "--path", store, "--tenant", "t")
    assert code == 2 and "no memory with id '[/nope]' in tenant 't'" in out
