"""`MnemoniaConfig`: one frozen, keyword-only configuration.

Sources, later wins: values given in code, then a JSON file, then ``MNEMONIA_*`` environment
variables (``MNEMONIA_HYBRID_KEYWORD_WEIGHT=0.3``). Every violation of every source is reported
in one :class:`~mnemonia.errors.InvalidConfigError` naming the key, the value, the allowed range
and where the value came from: unknown keys (with a "did you mean"), an unreadable file,
unparsable or out-of-range values. A ``MNEMONIA_*`` variable that names no key is a logged
warning with a "did you mean" (those of :data:`ENV_OTHER_VARIABLES`, e.g. ``MNEMONIA_PATH``,
pass silently): another tool's variable must not stop a store opening. An unknown keyword argument
(``MnemoniaConfig(defualt_k=3)``) raises :class:`~mnemonia.errors.UnknownConfigKeyError`, an
``InvalidConfigError`` that is also a ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mnemonia.errors import InvalidConfigError, UnknownConfigKeyError, shown
from mnemonia.scoring import activation as act
from mnemonia.scoring import consolidation as cons
from mnemonia.scoring import modes as _modes
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import retention as ret

log = logging.getLogger("mnemonia")

__all__ = ["EMBEDDER_BACKENDS", "ENV_OTHER_VARIABLES", "ENV_PREFIX", "MAX_METADATA_BYTES",
           "MAX_METADATA_DEPTH", "MAX_TEXT_CHARS", "TENANT_PATTERN", "MnemoniaConfig"]

ENV_PREFIX = "MNEMONIA_"
MAX_TEXT_CHARS = 16_000
MAX_METADATA_BYTES = 65_536
"""Default ``max_metadata_bytes``: a memory's metadata as UTF-8 JSON, at most 64 KiB."""
MAX_METADATA_DEPTH = 32
"""Default ``max_metadata_depth``: dicts and lists nested at most 32 levels deep."""
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
DEFAULT_KEYWORD_CANDIDATES: int = 100
DEFAULT_KEYWORD_POSTINGS: int = 500
DEFAULT_HYBRID_KEYWORD_WEIGHT: float = 0.55
DEFAULT_KEYWORD_DATES: bool = True
DEFAULT_KEYWORD_IDF: bool = True
DEFAULT_KEYWORD_EXPANSION: float = 0.45
DEFAULT_KEYWORD_STEM_CREDIT: float = 0.8
DEFAULT_SPEAKER_WEIGHT: float = 0.2
DEFAULT_CONTEXT_WEIGHT: float = 0.5
DEFAULT_CONTEXT_WINDOW: int = 2
DEFAULT_SESSION_WEIGHT: float = 0.0
DEFAULT_INITIAL_THRESHOLD: float = 0.1
DEFAULT_ENTITY_SIMILARITY_THRESHOLD: float = 0.3
DEFAULT_ENTITY_FANOUT: int = 20
DEFAULT_SPREAD_DEPTH: int = act.DEFAULT_DEPTH  # 2
DEFAULT_SPREAD_DECAY: float = 1.0
DEFAULT_SPREAD_FRONTIER: int = 20
DEFAULT_CROSS_TOPIC_PENALTY: float = act.DEFAULT_CROSS_TOPIC_PENALTY  # 0.4
DEFAULT_DEFAULT_MODE: str = "lifecycle"
DEFAULT_MIN_ACTIVATION: float = 0.15
DEFAULT_MIN_SIMILARITY: float = 0.25
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
DEFAULT_EXPIRE_INTERVAL: float = 300.0
"""Seconds between two TTL sweeps of expired keyed items (LangGraph's default: 5 minutes)."""
DEFAULT_MAINTENANCE_POLL_SECONDS: float = 1.0
DEFAULT_MAINTENANCE_LEASE_SECONDS: float = 300.0
DEFAULT_RERANK_CANDIDATES: int = 20
DEFAULT_EMBED_BATCH_SIZE: int = 64
EMBEDDER_BACKENDS: tuple[str, ...] = ("torch", "onnx", "onnx-int8")
"""How the bundled all-MiniLM-L6-v2 runs (``MemoryEngine.open(embedder=None)``): ``torch``
(sentence-transformers), ``onnx`` (the same weights exported once to ONNX and run by ONNX
Runtime: the same vectors to float precision), ``onnx-int8`` (that export with int8 weights:
close, not equal, vectors). All three carry the model's name, so a store opens with any."""
DEFAULT_EMBEDDER_BACKEND: str = "onnx"
"""ONNX by default: on the 2-core reference machine it embeds a query 2.6-2.7x faster than
sentence-transformers with the same vectors (``benchmarks/embedder.py``)."""
DEFAULT_ONNX_CACHE_DIR: str | None = None
"""``None``: ``$XDG_CACHE_HOME/mnemonia/onnx`` (else ``~/.cache/mnemonia/onnx``)."""
DEFAULT_QUERY_CACHE_SIZE: int = 1024
DEFAULT_EXACT_SEARCH_LIMIT: int = 8_000
"""An embedded store keeps the vectors of a tenant with at most this many in memory and finds
recall's nearest neighbours, and every candidate's cosine, by one matrix product instead of
Chroma's HNSW query and the candidates' vector reads. On the 2-core reference machine (recall
p50, the same store with and without, each in its own process) it was faster at 5,000
vectors (-0.3 and -1.8 ms), even at 9,000 (+0.4, -0.3 ms) and slower at 16,000 (+0.5, +1.1
ms). 0: always Chroma's HNSW index."""
DEFAULT_RETRY_ATTEMPTS: int = 5
DEFAULT_RETRY_MAX_WAIT: float = 2.0


