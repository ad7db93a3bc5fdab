"""The curated public surface of `mnemonia` and the purity of importing the scoring core."""

from __future__ import annotations

import subprocess
import sys

import mnemonia


def test_all_is_pinned() -> None:
    assert sorted(mnemonia.__all__) == sorted([
        "Clock", "Event", "Explanation", "Hit", "ManualClock", "Memory", "MemoryEngine",
        "MnemoniaConfig", "MnemoniaError", "RecallResult", "Relation", "Scheduler", "SystemClock",
        "__version__",
    ])
    for name in mnemonia.__all__:
        assert getattr(mnemonia, name) is not None


def test_importing_scoring_loads_no_third_party_module() -> None:
    code = (
        "import sys\n"
        "from mnemonia.scoring import sm2, retention, priority, activation, modes, "
        "consolidation, reevaluation\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'numpy', 'sqlalchemy', 'chromadb', 'torch', 'sentence_transformers'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
