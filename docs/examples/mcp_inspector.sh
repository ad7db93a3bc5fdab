#!/usr/bin/env bash
# The official MCP Inspector's CLI against `mnemonia mcp` over stdio (docs/mcp-clients.md):
# list the tools, remember, recall. Each call starts the server, as a client would.
#
#   bash mcp_inspector.sh [STORE]      # needs node (npx) and `mnemonia` with the mcp extra
set -euo pipefail
STORE=${1:-./memory}
INSPECTOR=${INSPECTOR:-npx -y @modelcontextprotocol/inspector@2.12.0}
SERVER=(mnemonia mcp --path "$STORE" --tenant alice)

$INSPECTOR --cli "${SERVER[@]}" --method tools/list
$INSPECTOR --cli "${SERVER[@]}" --method tools/call --tool-name remember \
  --tool-arg "text=Alice drinks green tea every morning"
$INSPECTOR --cli "${SERVER[@]}" --method tools/call --tool-name recall \
  --tool-arg "query=what does Alice drink?"
