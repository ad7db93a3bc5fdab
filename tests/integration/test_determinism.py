"""Same input, same store: a LoCoMo conversation ingested in two processes (two hash seeds, so
set and dict order of strings differ) on a ``ManualClock``, the background jobs running on its
moves, gives the same memories, the same relations and the same rankings, exactly.

Each run is ``_determinism_run.py`` in a fresh process (see there what it does). Memory ids are
random uuids, so a run's memories are keyed by their turn's ``dia_id`` (a note or a concept by
its text). The runs use the deterministic hashing embedder: what this checks is the engine's
own choices (which neighbours an entity links, which memories a review takes, how ties rank,
how consolidation groups), and the bundled model would make the test several times slower
(``benchmarks/determinism.py`` runs the same comparison with the model, on whole
conversations).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.locomo_data import DEFAULT_PATH

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNNER = Path(__file__).with_name("_determinism_run.py")
SAMPLE, TURNS = "conv-26", 200  # 10 sessions; name:caroline alone links 72 turns
SEEDS = ("1", "2")


def _runs(tmp_path: Path) -> list[dict[str, Any]]:
    procs = []
    for seed in SEEDS:
        out = tmp_path / f"run-{seed}.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONHASHSEED": seed}
        procs.append((out, subprocess.Popen(
            [sys.executable, str(RUNNER), str(tmp_path / f"store-{seed}"), str(DEFAULT_PATH),
             SAMPLE, str(TURNS), str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))
    for _, proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    return [json.loads(out.read_text()) for out, _ in procs]


def _relation_diff(a: list[list[Any]], b: list[list[Any]]) -> str:
    only_a = Counter(r[2] for r in map(tuple, a) if r not in set(map(tuple, b)))
    only_b = Counter(r[2] for r in map(tuple, b) if r not in set(map(tuple, a)))
    return f"only in the first run {dict(only_a)}, only in the second {dict(only_b)}"


@pytest.mark.skipif(not DEFAULT_PATH.exists(), reason=f"no LoCoMo data at {DEFAULT_PATH}")
def test_same_input_gives_the_same_store_in_every_process(tmp_path: Path) -> None:
    first, second = _runs(tmp_path)

    # what the runs went through: enough for every choice checked here to be a real choice
    kinds = Counter(r[2] for r in first["relations"])
    assert kinds["same_entity"] > 500 and kinds["follows"] > 100 and kinds["part_of"] == 3
    mems = first["memories"].values()
    reviewed = sum(m["sm2"][3] is not None for m in mems)
    assert 0 < reviewed < len(first["memories"])  # a review batch took some, not all
    assert sum(m["access_count"] > 0 for m in mems) > 0
    assert len(first["rankings"]) > 50

    assert first["relations"] == second["relations"], _relation_diff(
        first["relations"], second["relations"])
    differ = sorted(k for k in first["memories"] if first["memories"][k] != second["memories"][k])
    assert first["memories"] == second["memories"], f"{len(differ)} memories differ: {differ[:5]}"
    differ = [q for q in first["rankings"] if first["rankings"][q] != second["rankings"][q]]
    assert not differ, f"{len(differ)} of {len(first['rankings'])} rankings differ: {differ[:3]}"
