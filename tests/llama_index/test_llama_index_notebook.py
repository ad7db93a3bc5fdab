"""notebooks/llamaindex.ipynb runs top to bottom and shows a chat engine remembering across
sessions (real model, embedded Chroma, SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebooks import output_text, run_notebook


@pytest.mark.integration
@pytest.mark.slow
def test_llamaindex_notebook_runs(tmp_path: Path) -> None:
    nb = run_notebook("llamaindex.ipynb", tmp_path, timeout=600)
    text = output_text(nb)
    assert "sentence-transformers/all-MiniLM-L6-v2" in text  # the bundled real model
    # Monday's chat engine worked like with ChatMemoryBuffer, and stored episodes.
    assert "6 messages in Monday's chat" in text
    assert "episode monday user | Hi, I'm Alice." in text
    # On Wednesday, a new session: the model was sent Monday's memory and answered from it.
    assert "[system] Long-term memory: what you remember" in text
    assert "AI: From memory: My daughter Maya is allergic to peanuts" in text
    assert "AI: From memory: Hi, I'm Alice. I keep three beehives behind the orchard." in text
    # Reset cleared the session only.
    assert "wednesday after:  0 messages" in text
    assert "still recalled: ['- I drink green tea every morning before work.']" in text
    assert "bob sees: []" in text
    # Retriever and memory block.
    assert "2 source nodes; top:" in text
    assert "<long_term_memory>" in text
