"""An MCP client in Python (the official MCP SDK) that starts `mnemonia mcp` from a Claude
Desktop config file, as Claude Desktop does, then lists the tools, remembers and recalls
(docs/mcp-clients.md).

    pip install "mnemonia[mcp]"
    python mcp_client.py claude_desktop_config.json

The test suite runs main() on the documented config (tests/integration/test_mcp_guide.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TextIO

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def server_params(config_file: Path, name: str = "mnemonia") -> StdioServerParameters:
    """The ``mcpServers`` entry ``name`` of a Claude Desktop config: command, args, env."""
    entry = json.loads(config_file.read_text(encoding="utf-8"))["mcpServers"][name]
    return StdioServerParameters(command=entry["command"], args=entry.get("args", []),
                                 env=entry.get("env"))


async def main(config_file: Path, errlog: TextIO | None = None) -> list[str]:
    """Start the server of the config, list its tools, remember and recall; the tool names.
    The server's log (its stderr) goes to ``errlog``, by default this process's stderr."""
    params = server_params(config_file)
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        tools = [tool.name for tool in (await session.list_tools()).tools]
        print("tools:", ", ".join(tools))
        await session.call_tool("remember", {"text": "I prefer answers in bullet points"})
        found = await session.call_tool("recall", {"query": "How should you format answers?"})
        print(found.content[0].text)          # RELEVANT ... sections, as an LLM reads them
    return tools


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "claude_desktop_config.json")))
