"""Build the three distributions and check them as a user would get them.

1. ``python -m build`` (sdist, then the wheel from the sdist) for ``mnemonia`` (shared/),
   ``langchain-mnemonia`` and ``llama-index-memory-mnemonia`` (packages/), each from a copy of
   its folder, so the checkout gets no ``build/`` or ``*.egg-info``;
2. a fresh venv with nothing of the workspace: ``torch==2.13.0`` first (the local CPU wheel;
   an unpinned torch would pull the CUDA build), then the three wheels by file name (the
   other dependencies come from the package index);
3. a smoke test run in that venv from an empty folder: the three imports come from the venv,
   ``mnemonia demo`` tells its story, each adapter makes one call on the bundled model.

Usage (from the repository root)::

    .venv/bin/python scripts/check_wheels.py              # build, install, smoke
    .venv/bin/python scripts/check_wheels.py --build-only --out dist

Exit status: 0 when every step passed, 1 when one failed, 3 when the fresh venv could not
reach the package index (offline: nothing was checked past the build).
``tests/packaging/test_wheels.py`` builds the wheels and checks their metadata and contents
with the same functions; its ``slow`` test runs this whole script.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
EXIT_OFFLINE = 3

# What pip prints when it cannot reach an index (urllib3 / requests / socket messages).
NETWORK_ERRORS = ("NewConnectionError", "Failed to establish a new connection",
                  "Temporary failure in name resolution", "Network is unreachable",
                  "Could not fetch URL", "ConnectTimeoutError", "ProxyError")


@dataclass(frozen=True, kw_only=True)
class Distribution:
    """One distribution of the workspace: its name, source folder and import name."""

    name: str
    folder: str
    module: str

    @property
    def wheel_stem(self) -> str:
        """The distribution name as wheel file names spell it."""
        return self.name.replace("-", "_")


DISTRIBUTIONS = (
    Distribution(name="mnemonia", folder="shared", module="mnemonia"),
    Distribution(name="langchain-mnemonia", folder="packages/langchain-mnemonia",
                 module="langchain_mnemonia"),
    Distribution(name="llama-index-memory-mnemonia",
                 folder="packages/llama-index-memory-mnemonia",
                 module="llama_index.memory.mnemonia"),
)

_LEFT_BEHIND = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.pyc")


@dataclass(frozen=True, kw_only=True)
class Built:
    """The files ``python -m build`` made for one distribution."""

    dist: Distribution
    wheel: Path
    sdist: Path


class StepFailed(Exception):
    """A step of the check failed; the message says which and shows its output."""


class Offline(StepFailed):
    """pip could not reach the package index."""


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would let the workspace in: with ``PYTHONPATH`` on the
    checkout, the fresh venv's pip finds ``mnemonia`` "installed" there (its egg-info) and
    skips the wheel, and the smoke test imports the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (in :func:`clean_env` unless ``env`` is given); raise :class:`StepFailed`
    (or :class:`Offline`) with its output tail."""
    done = subprocess.run(cmd, cwd=cwd, env=clean_env() if env is None else env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        output = done.stdout[-3000:] + done.stderr[-5000:]
        error = Offline if any(m in output for m in NETWORK_ERRORS) else StepFailed
        raise error(f"{' '.join(cmd[:6])} ... exited {done.returncode}:\n{output}")
    return done


def build(dist: Distribution, out: Path, *, isolated: bool = True) -> Built:
    """``python -m build`` for ``dist`` into ``out``: the sdist, then the wheel from it.

    ``isolated=False`` builds with this interpreter's setuptools (no index needed); the
    release check builds isolated, as a publisher's CI does.
    """
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"build-{dist.name}-") as tmp:
        source = Path(tmp) / dist.name
        shutil.copytree(ROOT / dist.folder, source, ignore=_LEFT_BEHIND)
        cmd = [sys.executable, "-m", "build", "--outdir", str(out), str(source)]
        if not isolated:
            cmd.insert(3, "--no-isolation")
        run(cmd)
    wheels = sorted(out.glob(f"{dist.wheel_stem}-*.whl"))
    sdists = sorted(out.glob(f"{dist.wheel_stem}-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise StepFailed(f"{dist.name}: expected one wheel and one sdist in {out}, found "
                         f"{[p.name for p in wheels + sdists]}")
    return Built(dist=dist, wheel=wheels[0], sdist=sdists[0])


def build_all(out: Path, *, isolated: bool = True) -> list[Built]:
    """Build every distribution into ``out`` (which must hold none of them yet)."""
    return [build(dist, out, isolated=isolated) for dist in DISTRIBUTIONS]


def fresh_venv(folder: Path) -> Path:
    """A new venv in ``folder`` with an up-to-date pip and the CPU torch; its python."""
    run([sys.executable, "-m", "venv", str(folder)])
    python = folder / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip>=25.1"])
    run([str(python), "-m", "pip", "install", "-q", TORCH])
    return python


def install(python: Path, wheels: list[Path]) -> None:
    """Install the wheels by file name: pip takes ``mnemonia`` from the file given, never
    from an index."""
    run([str(python), "-m", "pip", "install", "-q", *map(str, wheels)])


SMOKE = r'''
import sys
from pathlib import Path

venv = Path(sys.prefix).resolve()
import mnemonia
import langchain_mnemonia
from llama_index.memory import mnemonia as li_mnemonia
for module in (mnemonia, langchain_mnemonia, li_mnemonia):
    where = Path(module.__file__).resolve()
    assert venv in where.parents, f"{module.__name__} imported from {where}, not the venv"
    print(f"{module.__name__} {module.__version__} from {where.parent}")

from langchain_mnemonia import MnemoniaRetriever
from llama_index.core.base.llms.types import ChatMessage
from llama_index.memory.mnemonia import MnemoniaMemory
from mnemonia import MemoryEngine

with MemoryEngine.open("./smoke-memory") as engine:      # the bundled model
    engine.add("Maya is allergic to peanuts", tenant="maya", importance=0.95)
    engine.add("Sam plays the trumpet in a jazz band", tenant="sam")
    docs = MnemoniaRetriever(engine=engine, tenant="maya", k=1).invoke(
        "what should I avoid cooking for Maya?")
    assert [d.page_content for d in docs] == ["Maya is allergic to peanuts"], docs
    print(f"langchain_mnemonia.MnemoniaRetriever: {docs[0].page_content!r} "
          f"score={docs[0].metadata['score']:.3f}")
    memory = MnemoniaMemory(engine=engine, tenant="maya", session_id="monday")
    memory.put(ChatMessage(role="user", content="I am baking a cake for Maya's birthday."))
    prompt = memory.get(input="Which nuts must the cake avoid?")
    assert prompt[0].role.value == "system" and "peanuts" in (prompt[0].content or ""), prompt
    assert "trumpet" not in str(prompt)
    print("llama_index.memory.mnemonia.MnemoniaMemory: the system message holds "
          f"{(prompt[0].content or '').splitlines()}")

try:                                                     # the [langgraph] extra is not here
    from langchain_mnemonia import MnemoniaStore  # noqa: F401
except ImportError as e:
    assert 'pip install "langchain-mnemonia[langgraph]"' in str(e), e
    print(f"without the extra: ImportError: {e}")
else:
    raise AssertionError("MnemoniaStore imported without langgraph installed")
print("smoke: ok")
'''


def smoke(python: Path, workdir: Path) -> str:
    """Run the demo and :data:`SMOKE` with ``python`` in ``workdir``; their output."""
    env = clean_env(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                    ANONYMIZED_TELEMETRY="False", COLUMNS="120")
    workdir.mkdir(parents=True, exist_ok=True)
    demo = run([str(python.parent / "mnemonia"), "demo", "--path", str(workdir / "demo")],
               cwd=workdir, env=env, timeout=600)
    for promise in ("Recall, with explanations", "Forgetting curve"):
        if promise not in demo.stdout:
            raise StepFailed(f"mnemonia demo did not show {promise!r}:\n{demo.stdout[-3000:]}")
    calls = run([str(python), "-c", SMOKE], cwd=workdir, env=env, timeout=600)
    return f"mnemonia demo: exit 0, {len(demo.stdout.splitlines())} lines\n{calls.stdout}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="keep the built files here (default: a "
                        "temporary folder)")
    parser.add_argument("--build-only", action="store_true",
                        help="build the three distributions, install nothing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="check-wheels-") as tmp:
        out = args.out or Path(tmp) / "dist"
        if out.exists() and any(out.glob("*mnemonia-*")):
            print(f"check_wheels: {out} already holds built files; give an empty folder",
                  file=sys.stderr)
            return 1
        try:
            started = time.monotonic()
            built = build_all(out)
            for b in built:
                print(f"built {b.wheel.name} ({b.wheel.stat().st_size // 1024} KiB), "
                      f"{b.sdist.name}")
            print(f"build: {time.monotonic() - started:.0f} s")
            if args.build_only:
                return 0
            started = time.monotonic()
            python = fresh_venv(Path(tmp) / "venv")
            install(python, [b.wheel for b in built])
            print(f"fresh venv with {TORCH} and the three wheels: "
                  f"{time.monotonic() - started:.0f} s")
            started = time.monotonic()
            print(smoke(python, Path(tmp) / "work"), end="")
            print(f"smoke: {time.monotonic() - started:.0f} s")
        except Offline as e:
            print(f"check_wheels: offline, the package index cannot be reached: {e}",
                  file=sys.stderr)
            return EXIT_OFFLINE
        except StepFailed as e:
            print(f"check_wheels: FAILED: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
