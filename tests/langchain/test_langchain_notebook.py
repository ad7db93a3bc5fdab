"""notebooks/langchain.ipynb runs top to bottom and shows memory across sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebooks import output_text, run_notebook


@pytest.mark.integration
@pytest.mark.slow
def test_langchain_notebook_runs(tmp_path: Path) -> None:
    nb = run_notebook("langchain.ipynb", tmp_path, timeout=600)
    text = output_text(nb)
    # The model was shown the prompt, and in a new session it saw what was said in the old one.
    assert "---- what the model sees ----" in text
    assert "AI: From memory: Hi! I'm Alice. I just adopted a cat called Miso." in text
    assert "AI: From memory: My sister Ana lives in Porto" in text
    assert "monday after:  0 messages" in text
    assert "still recalled: I work night shifts as a nurse at the city hospital." in text