def _unit(lo_open: bool = False) -> tuple[float, float, bool]:
    return (0.0, 1.0, lo_open)


@dataclass(frozen=True, kw_only=True)
class MnemoniaConfig:
    """All tunables of the engine. Defaults follow DESIGN.md; see the README for the chosen ones.

    Input limits (checked before anything is written; a value over a limit is an
    :class:`~mnemonia.errors.InvalidInputError` naming the limit):

    * ``max_text_chars`` (16000): characters of a memory's text or a query.
    * ``max_metadata_bytes`` (65536): a memory's metadata as UTF-8 JSON, in bytes; checked on
      ``add``, ``add_many`` and on the merged result of ``update_metadata``.
    * ``max_metadata_depth`` (32): how deep dicts and lists may nest in metadata.

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
    # Query words weigh ln((N+1)/(df+0.5)) in the keyword score (a rare word says more).
    keyword_idf: bool = DEFAULT_KEYWORD_IDF
    # A query word also matches the tenant's words whose word vectors reach this cosine,
    # credited (cos - t)/(1 - t) ("exercise" finds "yoga"); 0 turns it off.
    keyword_expansion: float = DEFAULT_KEYWORD_EXPANSION
    # A query word also matches the tenant's words of the same Porter stem ("painted" finds
    # "painting"), credited this much (or more, when their word vectors say so); 0: off.
    keyword_stem_credit: float = DEFAULT_KEYWORD_STEM_CREDIT
    # A memory said by a speaker the query names gains this share of relevance.
    speaker_weight: float = DEFAULT_SPEAKER_WEIGHT
    # A memory's relevance is lifted by this share of the best relevance among the memories
    # at most context_window turns before or after it in its session (0: off).
    context_weight: float = DEFAULT_CONTEXT_WEIGHT
    context_window: int = DEFAULT_CONTEXT_WINDOW
    # ... and by this share of (its own relevance x the best relevance among the candidates
    # of its session, session_id): a session as one context node. Off by default: on LoCoMo
    # it moves R@10 by +0.5 (open-domain +2.3) but surfaces off-topic turns of a chat session.
    session_weight: float = DEFAULT_SESSION_WEIGHT
    initial_threshold: float = DEFAULT_INITIAL_THRESHOLD
    entity_similarity_threshold: float = DEFAULT_ENTITY_SIMILARITY_THRESHOLD
    entity_fanout: int = DEFAULT_ENTITY_FANOUT
    spread_depth: int = DEFAULT_SPREAD_DEPTH
    spread_decay: float = DEFAULT_SPREAD_DECAY
    spread_frontier: int = DEFAULT_SPREAD_FRONTIER
    cross_topic_penalty: float = DEFAULT_CROSS_TOPIC_PENALTY
    default_mode: str = DEFAULT_DEFAULT_MODE
    min_activation: float = DEFAULT_MIN_ACTIVATION
    # A memory whose cosine with the query reaches this passes the floor (and the seed
    # threshold) whatever its keyword share: a paraphrase that shares no word with its
    # question fuses under min_activation. 1.0: the fused score alone decides.
    min_similarity: float = DEFAULT_MIN_SIMILARITY
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
    expire_interval: float = DEFAULT_EXPIRE_INTERVAL
    maintenance_poll_seconds: float = DEFAULT_MAINTENANCE_POLL_SECONDS
    maintenance_lease_seconds: float = DEFAULT_MAINTENANCE_LEASE_SECONDS
    # Input limits
    max_text_chars: int = MAX_TEXT_CHARS
    max_metadata_bytes: int = MAX_METADATA_BYTES
    max_metadata_depth: int = MAX_METADATA_DEPTH
    # Embeddings, storage, network
    embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE
    # The bundled model's runtime (EMBEDDER_BACKENDS) and where the ONNX export is cached;
    # both apply when no embedder is given to MemoryEngine.open.
    embedder_backend: str = DEFAULT_EMBEDDER_BACKEND
    onnx_cache_dir: str | None = DEFAULT_ONNX_CACHE_DIR
    query_cache_size: int = DEFAULT_QUERY_CACHE_SIZE
    exact_search_limit: int = DEFAULT_EXACT_SEARCH_LIMIT
    retry_attempts: int = DEFAULT_RETRY_ATTEMPTS
    retry_max_wait: float = DEFAULT_RETRY_MAX_WAIT

    def __new__(cls, *args: Any, **kwargs: Any) -> MnemoniaConfig:
        # An unknown keyword would be a bare TypeError from the generated __init__; report it
        # (with a "did you mean") together with every other violation of the call instead.
        if not args and set(kwargs) - _names():
            _assemble([(_CODE, kwargs, [])], cls)
        return super().__new__(cls)

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

        Later sources win. ``env`` defaults to ``os.environ``; pass ``{}`` to ignore it. Every
        violation of every source (unknown keys, unreadable file, unparsable or out-of-range
        values) is reported in one :class:`InvalidConfigError`.
        """
        stages: list[_Stage] = [(_CODE, values, [])]
        if path is not None:
            stages.append(_read_json(path))
        stages.append(_from_env(os.environ if env is None else env))
        return _assemble(stages, cls)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> MnemoniaConfig:
        """A config from a JSON object file (unknown keys are errors)."""
        return _assemble([_read_json(path)], cls)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MnemoniaConfig:
        """A config from ``MNEMONIA_*`` variables only (unknown ones are errors)."""
        return _assemble([_from_env(os.environ if env is None else env)], cls)

    def replace(self, **changes: Any) -> MnemoniaConfig:
        """A copy with ``changes`` applied (validated)."""
        return _assemble([(_CODE, {**self.to_dict(), **changes}, [])], type(self))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# -- sources ---------------------------------------------------------------------------------
