"""`MnemoniaConfig`: one frozen, keyword-only configuration.

Sources, later wins: values given in code, then a JSON file, then ``MNEMONIA_*`` environment
variables (``MNEMONIA_HYBRID_KEYWORD_WEIGHT=0.3``). Every violation is reported in one
:class:`~mnemonia.errors.InvalidConfigError` naming the key, the value and the allowed range.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mnemonia.errors import InvalidConfigError
from mnemonia.scoring import activation as act
from mnemonia.scoring import consolidation as cons
from mnemonia.scoring import modes as _modes
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import retention as ret

__all__ = ["ENV_PREFIX", "MAX_TEXT_CHARS", "TENANT_PATTERN", "MnemoniaConfig"]

ENV_PREFIX = "MNEMONIA_"
MAX_TEXT_CHARS = 16_000
TENANT_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$")
MODES: tuple[str, ...] = tuple(_modes.MODES)
"""Names of the score blends (:data:`mnemonia.scoring.modes.MODES`)."""
# Defaults, one named constant each; where the seed fixes a value, it comes from the pure
# scoring core, so the two cannot drift apart. The others were chosen on LoCoMo (README).
DEFAULT_RETENTION_HALF_LIFE: float = ret.DEFAULT_HALF_LIFE  # 86_400.0
DEFAULT_STABILITY_GROWTH: float = ret.STABILITY_GROWTH  # 1.5
DEFAULT_STABILITY_CAP: float = ret.STABILITY_CAP  # 100.0
DEFAULT_PRIORITY_WEIGHT_IMPORTANCE: float = prio.DEFAULT_WEIGHTS.importance  # 0.4
DEFAULT_PRIORITY_WEIGHT_RECENCY: float = prio.DEFAULT_WEIGHTS.recency  # 0.3
DEFAULT_PRIORITY_WEIGHT_ACCESS: float = prio.DEFAULT_WEIGHTS.access  # 0.2
DEFAULT_PRIORITY_WEIGHT_RETENTION: float = prio.DEFAULT_WEIGHTS.retention  # 0.1
DEFAULT_EVICTION_BUDGET: float = prio.DEFAULT_EVICTION_BUDGET  # 0.05
DEFAULT_MAX_MEMORIES: int | None = None
DEFAULT_CONSOLIDATION_THRESHOLD: float = cons.DEFAULT_THRESHOLD  # 0.7
DEFAULT_CONSOLIDATION_MIN_GROUP: int = cons.DEFAULT_MIN_GROUP  # 2
DEFAULT_DEFAULT_K: int = 3
DEFAULT_EPISODE_K: int = 5
DEFAULT_RECALL_INITIAL_CANDIDATES: int = 10
DEFAULT_KEYWORD_CANDIDATES: int = 20
DEFAULT_KEYWORD_POSTINGS: int = 500
DEFAULT_HYBRID_KEYWORD_WEIGHT: float = 0.45
DEFAULT_KEYWORD_DATES: bool = True
DEFAULT_INITIAL_THRESHOLD: float = 0.1
DEFAULT_ENTITY_SIMILARITY_THRESHOLD: float = 0.3
DEFAULT_ENTITY_FANOUT: int = 20
DEFAULT_SPREAD_DEPTH: int = act.DEFAULT_DEPTH  # 2
DEFAULT_SPREAD_DECAY: float = 1.0
DEFAULT_SPREAD_FRONTIER: int = 20
DEFAULT_CROSS_TOPIC_PENALTY: float = act.DEFAULT_CROSS_TOPIC_PENALTY  # 0.4
DEFAULT_DEFAULT_MODE: str = "relevance"
DEFAULT_MIN_ACTIVATION: float = 0.15
DEFAULT_REVIEW_BATCH: int = 50
DEFAULT_IMMEDIATE_THRESHOLD: float = reeval.DEFAULT_IMMEDIATE_THRESHOLD  # 0.7
DEFAULT_BATCH_THRESHOLD: float = reeval.DEFAULT_BATCH_THRESHOLD  # 0.35
DEFAULT_RELATED_THRESHOLD: float = 0.6
DEFAULT_SNAPSHOT_SIZE: int = 10
DEFAULT_REEVALUATION_INTERVAL: float = 600.0
DEFAULT_REEVALUATION_COOLDOWN: float = reeval.DEFAULT_COOLDOWN.total_seconds()  # 300.0
DEFAULT_REEVALUATION_PER_TENANT_CAP: int = reeval.DEFAULT_PER_TENANT_CAP  # 100
DEFAULT_INTELLIGENCE_DISABLED_TENANTS: tuple[str, ...] = ()
DEFAULT_MAINTENANCE: str = "background"
MAINTENANCE_MODES = ("background", "manual")
"""``background``: the engine runs its maintenance by itself; ``manual``: only when called."""
DEFAULT_ENRICH_INTERVAL: float = 60.0
DEFAULT_REVIEW_INTERVAL: float = 600.0
DEFAULT_EVICT_INTERVAL: float = 3600.0
DEFAULT_CONSOLIDATE_INTERVAL: float = 3600.0
DEFAULT_MAINTENANCE_POLL_SECONDS: float = 1.0
DEFAULT_MAINTENANCE_LEASE_SECONDS: float = 300.0
DEFAULT_RERANK_CANDIDATES: int = 20
DEFAULT_EMBED_BATCH_SIZE: int = 64
DEFAULT_QUERY_CACHE_SIZE: int = 1024
DEFAULT_RETRY_ATTEMPTS: int = 5
DEFAULT_RETRY_MAX_WAIT: float = 2.0


def _unit(lo_open: bool = False) -> tuple[float, float, bool]:
    return (0.0, 1.0, lo_open)


@dataclass(frozen=True, kw_only=True)
class MnemoniaConfig:
    """All tunables of the engine. Defaults follow DESIGN.md; see the README for the chosen ones.

    Example:
        >>> MnemoniaConfig(hybrid_keyword_weight=0.3).default_k
        3
    """

    # Forgetting curve and priority
    retention_half_life: float = DEFAULT_RETENTION_HALF_LIFE
    stability_growth: float = DEFAULT_STABILITY_GROWTH
    stability_cap: float = DEFAULT_STABILITY_CAP
    priority_weight_importance: float = DEFAULT_PRIORITY_WEIGHT_IMPORTANCE
    priority_weight_recency: float = DEFAULT_PRIORITY_WEIGHT_RECENCY
    priority_weight_access: float = DEFAULT_PRIORITY_WEIGHT_ACCESS
    priority_weight_retention: float = DEFAULT_PRIORITY_WEIGHT_RETENTION
    # Eviction and consolidation
    eviction_budget: float = DEFAULT_EVICTION_BUDGET
    max_memories: int | None = DEFAULT_MAX_MEMORIES
    consolidation_threshold: float = DEFAULT_CONSOLIDATION_THRESHOLD
    consolidation_min_group: int = DEFAULT_CONSOLIDATION_MIN_GROUP
    # Recall
    default_k: int = DEFAULT_DEFAULT_K
    episode_k: int = DEFAULT_EPISODE_K
    recall_initial_candidates: int = DEFAULT_RECALL_INITIAL_CANDIDATES
    keyword_candidates: int = DEFAULT_KEYWORD_CANDIDATES
    # Query words are searched rarest first while their matches in the tenant total at most
    # this many: a word in more memories says little about any of them, and ranking its
    # matches would make keyword search grow with the store.
    keyword_postings: int = DEFAULT_KEYWORD_POSTINGS
    hybrid_keyword_weight: float = DEFAULT_HYBRID_KEYWORD_WEIGHT
    keyword_dates: bool = DEFAULT_KEYWORD_DATES
    initial_threshold: float = DEFAULT_INITIAL_THRESHOLD
    entity_similarity_threshold: float = DEFAULT_ENTITY_SIMILARITY_THRESHOLD
    entity_fanout: int = DEFAULT_ENTITY_FANOUT
    spread_depth: int = DEFAULT_SPREAD_DEPTH
    spread_decay: float = DEFAULT_SPREAD_DECAY
    spread_frontier: int = DEFAULT_SPREAD_FRONTIER
    cross_topic_penalty: float = DEFAULT_CROSS_TOPIC_PENALTY
    default_mode: str = DEFAULT_DEFAULT_MODE
    min_activation: float = DEFAULT_MIN_ACTIVATION
    relation_types: Mapping[str, float] = field(default_factory=dict)
    # Review, gatekeeper, re-evaluation
    review_batch: int = DEFAULT_REVIEW_BATCH
    immediate_threshold: float = DEFAULT_IMMEDIATE_THRESHOLD
    batch_threshold: float = DEFAULT_BATCH_THRESHOLD
    related_threshold: float = DEFAULT_RELATED_THRESHOLD
    snapshot_size: int = DEFAULT_SNAPSHOT_SIZE
    reevaluation_interval: float = DEFAULT_REEVALUATION_INTERVAL
    reevaluation_cooldown: float = DEFAULT_REEVALUATION_COOLDOWN
    reevaluation_per_tenant_cap: int = DEFAULT_REEVALUATION_PER_TENANT_CAP
    intelligence_disabled_tenants: tuple[str, ...] = DEFAULT_INTELLIGENCE_DISABLED_TENANTS
    # Background maintenance (seconds on the engine's clock between two runs of each job;
    # re-evaluation uses reevaluation_interval). The poll and the lease are real seconds.
    maintenance: str = DEFAULT_MAINTENANCE
    # With a reranker (MemoryEngine.open(rerank=...)): how many of the best scored memories
    # the cross-encoder re-scores (at least k).
    rerank_candidates: int = DEFAULT_RERANK_CANDIDATES
    enrich_interval: float = DEFAULT_ENRICH_INTERVAL
    review_interval: float = DEFAULT_REVIEW_INTERVAL
    evict_interval: float = DEFAULT_EVICT_INTERVAL
    consolidate_interval: float = DEFAULT_CONSOLIDATE_INTERVAL
    maintenance_poll_seconds: float = DEFAULT_MAINTENANCE_POLL_SECONDS
    maintenance_lease_seconds: float = DEFAULT_MAINTENANCE_LEASE_SECONDS
    # Embeddings, storage, network
    max_text_chars: int = MAX_TEXT_CHARS
    embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE
    query_cache_size: int = DEFAULT_QUERY_CACHE_SIZE
    retry_attempts: int = DEFAULT_RETRY_ATTEMPTS
    retry_max_wait: float = DEFAULT_RETRY_MAX_WAIT

    def __post_init__(self) -> None:
        problems = _validate(self)
        if problems:
            raise InvalidConfigError(problems)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **values: Any,
    ) -> MnemoniaConfig:
        """Build a config from code ``values``, then the JSON file at ``path``, then ``env``.

        Later sources win. ``env`` defaults to ``os.environ``; pass ``{}`` to ignore it.
        """
        merged: dict[str, Any] = dict(values)
        if path is not None:
            merged.update(cls._read_json(Path(path)))
        merged.update(cls._from_env(os.environ if env is None else env))
        return cls._build(merged)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> MnemoniaConfig:
        """A config from a JSON object file (unknown keys are errors)."""
        return cls._build(cls._read_json(Path(path)))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MnemoniaConfig:
        """A config from ``MNEMONIA_*`` variables only."""
        return cls._build(cls._from_env(os.environ if env is None else env))

    def replace(self, **changes: Any) -> MnemoniaConfig:
        """A copy with ``changes`` applied (validated)."""
        return self._build({**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def _build(cls, values: Mapping[str, Any]) -> MnemoniaConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidConfigError(
                [f"unknown key {k!r} (allowed: {', '.join(sorted(known))})" for k in unknown]
            )
        coerced = dict(values)
        if "relation_types" in coerced and isinstance(coerced["relation_types"], Mapping):
            coerced["relation_types"] = dict(coerced["relation_types"])
        disabled = coerced.get("intelligence_disabled_tenants")
        if isinstance(disabled, list):
            coerced["intelligence_disabled_tenants"] = tuple(disabled)
        return cls(**coerced)

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise InvalidConfigError(f"config file {str(path)!r} does not exist") from e
        except json.JSONDecodeError as e:
            raise InvalidConfigError(f"config file {str(path)!r} is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise InvalidConfigError(f"config file {str(path)!r} must hold a JSON object")
        return data

    @classmethod
    def _from_env(cls, env: Mapping[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        problems: list[str] = []
        by_name = {f.name: f for f in fields(cls)}
        for key, raw in env.items():
            if not key.startswith(ENV_PREFIX):
                continue
            name = key[len(ENV_PREFIX) :].lower()
            if name not in by_name:
                continue  # other MNEMONIA_* variables (e.g. MNEMONIA_HOME) are not config keys
            try:
                out[name] = _parse_env(name, raw, by_name[name])
            except ValueError as e:
                problems.append(f"{key}={raw!r}: {e}")
        if problems:
            raise InvalidConfigError(problems)
        return out


def _parse_env(name: str, raw: str, f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        default = f.default
    else:
        factory: Any = f.default_factory
        default = factory()
    text = raw.strip()
    if name == "max_memories":
        return None if text.lower() in ("", "none", "null") else int(text)
    if isinstance(default, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, tuple):
        return tuple(p.strip() for p in text.split(",") if p.strip())
    if isinstance(default, dict):
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        return value
    return text


_FLOAT_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    # name: (low, high, low_inclusive, high_inclusive)
    "retention_half_life": (0.0, math.inf, False, False),
    "stability_growth": (1.0, math.inf, True, False),
    "stability_cap": (1.0, math.inf, True, False),
    "priority_weight_importance": (0.0, math.inf, True, False),
    "priority_weight_recency": (0.0, math.inf, True, False),
    "priority_weight_access": (0.0, math.inf, True, False),
    "priority_weight_retention": (0.0, math.inf, True, False),
    "eviction_budget": (0.0, 1.0, False, True),
    "consolidation_threshold": (0.0, 1.0, False, True),
    "hybrid_keyword_weight": (0.0, 1.0, True, True),
    "initial_threshold": (0.0, 1.0, True, True),
    "entity_similarity_threshold": (0.0, 1.0, True, True),
    "spread_decay": (0.0, 1.0, False, True),
    "cross_topic_penalty": (0.0, 1.0, True, True),
    "min_activation": (0.0, 1.0, True, True),
    "immediate_threshold": (0.0, 1.0, True, True),
    "batch_threshold": (0.0, 1.0, True, True),
    "related_threshold": (0.0, 1.0, True, True),
    "reevaluation_interval": (0.0, math.inf, False, False),
    "reevaluation_cooldown": (0.0, math.inf, True, False),
    "retry_max_wait": (0.0, math.inf, False, False),
    "enrich_interval": (0.0, math.inf, False, False),
    "review_interval": (0.0, math.inf, False, False),
    "evict_interval": (0.0, math.inf, False, False),
    "consolidate_interval": (0.0, math.inf, False, False),
    "maintenance_poll_seconds": (0.0, math.inf, False, False),
    "maintenance_lease_seconds": (0.0, math.inf, False, False),
}
_INT_MINIMUMS: dict[str, int] = {
    "consolidation_min_group": 2,
    "default_k": 1,
    "episode_k": 0,
    "recall_initial_candidates": 1,
    "keyword_candidates": 0,
    "keyword_postings": 1,
    "entity_fanout": 0,
    "spread_depth": 0,
    "spread_frontier": 1,
    "review_batch": 1,
    "snapshot_size": 1,
    "reevaluation_per_tenant_cap": 1,
    "max_text_chars": 1,
    "embed_batch_size": 1,
    "query_cache_size": 0,
    "retry_attempts": 1,
    "rerank_candidates": 1,
}

_BOOLS = ("keyword_dates",)


CONFIG_ENV = ENV_PREFIX + "CONFIG"
"""Environment variable naming a JSON config file (else ``mnemonia.json`` in the store)."""
CONFIG_FILE = "mnemonia.json"


def config_file(store: str | os.PathLike[str] | None, chroma_url: str | None = None
                ) -> Path | None:
    """The JSON config an engine opened on ``store`` reads by default: ``$MNEMONIA_CONFIG``,
    else ``mnemonia.json`` in the store folder (``./memory`` for an embedded store opened
    without a path) when it exists, else none."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    if store is None and chroma_url is not None:
        return None
    candidate = Path(store if store is not None else "./memory").expanduser() / CONFIG_FILE
    return candidate if candidate.is_file() else None


