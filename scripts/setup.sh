#!/usr/bin/env bash
# Sets up .venv with every workspace member (editable) and the dev tools. Idempotent.
# PyTorch is pinned and installed first: torch==2.13.0 is the local CPU wheel; an unpinned torch
# (asked for by sentence-transformers) would pull several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade "pip>=25.1"
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q \
  -e shared \
  -e "packages/langchain-mnemonia[legacy,langgraph]" \
  -e packages/llama-index-memory-mnemonia
.venv/bin/python -m pip install -q --group dev
# Refuse to go on if something replaced the CPU torch with another build.
.venv/bin/python - <<'PY'
import torch
assert torch.__version__.startswith("2.13.0"), f"unexpected torch {torch.__version__}"
PY
echo "setup: .venv ready ($(.venv/bin/python --version))"