_CODE = "code"
_Stage = tuple[str, Mapping[str, Any], list[str]]
"""``(source, values, problems found reading the source)``; the source is ``"code"``,
``"config file '...'"`` or ``"environment"``."""


def _names() -> frozenset[str]:
    return frozenset(f.name for f in fields(MnemoniaConfig))


def _did_you_mean(key: str, choices: frozenset[str], shown: Callable[[str], str]) -> str:
    close = difflib.get_close_matches(key, sorted(choices), n=1, cutoff=0.6)
    if close:
        return f"did you mean {shown(close[0])}?"
    return "the keys are " + ", ".join(shown(c) for c in sorted(choices))


def _read_json(path: Any) -> _Stage:
    """The values of a JSON config file, or the problem reading it."""
    if not isinstance(path, str | os.PathLike):
        return (_CODE, {}, [f"path={shown(path)}: must be the path of a JSON file (str or Path)"])
    where = f"config file {str(path)!r}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (where, {}, [f"{where} does not exist"])
    except OSError as e:
        return (where, {}, [f"{where} cannot be read: {e.strerror or e}"])
    except UnicodeDecodeError as e:
        return (where, {}, [f"{where} is not UTF-8 text: {e}"])
    except json.JSONDecodeError as e:
        return (where, {}, [f"{where} is not valid JSON: {e}"])
    if not isinstance(data, dict):
        return (where, {}, [f"{where} must hold a JSON object, got {type(data).__name__}"])
    return (where, data, [])


