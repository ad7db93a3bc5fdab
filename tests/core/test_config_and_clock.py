"""MnemoniaConfig (frozen, every violation in one error, code < JSON file < env) and clocks."""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mnemonia.clock import ManualClock, SystemClock
from mnemonia.config import MnemoniaConfig
from mnemonia.errors import InvalidConfigError, InvalidInputError, NaiveDatetimeError


def test_defaults_follow_the_design() -> None:
    c = MnemoniaConfig()
    assert (c.retention_half_life, c.eviction_budget, c.consolidation_threshold) == (
        86400.0, 0.05, 0.7)
    # Recall defaults chosen on LoCoMo (docs/benchmarks/locomo.md, "The defaults and why";
    # DESIGN sections 5 and 8 leave them to the benchmark): fusion weight 0.55, no per-hop
    # decay, and the round-two steps (IDF, expansion 0.45, speaker 0.2, session context 0.5
    # over 2 turns, the session's best off, 100 keyword candidates).
    assert (c.hybrid_keyword_weight, c.initial_threshold, c.spread_depth, c.spread_decay) == (
        0.55, 0.1, 2, 1.0)
    assert (c.keyword_candidates, c.keyword_idf, c.keyword_expansion, c.speaker_weight) == (
        100, True, 0.45, 0.2)
    assert (c.context_weight, c.context_window, c.session_weight) == (0.5, 2, 0.0)
    assert (c.default_mode, c.keyword_dates, c.spread_frontier) == ("lifecycle", True, 20)
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
    start = datetime(2025, 1, 1, tzinfo=UTC)
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


def test_every_violation_of_every_source_in_one_error(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Defect 6: a file with a bad default_k, an out-of-range weight, an unknown key and a
    non-number, plus a misspelt and an unparsable variable and a bad code value: one error,
    each violation saying where it came from."""
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps({"default_k": 0, "hybrid_keyword_weight": 1.5, "defualt_k": 3,
                             "spread_decay": "fast"}))
    env = {"MNEMONIA_EPISOD_K": "2", "MNEMONIA_MIN_ACTIVATION": "high",
           "MNEMONIA_SPREAD_DEPTH": "-1", "MNEMONIA_PATH": "/some/store"}
    with pytest.raises(InvalidConfigError) as info, caplog.at_level(logging.WARNING, "mnemonia"):
        MnemoniaConfig.load(f, env=env, eviction_budget=2.0)
    assert [r.getMessage() for r in caplog.records] == [
        "ignoring the environment variable MNEMONIA_EPISOD_K: it is no Mnemonia config key "
        "(did you mean MNEMONIA_EPISODE_K?)"]
    where = f"(in config file {str(f)!r})"
    assert info.value.violations == [
        "eviction_budget=2.0: must be in (0, 1]",
        f"default_k=0: must be an integer >= 1 {where}",
        f"hybrid_keyword_weight=1.5: must be in [0, 1] {where}",
        f"unknown key 'defualt_k' in config file {str(f)!r}: did you mean 'default_k'?",
        f"spread_decay='fast': must be a finite number in (0, 1] {where}",
        "MNEMONIA_MIN_ACTIVATION='high': expected a number",
        "spread_depth=-1: must be an integer >= 0 (from MNEMONIA_SPREAD_DEPTH)",
    ]
    assert not isinstance(info.value, TypeError)  # no unknown keyword argument in code


def test_unreadable_file_is_reported_with_the_other_sources(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError) as info:
        MnemoniaConfig.load(tmp_path / "missing.json", env={"MNEMONIA_DEFAULT_K": "x"})
    assert len(info.value.violations) == 2
    assert "does not exist" in info.value.violations[0]
    with pytest.raises(InvalidConfigError, match="cannot be read"):
        MnemoniaConfig.load(tmp_path, env={})  # a folder
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(InvalidConfigError, match="must hold a JSON object, got list"):
        MnemoniaConfig.from_json(tmp_path / "list.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(InvalidConfigError, match="not UTF-8"):
        MnemoniaConfig.from_json(tmp_path / "bin.json")


def test_unknown_environment_variable_is_a_warning_and_known_others_pass(
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 33: another tool's MNEMONIA_* variable (MNEMONIA_PYTHON) must not stop a store
    opening; a misspelt key is named in a warning with the closest key."""
    with caplog.at_level(logging.WARNING, "mnemonia"):
        assert MnemoniaConfig.from_env({"MNEMONIA_DEFUALT_K": "3"}) == MnemoniaConfig()
        assert MnemoniaConfig.load(env={"MNEMONIA_COLOUR": "blue",
                                        "MNEMONIA_PYTHON": "/usr/bin/python3"}) == (
            MnemoniaConfig())
    warned = [r.getMessage() for r in caplog.records]
    assert warned[0] == ("ignoring the environment variable MNEMONIA_DEFUALT_K: it is no "
                         "Mnemonia config key (did you mean MNEMONIA_DEFAULT_K?)")
    assert warned[1].startswith("ignoring the environment variable MNEMONIA_COLOUR: it is no "
                                "Mnemonia config key (the keys are ")
    assert warned[2].startswith("ignoring the environment variable MNEMONIA_PYTHON")
    with pytest.raises(InvalidConfigError, match="MNEMONIA_DEFAULT_K='x'"):
        MnemoniaConfig.from_env({"MNEMONIA_DEFAULT_K": "x", "MNEMONIA_PYTHON": "y"})
    with pytest.raises(InvalidConfigError, match="unknown keyword argument 'defualt_k'"):
        MnemoniaConfig.load(env={}, defualt_k=3)  # in code: still an error
    # MNEMONIA_PATH is the CLI's store folder, not a config key: allowed, and ignored here.
    from mnemonia.config import ENV_OTHER_VARIABLES

    assert set(ENV_OTHER_VARIABLES) == {"MNEMONIA_PATH", "MNEMONIA_CONFIG", "MNEMONIA_UI_TOKEN",
                                       "MNEMONIA_SCREENSHOTS"}
    assert MnemoniaConfig.from_env({"MNEMONIA_PATH": "/x", "OTHER_DEFUALT_K": "1"}) == (
        MnemoniaConfig())
    with pytest.raises(InvalidConfigError, match="must be a mapping"):
        MnemoniaConfig.load(env=["MNEMONIA_DEFAULT_K=3"])  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="an environment value must be text"):
        MnemoniaConfig.load(env={"MNEMONIA_DEFAULT_K": 3})  # type: ignore[dict-item]


