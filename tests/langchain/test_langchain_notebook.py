"""notebooks/langchain.ipynb runs top to bottom and shows memory across sessions."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "langchain.ipynb"


def _text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.integration
@pytest.mark.slow
def test_langchain_notebook_runs(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    text = _text(nb)
    # The model was shown the prompt, and in a new session it saw what was said in the old one.
    assert "---- what the model sees ----" in text
    assert "AI: From memory: Hi! I'm Alice. I just adopted a cat called Miso." in text
    assert "AI: From memory: My sister Ana lives in Porto" in text
    assert "monday after:  0 messages" in text
    assert "still recalled: I work night shifts as a nurse at the city hospital." in text
