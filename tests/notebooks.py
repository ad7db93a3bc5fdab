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
    """All text a notebook printed or displayed, cell by cell. A cell's stdout is one text
    (under load the kernel may flush one ``print`` as several stream outputs, or put a
    stderr warning between its pieces), then its stderr, then what it displayed."""
    parts = []
    for cell in nb.cells:
        outs = cell.get("outputs", [])
        for name in ("stdout", "stderr"):
            text = "".join(o.get("text", "") for o in outs
                           if o.get("output_type") == "stream" and o.get("name") == name)
            if text:
                parts.append(text)
        parts.extend(o.get("data", {}).get("text/plain", "") for o in outs
                     if o.get("output_type") != "stream")
    return "\n".join(parts)
