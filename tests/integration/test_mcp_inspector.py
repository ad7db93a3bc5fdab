"""The official MCP Inspector's CLI (npm ``@modelcontextprotocol/inspector --cli``, installed
by scripts/setup.sh into .tools/) against ``mnemonia mcp`` over stdio and streamable HTTP:
tools/list, remember, recall, forget and a tool error, as a user would run them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = ROOT / ".tools" / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.skipif(shutil.which("node") is None,
                       reason="node is not installed: the MCP Inspector CLI runs on node"),
    pytest.mark.skipif(not INSPECTOR.exists(), reason=(
        "the MCP Inspector is not installed in .tools/ (scripts/setup.sh installs it with "
        "npm when node is there)")),
]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([*sys.path])}


def _inspect(target: list[str], *args: str, rc: int = 0) -> dict[str, Any]:
    """The CLI's JSON answer (``rc``: its exit code; 5 when a tool returned isError)."""
    done = subprocess.run([str(INSPECTOR), "--cli", *target, *args], capture_output=True,
                          text=True, timeout=180, env=_env(), check=False)
    assert done.returncode == rc, done.stdout[-2000:] + done.stderr[-2000:]
    start = done.stdout.index("{")
    answer, _ = json.JSONDecoder().raw_decode(done.stdout[start:])
    return answer  # type: ignore[no-any-return]


def _server(folder: Path) -> list[str]:
    return [sys.executable, "-m", "mnemonia.cli", "mcp", "--path", str(folder),
            "--tenant", "alice"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_target(tmp_path: Path) -> Iterator[list[str]]:
    port = _free_port()
    proc = subprocess.Popen([*_server(tmp_path / "store"), "--http", "--port", str(port)],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(300):  # up to 60 s for the server to listen
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail(f"mnemonia mcp --http exited: {proc.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.2)
        yield [f"http://127.0.0.1:{port}/mcp", "--transport", "http"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        err = proc.stderr.read()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == 0, err  # stopped cleanly, the store closed


def _session(target: list[str]) -> None:
    listed = _inspect(target, "--method", "tools/list")
    assert {"remember", "recall", "forget"} <= {t["name"] for t in listed["tools"]}
    made = _inspect(target, "--method", "tools/call", "--tool-name", "remember",
                    "--tool-arg", "text=Alice drinks green tea every morning",
                    "--tool-arg", "kind=fact")
    memory_id = made["structuredContent"]["memory"]["id"]
    found = _inspect(target, "--method", "tools/call", "--tool-name", "recall",
                     "--tool-arg", "query=what does Alice drink?")
    assert "Alice drinks green tea every morning" in json.dumps(found)
    gone = _inspect(target, "--method", "tools/call", "--tool-name", "forget",
                    "--tool-arg", f"id={memory_id}")
    assert not gone.get("isError")
    after = _inspect(target, "--method", "tools/call", "--tool-name", "recall",
                     "--tool-arg", "query=what does Alice drink?")
    assert "Alice drinks green tea" not in json.dumps(after)
    bad = _inspect(target, "--method", "tools/call", "--tool-name", "recall",
                   "--tool-arg", "query=tea", "--tool-arg", "tenant=not a tenant!", rc=5)
    assert bad["isError"] is True
    assert "tenant" in bad["content"][0]["text"]


def test_inspector_over_stdio(tmp_path: Path) -> None:
    _session(_server(tmp_path / "store"))


def test_inspector_over_http(http_target: list[str]) -> None:
    _session(http_target)