ENV_OTHER_VARIABLES: Mapping[str, str] = {
    "MNEMONIA_PATH": "the store folder of the `mnemonia` command line (its --path)",
    "MNEMONIA_CONFIG": "a JSON config file an engine reads by default (config_file)",
    "MNEMONIA_UI_TOKEN": "the token `mnemonia ui` requires (its --token)",
    "MNEMONIA_SCREENSHOTS": "where the inspector's browser test saves its screenshots",
}
"""``MNEMONIA_*`` variables that are used but are no config keys. Any other ``MNEMONIA_*``
variable that names no config key is ignored with a warning naming it and the closest key (a
misspelt key is not silently ignored; another tool's variable does not stop a store opening);
a bad value of a key is an error."""


def _from_env(env: Any) -> _Stage:
    """The config values of the ``MNEMONIA_*`` variables of ``env``, and their problems."""
    if not isinstance(env, Mapping):
        return ("environment", {}, [f"env={shown(env)}: must be a mapping of variable -> text"])
    out: dict[str, Any] = {}
    problems: list[str] = []
    by_name = {f.name: f for f in fields(MnemoniaConfig)}
    for key, raw in env.items():
        if not isinstance(key, str) or not key.startswith(ENV_PREFIX) \
                or key in ENV_OTHER_VARIABLES:
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name not in by_name:
            # another tool's variable (a launcher's, say) must not stop a store opening:
            # named in a warning, with the closest key in case it is a misspelt one
            hint = _did_you_mean(name, frozenset(by_name), lambda n: ENV_PREFIX + n.upper())
            log.warning("ignoring the environment variable %s: it is no Mnemonia config key "
                        "(%s)", key, hint)
            continue
        if not isinstance(raw, str):
            problems.append(f"{key}={shown(raw)}: an environment value must be text")
            continue
        try:
            out[name] = _parse_env(name, raw, by_name[name])
        except ValueError as e:
            problems.append(f"{key}={shown(raw)}: {e}")
    return ("environment", out, problems)


def _coerce(values: Mapping[str, Any]) -> dict[str, Any]:
    """JSON and env shapes of the container fields as the dataclass holds them."""
    out = dict(values)
    if isinstance(out.get("relation_types"), Mapping):
        out["relation_types"] = dict(out["relation_types"])
    if isinstance(out.get("intelligence_disabled_tenants"), list):
        out["intelligence_disabled_tenants"] = tuple(out["intelligence_disabled_tenants"])
    return out


