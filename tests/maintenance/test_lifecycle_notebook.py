"""notebooks/lifecycle.ipynb runs top to bottom on the bundled model and draws its plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebooks import output_text, run_notebook


@pytest.mark.integration
@pytest.mark.slow
def test_lifecycle_notebook_runs_and_plots(tmp_path: Path) -> None:
    nb = run_notebook("lifecycle.ipynb", tmp_path, timeout=900)
    images = [o for c in nb.cells for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    # forgetting curves, access patterns, SM-2 schedule, eviction, consolidation, heat
    assert len(images) == 6
    text = output_text(nb)
    assert "importance 0.8, after 1 day   R = 0.286505" in text
    assert "q=5: interval 15 days, repetitions 3" in text
    assert "evicted 4:" in text
    assert "recall after restore: True" in text
    assert "second run creates 0 concepts" in text
    assert "members hidden from recall: True" in text
    assert "state at ingest: skipped" in text and "state now: immediate" in text
    stderr = [o.text for c in nb.cells for o in c.get("outputs", [])
              if o.output_type == "stream" and o.name == "stderr"]
    assert stderr == []
