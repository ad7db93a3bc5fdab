"""A LangChain retriever and a LlamaIndex memory built without an engine, side by side in one
process (a new Python process, as an application would be), on the embedded default store with
the bundled model: they share one engine (``MemoryEngine.shared()``) instead of the second one
being refused by the store folder's lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

APP = r'''
import json
from langchain_mnemonia import MnemoniaRetriever
from llama_index.core.llms import ChatMessage
from llama_index.memory.mnemonia import MnemoniaMemory

memory = MnemoniaMemory(tenant="maya", session_id="monday")          # LlamaIndex, no engine
memory.put(ChatMessage(role="user", content="My sister Lena is allergic to peanuts."))
retriever = MnemoniaRetriever(tenant="maya", k=1)                      # LangChain, no engine
docs = retriever.invoke("what is Lena allergic to?")
print(json.dumps({"same_engine": retriever.engine is memory.engine,
                  "path": str(retriever.engine.path),
                  "texts": [d.page_content for d in docs]}))
retriever.engine.close()
'''


def test_langchain_and_llamaindex_defaults_share_one_engine(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", APP], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
             "TOKENIZERS_PARALLELISM": "false"}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["same_engine"] is True
    assert out["path"] == str((tmp_path / "memory").resolve())
    assert out["texts"] == ["My sister Lena is allergic to peanuts."]