def _stage_problems(source: str, values: Mapping[str, Any], names: frozenset[str]
                    ) -> list[str]:
    """Unknown keys and out-of-range values of one source, each saying where it came from."""
    problems: list[str] = []
    for key in values:
        if key in names:
            where = "" if source == _CODE else (
                f" (from {ENV_PREFIX}{key.upper()})" if source == "environment"
                else f" (in {source})")
            problems += [p + where for p in _field_problems(key, values[key])]
        elif source != "environment":  # the environment's unknown keys are reported by name
            what = (f"keyword argument {shown(key)}" if source == _CODE
                    else f"key {shown(key)} in {source}")
            problems.append(f"unknown {what}: {_did_you_mean(str(key), names, repr)}")
    return problems


def _assemble(stages: list[_Stage], cls: type[MnemoniaConfig]) -> MnemoniaConfig:
    """The config of ``stages`` (later wins), or one error listing every violation of every
    source: unknown keys (with a "did you mean"), unreadable sources, bad values."""
    names = _names()
    problems: list[str] = []
    merged: dict[str, Any] = {}
    unknown_kwarg = False
    for source, raw, read_problems in stages:
        values = _coerce(raw)
        problems += read_problems
        problems += _stage_problems(source, values, names)
        unknown_kwarg |= source == _CODE and bool(set(values) - names)
        merged.update({k: v for k, v in values.items() if k in names})
    if not problems:
        problems += _cross_problems({**_defaults(), **merged})
    if problems:
        raise (UnknownConfigKeyError if unknown_kwarg else InvalidConfigError)(problems)
    return cls(**merged)


def _defaults() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(MnemoniaConfig):
        factory: Any = f.default_factory
        out[f.name] = f.default if f.default is not dataclasses.MISSING else factory()
    return out


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
    "keyword_expansion": (0.0, 1.0, True, False),
    "keyword_stem_credit": (0.0, 1.0, True, True),
    "speaker_weight": (0.0, 1.0, True, True),
    "context_weight": (0.0, 1.0, True, True),
    "session_weight": (0.0, 1.0, True, True),
    "entity_similarity_threshold": (0.0, 1.0, True, True),
    "spread_decay": (0.0, 1.0, False, True),
    "cross_topic_penalty": (0.0, 1.0, True, True),
    "min_activation": (0.0, 1.0, True, True),
    "min_similarity": (0.0, 1.0, True, True),
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
    "expire_interval": (0.0, math.inf, False, False),
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
    "context_window": 0,
    "review_batch": 1,
    "snapshot_size": 1,
    "reevaluation_per_tenant_cap": 1,
    "max_text_chars": 1,
    "max_metadata_bytes": 2,  # "{}"
    "max_metadata_depth": 1,
    "embed_batch_size": 1,
    "query_cache_size": 0,
    "exact_search_limit": 0,
    "retry_attempts": 1,
    "rerank_candidates": 1,
}

_BOOLS = ("keyword_dates", "keyword_idf")


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


def _float_problems(name: str, v: Any) -> list[str]:
    lo, hi, lo_in, hi_in = _FLOAT_RANGES[name]
    allowed = _range_text(lo, hi, lo_in, hi_in)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return [f"{name}={shown(v)}: must be a finite number in {allowed}"]
    ok_lo = v >= lo if lo_in else v > lo
    ok_hi = v <= hi if hi_in else v < hi
    return [] if ok_lo and ok_hi else [f"{name}={shown(v)}: must be in {allowed}"]


