#!/usr/bin/env bash
# Sets up .venv with every workspace member (editable) and the dev tools. Idempotent.
# PyTorch is pinned and installed first: torch==2.13.0 is the local CPU wheel; an unpinned torch
# (asked for by sentence-transformers) would pull several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# The PostgreSQL tests start their own cluster on 127.0.0.1 and need the server binaries
# (initdb, pg_ctl). Install Debian's postgresql when they are missing and we may (root + apt).
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "setup: PostgreSQL server binaries not found; the PostgreSQL tests will be skipped" >&2
  fi
fi
# The inspector's browser tests (tests/ui) drive headless Chromium through chromedriver:
# Debian's chromium and chromium-driver, installed when missing and we may (root + apt).
if ! command -v chromedriver >/dev/null 2>&1 || ! { command -v chromium >/dev/null 2>&1 \
    || command -v chromium-browser >/dev/null 2>&1; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      chromium chromium-driver >/dev/null
  else
    echo "setup: chromium/chromedriver not found; the inspector's browser tests will be skipped" >&2
  fi
fi
# The MCP Inspector's CLI (tests/integration/test_mcp_inspector.py) is an npm package:
# installed into .tools/node_modules (pinned in .tools/package.json) when node and npm are
# there; without them those tests are skipped, saying why.
if command -v npm >/dev/null 2>&1; then
  (cd .tools && npm install --no-audit --no-fund --loglevel=error >/dev/null) \
    || echo "setup: npm install in .tools failed; the MCP Inspector tests will be skipped" >&2
else
  echo "setup: node/npm not found; the MCP Inspector tests will be skipped" >&2
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade "pip>=25.1"
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q \
  -e "shared[mcp,ui]" \
  -e "packages/langchain-mnemonia[legacy,langgraph]" \
  -e packages/llama-index-memory-mnemonia
.venv/bin/python -m pip install -q --group dev
# Refuse to go on if something replaced the CPU torch with another build.
.venv/bin/python - <<'PY'
import torch
assert torch.__version__.startswith("2.13.0"), f"unexpected torch {torch.__version__}"
PY
echo "setup: .venv ready ($(.venv/bin/python --version))"
