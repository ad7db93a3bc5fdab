"""Paraphrases and off-topic questions in small tenants (issue 33 point 1): does the default
floor keep a true paraphrase that shares no word with its memory, and drop an off-topic one?

    .venv/bin/python benchmarks/paraphrase.py                 # the shipped defaults
    .venv/bin/python benchmarks/paraphrase.py --sweep         # + the floors considered

The set (benchmarks/data/paraphrase_set.json): 8 tenants of 5 memories, 39 questions that each
ask about one memory without sharing a content word (or a Porter stem) with it, and 12
off-topic questions asked of every tenant (96 asks). Printed per configuration: paraphrases
found in the top 3, paraphrases with an empty result, and for the off-topic asks the hits per
ask and the share of asks with any hit. ``--cosines`` prints, per question, the cosine of its
memory (paraphrases) or of the tenant's closest memory (off-topic), which is what a floor on
the cosine side separates.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.scoring import activation as act
from mnemonia.scoring.stemming import stem

SET_PATH = Path(__file__).resolve().parent / "data" / "paraphrase_set.json"


def load_set(path: Path = SET_PATH) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def shared_words(question: str, memory: str) -> set[str]:
    """Content words (stemmed) the question shares with the memory: none, for this set."""
    return {stem(w) for w in act.query_tokens(question)} & \
        {stem(w) for w in act.query_tokens(memory)}


def fill(engine: MemoryEngine, data: Mapping[str, Any]) -> dict[str, list[str]]:
    """Add every tenant's memories; ``{tenant: [memory ids in set order]}``."""
    return {tenant: [m.id for m in engine.add_many([{"text": t} for t in spec["memories"]],
                                                   tenant=tenant)]
            for tenant, spec in data["tenants"].items()}


def measure(engine: MemoryEngine, data: Mapping[str, Any], ids: Mapping[str, list[str]],
            **recall_kwargs: Any) -> dict[str, Any]:
    """The figures of one configuration (recall at k=3, ``touch=False``)."""
    found = empty = asked = 0
    missed: list[str] = []
    for tenant, spec in data["tenants"].items():
        for question, target in spec["questions"]:
            res = engine.recall(question, tenant=tenant, k=3, touch=False, **recall_kwargs)
            got = [h.memory.id for h in res.memories]
            asked += 1
            found += ids[tenant][target] in got
            empty += not got
            if ids[tenant][target] not in got:
                missed.append(f"{tenant}: {question}")
    off_hits = []
    for tenant in data["tenants"]:
        for question in data["off_topic"]:
            res = engine.recall(question, tenant=tenant, k=3, touch=False, **recall_kwargs)
            off_hits.append(len(res.memories))
    return {"paraphrases": asked, "found_top3": found, "empty": empty, "missed": missed,
            "off_topic_asks": len(off_hits), "hits_per_off_topic": statistics.mean(off_hits),
            "off_topic_with_a_hit": sum(1 for n in off_hits if n) / len(off_hits)}


def cosines(engine: MemoryEngine, data: Mapping[str, Any], ids: Mapping[str, list[str]]
            ) -> tuple[list[float], list[float]]:
    """Cosine of each paraphrase's memory, and of each off-topic ask's closest memory."""
    para, off = [], []
    for tenant, spec in data["tenants"].items():
        for question, target in spec["questions"]:
            res = engine.recall(question, tenant=tenant, k=5, touch=False, min_activation=0,
                                mode="relevance")
            by_id = {h.memory.id: h.explanation.cosine or 0.0 for h in res.memories}
            para.append(by_id.get(ids[tenant][target], 0.0))
        for question in data["off_topic"]:
            res = engine.recall(question, tenant=tenant, k=5, touch=False, min_activation=0,
                                mode="relevance")
            off.append(max((h.explanation.cosine or 0.0 for h in res.memories), default=0.0))
    return para, off


def row(name: str, m: Mapping[str, Any]) -> str:
    return (f"| {name} | {m['found_top3']}/{m['paraphrases']} | {m['empty']} | "
            f"{m['hits_per_off_topic']:.2f} | {100 * m['off_topic_with_a_hit']:.0f}% |")


SWEEP: Sequence[tuple[str, dict[str, Any]]] = (
    ("min_activation 0 (no floor)", {"min_activation": 0.0}),
    ("min_activation 0.10", {"min_activation": 0.10}),
    ("min_activation 0.15, fused only (before)", {"min_similarity": 1.0}),
    *[(f"min_activation 0.15, min_similarity {s:.2f}", {"min_similarity": s})
      for s in (0.20, 0.25, 0.30, 0.35, 0.40)],
)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sweep", action="store_true", help="also the floors considered")
    ap.add_argument("--cosines", action="store_true", help="print the cosine distributions")
    args = ap.parse_args(argv)
    data = load_set()
    for tenant, spec in data["tenants"].items():
        for question, target in spec["questions"]:
            common = shared_words(question, spec["memories"][target])
            if common:
                print(f"warning: {tenant}: {question!r} shares {sorted(common)}")
    root = Path(tempfile.mkdtemp(prefix="mnemonia-paraphrase-"))
    try:
        with MemoryEngine.open(root / "store", maintenance="manual") as engine:
            ids = fill(engine, data)
            print("| configuration | paraphrases found in the top 3 | paraphrases with "
                  "nothing | hits per off-topic ask | off-topic asks with a hit |")
            print("| --- | --- | --- | --- | --- |")
            print(row("shipped defaults", measure(engine, data, ids)))
            if args.cosines:
                para, off = cosines(engine, data, ids)
                print(f"paraphrase cosines: min {min(para):.3f}, quartiles "
                      f"{[round(q, 3) for q in statistics.quantiles(para, n=4)]}, "
                      f"max {max(para):.3f}")
                print(f"off-topic best cosines: min {min(off):.3f}, quartiles "
                      f"{[round(q, 3) for q in statistics.quantiles(off, n=4)]}, "
                      f"max {max(off):.3f}")
                print("paraphrases under each off-topic quantile:",
                      sorted(round(p, 3) for p in para)[:8])
        if args.sweep:
            for name, changes in SWEEP:
                recall_kwargs = {}
                if "min_activation" in changes:
                    recall_kwargs["min_activation"] = changes.pop("min_activation")
                cfg = MnemoniaConfig(**changes)
                with MemoryEngine.open(root / "store", config=cfg,
                                       maintenance="manual") as engine:
                    print(row(name, measure(engine, data, ids, **recall_kwargs)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
