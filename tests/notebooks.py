"""Shared helper: execute a notebook of notebooks/ with nbclient and collect its outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def run_notebook(name: str, workdir: Path, timeout: int = 900) -> nbformat.NotebookNode:
    """Run ``notebooks/<name>`` top to bottom in ``workdir``; fail on any error output."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(workdir)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == [], errors
    return nb


def output_text(nb: nbformat.NotebookNode) -> str:
    """All text a notebook printed or displayed, in order."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)
