"""notebooks/llamaindex.ipynb runs top to bottom and shows a chat engine remembering across
sessions (real model, embedded Chroma, SQLite)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "llamaindex.ipynb"


def _text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.integration
@pytest.mark.slow
def test_llamaindex_notebook_runs(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    text = _text(nb)
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
