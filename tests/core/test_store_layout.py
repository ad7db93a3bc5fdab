"""The side-store stays split by concern (DESIGN section 1, issue 32): no store module over
700 lines, no store class over 40 methods, and every dialect difference in
``store/dialect.py`` rather than in branches on the dialect's name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared" / "mnemonia"
STORE = CORE / "store"
MODULE_MAX_LINES = 700
CLASS_MAX_METHODS = 40
# Migrations are DDL frozen per dialect (append-only); schema.item_expressions is the index
# definition of migration 9, which the dialects read.
DIALECT_BRANCHES_ALLOWED = {STORE / "dialect.py", STORE / "schema.py"}
BRANCH = re.compile(r"dialect(\.name)?\s*(==|!=|\bin\b|\bnot in\b)")


def test_store_modules_and_classes_stay_small() -> None:
    big = []
    for path in sorted(STORE.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MODULE_MAX_LINES:
            big.append(f"{path.name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef)
                        for b in node.body)
                if n > CLASS_MAX_METHODS:
                    big.append(f"{path.name}: class {node.name} has {n} methods")
    assert big == []


def test_dialect_branches_live_in_the_dialect_module() -> None:
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in sorted(CORE.rglob("*.py")) if p not in DIALECT_BRANCHES_ALLOWED
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
             if BRANCH.search(line)]
    assert found == []


def test_the_side_store_is_a_composition_root() -> None:
    """Callers name the concern they use: ``SideStore`` itself runs no SQL of its own."""
    source = (STORE / "repository.py").read_text(encoding="utf-8")
    assert "sqlalchemy" not in source and "exec_driver_sql" not in source
    assert len(source.splitlines()) <= 120


def test_chroma_implements_the_vector_index_protocol() -> None:
    """``VectorIndex`` is the seam another vector backend implements; Chroma's index has
    every method of it (mypy checks the signatures where ``Runtime.open`` builds it)."""
    from mnemonia.store import ChromaIndex, VectorIndex

    methods = sorted(n for n, v in vars(VectorIndex).items()
                     if callable(v) and not n.startswith("_"))
    assert methods and [n for n in methods if not callable(getattr(ChromaIndex, n, None))] == []


def test_collection_handles_have_a_type_outside_the_store() -> None:
    loose = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(CORE.rglob("*.py"))
             if not p.is_relative_to(STORE)
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
             if re.search(r"\bcol(lection)?: Any\b", line)]
    assert loose == []