def _range_text(lo: float, hi: float, lo_in: bool, hi_in: bool) -> str:
    left = "[" if lo_in else "("
    right = "]" if hi_in else ")"
    return f"{left}{lo:g}, {'inf' if math.isinf(hi) else f'{hi:g}'}{right}"


def _validate(cfg: MnemoniaConfig) -> list[str]:
    problems: list[str] = []
    for name, (lo, hi, lo_in, hi_in) in _FLOAT_RANGES.items():
        v = getattr(cfg, name)
        allowed = _range_text(lo, hi, lo_in, hi_in)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            problems.append(f"{name}={v!r}: must be a finite number in {allowed}")
            continue
        ok_lo = v >= lo if lo_in else v > lo
        ok_hi = v <= hi if hi_in else v < hi
        if not (ok_lo and ok_hi):
            problems.append(f"{name}={v!r}: must be in {allowed}")
    for name, minimum in _INT_MINIMUMS.items():
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            problems.append(f"{name}={v!r}: must be an integer >= {minimum}")
    if cfg.max_memories is not None and (
        isinstance(cfg.max_memories, bool)
        or not isinstance(cfg.max_memories, int)
        or cfg.max_memories < 1
    ):
        problems.append(f"max_memories={cfg.max_memories!r}: must be None or an integer >= 1")
    weights = [
        cfg.priority_weight_importance,
        cfg.priority_weight_recency,
        cfg.priority_weight_access,
        cfg.priority_weight_retention,
    ]
    if all(isinstance(w, int | float) and w == 0 for w in weights):
        problems.append("priority_weight_*: the four priority weights must not all be zero")
    for name in _BOOLS:
        v = getattr(cfg, name)
        if not isinstance(v, bool):
            problems.append(f"{name}={v!r}: must be true or false")
    if cfg.maintenance not in MAINTENANCE_MODES:
        problems.append(f"maintenance={cfg.maintenance!r}: must be one of "
                        f"{', '.join(MAINTENANCE_MODES)}")
    if cfg.default_mode not in MODES:
        problems.append(f"default_mode={cfg.default_mode!r}: must be one of {', '.join(MODES)}")
    if isinstance(cfg.batch_threshold, float | int) \
            and isinstance(cfg.immediate_threshold, float | int) \
            and cfg.batch_threshold > cfg.immediate_threshold:
        problems.append(
            f"batch_threshold={cfg.batch_threshold!r}: must not exceed "
            f"immediate_threshold={cfg.immediate_threshold!r}"
        )
    if not isinstance(cfg.relation_types, Mapping):
        problems.append(f"relation_types={cfg.relation_types!r}: must be a mapping name -> weight")
    else:
        for rel, w in cfg.relation_types.items():
            if not isinstance(rel, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", rel):
                problems.append(f"relation_types key {rel!r}: must match [a-z][a-z0-9_]*")
            if isinstance(w, bool) or not isinstance(w, int | float) or not 0 < w <= 1:
                problems.append(f"relation_types[{rel!r}]={w!r}: weight must be in (0, 1]")
    if not isinstance(cfg.intelligence_disabled_tenants, tuple) or not all(
        isinstance(t, str) for t in cfg.intelligence_disabled_tenants
    ):
        problems.append(
            f"intelligence_disabled_tenants={cfg.intelligence_disabled_tenants!r}: "
            "must be a tuple of tenant names"
        )
    return problems
