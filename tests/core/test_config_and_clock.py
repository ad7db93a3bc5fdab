"""MnemoniaConfig (frozen, every violation in one error, code < JSON file < env) and clocks."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mnemonia.clock import ManualClock, SystemClock
from mnemonia.config import MnemoniaConfig
from mnemonia.errors import InvalidConfigError, InvalidInputError, NaiveDatetimeError


def test_defaults_follow_the_design() -> None:
    c = MnemoniaConfig()
    assert (c.retention_half_life, c.eviction_budget, c.consolidation_threshold) == (
        86400.0, 0.05, 0.7)
    # Recall defaults chosen on LoCoMo (README "Retrieval quality (LoCoMo)"; DESIGN sections
    # 5 and 8 leave them to the benchmark): fusion weight 0.45, no per-hop decay, relevance.
    assert (c.hybrid_keyword_weight, c.initial_threshold, c.spread_depth, c.spread_decay) == (
        0.45, 0.1, 2, 1.0)
    assert (c.default_mode, c.keyword_dates, c.spread_frontier) == ("relevance", True, 20)
    assert c.keyword_postings == 500
    assert (c.min_activation, c.default_k, c.episode_k, c.entity_fanout) == (0.15, 3, 5, 20)


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        MnemoniaConfig().default_k = 5  # type: ignore[misc]


def test_keyword_only() -> None:
    with pytest.raises(TypeError):
        MnemoniaConfig(86400.0)  # type: ignore[misc]


def test_every_violation_in_one_error() -> None:
    with pytest.raises(InvalidConfigError) as info:
        MnemoniaConfig(hybrid_keyword_weight=1.5, default_k=0, default_mode="nope",
                       eviction_budget=float("nan"))
    err = info.value
    assert len(err.violations) == 4
    text = str(err)
    assert "hybrid_keyword_weight=1.5" in text and "[0, 1]" in text
    assert "default_k=0" in text and "default_mode='nope'" in text and "eviction_budget" in text
    assert isinstance(err, ValueError)


def test_all_zero_priority_weights_rejected() -> None:
    with pytest.raises(InvalidConfigError, match="must not all be zero"):
        MnemoniaConfig(priority_weight_importance=0, priority_weight_recency=0,
                       priority_weight_access=0, priority_weight_retention=0)


def test_later_source_wins(tmp_path: Path) -> None:
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps({"default_k": 7, "hybrid_keyword_weight": 0.5}))
    cfg = MnemoniaConfig.load(f, env={"MNEMONIA_HYBRID_KEYWORD_WEIGHT": "0.2"},
                              default_k=4, episode_k=2)
    assert cfg.default_k == 7  # file beats code
    assert cfg.hybrid_keyword_weight == 0.2  # env beats file
    assert cfg.episode_k == 2  # code where nothing later says otherwise


def test_env_parsing_and_errors() -> None:
    cfg = MnemoniaConfig.from_env({"MNEMONIA_MAX_MEMORIES": "1000",
                                   "MNEMONIA_INTELLIGENCE_DISABLED_TENANTS": "a, b",
                                   "MNEMONIA_PATH": "/ignored/not/a/key"})
    assert cfg.max_memories == 1000 and cfg.intelligence_disabled_tenants == ("a", "b")
    with pytest.raises(InvalidConfigError, match="MNEMONIA_DEFAULT_K='three'"):
        MnemoniaConfig.from_env({"MNEMONIA_DEFAULT_K": "three"})


def test_unknown_key_in_file(tmp_path: Path) -> None:
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps({"defualt_k": 3}))
    with pytest.raises(InvalidConfigError, match="unknown key 'defualt_k'"):
        MnemoniaConfig.from_json(f)


def test_manual_clock() -> None:
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    c = ManualClock(start)
    assert c.now() == start
    assert c.advance(timedelta(days=2)) == start + timedelta(days=2)
    assert c.set(start) == start
    with pytest.raises(NaiveDatetimeError):
        ManualClock(datetime(2025, 1, 1))
    with pytest.raises(InvalidInputError):
        c.advance(timedelta(seconds=-1))


def test_system_clock_is_aware_utc() -> None:
    now = SystemClock().now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
