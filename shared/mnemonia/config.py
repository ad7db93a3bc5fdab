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

Each key is declared once, in the class body: ``name: type = key(default, check, doc)``. The
validation, the parsing of environment values, the shapes of JSON values and the reference
(:func:`reference`, :func:`reference_markdown`: the documentation's table) derive from them.
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from mnemonia.config_checks import (
    SECONDS,
    Check,
    Flag,
    Folder,
    Integer,
    Number,
    OneOf,
    RelationTypes,
    TenantNames,
)
from mnemonia.errors import InvalidConfigError, UnknownConfigKeyError, shown
from mnemonia.scoring import activation as act
from mnemonia.scoring import consolidation as cons
from mnemonia.scoring import modes as _modes
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import retention as ret

log = logging.getLogger("mnemonia")

__all__ = ["EMBEDDER_BACKENDS", "ENV_OTHER_VARIABLES", "ENV_PREFIX", "EVICTION_POLICIES",
           "MAX_METADATA_BYTES", "MAX_METADATA_DEPTH", "MAX_TEXT_CHARS", "TENANT_PATTERN",
           "ConfigKey", "MnemoniaConfig", "reference", "reference_markdown"]

ENV_PREFIX = "MNEMONIA_"
TENANT_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?$")
MODES: tuple[str, ...] = tuple(_modes.MODES)
"""Names of the score blends (:data:`mnemonia.scoring.modes.MODES`)."""
MAINTENANCE_MODES = ("background", "manual")
EVICTION_POLICIES: tuple[str, ...] = prio.EVICTION_POLICIES
"""Names of the eviction orders (:data:`mnemonia.scoring.priority.EVICTION_POLICIES`)."""
EMBEDDER_BACKENDS: tuple[str, ...] = ("torch", "onnx", "onnx-int8")
"""How the bundled all-MiniLM-L6-v2 runs (``MemoryEngine.open(embedder=None)``): ``torch``
(sentence-transformers), ``onnx`` (the same weights exported once to ONNX and run by ONNX
Runtime: the same vectors to float precision), ``onnx-int8`` (that export with int8 weights:
close, not equal, vectors). All three carry the model's name, so a store opens with any."""


_KEY = "mnemonia"  # where a field's metadata holds its Key
_T = TypeVar("_T")


@dataclass(frozen=True)
class Key:
    """A config key's check and documentation (a field's ``metadata["mnemonia"]``)."""

    check: Check
    doc: str


def key(default: _T, check: Check, doc: str) -> _T:
    """Declare a config key: its default, what it accepts and what it means."""
    return field(default=default, metadata={_KEY: Key(check, doc)})


def key_made_by(factory: Callable[[], _T], check: Check, doc: str) -> _T:
    """:func:`key` for a mutable default, made by ``factory`` for each config."""
    return field(default_factory=factory, metadata={_KEY: Key(check, doc)})


@dataclass(frozen=True, kw_only=True)
class MnemoniaConfig:
    """All tunables of the engine, each declared once below: default, check, meaning.

    :func:`reference` lists them (the configuration page of the documentation); DESIGN.md
    gives the seed's defaults, docs/benchmarks/locomo.md the ones chosen on LoCoMo.

    Example:
        >>> MnemoniaConfig(hybrid_keyword_weight=0.3).default_k
        3
    """

    # Forgetting curve and priority
    retention_half_life: float = key(ret.DEFAULT_HALF_LIFE, SECONDS, (
        "Seconds: retention is `exp(-t / (half_life * importance * stability))`, t the time "
        "since the last access; a term of priority and of the seed recall modes."))
    stability_growth: float = key(ret.STABILITY_GROWTH, Number(1), (
        "Each access (a recall hit, a touching read) multiplies a memory's stability by this, "
        "up to `stability_cap`: what is used is forgotten more slowly."))
    stability_cap: float = key(ret.STABILITY_CAP, Number(1), "The largest stability.")
    priority_weight_importance: float = key(prio.DEFAULT_WEIGHTS.importance, Number(0), (
        "Weight of importance in priority, which orders eviction, review and the snapshot "
        "(the four weights are normalised and must not all be zero)."))
    priority_weight_recency: float = key(prio.DEFAULT_WEIGHTS.recency, Number(0), (
        "Weight of recency, `1 / (1 + days since created)`, in priority."))
    priority_weight_access: float = key(prio.DEFAULT_WEIGHTS.access, Number(0), (
        "Weight of use, `min(1, access_count / 100)`, in priority."))
    priority_weight_retention: float = key(prio.DEFAULT_WEIGHTS.retention, Number(0), (
        "Weight of retention (`retention_half_life`) in priority."))
    # Eviction and consolidation
    eviction_budget: float = key(prio.DEFAULT_EVICTION_BUDGET, Number(0, 1, low_open=True), (
        "Share of a tenant's active memories one eviction run may remove (at least 1)."))
    max_memories: int | None = key(None, Integer(1, optional=True), (
        "Active memories per tenant above which the eviction job removes some (up to "
        "`eviction_budget` a run); `None`: no limit."))
    eviction_policy: str = key(prio.DEFAULT_EVICTION_POLICY, OneOf(EVICTION_POLICIES), (
        "Which memories eviction takes first (`EVICTION_POLICIES`): `informative` takes "
        "never-used memories first, then those the gatekeeper skipped, then the least "
        "`importance * distinct content words * (1 + recency)`; `unused_first` never-used "
        "first, by priority; `composite` the seed's priority alone, lowest first."))
    consolidation_threshold: float = key(cons.DEFAULT_THRESHOLD, Number(0, 1, low_open=True), (
        "Jaccard similarity of word sets at which memories group into one concept."))
    consolidation_min_group: int = key(cons.DEFAULT_MIN_GROUP, Integer(2), (
        "Fewest near-duplicates that consolidate into a concept."))
    # Recall
    default_k: int = key(3, Integer(1), "How many memories a recall returns without a `k`.")
    episode_k: int = key(5, Integer(0), (
        "Episode memories beyond the top k that a recall also returns, in `episodes`."))
    recall_initial_candidates: int = key(10, Integer(1), (
        "Dense candidates: the nearest `max(2 * this, 2 * k)` vectors of the query."))
    keyword_candidates: int = key(100, Integer(0), (
        "Keyword candidates (at least k) from the keyword index; 0: none. Chosen on LoCoMo."))
    keyword_postings: int = key(500, Integer(1), (
        "Query words are searched rarest first while their matches in the tenant total at "
        "most this many: a common word says little, and ranking its matches would make keyword "
        "search grow with the store."))
    hybrid_keyword_weight: float = key(0.55, Number(0, 1), (
        "Weight w of the keyword overlap in `fused = (1 - w) * cosine + w * overlap`; chosen "
        "on LoCoMo."))
    keyword_dates: bool = key(True, Flag(), (
        "The text a query's words are matched against carries the memory's date (`on 7 "
        "February 2022`), so a query naming a month or a year matches what was said then."))
    keyword_idf: bool = key(True, Flag(), (
        "Query words weigh `ln((N + 1) / (df + 0.5))` in the keyword score: a rare word says "
        "more."))
    keyword_expansion: float = key(0.45, Number(0, 1, high_open=True), (
        "A query word also matches the tenant's words whose word vectors reach this cosine t, "
        "credited `(cos - t) / (1 - t)` (\"exercise\" finds \"yoga\"); 0: off."))
    keyword_stem_credit: float = key(0.8, Number(0, 1), (
        "A query word also matches the tenant's words of its Porter stem (\"painted\" finds "
        "\"painting\"), credited this much (or more, when the word vectors say so); 0: off."))
    speaker_weight: float = key(0.2, Number(0, 1), (
        "A memory said by a speaker the query names gains this share of relevance."))
    context_weight: float = key(0.5, Number(0, 1), (
        "A memory's relevance is lifted by this share of the best relevance among the "
        "memories at most `context_window` turns from it in its session; 0: off."))
    context_window: int = key(2, Integer(0), "Turns before and after, for `context_weight`.")
    session_weight: float = key(0.0, Number(0, 1), (
        "Lift by this share of (own relevance x the best relevance among the candidates of "
        "the session): the session as one context node. Off by default: +0.5 R@10 on "
        "LoCoMo, but it surfaces off-topic turns of a chat session."))
    initial_threshold: float = key(0.1, Number(0, 1), (
        "Fused relevance a candidate needs to seed activation (with a floor of 0, any does)."))
    entity_similarity_threshold: float = key(0.3, Number(0, 1), (
        "Cosine between the query and an entity's label from which the entity boosts its "
        "memories (a name the query spells out always does)."))
    entity_fanout: int = key(20, Integer(0), (
        "Memories each matched entity may boost, best fused first; 0: no entity step."))
    spread_depth: int = key(act.DEFAULT_DEPTH, Integer(0), "Hops of spreading along relations.")
    spread_decay: float = key(1.0, Number(0, 1, low_open=True), (
        "Factor per hop of spreading, beside each relation type's weight; chosen on LoCoMo."))
    spread_frontier: int = key(20, Integer(1), (
        "Per hop, only this many of the most activated memories spread."))
    cross_topic_penalty: float = key(act.DEFAULT_CROSS_TOPIC_PENALTY, Number(0, 1), (
        "Factor on activation spreading into another topic than the query's `topic=`."))
    default_mode: str = key("lifecycle", OneOf(MODES), "The score blend of `recall(mode=None)`.")
    min_activation: float = key(0.15, Number(0, 1), (
        "Activation floor of a recall (`min_activation=None`); 0 fills up to k."))
    min_similarity: float = key(0.25, Number(0, 1), (
        "A memory whose cosine with the query reaches this passes the floor (and the seed "
        "threshold) whatever its keyword share: a paraphrase that shares no word with its "
        "question fuses under min_activation. 1.0: the fused score alone decides. Chosen on "
        "benchmarks/paraphrase.py: 34/39 paraphrases in the top 3 (27 at 1.0), 0.01 hits "
        "per off-topic ask."))
    relation_types: Mapping[str, float] = key_made_by(dict, RelationTypes(), (
        "Relation types beyond the built-in ones, with their spread weight (or a new weight "
        "for a built-in one)."))
    # Review, gatekeeper, re-evaluation
    review_batch: int = key(50, Integer(1), "Due memories one review run reviews per tenant.")
    immediate_threshold: float = key(reeval.DEFAULT_IMMEDIATE_THRESHOLD, Number(0, 1), (
        "Gatekeeper score at ingest (heat, in re-evaluation) from which a memory is "
        "`immediate`: enriched at once."))
    batch_threshold: float = key(reeval.DEFAULT_BATCH_THRESHOLD, Number(0, 1), (
        "Gatekeeper score (heat) from which a memory is `batched`, enriched by the next "
        "enrichment run; below it, `skipped`. At most `immediate_threshold`."))
    related_threshold: float = key(0.6, Number(0, 1), (
        "Cosine at which ingest links a memory to a close neighbour by `related_to`."))
    detect_updates: bool = key(True, Flag(), (
        "Ingest records supersessions (a new value for what an older memory stated) and "
        "contradictions by itself, with their evidence (DESIGN 5b; `engine.unsupersede` "
        "undoes one)."))
    update_threshold: float = key(0.6, Number(0, 1), (
        "Confidence from which an automatic supersession or contradiction is recorded."))
    slot_weight: float = key(1.0, Number(0, 1), (
        "How much recall favours what a question about one person's one-valued slot asks "
        "for (DESIGN 5b): the best hits that state a value of that slot score "
        "`1 + slot_weight` times higher, and of those filling it the later ranks first. "
        "1.0: update set seed 0 R@1 56.5 (0) / 78.0 (0.4) / 79.8 (1.0), LoCoMo dev R@k "
        "unchanged (71.4/77.7/84.0); 0 turns it off."))
    snapshot_size: int = key(10, Integer(1), "Memories in a snapshot (`limit=None`).")
    reevaluation_interval: float = key(600.0, SECONDS, "Seconds between two re-evaluations.")
    reevaluation_cooldown: float = key(reeval.DEFAULT_COOLDOWN.total_seconds(), Number(0), (
        "Seconds before a re-evaluated memory may be re-evaluated again."))
    reevaluation_per_tenant_cap: int = key(reeval.DEFAULT_PER_TENANT_CAP, Integer(1), (
        "Memories re-evaluated per tenant and run, hottest first."))
    intelligence_disabled_tenants: tuple[str, ...] = key((), TenantNames(), (
        "Tenants re-evaluation leaves alone."))
    # Background maintenance (intervals: seconds on the engine's clock)
    maintenance: str = key("background", OneOf(MAINTENANCE_MODES), (
        "`background`: the engine runs its maintenance jobs by itself; `manual`: only when "
        "called (`engine.maintain()`, `mnemonia maintain`)."))
    rerank_candidates: int = key(20, Integer(1), (
        "With a reranker (`MemoryEngine.open(rerank=...)`), how many of the best scored "
        "memories the cross-encoder re-scores (at least k)."))
    enrich_interval: float = key(60.0, SECONDS, "Seconds between two enrichment runs.")
    review_interval: float = key(600.0, SECONDS, "Seconds between two review runs.")
    evict_interval: float = key(3600.0, SECONDS, "Seconds between two eviction runs.")
    consolidate_interval: float = key(3600.0, SECONDS, "Seconds between two consolidations.")
    expire_interval: float = key(300.0, SECONDS, (
        "Seconds between two sweeps of expired keyed items (LangGraph's default: 5 minutes)."))
    maintenance_poll_seconds: float = key(1.0, SECONDS, (
        "Real seconds the maintenance thread sleeps between two looks at what is due."))
    maintenance_lease_seconds: float = key(300.0, SECONDS, (
        "Real seconds a job's lease lasts: a process that crashed mid-job holds it no longer."))
    # Input limits (checked before anything is written; over a limit: InvalidInputError)
    max_text_chars: int = key(16_000, Integer(1), "Characters of a memory's text or a query.")
    max_metadata_bytes: int = key(65_536, Integer(2), (  # "{}"
        "Bytes of a memory's metadata as UTF-8 JSON (on `add`, `add_many` and the merged "
        "result of `update_metadata`)."))
    max_metadata_depth: int = key(32, Integer(1), "Levels dicts and lists may nest in metadata.")
    # Embeddings, storage, network
    embed_batch_size: int = key(64, Integer(1), (
        "Texts per embedding batch. Read by nothing yet: the embedders keep their own (64)."))
    embedder_backend: str = key("onnx", OneOf(EMBEDDER_BACKENDS), (
        "How the bundled model runs without an `embedder` (`EMBEDDER_BACKENDS`). ONNX: a query "
        "embeds 2.6-2.7x faster than torch, same vectors (`benchmarks/embedder.py`)."))
    onnx_cache_dir: str | None = key(None, Folder(), (
        "Where the ONNX export is cached; `None`: `$XDG_CACHE_HOME/mnemonia/onnx` (else "
        "`~/.cache/mnemonia/onnx`)."))
    query_cache_size: int = key(1024, Integer(0), "Query embeddings kept per store; 0: none.")
    exact_search_limit: int = key(16_000, Integer(0), (
        "An embedded store searches a tenant of at most this many vectors exactly, by one "
        "matrix product over a copy in memory, instead of Chroma's HNSW index; recall then "
        "reads every candidate's cosine from that product, none from the side-store. Recall "
        "p50 against HNSW on a quiet 2-core machine, queries alternating in one process: "
        "-10% at 11,100 vectors, -3% at 21,100 (2026-11-28); on plain stores +0.5-1.1 ms at "
        "16,000 (2026-11-24). 0: always HNSW."))
    own_index_limit: int = key(2_000_000, Integer(0), (
        "Vectors an embedded store holds, over all tenants past `exact_search_limit`, in HNSW "
        "indexes of its own (usearch, in memory, saved in the store's `indexes/` folder on "
        "close) instead of asking Chroma's: at 100,000 vectors a search takes ~0.5 ms "
        "against Chroma's ~1.2 ms at about the same recall (`benchmarks/ann_index.py`). ~2.9 KB "
        "of memory a vector; a tenant that does not fit uses Chroma's query. 0: never."))
    retry_attempts: int = key(5, Integer(1), (
        "Tries of a store call (Chroma, the SQL side-store) that fails with a transient error."))
    retry_max_wait: float = key(2.0, SECONDS, "Most seconds of backoff between two tries.")

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


_CHECKS: dict[str, Check] = {f.name: f.metadata[_KEY].check
                             for f in fields(MnemoniaConfig) if _KEY in f.metadata}
# The defaults other modules import by name, read from the declarations above.
MAX_TEXT_CHARS: int = MnemoniaConfig.max_text_chars
MAX_METADATA_BYTES: int = MnemoniaConfig.max_metadata_bytes
MAX_METADATA_DEPTH: int = MnemoniaConfig.max_metadata_depth
DEFAULT_KEYWORD_POSTINGS: int = MnemoniaConfig.keyword_postings
DEFAULT_EMBEDDER_BACKEND: str = MnemoniaConfig.embedder_backend


def _check(name: str) -> Check:
    """The check of the key ``name`` (a key declared without :func:`key` has none)."""
    if name not in _CHECKS:
        raise TypeError(f"config key {name!r} declares no check: declare it with "
                        "key(default, check, doc)")
    return _CHECKS[name]


@dataclass(frozen=True)
class ConfigKey:
    """One config key as :func:`reference` lists it.

    Attributes:
        name: The key; ``MNEMONIA_`` and the name in capitals is its environment variable.
        type: Its type as annotated, e.g. ``"int | None"``.
        default: Its default value.
        allowed: The values it accepts, in the words of its error messages.
        doc: What it does.
    """

    name: str
    type: str
    default: Any
    allowed: str
    doc: str


def reference() -> list[ConfigKey]:
    """Every config key, in the order of :class:`MnemoniaConfig`, read from its declaration.

    Example:
        >>> [(k.default, k.allowed) for k in reference() if k.name == "default_k"]
        [(3, 'an integer >= 1')]
    """
    defaults = _defaults()
    return [ConfigKey(f.name, str(f.type), defaults[f.name], _check(f.name).allowed(),
                      f.metadata[_KEY].doc) for f in fields(MnemoniaConfig)]


def reference_markdown() -> str:
    """:func:`reference` as a Markdown table (Key, Type, Default, Allowed, Meaning), one row
    per key: the documentation's configuration page. A pipe in a cell is escaped, so GitHub
    and MkDocs (Python-Markdown's ``tables``) read five cells in every row."""
    rows = ["| Key | Type | Default | Allowed | Meaning |", "| --- | --- | --- | --- | --- |"]
    for k in reference():
        cells = [_code(k.name), _code(k.type), _code(repr(k.default)), _code(k.allowed),
                 " ".join(k.doc.split()).replace("|", "\\|")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _code(text: str) -> str:
    """Inline code in a table cell; with a pipe or a backtick, as HTML with entities (a pipe
    in backticks would end the cell on GitHub, and keep its backslash in Python-Markdown)."""
    if "|" in text or "`" in text:
        return "<code>" + html.escape(text).replace("|", "&#124;").replace("`", "&#96;") + "</code>"
    return f"`{text}`"


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
    names = _names()
    for key, raw in env.items():
        if not isinstance(key, str) or not key.startswith(ENV_PREFIX) \
                or key in ENV_OTHER_VARIABLES:
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name not in names:
            # another tool's variable (a launcher's, say) must not stop a store opening:
            # named in a warning, with the closest key in case it is a misspelt one
            hint = _did_you_mean(name, names, lambda n: ENV_PREFIX + n.upper())
            log.warning("ignoring the environment variable %s: it is no Mnemonia config key "
                        "(%s)", key, hint)
            continue
        if not isinstance(raw, str):
            problems.append(f"{key}={shown(raw)}: an environment value must be text")
            continue
        try:
            out[name] = _check(name).parse(raw)
        except ValueError as e:
            problems.append(f"{key}={shown(raw)}: {e}")
    return ("environment", out, problems)


def _coerce(values: Mapping[str, Any]) -> dict[str, Any]:
    """JSON and env shapes of the container fields as the dataclass holds them."""
    names = _names()
    return {k: _check(k).shape(v) if k in names else v for k, v in values.items()}


def _stage_problems(source: str, values: Mapping[str, Any], names: frozenset[str]
                    ) -> list[str]:
    """Unknown keys and out-of-range values of one source, each saying where it came from."""
    problems: list[str] = []
    for key in values:
        if key in names:
            where = "" if source == _CODE else (
                f" (from {ENV_PREFIX}{key.upper()})" if source == "environment"
                else f" (in {source})")
            problems += [p + where for p in _check(key).problems(key, values[key])]
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


_WEIGHT_NAMES = ("priority_weight_importance", "priority_weight_recency",
                 "priority_weight_access", "priority_weight_retention")


def _cross_problems(values: Mapping[str, Any]) -> list[str]:
    """Rules between fields, checked once each field is valid on its own."""
    def ok(*names: str) -> bool:
        return not any(_check(n).problems(n, values[n]) for n in names)

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
    problems = [p for name, v in values.items() for p in _check(name).problems(name, v)]
    return problems + _cross_problems(values)