def _relation_type_problems(v: Any) -> list[str]:
    if not isinstance(v, Mapping):
        return [f"relation_types={shown(v)}: must be a mapping name -> weight"]
    problems = []
    for rel, w in v.items():
        if not isinstance(rel, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", rel):
            problems.append(f"relation_types key {shown(rel)}: must match [a-z][a-z0-9_]*")
        if isinstance(w, bool) or not isinstance(w, int | float) or not 0 < w <= 1:
            problems.append(f"relation_types[{shown(rel)}]={shown(w)}: weight must be in (0, 1]")
    return problems


def _field_problems(name: str, v: Any) -> list[str]:
    """What is wrong with the value ``v`` of the field ``name`` taken on its own."""
    if name in _FLOAT_RANGES:
        return _float_problems(name, v)
    if name == "relation_types":
        return _relation_type_problems(v)
    integer = not isinstance(v, bool) and isinstance(v, int)
    if name in _INT_MINIMUMS and not (integer and v >= _INT_MINIMUMS[name]):
        return [f"{name}={shown(v)}: must be an integer >= {_INT_MINIMUMS[name]}"]
    if name == "max_memories" and v is not None and not (integer and v >= 1):
        return [f"max_memories={shown(v)}: must be None or an integer >= 1"]
    if name in _BOOLS and not isinstance(v, bool):
        return [f"{name}={shown(v)}: must be true or false"]
    if name == "default_mode" and (not isinstance(v, str) or v not in MODES):
        return [f"default_mode={shown(v)}: must be one of {', '.join(MODES)}"]
    if name == "maintenance" and (not isinstance(v, str) or v not in MAINTENANCE_MODES):
        return [f"maintenance={shown(v)}: must be one of {', '.join(MAINTENANCE_MODES)}"]
    if name == "embedder_backend" and (not isinstance(v, str) or v not in EMBEDDER_BACKENDS):
        return [f"embedder_backend={shown(v)}: must be one of {', '.join(EMBEDDER_BACKENDS)}"]
    if name == "onnx_cache_dir" and v is not None and (not isinstance(v, str) or not v.strip()):
        return [f"onnx_cache_dir={shown(v)}: must be None or a folder path (non-empty str)"]
    if name == "intelligence_disabled_tenants" and (
            not isinstance(v, tuple) or not all(isinstance(t, str) for t in v)):
        return [f"intelligence_disabled_tenants={shown(v)}: must be a tuple of tenant names"]
    return []


_WEIGHT_NAMES = ("priority_weight_importance", "priority_weight_recency",
                 "priority_weight_access", "priority_weight_retention")


def _cross_problems(values: Mapping[str, Any]) -> list[str]:
    """Rules between fields, checked once each field is valid on its own."""
    def ok(*names: str) -> bool:
        return not any(_field_problems(n, values[n]) for n in names)

    problems: list[str] = []
    if ok(*_WEIGHT_NAMES) and all(values[n] == 0 for n in _WEIGHT_NAMES):
        problems.append("priority_weight_*: the four priority weights must not all be zero")
    batch, immediate = values["batch_threshold"], values["immediate_threshold"]
    if ok("batch_threshold", "immediate_threshold") and batch > immediate:
        problems.append(f"batch_threshold={shown(batch)}: must not exceed "
                        f"immediate_threshold={shown(immediate)}")
    return problems


def _validate(cfg: MnemoniaConfig) -> list[str]:
    """Every violation of a config: each field on its own, then the rules between fields."""
    values = cfg.to_dict()
    problems = [p for name, v in values.items() for p in _field_problems(name, v)]
    return problems + _cross_problems(values)


def _parse_env(name: str, raw: str, f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        default = f.default
    else:
        factory: Any = f.default_factory
        default = factory()
    text = raw.strip()
    if name == "max_memories":
        return None if text.lower() in ("", "none", "null") else _number(int, text, "an integer")
    if name == "onnx_cache_dir":
        return raw if text else None
    if isinstance(default, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if isinstance(default, int):
        return _number(int, text, "an integer")
    if isinstance(default, float):
        return _number(float, text, "a number")
    if isinstance(default, tuple):
        return tuple(p.strip() for p in text.split(",") if p.strip())
    if isinstance(default, dict):
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ValueError(f"expected a JSON object ({e})") from e
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        return value
    return text


def _number(kind: Callable[[str], Any], text: str, what: str) -> Any:
    try:
        return kind(text)
    except ValueError as e:
        raise ValueError(f"expected {what}") from e
