"""The README's first command runs `mnemonia demo`: check it runs and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_runs_and_shows_its_story(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("mnemonia")
    out = subprocess.run([str(exe), "demo", "--path", str(tmp_path / "demo")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COLUMNS": "140"})
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "Recall, with explanations" in text
    # the background maintenance enriched the batched turns and reviewed memories by itself
    assert "Maintenance ran by itself (no maintain() call)" in text
    assert "memories reviewed on their SM-2 schedule" in text
    assert "same_entity" in text and "follows" in text
    # the dog question finds Lena's memory through a relation the enrichment made
    assert "'My sister Lena will look after Pixel while I am ' surfaced via" in text
    assert "April 28th" in text  # the superseding memory answers the launch question
    # the launch-date change is detected by the engine at ingest, not by a call of the demo's
    assert "the engine detected it, and the April 14th memory is superseded" \
        in " ".join(text.split())
    assert "1 superseded" in text
    assert "surfaced via context_of" in text  # the relation made a connected memory surface
    assert "Forgetting curve" in text and "recall about the dog" in text
    # the second run on the same store reuses it instead of adding duplicates
    again = subprocess.run([str(exe), "demo", "--path", str(tmp_path / "demo")],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "140"})
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already holds the demo" in again.stdout
    assert "12 active memories" in again.stdout


def test_cli_add_recall_stats(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).with_name("mnemonia"))
    store = str(tmp_path / "cli")
    add = subprocess.run([exe, "add", "The wifi password is on the fridge", "--path", store,
                          "--tenant", "home", "--importance", "0.9"],
                         capture_output=True, text=True, timeout=300)
    assert add.returncode == 0, add.stderr[-2000:]
    rec = subprocess.run([exe, "recall", "where is the wifi password?", "--path", store,
                          "--tenant", "home", "--json"], capture_output=True, text=True,
                         timeout=300)
    assert rec.returncode == 0 and "fridge" in rec.stdout
    bad = subprocess.run([exe, "add", "x", "--path", store, "--importance", "3"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "importance=3" in bad.stdout