def test_every_mnemonia_variable_the_project_uses_is_a_key_or_whitelisted() -> None:
    """A test of the whitelist itself: the MNEMONIA_* names the code, README, documentation
    and notebooks use are config keys or ENV_OTHER_VARIABLES, so the stricter check refuses
    none of them."""
    import re

    from mnemonia.config import ENV_OTHER_VARIABLES

    root = Path(__file__).resolve().parents[2]
    files = [p for pattern in ("shared/**/*.py", "packages/**/*.py", "notebooks/**/*.ipynb",
                               "README.md", "docs/**/*.md", "benchmarks/**/*.py",
                               "scripts/**/*")
             for p in root.glob(pattern) if p.is_file()]
    used = {m for p in files for m in re.findall(r"\bMNEMONIA_[A-Z0-9_]*[A-Z0-9]\b",
                                                p.read_text(encoding="utf-8", errors="ignore"))}
    assert "MNEMONIA_PATH" in used
    keys = {f"MNEMONIA_{f.name.upper()}" for f in dataclasses.fields(MnemoniaConfig)}
    assert used - keys - set(ENV_OTHER_VARIABLES) == set()


def test_unknown_keyword_argument_is_a_config_error_and_a_type_error() -> None:
    from mnemonia.errors import UnknownConfigKeyError

    for call in (lambda: MnemoniaConfig(defualt_k=3),  # type: ignore[call-arg]
                 lambda: MnemoniaConfig.load(env={}, defualt_k=3),
                 lambda: MnemoniaConfig().replace(defualt_k=3)):
        with pytest.raises(UnknownConfigKeyError, match="did you mean 'default_k'") as info:
            call()
        assert isinstance(info.value, InvalidConfigError)
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    # ... with every other violation of the same call
    with pytest.raises(TypeError) as info2:
        MnemoniaConfig(foo=1, default_k=0, default_mode="x")  # type: ignore[call-arg]
    assert isinstance(info2.value, InvalidConfigError)
    assert len(info2.value.violations) == 3
    assert "unknown keyword argument 'foo': the keys are" in str(info2.value)
    with pytest.raises(UnknownConfigKeyError, match="unknown keyword argument 'foo'"):
        MnemoniaConfig.load(env={}, foo=1)


def test_metadata_limits_are_config_keys() -> None:
    c = MnemoniaConfig()
    assert (c.max_metadata_bytes, c.max_metadata_depth) == (65536, 32)
    assert MnemoniaConfig.from_env({"MNEMONIA_MAX_METADATA_BYTES": "1024"}).max_metadata_bytes \
        == 1024
    with pytest.raises(InvalidConfigError) as info:
        MnemoniaConfig(max_metadata_bytes=1, max_metadata_depth=0)
    assert info.value.violations == ["max_metadata_bytes=1: must be an integer >= 2",
                                     "max_metadata_depth=0: must be an integer >= 1"]


def test_config_survives_copy_and_pickle() -> None:
    import copy
    import pickle

    c = MnemoniaConfig(default_k=5)
    assert pickle.loads(pickle.dumps(c)) == c == copy.deepcopy(c)
    assert dataclasses.replace(c, default_k=6).default_k == 6


def test_embedder_backend_is_a_checked_choice() -> None:
    c = MnemoniaConfig()
    assert (c.embedder_backend, c.onnx_cache_dir) == ("onnx", None)
    assert MnemoniaConfig(embedder_backend="onnx-int8").embedder_backend == "onnx-int8"
    cfg = MnemoniaConfig.from_env({"MNEMONIA_EMBEDDER_BACKEND": "onnx",
                                   "MNEMONIA_ONNX_CACHE_DIR": "/srv/cache/onnx"})
    assert (cfg.embedder_backend, cfg.onnx_cache_dir) == ("onnx", "/srv/cache/onnx")
    assert MnemoniaConfig.from_env({"MNEMONIA_ONNX_CACHE_DIR": ""}).onnx_cache_dir is None
    with pytest.raises(InvalidConfigError) as info:
        MnemoniaConfig(embedder_backend="tensorrt", onnx_cache_dir="  ")
    assert info.value.violations == [
        "embedder_backend='tensorrt': must be one of torch, onnx, onnx-int8",
        "onnx_cache_dir='  ': must be None or a folder path (non-empty str)"]
    with pytest.raises(InvalidConfigError) as env_info:
        MnemoniaConfig.load(env={"MNEMONIA_EMBEDDER_BACKEND": "ONNX"})
    assert env_info.value.violations == [
        "embedder_backend='ONNX': must be one of torch, onnx, onnx-int8 "
        "(from MNEMONIA_EMBEDDER_BACKEND)"]
    with pytest.raises(InvalidConfigError, match="embedder_backend=None: must be one of"):
        MnemoniaConfig().replace(embedder_backend=None)
