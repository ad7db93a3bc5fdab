"""The knowledge-update dev set generator (``benchmarks/updates_data.py``) and the harness's
scoring (``benchmarks/updates.py``): same seed, same set; every category; ids that exist;
controls and hard negatives with nothing stale. No model, no store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import updates_data  # noqa: E402

SEED = 7


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return updates_data.generate(SEED, tenants=updates_data.SMALL_TENANTS)


def _questions(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for t in data["tenants"] for q in t["questions"]]


def test_the_same_seed_gives_the_same_set(data: dict[str, Any]) -> None:
    again = updates_data.generate(SEED, tenants=updates_data.SMALL_TENANTS)
    assert json.dumps(again, sort_keys=True) == json.dumps(data, sort_keys=True)
    other = updates_data.generate(SEED + 1, tenants=updates_data.SMALL_TENANTS)
    assert json.dumps(other, sort_keys=True) != json.dumps(data, sort_keys=True)


def test_the_same_seed_gives_the_same_file_in_another_process(tmp_path: Path,
                                                              data: dict[str, Any]) -> None:
    """No dependence on string hashing or anything else that changes between processes."""
    out = tmp_path / "set.json"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, str(BENCHMARKS / "updates_data.py"), "--seed", str(SEED),
                    "--tenants", str(updates_data.SMALL_TENANTS), "--out", str(out)],
                   check=True, env=env, capture_output=True)
    assert updates_data.load(out) == json.loads(json.dumps(data))


def test_every_category_and_kind_of_hard_negative_is_there(data: dict[str, Any]) -> None:
    qs = _questions(data)
    assert set(Counter(q["category"] for q in qs)) == set(updates_data.CATEGORIES)
    assert {q["subtype"] for q in qs if q["category"] == "negative"} == set(
        updates_data.NEGATIVE_KINDS)
    assert {t["kind"] for t in data["tenants"]} == {"chat", "dialogue"}
    assert {q["subject_kind"] for q in qs} == {"user", "speaker", "third"}
    # the gaps the recipe asks for: adjacent, 5 and 50 memories between versions, and both
    # the same session (minutes) and a later one (days)
    assert {0, 5, 50} <= {q["gap_memories"] for q in qs}
    assert {q["same_session"] for q in qs} == {True, False}
    assert min(q["gap_seconds"] for q in qs if not q["same_session"]) >= 86_400


def test_gold_stale_and_negative_ids_exist_and_are_in_order(data: dict[str, Any]) -> None:
    for t in data["tenants"]:
        mems = {m["id"]: m for m in t["memories"]}
        at = {i: datetime.fromisoformat(m["at"]) for i, m in mems.items()}
        for q in t["questions"]:
            ids = q["gold"] + q["stale"] + q["negatives"]
            assert q["gold"], q
            assert set(ids) <= set(mems), q
            assert len(set(ids)) == len(ids), q
            # stale versions come before gold, and gold is the slot's newest statement
            assert all(at[s] < at[g] for s in q["stale"] for g in q["gold"]), q
            slot = [i for i, m in mems.items() if m["slot"] == q["slot"]]
            assert sorted(slot) == sorted(q["gold"] + q["stale"]), q
            assert q["gap_memories"] >= 0


def test_updates_have_stale_versions_and_controls_and_negatives_have_none(
        data: dict[str, Any]) -> None:
    for t in data["tenants"]:
        mems = {m["id"]: m for m in t["memories"]}
        for q in t["questions"]:
            if q["category"] in ("one_cue", "one_bare", "one_message", "retraction"):
                assert q["stale"] and len(q["gold"]) == 1 and not q["negatives"], q
            elif q["category"] == "many":
                # every value of the slot is gold, nothing is stale
                assert len(q["gold"]) >= 2 and not q["stale"] and not q["negatives"], q
                assert q["cardinality"] == "many"
            else:
                assert q["category"] == "negative"
                assert not q["stale"] and len(q["gold"]) == 1 and q["negatives"], q
                gold, neg = mems[q["gold"][0]], mems[q["negatives"][0]]
                assert neg["slot"] != q["slot"]
                if q["subtype"] == "other_speaker":  # both in the first person, two people
                    assert gold["speaker"] != neg["speaker"]
                    assert {gold["speaker"], neg["speaker"]} <= set(t["speakers"])


def test_every_memory_has_a_speaker_a_session_and_a_time(data: dict[str, Any]) -> None:
    for t in data["tenants"]:
        times = [datetime.fromisoformat(m["at"]) for m in t["memories"]]
        assert all(x.tzinfo is not None for x in times)
        assert times == sorted(times) and len(set(times)) == len(times)
        assert datetime.fromisoformat(t["ask_at"]) > times[-1]
        for m in t["memories"]:
            assert m["speaker"] in t["speakers"] and m["session_id"].startswith(t["tenant"])
            assert m["text"].strip() and not any(c in m["text"] for c in "{}[]|"), m
        for q in t["questions"]:
            assert not any(c in q["question"] for c in "{}[]|"), q


def test_the_default_set_has_several_thousand_memories() -> None:
    full = updates_data.generate(updates_data.DEFAULT_SEED)
    n = sum(len(t["memories"]) for t in full["tenants"])
    assert 3_000 <= n <= 10_000
    assert len(json.dumps(full)) < 3_000_000


def test_scoring_follows_the_recipe() -> None:
    """R@1 is clean (a concept holding gold and stale is no answer), stale at or above gold
    counts ties inside a concept, MANY wants every value, negatives count as false
    supersessions when they come first."""
    import updates

    one = {"id": "q", "category": "one_cue", "gold": ["g"], "stale": ["s"], "negatives": []}
    g, s, x = frozenset({"g"}), frozenset({"s"}), frozenset({"x"})
    assert updates.score(one, [g, s]) == updates.Score(True, True, False, False, None)
    assert updates.score(one, [s, g]) == updates.Score(False, True, True, False, None)
    assert updates.score(one, [x, s]).stale_above  # stale there, gold not
    assert not updates.score(one, [x, x]).stale_above  # neither: a miss, not stale
    both = frozenset({"g", "s"})
    assert updates.score(one, [both]) == updates.Score(False, True, True, True, None)
    many = {"id": "m", "category": "many", "gold": ["a", "b"], "stale": [], "negatives": []}
    a, b = frozenset({"a"}), frozenset({"b"})
    assert updates.score(many, [b, a]) == updates.Score(True, True, None, False, False)
    assert updates.score(many, [b, x]) == updates.Score(True, False, None, False, True)
    neg = {"id": "n", "category": "negative", "gold": ["g"], "stale": [], "negatives": ["n"]}
    n = frozenset({"n"})
    assert updates.score(neg, [g, n]) == updates.Score(True, True, None, False, False)
    assert updates.score(neg, [n, g]) == updates.Score(False, True, None, False, True)
