"""Guard rails of the layout (DESIGN section 1): dependencies point one way, no module reaches
another module's ``_private`` names, the front door stays small, no runtime ``assert``, and
strict typing on the core layers.

Each check reads the source with :mod:`ast` (imports inside functions count too: a hidden
import is still a dependency), so a violation fails here with the file, the line and the rule.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared" / "mnemonia"
ADAPTERS = [ROOT / "packages" / "langchain-mnemonia" / "langchain_mnemonia",
            ROOT / "packages" / "llama-index-memory-mnemonia" / "llama_index"]

# adapters, cli, mcp, ui -> engine -> {ingest, recall, lifecycle, transfer, maintenance,
# items, inspection}
# -> runtime -> {store, validation, embeddings, models, entities, config, clock} -> scoring
# -> errors. A module may import its own layer and the layers below it, never one above.
LAYERS: dict[str, int] = {
    "mnemonia.errors": 0,
    "mnemonia.scoring": 1,
    "mnemonia.store": 2, "mnemonia.validation": 2, "mnemonia.embeddings": 2,
    "mnemonia.models": 2, "mnemonia.entities": 2, "mnemonia.config": 2, "mnemonia.clock": 2,
    "mnemonia.config_checks": 2,
    "mnemonia.runtime": 3, "mnemonia.caches": 3, "mnemonia.ranking": 3,
    "mnemonia.ingest": 4, "mnemonia.recall": 4, "mnemonia.keywords": 4, "mnemonia.lifecycle": 4,
    "mnemonia.transfer": 4, "mnemonia.consistency": 4, "mnemonia.maintenance": 4,
    "mnemonia.items": 4, "mnemonia.updates": 4,
    "mnemonia.inspection": 4,
    "mnemonia.engine": 5,
    "mnemonia.cli": 6, "mnemonia.mcp": 6, "mnemonia.ui": 6, "mnemonia": 6,
}
LAYER_NAMES = {0: "errors", 1: "scoring", 2: "store/validation/models/config/...",
               3: "runtime/caches/ranking",
               4: "ingest/recall/lifecycle/transfer/maintenance/inspection",
               5: "engine",
               6: "cli/mcp/ui/package root"}
# What the adapters may import of the core: the public names, nothing of its machinery.
ADAPTER_ALLOWED = {"mnemonia", "mnemonia.errors", "mnemonia.models", "mnemonia.validation",
                   "mnemonia.config", "mnemonia.embeddings", "mnemonia.clock"}
ENGINE_MAX_LINES = 425  # "~400 lines at most" (issue 12); + unsupersede (issue 34)
FUNCTION_MAX_LINES = 80  # outside the pure scoring core and the CLI


def module_name(path: Path) -> str:
    rel = path.relative_to(CORE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The layer of a ``mnemonia`` module (its longest listed prefix), None if unlisted."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return LAYERS[key]
    return LAYERS.get(module)  # the package root only: every other module must be listed


def imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of every import in a file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.is_relative_to(CORE.parent) else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            yield node.lineno, base, [a.name for a in node.names]


def core_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def adapter_files() -> list[Path]:
    return sorted(p for root in ADAPTERS for p in root.rglob("*.py"))


def layer_violations(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        me = module_name(path)
        mine = layer_of(me)
        if mine is None:
            found.append(f"{me}: not placed in a layer (add it to LAYERS)")
            continue
        for line, target, names in imports(path):
            targets = [target] + [f"{target}.{n}" for n in names if target == "mnemonia"]
            for t in targets:
                theirs = layer_of(t) if t.split(".")[0] == "mnemonia" else None
                if theirs is not None and theirs > mine and t != "mnemonia":
                    found.append(f"{path.relative_to(ROOT)}:{line}: {me} ({LAYER_NAMES[mine]})"
                                 f" imports {t} ({LAYER_NAMES[theirs]}), a layer above it")
    return found


def test_every_core_module_is_in_a_layer_and_imports_only_downwards() -> None:
    assert layer_violations(core_files()) == []


def test_scoring_imports_nothing_of_the_project_but_errors() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}: {t}" for p in sorted((CORE / "scoring").rglob("*.py"))
           for line, t, _ in imports(p)
           if t.startswith("mnemonia") and not t.startswith(("mnemonia.scoring",
                                                             "mnemonia.errors"))]
    assert bad == []


def test_nothing_below_the_front_door_imports_the_engine() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}" for p in core_files()
           # the front door's callers (cli, mcp, ui, the package root) sit above it
           if (layer_of(module_name(p)) or 0) < LAYERS["mnemonia.engine"]
           for line, t, names in imports(p)
           if t == "mnemonia.engine" or (t == "mnemonia" and "MemoryEngine" in names)]
    assert bad == []


def test_adapters_import_only_the_public_core() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}: {t}" for p in adapter_files()
           for line, t, _ in imports(p)
           if t.split(".")[0] == "mnemonia" and t not in ADAPTER_ALLOWED]
    assert bad == []


def private_reaches(files: list[Path]) -> list[str]:
    """``from m import _x`` where ``m`` is another project module (dunders allowed)."""
    found = []
    for path in files:
        for line, target, names in imports(path):
            if target.split(".")[0] not in ("mnemonia", "langchain_mnemonia", "llama_index"):
                continue
            for n in names:
                # a package's own ``_private`` helper module is the convention (CONVENTIONS 4)
                if n.startswith("_") and not n.startswith("__") and n != "_private":
                    found.append(f"{path.relative_to(ROOT)}:{line}: imports {target}.{n}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    assert private_reaches(core_files() + adapter_files()) == []


def test_the_guards_catch_a_violation(tmp_path: Path) -> None:
    """The checks above fail on code that breaks the rules (so they cannot pass vacuously)."""
    fake = CORE / "maintenance" / "_guard_probe.py"
    fake.write_text("from mnemonia.engine import MemoryEngine\n"
                    "from mnemonia.recall import _Spreader\n", encoding="utf-8")
    try:
        layered = layer_violations([fake])
        private = private_reaches([fake])
    finally:
        fake.unlink()
    assert any("imports mnemonia.engine (engine), a layer above it" in v for v in layered)
    assert private == ["shared/mnemonia/maintenance/_guard_probe.py:2: imports "
                       "mnemonia.recall._Spreader"]


def test_engine_is_a_front_door() -> None:
    """``engine.py`` holds no SQL and stays small."""
    source = (CORE / "engine.py").read_text(encoding="utf-8")
    assert "sqlalchemy" not in source and "exec_driver_sql" not in source
    assert len(source.splitlines()) <= ENGINE_MAX_LINES


def test_sql_lives_in_the_store_only() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}" for p in core_files() + adapter_files()
           if not p.is_relative_to(CORE / "store")
           for line, t, _ in imports(p) if t.split(".")[0] == "sqlalchemy"]
    assert bad == []


def test_functions_stay_short() -> None:
    long = []
    for path in core_files() + adapter_files():
        rel = path.relative_to(ROOT)
        if "scoring" in rel.parts or path.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > FUNCTION_MAX_LINES:
                    long.append(f"{rel}:{node.lineno}: {node.name} has {n} lines")
    assert long == []


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    if exe.exists():
        return str(exe)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed (it is in the dev dependency group)")
    return found


def test_ruff_forbids_private_access_and_runtime_asserts() -> None:
    """ruff SLF001 (``obj._private`` from outside) and S101 (``assert``) on the project's code."""
    done = subprocess.run(
        [_tool("ruff"), "check", "--select", "SLF001,S101", "--no-cache",
         "shared/mnemonia", "packages"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_strict_on_the_core_layers() -> None:
    """Strict mypy (pyproject) on scoring, store, runtime, caches and recall, and the rest
    checked."""
    done = subprocess.run(
        [_tool("mypy"), "--no-incremental", "-p", "mnemonia"], cwd=ROOT,
        capture_output=True, text=True, check=False,
        env={**os.environ, "MYPYPATH": str(ROOT / "shared")})
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
