"""How fast `mnemonia mcp` answers after launch: the time from starting the process to the
first `tools/list` answer and to the first `recall` answer, over stdio, with the official MCP
Python client (as Claude Desktop and the Inspector start it: a new process per session).
Each run uses the same store (seeded once with a few memories). Run:

    .venv/bin/python benchmarks/mcp_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


async def _once(folder: Path) -> tuple[float, float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemonia.cli", "mcp", "--path", str(folder), "--tenant", "alice"],
        env={**os.environ, "HF_HUB_OFFLINE": "1"})
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        listed = time.perf_counter() - start
        await session.call_tool("recall", {"query": "what does Alice drink?"})
        recalled = time.perf_counter() - start
    return listed, recalled


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    from mnemonia import MemoryEngine

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "memory"
        with MemoryEngine.open(folder) as engine:
            engine.add_many([{"text": t} for t in (
                "Alice drinks green tea", "Alice flies to Lisbon in May",
                "Bob is allergic to peanuts")], tenant="alice")
        times = [asyncio.run(_once(folder)) for _ in range(runs)]
    for name, values in (("launch -> tools/list", [t[0] for t in times]),
                         ("launch -> first recall", [t[1] for t in times])):
        print(f"{name:24} min {min(values):.2f} s  median {statistics.median(values):.2f} s"
              f"  max {max(values):.2f} s  ({runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
