"""The MCP clients guide's examples run as written (docs/mcp-clients.md): the Claude Desktop
config (docs/examples/claude_desktop_config.json) starts ``mnemonia mcp`` and answers
tools/list, remember and recall through the Python client example (mcp_client.py, the
official MCP SDK over stdio), and the Inspector CLI script (mcp_inspector.sh) lists the tools,
remembers and recalls. The config's two placeholders, the absolute path of the ``mnemonia``
command and of the store, are replaced by this install's command and a temporary folder;
everything else is used as documented."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
INSPECTOR = ROOT / ".tools" / "node_modules" / ".bin" / "mcp-inspector"
COMMAND = Path(sys.executable).with_name("mnemonia")
TOOLS = {"remember", "recall", "forget", "restore", "feedback", "relate", "unsupersede",
         "stats"}

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _code_path() -> str:
    """This checkout's code first, as the test run imports it."""
    return os.pathsep.join(sys.path)


def test_the_claude_desktop_config_starts_the_server(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    documented = json.loads((EXAMPLES / "claude_desktop_config.json").read_text())
    entry = documented["mcpServers"]["mnemonia"]
    # the shape the guide explains: an absolute command, then mcp --path ABSOLUTE --tenant
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).name == "mnemonia"
    args = entry["args"]
    assert args[0] == "mcp" and Path(args[args.index("--path") + 1]).is_absolute()
    assert args[args.index("--tenant") + 1] == "me"
    args[args.index("--path") + 1] = str(tmp_path / "memory")
    entry["command"] = str(COMMAND)
    entry["env"] = {**entry.get("env", {}), "PYTHONPATH": _code_path()}
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps(documented), encoding="utf-8")

    spec = importlib.util.spec_from_file_location("guide_mcp_client", EXAMPLES / "mcp_client.py")
    assert spec is not None and spec.loader is not None
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    with (tmp_path / "server.log").open("w") as log:
        tools = asyncio.run(asyncio.wait_for(client.main(config, log), timeout=300))
    assert set(tools) == TOOLS
    out = capsys.readouterr().out
    assert "RELEVANT" in out and "- I prefer answers in bullet points" in out
    assert (tmp_path / "memory").is_dir()      # the store is where the config put it
    assert "serving the store" in (tmp_path / "server.log").read_text()


def _json_documents(text: str) -> list[Any]:
    """The JSON documents the Inspector CLI printed, one after another."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) != -1:
        doc, end = decoder.raw_decode(text, start)
        docs.append(doc)
        at = end
    return docs


@pytest.mark.skipif(shutil.which("node") is None,
                    reason="node is not installed: the MCP Inspector CLI runs on node")
@pytest.mark.skipif(not INSPECTOR.exists(), reason=(
    "the MCP Inspector is not installed in .tools/ (scripts/setup.sh installs it with npm "
    "when node is there)"))
def test_the_inspector_script(tmp_path: Path) -> None:
    env = {**os.environ, "INSPECTOR": str(INSPECTOR), "PYTHONPATH": _code_path(),
           "PATH": f"{COMMAND.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(EXAMPLES / "mcp_inspector.sh"), str(tmp_path / "m")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    listed, made, found = _json_documents(done.stdout)
    assert {t["name"] for t in listed["tools"]} == TOOLS
    assert made["structuredContent"]["memory"]["text"] == "Alice drinks green tea every morning"
    assert [m["text"] for m in found["structuredContent"]["memories"]] == [
        "Alice drinks green tea every morning"]
