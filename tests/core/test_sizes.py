"""Guard rails on the size of the core's rooms (DESIGN section 1): no module over
:data:`MODULE_MAX_LINES` lines and no class over :data:`CLASS_MAX_METHODS` methods
(``MemoryEngine``, the public API, excepted), so a maintainer finds each concern in a room of
its own.

The rooms still too big are listed with the work that splits them; the test fails on a new
violation and on a listed room that has come within the limits (take it off the list), so the
list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "shared" / "mnemonia"
MODULE_MAX_LINES = 700
CLASS_MAX_METHODS = 40
CLASS_EXCEPTED = {"engine.py:MemoryEngine"}  # the public API: one method per public call
STILL_TOO_BIG: dict[str, str] = {}
CLASSES_STILL_TOO_BIG: dict[str, str] = {}


def module_sizes(root: Path = CORE) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(root.rglob("*.py"))}


def class_sizes(root: Path = CORE) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in sorted(root.rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                out[f"{p.relative_to(root).as_posix()}:{node.name}"] = sum(
                    isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in node.body)
    return out


def oversize(sizes: dict[str, int], limit: int, excepted: set[str]) -> set[str]:
    return {name for name, n in sizes.items() if n > limit and name not in excepted}


def test_no_core_module_is_over_the_line_limit() -> None:
    big = oversize(module_sizes(), MODULE_MAX_LINES, set())
    new = sorted(big - set(STILL_TOO_BIG))
    assert not new, f"core modules over {MODULE_MAX_LINES} lines: {new}; split them by concern"
    done = sorted(set(STILL_TOO_BIG) - big)
    assert not done, f"{done} are within {MODULE_MAX_LINES} lines now: take them off the list"


def test_no_core_class_has_too_many_methods() -> None:
    big = oversize(class_sizes(), CLASS_MAX_METHODS, CLASS_EXCEPTED)
    new = sorted(big - set(CLASSES_STILL_TOO_BIG))
    assert not new, f"classes over {CLASS_MAX_METHODS} methods: {new}; split them by concern"
    done = sorted(set(CLASSES_STILL_TOO_BIG) - big)
    assert not done, f"{done} have at most {CLASS_MAX_METHODS} methods now: take them off"


def test_the_guards_catch_a_violation(tmp_path: Path) -> None:
    """The checks above fail when a violation is introduced: a module one line too long and a
    class with one method too many, in a copy of a core layout."""
    (tmp_path / "store").mkdir()
    (tmp_path / "ok.py").write_text("x = 1\n" * MODULE_MAX_LINES)
    (tmp_path / "store" / "big.py").write_text("x = 1\n" * (MODULE_MAX_LINES + 1))
    methods = "".join(f"    def m{i}(self) -> None: ...\n" for i in range(CLASS_MAX_METHODS + 1))
    (tmp_path / "wide.py").write_text("class Wide:\n" + methods + "class Fine:\n"
                                      "    def m(self) -> None: ...\n")
    assert oversize(module_sizes(tmp_path), MODULE_MAX_LINES, set()) == {"store/big.py"}
    assert oversize(class_sizes(tmp_path), CLASS_MAX_METHODS, set()) == {"wide.py:Wide"}
    assert oversize(class_sizes(tmp_path), CLASS_MAX_METHODS, {"wide.py:Wide"}) == set()
