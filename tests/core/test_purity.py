"""The scoring core is pure: standard library only, no clock reads, no I/O.

Scans the source with ``ast`` so that a forbidden import fails here even when the dependency
happens to be installed.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import mnemonia.scoring
import pytest

ROOT = Path(__file__).resolve().parents[2] / "shared" / "mnemonia"
SCORING = ROOT / "scoring"
SCORING_FILES = sorted(SCORING.rglob("*.py"))
ALLOWED_FIRST_PARTY = ("mnemonia.errors", "mnemonia.scoring")
CLOCK_METHODS = {"now", "utcnow", "today", "fromtimestamp", "utcfromtimestamp"}
TIME_FUNCTIONS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
                  "perf_counter_ns", "localtime", "gmtime", "sleep"}
IO_CALLS = {"open", "print", "input", "__import__"}


def _is_allowed_first_party(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in ALLOWED_FIRST_PARTY)


def import_violations(source: str, *, allow_first_party: bool = True) -> list[str]:
    """Return every import in ``source`` that is not stdlib (or allowed first-party)."""
    bad: list[str] = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside mnemonia.scoring
                continue
            base = node.module or ""
            if base == "mnemonia":
                modules = [f"mnemonia.{alias.name}" for alias in node.names]
            else:
                modules = [base]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
        ):
            bad.append(f"line {node.lineno}: dynamic import")
        for module in modules:
            top = module.split(".")[0]
            if top in sys.stdlib_module_names:
                continue
            if allow_first_party and _is_allowed_first_party(module):
                continue
            bad.append(f"line {getattr(node, 'lineno', 0)}: import {module}")
    return bad


def clock_and_io_violations(source: str) -> list[str]:
    """Return every clock read or I/O call in ``source``."""
    bad: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            bad.append(f"line {node.lineno}: from time import ...")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in CLOCK_METHODS:
                bad.append(f"line {node.lineno}: .{func.attr}()")
            if isinstance(func.value, ast.Name) and func.value.id == "time" and (
                func.attr in TIME_FUNCTIONS
            ):
                bad.append(f"line {node.lineno}: time.{func.attr}()")
        elif isinstance(func, ast.Name) and func.id in IO_CALLS:
            bad.append(f"line {node.lineno}: {func.id}()")
    return bad


def test_every_scoring_module_is_scanned() -> None:
    names = {p.name for p in SCORING_FILES}
    assert {"sm2.py", "retention.py", "priority.py", "activation.py", "consolidation.py",
            "reevaluation.py", "modes.py", "__init__.py"} <= names


@pytest.mark.parametrize("path", SCORING_FILES, ids=lambda p: p.name)
def test_scoring_imports_only_stdlib_and_errors(path: Path) -> None:
    assert import_violations(path.read_text(encoding="utf-8")) == []


def test_errors_module_imports_only_stdlib() -> None:
    source = (ROOT / "errors.py").read_text(encoding="utf-8")
    assert import_violations(source, allow_first_party=False) == []


@pytest.mark.parametrize("path", SCORING_FILES, ids=lambda p: p.name)
def test_scoring_never_reads_a_clock_or_does_io(path: Path) -> None:
    assert clock_and_io_violations(path.read_text(encoding="utf-8")) == []


def test_the_scanners_catch_violations() -> None:
    bad_imports = (
        "import numpy\nfrom mnemonia import clock\nfrom mnemonia.store import x\n"
        "import mnemonia.engine\nimportlib.import_module('chromadb')\n"
        "from . import sm2\nimport math\nfrom mnemonia.errors import MnemoniaError\n"
    )
    found = import_violations(bad_imports)
    assert len(found) == 5
    assert any("numpy" in v for v in found) and any("mnemonia.clock" in v for v in found)
    bad_clock = (
        "datetime.now(timezone.utc)\ndatetime.datetime.utcnow()\ndate.today()\n"
        "time.time()\ntime.monotonic()\nfrom time import time\nopen('x')\n"
        "x = now - then\nstate.next_review <= now\n"
    )
    assert len(clock_and_io_violations(bad_clock)) == 7


def test_public_all_is_pinned() -> None:
    assert mnemonia.scoring.__all__ == [
        "activation",
        "consolidation",
        "modes",
        "priority",
        "reevaluation",
        "retention",
        "sm2",
    ]
    for name in mnemonia.scoring.__all__:
        module = getattr(mnemonia.scoring, name)
        for public in module.__all__:
            assert hasattr(module, public), f"{name}.{public} is listed but missing"
