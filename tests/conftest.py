"""Shared fixtures: clocks, engines on the hashing embedder (fast) or the bundled model (real),
and a real Chroma server started by the test run itself on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder, default_embedder

START = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def config() -> MnemoniaConfig:
    """The defaults, with maintenance run only when a test calls it (``maintenance="manual"``):
    tests of the background maintenance open their engines with the default instead."""
    return MnemoniaConfig.load(env={}, maintenance="manual")


@pytest.fixture
def hashing_embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
           hashing_embedder: HashingEmbedder) -> Iterator[MemoryEngine]:
    """An embedded engine (real Chroma, real SQLite) on the deterministic hashing embedder."""
    eng = MemoryEngine.open(tmp_path / "store", config=config, clock=clock,
                            embedder=hashing_embedder)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def real_embedder():  # type: ignore[no-untyped-def]
    """The bundled all-MiniLM-L6-v2, loaded once per test session."""
    emb = default_embedder()
    emb.embed_query("warm up")
    return emb


@pytest.fixture
def real_engine(tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
                real_embedder) -> Iterator[MemoryEngine]:  # type: ignore[no-untyped-def]
    """An embedded engine on the real model, real Chroma and real SQLite."""
    eng = MemoryEngine.open(tmp_path / "store", config=config, clock=clock,
                            embedder=real_embedder)
    yield eng
    eng.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chroma_cli() -> str:
    here = Path(sys.executable).parent / "chroma"
    if here.exists():
        return str(here)
    found = shutil.which("chroma")
    if not found:
        pytest.fail("the `chroma` command (from the chromadb package) is not installed")
    return found


def wait_for_chroma(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait (at most 60 s) until the `chroma run` server ``proc`` answers its heartbeat at
    ``url``; the test fails with the end of its ``log`` if it dies or never answers."""
    import httpx

    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"chroma server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `chroma run` server on a free 127.0.0.1 port; yields its URL."""
    data = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log = open(data / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [_chroma_cli(), "run", "--path", str(data / "db"), "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_chroma(url, proc, data / "server.log")
    except BaseException:
        log.close()
        raise
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden", action="store_true", default=False,
        help="rewrite tests/golden/reference.json from the current code instead of comparing "
             "with it (only for an intended behaviour change; give the reason in the commit "
             "message)")
