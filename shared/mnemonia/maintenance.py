"""Maintenance: eviction, consolidation, the SM-2 review worker, enrichment, re-evaluation,
the snapshot, use reports, and a background :class:`Scheduler` (DESIGN section 5).

Every function takes the :class:`~mnemonia.engine.MemoryEngine` first; the engine's public
methods (``engine.evict``, ``engine.consolidate``, ...) delegate here. Scoring comes from the
pure :mod:`mnemonia.scoring` core; time always comes from ``engine.clock``. Each operation
returns a frozen report dataclass with counts (``report.as_dict()`` for JSON or tables) and logs
one structured line on the ``mnemonia.maintenance`` logger.

Example:
    >>> import tempfile
    >>> from datetime import datetime, timezone
    >>> from mnemonia import ManualClock, MemoryEngine
    >>> from mnemonia.embeddings import HashingEmbedder
    >>> clock = ManualClock(datetime(2025, 1, 1, tzinfo=timezone.utc))
    >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder(),
    ...                        clock=clock) as engine:
    ...     _ = engine.add_many([{"text": "The deploy runs every Friday at noon"},
    ...                          {"text": "the deploy runs every friday at noon."}],
    ...                         tenant="ops")
    ...     engine.consolidate(tenant="ops").concepts_created
    1
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from mnemonia.errors import InvalidInputError, MnemoniaError
from mnemonia.scoring import activation as act
from mnemonia.scoring import consolidation as cons
from mnemonia.scoring import priority as prio
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import sm2
from mnemonia.store import sql as S

if TYPE_CHECKING:
    from mnemonia.engine import MemoryEngine

__all__ = [
    "DEFAULT_INTERVALS",
    "JOBS",
    "ConsolidationReport",
    "EnrichmentReport",
    "EvictionReport",
    "MaintenanceReport",
    "Promotion",
    "ReevaluationReport",
    "ReviewReport",
    "Scheduler",
    "TenantMaintenance",
    "consolidate",
    "echoes",
    "enrich",
    "estimate_quality",
    "evict",
    "maintain",
    "quality_from_rank",
    "reevaluate",
    "report_use",
    "review",
    "run_cli",
    "snapshot",
]

log = logging.getLogger("mnemonia.maintenance")

JOBS: tuple[str, ...] = ("enrich", "evict", "consolidate", "review", "reevaluate")
"""Maintenance jobs, in the order :func:`maintain` runs the per-tenant ones."""

DEFAULT_INTERVALS: Mapping[str, float | None] = {
    "reevaluate": None,  # None here: config.reevaluation_interval (600 s by default)
    "enrich": 60.0,
    "review": 600.0,
    "evict": 3600.0,
    "consolidate": 3600.0,
}
"""Seconds between two runs of each job in a :class:`Scheduler` (overridable per job)."""

LAST_TICK_KEY = "reevaluation.last_tick"
"""``kv`` key holding the time (epoch seconds) of the last successful re-evaluation tick."""
DEFERRED_KEY = "reevaluation.deferred"
"""``kv`` key holding the candidates the last tick left out (per-tenant cap or cooldown):
``{memory_id: [tenant, heat, when the heat was computed]}``; they compete again in the next
tick (for at most one window), so a cap delays a promotion instead of dropping it."""

MINHASH_PERMUTATIONS = 128
MINHASH_SEED = 1
LSH_RECALL_AT_THRESHOLD = 0.9999
"""LSH banding is chosen so a pair exactly at the Jaccard threshold is a candidate with at
least this probability (more similar pairs even more surely)."""

REACTIVE_USE_QUALITY = 5  # a memory the reply echoed was useful
ECHO_MIN_SHARE = 0.5  # share of a memory's content words the reply must contain
_SLACK = 1e-9  # numpy vs pure-Python priority differ by far less than this
_CHUNK = 500
_NEIGHBOURS = 6  # as at ingest: nearest neighbours used for related_to
_LISTED_MEMBERS = 100  # member ids kept in a concept's metadata and event (relations hold all)
_SNAPSHOT_HEADER = "MEMORY SNAPSHOT"

_QUALITY_BINS = (0.9, 0.7, 0.5, 0.3, 0.1)  # -> 5, 4, 3, 2, 1, else 0
_ESTIMATE_DECAY_PER_HOUR = 0.05
_WORD = re.compile(r"\w+")


# ----------------------------------------------------------------------------------------
# reports
# ----------------------------------------------------------------------------------------
def _json_default(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


@dataclass(frozen=True, kw_only=True)
class _Report:
    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-safe dict."""
        return json.loads(json.dumps(asdict(self), default=_json_default))  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class EvictionReport(_Report):
    """What one eviction run did.

    Attributes:
        tenant: The tenant.
        active: Active (not soft-deleted) memories before the run.
        protected: Active memories that may never be evicted (importance > 0.9, pinned,
            immediate).
        allowed: How many the run was allowed to evict (the budget, or fewer in automatic mode).
        evicted: How many were soft-deleted.
        ids: The evicted ids, lowest priority first.
        reason: ``budget`` (explicit run), ``over_max_memories`` or ``not_over_max_memories``.
    """

    tenant: str
    active: int
    protected: int
    allowed: int
    evicted: int
    ids: tuple[str, ...] = ()
    reason: str = "budget"


@dataclass(frozen=True, kw_only=True)
class ConsolidationReport(_Report):
    """What one consolidation run did.

    Attributes:
        scanned: Unconsolidated active memories considered.
        candidate_pairs: Pairs of distinct word sets proposed by MinHash LSH.
        verified_pairs: Those whose exact Jaccard meets the threshold.
        groups: Groups formed.
        concepts_created: New ``concept`` memories.
        members_consolidated: Memories marked as part of a concept.
        concept_ids: The concepts written by this run.
    """

    tenant: str
    scanned: int
    candidate_pairs: int
    verified_pairs: int
    groups: int
    concepts_created: int
    members_consolidated: int
    concept_ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ReviewReport(_Report):
    """What one SM-2 review pass did.

    Attributes:
        due: Enriched memories due for review.
        reviewed: Reviewed now (at most ``review_batch``).
        from_use: Qualities taken from reported use (the reply echoed the memory).
        from_recall: Qualities taken from recall ranks since the last review.
        estimated: Qualities estimated (no signal).
        ids: Reviewed ids, in review order.
    """

    tenant: str
    due: int
    reviewed: int
    from_use: int
    from_recall: int
    estimated: int
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EnrichmentReport(_Report):
    """What one enrichment sweep did: ``pending`` memories waited, ``enriched`` were done."""

    tenant: str
    pending: int
    enriched: int
    relations_added: int


@dataclass(frozen=True, kw_only=True)
class Promotion(_Report):
    """One ``reevaluation_promoted`` change."""

    memory_id: str
    tenant: str
    old_state: str
    new_state: str
    heat: float


@dataclass(frozen=True, kw_only=True)
class ReevaluationReport(_Report):
    """What one re-evaluation tick did (all tenants).

    Attributes:
        window_start: Access-log rows after this time were read (the last successful tick,
            or one hour back at most).
        window_end: The tick time.
        scanned: Access-log rows read.
        memories: Distinct memories among them (tenants with intelligence enabled).
        candidates: Of those, ``skipped``/``batched`` active memories.
        reevaluated: Candidates past the cooldown and within the per-tenant cap.
        promoted: Promotions made.
        disabled_tenants: Tenants left alone (``intelligence_disabled_tenants``).
        promotions: The promotions, per tenant hottest first.
        enriched: Memories promoted to ``immediate`` and enriched in the same tick.
        deferred: Candidates left out by the cap or the cooldown; they compete again in the
            next tick (see :data:`DEFERRED_KEY`).
    """

    window_start: datetime
    window_end: datetime
    scanned: int
    memories: int
    candidates: int
    reevaluated: int
    promoted: int
    disabled_tenants: tuple[str, ...] = ()
    promotions: tuple[Promotion, ...] = ()
    enriched: int = 0
    deferred: int = 0


@dataclass(frozen=True, kw_only=True)
class TenantMaintenance(_Report):
    """The per-tenant part of :class:`MaintenanceReport`."""

    tenant: str
    enrichment: EnrichmentReport
    eviction: EvictionReport
    consolidation: ConsolidationReport
    review: ReviewReport


@dataclass(frozen=True, kw_only=True)
class MaintenanceReport(_Report):
    """What :func:`maintain` did: one re-evaluation tick, then every tenant's jobs."""

    reevaluation: ReevaluationReport
    tenants: tuple[TenantMaintenance, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """Totals over tenants: enriched, evicted, concepts, consolidated, reviewed, promoted."""
        t = self.tenants
        return {
            "tenants": len(t),
            "enriched": sum(x.enrichment.enriched for x in t) + self.reevaluation.enriched,
            "evicted": sum(x.eviction.evicted for x in t),
            "concepts_created": sum(x.consolidation.concepts_created for x in t),
            "members_consolidated": sum(x.consolidation.members_consolidated for x in t),
            "reviewed": sum(x.review.reviewed for x in t),
            "scanned": self.reevaluation.scanned,
            "promoted": self.reevaluation.promoted,
        }

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out["counts"] = self.counts
        return out


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------
def _ts(dt: datetime) -> float:
    return dt.timestamp()


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _event_row(tenant: str, memory_id: str, event: str, at: float,
               before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
               ) -> dict[str, Any]:
    """One ``memory_events`` row, serialised exactly like ``MemoryEngine._event``."""
    return dict(tenant=tenant, memory_id=memory_id, event=event, at=at,
                before=json.dumps(before, default=str) if before is not None else None,
                after=json.dumps(after, default=str) if after is not None else None)


def _insert_events(conn: Any, rows: list[dict[str, Any]]) -> None:
    for chunk in _chunks(rows):
        conn.execute(S.memory_events.insert(), list(chunk))


def _weights(engine: MemoryEngine) -> prio.PriorityWeights:
    cfg = engine.config
    return prio.PriorityWeights(importance=cfg.priority_weight_importance,
                                recency=cfg.priority_weight_recency,
                                access=cfg.priority_weight_access,
                                retention=cfg.priority_weight_retention)


def _priority_of(engine: MemoryEngine, r: Any, now: datetime,
                 weights: prio.PriorityWeights) -> float:
    """The exact priority (pure scoring core) of a memory row."""
    return prio.priority(importance=float(r.importance), created_at=_dt(r.created_at),
                         accessed_at=_dt(r.accessed_at), access_count=int(r.access_count),
                         stability=float(r.stability), now=now, weights=weights,
                         half_life=engine.config.retention_half_life)


def _columns(rows: Sequence[Any]) -> dict[str, tuple[Any, ...]]:
    """Column tuples of SQL rows, by column name (one pass; much faster than per-row access)."""
    if not rows:
        return {}
    return dict(zip(rows[0]._fields, zip(*rows, strict=True), strict=True))


def _priority_array(engine: MemoryEngine, cols: Mapping[str, Sequence[Any]], nowts: float,
                    weights: prio.PriorityWeights) -> np.ndarray:
    """The same priority formula, vectorised, to shortlist before the exact computation.

    Agrees with :func:`mnemonia.scoring.priority.priority` to far better than ``_SLACK``.
    """
    if not cols:
        return np.zeros(0)
    w = weights.normalised()
    imp = np.asarray(cols["importance"], dtype=float)
    created = np.asarray(cols["created_at"], dtype=float)
    accessed = np.asarray(cols["accessed_at"], dtype=float)
    count = np.asarray(cols["access_count"], dtype=float)
    stab = np.asarray(cols["stability"], dtype=float)
    recency = 1.0 / (1.0 + np.maximum(0.0, (nowts - created) / 86400.0))
    access = np.minimum(1.0, count / prio.ACCESS_SATURATION)
    strength = engine.config.retention_half_life * imp * stab
    elapsed = np.maximum(0.0, nowts - accessed)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        retention = np.where(imp == 0.0, 0.0, np.exp(-elapsed / np.where(strength > 0, strength,
                                                                         1.0)))
    value = w.importance * imp + w.recency * recency + w.access * access + w.retention * retention
    return np.clip(value, 0.0, 1.0)


def _shortlist(values: np.ndarray, mask: np.ndarray, n: int, *, lowest: bool) -> np.ndarray:
    """Indices (within ``mask``) of the ``n`` lowest (or highest) values plus every near-tie."""
    idx = np.nonzero(mask)[0]
    if n <= 0 or idx.size == 0:
        return idx[:0]
    if idx.size <= n:
        return idx
    vals = values[idx]
    if lowest:
        cut = float(np.partition(vals, n - 1)[n - 1])
        return np.asarray(idx[vals <= cut + _SLACK])
    cut = float(-np.partition(-vals, n - 1)[n - 1])
    return np.asarray(idx[vals >= cut - _SLACK])


def _tenant_rows(engine: MemoryEngine, conn: Any, tenant: str, columns: Sequence[Any],
                 *conditions: Any) -> list[Any]:
    m = S.memories
    return list(conn.execute(sa.select(*columns).where(
        m.c.tenant == tenant, m.c.status == "committed", m.c.deleted_at.is_(None),
        *conditions)).all())


# ----------------------------------------------------------------------------------------
# eviction
# ----------------------------------------------------------------------------------------
def evict(engine: MemoryEngine, *, tenant: str, force: bool = True) -> EvictionReport:
    """Soft-delete the lowest-priority active memories of ``tenant``.

    An explicit run (``force=True``, what ``engine.evict`` does) removes
    ``max(1, int(active * eviction_budget))`` memories; automatic maintenance
    (``force=False``) evicts only while the tenant is over ``max_memories`` (when set), at most
    the budget and never below the limit. Never evicted: importance > 0.9, pinned, state
    ``immediate``. Ties go to the older access. Each eviction writes an ``evicted`` event;
    ``engine.restore(id)`` brings a memory back whole.
    """
    engine._check_open()
    if not isinstance(force, bool):
        raise InvalidInputError(f"force={force!r}: must be True or False")
    cfg = engine.config
    now = engine.clock.now()
    nowts = _ts(now)
    m = S.memories
    cols = [m.c.id, m.c.importance, m.c.created_at, m.c.accessed_at, m.c.access_count,
            m.c.stability, m.c.pinned, m.c.state]
    with engine.sql.connect() as conn:
        rows = _tenant_rows(engine, conn, tenant, cols)
    active = len(rows)
    budget = prio.eviction_count(active, cfg.eviction_budget)
    if force:
        allowed, reason = budget, "budget"
    elif cfg.max_memories is not None and active > cfg.max_memories:
        allowed, reason = min(budget, active - cfg.max_memories), "over_max_memories"
    else:
        allowed, reason = 0, "not_over_max_memories"
    data = _columns(rows)
    if rows:
        protected = ((np.asarray(data["importance"], dtype=float) > prio.PROTECTED_IMPORTANCE)
                     | np.asarray(data["pinned"], dtype=bool)
                     | (np.asarray(data["state"], dtype=object) == reeval.IMMEDIATE))
    else:
        protected = np.zeros(0, dtype=bool)
    chosen: list[str] = []
    if allowed:
        weights = _weights(engine)
        values = _priority_array(engine, data, nowts, weights)
        short = _shortlist(values, ~protected, allowed, lowest=True)
        candidates = [prio.EvictionCandidate(
            id=rows[i].id, priority=_priority_of(engine, rows[i], now, weights),
            accessed_at=_dt(rows[i].accessed_at), importance=float(rows[i].importance),
            pinned=bool(rows[i].pinned), state=rows[i].state) for i in short]
        chosen = prio.select_for_eviction(candidates, budget=cfg.eviction_budget, count=allowed)
        by_id = {c.id: c for c in candidates}
        with engine._write, engine.sql.begin() as conn:
            still: list[str] = []
            for chunk in _chunks(chosen):
                still += [r[0] for r in conn.execute(sa.select(m.c.id).where(
                    m.c.id.in_(chunk), m.c.deleted_at.is_(None)))]
                conn.execute(m.update().where(m.c.id.in_(chunk), m.c.deleted_at.is_(None))
                             .values(deleted_at=nowts))
            keep = set(still)
            chosen = [i for i in chosen if i in keep]
            _insert_events(conn, [_event_row(
                tenant, i, "evicted", nowts,
                {"deleted_at": None, "priority": round(by_id[i].priority, 6)},
                {"deleted_at": now.isoformat(), "reason": reason}) for i in chosen])
        engine._entities.pop(tenant, None)
    report = EvictionReport(tenant=tenant, active=active, protected=int(protected.sum()),
                            allowed=allowed, evicted=len(chosen), ids=tuple(chosen),
                            reason=reason)
    log.info("evict tenant=%s active=%d allowed=%d evicted=%d reason=%s", tenant, active,
             allowed, len(chosen), reason, extra={"mnemonia": {"job": "evict", **report.as_dict()}})
    return report


# ----------------------------------------------------------------------------------------
# consolidation
# ----------------------------------------------------------------------------------------
def _lsh_params(threshold: float, num_perm: int = MINHASH_PERMUTATIONS) -> tuple[int, int]:
    """Bands and rows for MinHash LSH: the most rows per band (fewest false positives) that
    still make a pair at ``threshold`` a candidate with probability >= LSH_RECALL_AT_THRESHOLD."""
    best = (num_perm, 1)
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if 1.0 - (1.0 - threshold ** r) ** b >= LSH_RECALL_AT_THRESHOLD:
            best = (b, r)
    return best


def _similar_sets(token_sets: Sequence[frozenset[str]], threshold: float
                  ) -> tuple[dict[int, set[int]], int]:
    """Pairs of distinct, non-empty word sets with exact Jaccard >= ``threshold``.

    Candidates come from datasketch MinHash LSH (every set is indexed: no sample); each is
    verified with the exact Jaccard. Returns ``{index: {similar indices}}`` (symmetric) and the
    number of candidate pairs LSH proposed.
    """
    from datasketch import MinHash, MinHashLSH
    from datasketch.hashfunc import sha1_hash32

    similar: dict[int, set[int]] = {}
    if len(token_sets) < 2:
        return similar, 0
    bands, rows_per_band = _lsh_params(threshold)
    was_enabled = gc.isenabled()
    gc.disable()  # millions of small set/bytes objects: the cyclic GC would dominate the run
    try:
        # One MinHash reused for every set (LSH keeps only the band digests), and each word
        # hashed once per run: the same signatures as MinHash.bulk, several times faster.
        hashfunc = functools.lru_cache(maxsize=None)(sha1_hash32)
        sketch = MinHash(num_perm=MINHASH_PERMUTATIONS, seed=MINHASH_SEED, hashfunc=hashfunc)
        lsh = MinHashLSH(num_perm=MINHASH_PERMUTATIONS, params=(bands, rows_per_band))
        with lsh.insertion_session() as session:
            for i, tokens in enumerate(token_sets):
                sketch.clear()
                sketch.update_batch([t.encode("utf-8") for t in tokens])
                session.insert(i, sketch, check_duplication=False)
        hashfunc.cache_clear()
        seen: set[tuple[int, int]] = set()
        for table in lsh.hashtables:
            for key, size in table.itemcounts().items():
                if size < 2:
                    continue
                members = sorted(table.get(key))
                for x, a in enumerate(members):
                    for b in members[x + 1:]:
                        if (a, b) in seen:
                            continue
                        seen.add((a, b))
                        if cons.jaccard(token_sets[a], token_sets[b]) >= threshold:
                            similar.setdefault(a, set()).add(b)
                            similar.setdefault(b, set()).add(a)
        return similar, len(seen)
    finally:
        if was_enabled:
            gc.enable()


class _Candidates(Mapping[str, frozenset[str]]):
    """Per memory id, the ids LSH (verified) found similar: same word set or a similar one.

    Computed on demand, so a family of thousands of identical texts costs linear time.
    """

    def __init__(self, set_of: Mapping[str, int], members: Sequence[Sequence[str]],
                 similar: Mapping[int, set[int]]) -> None:
        self._set_of = set_of
        self._members = members
        self._similar = similar

    def __getitem__(self, key: str) -> frozenset[str]:
        j = self._set_of[key]
        out = set(self._members[j])
        for other in self._similar.get(j, ()):
            out.update(self._members[other])
        out.discard(key)
        return frozenset(out)

    def __iter__(self) -> Iterator[str]:
        return iter(self._set_of)

    def __len__(self) -> int:
        return len(self._set_of)


def _concept_id(tenant: str, members: Sequence[str]) -> str:
    digest = hashlib.blake2b("\x1f".join([tenant, *sorted(members)]).encode(),
                             digest_size=12).hexdigest()
    return f"concept-{digest}"


def _clip_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0] or text[:limit - 1]
    return cut.rstrip() + "…"


def consolidate(engine: MemoryEngine, *, tenant: str,
                summariser: Callable[[list[str]], str] | None = None) -> ConsolidationReport:
    """Merge near-duplicate memories of ``tenant`` into ``concept`` memories.

    Word sets are lower-cased word tokens; MinHash LSH (datasketch) proposes candidates over
    every unconsolidated active memory, the exact Jaccard verifies them, and
    :func:`mnemonia.scoring.consolidation.group` groups them deterministically (seeds by
    priority, highest first). Each group becomes one ``concept`` (text merged without repeated
    sentences, or written by ``summariser(texts)``; importance = mean; entities = union; the
    highest member state) with ``part_of`` relations from its members, which stay but are
    marked consolidated and hidden from recall when their concept is returned. Running it
    twice creates nothing new. ``concept`` memories (made here or added as such) and
    memories already consolidated are not regrouped.
    """
    engine._check_open()
    if summariser is not None and not callable(summariser):
        raise InvalidInputError(f"summariser={summariser!r}: must be a callable texts -> text")
    cfg = engine.config
    now = engine.clock.now()
    m = S.memories
    cols = [m.c.id, m.c.text, m.c.importance, m.c.created_at, m.c.accessed_at,
            m.c.access_count, m.c.stability, m.c.state, m.c.topic, m.c.entities, m.c.kind]
    with engine.sql.connect() as conn:
        rows = _tenant_rows(engine, conn, tenant, cols, m.c.consolidated_into.is_(None),
                            m.c.kind != "concept")
    by_set: dict[frozenset[str], list[str]] = {}
    for r in rows:
        tokens = cons.tokenize(r.text)
        if tokens:  # an empty word set has Jaccard 0 with everything
            by_set.setdefault(tokens, []).append(r.id)
    sets = list(by_set)
    members = [by_set[s] for s in sets]
    similar, candidate_pairs = _similar_sets(sets, cfg.consolidation_threshold)
    verified = sum(len(v) for v in similar.values()) // 2
    # Only memories with at least one verified partner can be in a group.
    in_play = [j for j in range(len(sets)) if len(members[j]) > 1 or j in similar]
    set_of = {mid: j for j in in_play for mid in members[j]}
    row_by_id = {r.id: r for r in rows if r.id in set_of}
    weights = _weights(engine)
    items = [cons.ConsolidationItem(id=mid, tokens=sets[set_of[mid]],
                                    priority=_priority_of(engine, row_by_id[mid], now, weights))
             for mid in set_of]
    groups = cons.group(items, threshold=cfg.consolidation_threshold,
                        min_group=cfg.consolidation_min_group,
                        candidates=_Candidates(set_of, members, similar))
    created: list[str] = []
    consolidated = 0
    for batch in _chunks(groups, 200):
        made, marked = _write_concepts(engine, tenant, [list(g) for g in batch], row_by_id,
                                       summariser)
        created += made
        consolidated += marked
    report = ConsolidationReport(tenant=tenant, scanned=len(rows),
                                 candidate_pairs=candidate_pairs, verified_pairs=verified,
                                 groups=len(groups), concepts_created=len(created),
                                 members_consolidated=consolidated, concept_ids=tuple(created))
    log.info("consolidate tenant=%s scanned=%d candidate_pairs=%d groups=%d concepts=%d "
             "members=%d", tenant, len(rows), candidate_pairs, len(groups), len(created),
             consolidated, extra={"mnemonia": {"job": "consolidate",
                                               **{k: v for k, v in report.as_dict().items()
                                                  if k != "concept_ids"}}})
    return report


def _concept_item(engine: MemoryEngine, tenant: str, group: list[str], rows: Mapping[str, Any],
                  summariser: Callable[[list[str]], str] | None) -> dict[str, Any]:
    texts = [rows[i].text for i in group]
    if summariser is not None:
        text = summariser(list(texts))
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(
                f"the summariser returned {text!r} for {len(texts)} texts; it must return a "
                "non-empty string")
    else:
        text = cons.merge_texts(texts)
    entities: list[str] = []
    for i in group:
        entities += [e for e in json.loads(rows[i].entities) if e not in entities]
    topics = {rows[i].topic for i in group}
    return {"id": _concept_id(tenant, group), "kind": "concept",
            "text": _clip_text(text, engine.config.max_text_chars),
            "importance": sum(float(rows[i].importance) for i in group) / len(group),
            "entities": entities, "topic": topics.pop() if len(topics) == 1 else None,
            "metadata": {"consolidated_from": list(group[:_LISTED_MEMBERS]),
                         "consolidated_count": len(group)}}


def _write_concepts(engine: MemoryEngine, tenant: str, groups: list[list[str]],
                    rows: Mapping[str, Any], summariser: Callable[[list[str]], str] | None
                    ) -> tuple[list[str], int]:
    m = S.memories
    cids = [_concept_id(tenant, g) for g in groups]
    with engine.sql.connect() as conn:
        # A concept id is derived from its members: one left by an interrupted run is reused.
        existing = {r[0] for chunk in _chunks(cids) for r in conn.execute(
            sa.select(m.c.id).where(m.c.id.in_(chunk), m.c.status == "committed"))}
    new_items = [_concept_item(engine, tenant, g, rows, summariser)
                 for g, cid in zip(groups, cids, strict=True) if cid not in existing]
    if new_items:
        engine.add_many(new_items, tenant=tenant)
    now = engine.clock.now()
    nowts = _ts(now)
    marked = 0
    to_enrich: list[str] = []
    with engine._write, engine.sql.begin() as conn:
        states = {r.id: r for chunk in _chunks(cids) for r in conn.execute(
            sa.select(m.c.id, m.c.state, m.c.enriched_at).where(m.c.id.in_(chunk)))}
        everyone = [i for g in groups for i in g]
        still = {r[0] for chunk in _chunks(everyone) for r in conn.execute(
            sa.select(m.c.id).where(m.c.id.in_(chunk), m.c.consolidated_into.is_(None),
                                    m.c.deleted_at.is_(None)))}
        edges: dict[tuple[str, str, str], float] = {}
        events: list[dict[str, Any]] = []
        marks: list[dict[str, Any]] = []
        raised: list[dict[str, Any]] = []
        for group, cid in zip(groups, cids, strict=True):
            free = [i for i in group if i in still]  # group order: seed first
            if cid not in states or not free:
                continue
            still.difference_update(free)
            marks += [{"b_id": mid, "cid": cid} for mid in free]
            marked += len(free)
            events += [_event_row(tenant, mid, "consolidated", nowts, {"consolidated_into": None},
                                  {"consolidated_into": cid}) for mid in free]
            events.append(_event_row(tenant, cid, "consolidated", nowts, None,
                                     {"members": free[:_LISTED_MEMBERS],
                                      "count": len(free)}))
            edges.update({(mid, cid, "part_of"): 1.0 for mid in free})
            # A concept stands for its members: at least the highest state among them.
            top = max((rows[i].state for i in group), key=reeval.state_rank)
            current = states[cid].state
            if reeval.state_rank(top) > reeval.state_rank(current):
                raised.append({"b_id": cid, "state": top})
                current = top
            if current == reeval.IMMEDIATE and states[cid].enriched_at is None:
                to_enrich.append(cid)
        if marks:
            conn.execute(m.update().where(m.c.id == sa.bindparam("b_id"))
                         .values(consolidated_into=sa.bindparam("cid")), marks)
        if raised:
            conn.execute(m.update().where(m.c.id == sa.bindparam("b_id"))
                         .values(state=sa.bindparam("state")), raised)
        engine._insert_edges(conn, tenant, edges, nowts)
        _insert_events(conn, events)
    if to_enrich:
        _enrich_ids(engine, tenant, to_enrich)
    engine._entities.pop(tenant, None)
    created = [c for c in cids if c not in existing and c in states]
    return created, marked


# ----------------------------------------------------------------------------------------
# enrichment
# ----------------------------------------------------------------------------------------
def _enrich_ids(engine: MemoryEngine, tenant: str, ids: Sequence[str]) -> int:
    """Enrich stored memories (entities, related_to / same_entity / follows, SM-2 schedule)
    through the engine's own ``_enrich``; returns the relations added."""
    from mnemonia.engine import _Prepared

    if not ids:
        return 0
    col = engine._collection(tenant, create=False)
    if col is None:
        return 0
    m = S.memories
    added = 0
    for chunk in _chunks(list(ids), 256):
        with engine.sql.connect() as conn:
            vectors = engine._candidate_vectors(conn, col, chunk)
        order = [i for i in chunk if i in vectors]
        if not order:
            continue
        matrix = np.stack([vectors[i] for i in order]).astype(np.float32)
        near_ids, near_sims = engine.vectors.query(col, matrix, _NEIGHBOURS + 1)
        with engine._write, engine.sql.begin() as conn:
            rows = engine._rows(conn, tenant, order)
            others = {o for row in near_ids for o in row}
            gone = {r[0] for part in _chunks(sorted(others)) for r in conn.execute(
                sa.select(m.c.id).where(m.c.id.in_(part), m.c.deleted_at.is_not(None)))}
            items = []
            for i, mid in enumerate(order):
                r = rows.get(mid)
                if r is None or r.deleted_at is not None or r.enriched_at is not None:
                    continue
                near = [(o, float(s)) for o, s in zip(near_ids[i], near_sims[i], strict=True)
                        if o != mid and o not in gone][:_NEIGHBOURS]
                items.append((_Prepared(
                    id=r.id, text=r.text, embed_text=engine._indexed_text(r), kind=r.kind,
                    topic=r.topic, entities=list(json.loads(r.entities)),
                    importance=float(r.importance), at=float(r.created_at),
                    session_id=r.session_id, metadata=json.loads(r.metadata),
                    pinned=bool(r.pinned)), near))
            if not items:
                continue
            before = _relation_count(conn, tenant)
            engine._enrich(conn, tenant, items, _ts(engine.clock.now()))
            added += _relation_count(conn, tenant) - before
    engine._entities.pop(tenant, None)
    return added


def _relation_count(conn: Any, tenant: str) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(S.relations)
                            .where(S.relations.c.tenant == tenant)).scalar_one())


def enrich(engine: MemoryEngine, *, tenant: str) -> EnrichmentReport:
    """The enrichment sweep: every active ``batched`` (or ``immediate``) memory not enriched
    yet gets entities, automatic relations and its SM-2 schedule. ``skipped`` never does."""
    engine._check_open()
    m = S.memories
    with engine.sql.connect() as conn:
        pending = [r[0] for r in conn.execute(sa.select(m.c.id).where(
            m.c.tenant == tenant, m.c.status == "committed", m.c.deleted_at.is_(None),
            m.c.enriched_at.is_(None), m.c.state != reeval.SKIPPED).order_by(m.c.seq))]
    added = _enrich_ids(engine, tenant, pending)
    with engine.sql.connect() as conn:
        left = 0
        for chunk in _chunks(pending):
            left += int(conn.execute(sa.select(sa.func.count()).where(
                m.c.id.in_(chunk), m.c.enriched_at.is_(None))).scalar_one())
    report = EnrichmentReport(tenant=tenant, pending=len(pending),
                              enriched=len(pending) - left, relations_added=added)
    log.info("enrich tenant=%s pending=%d enriched=%d relations_added=%d", tenant,
             report.pending, report.enriched, added,
             extra={"mnemonia": {"job": "enrich", **report.as_dict()}})
    return report


# ----------------------------------------------------------------------------------------
# review worker (SM-2)
# ----------------------------------------------------------------------------------------
def quality_from_rank(best_rank: int) -> int:
    """SM-2 quality from recall use: rank 1 counts 5, top-3 4, returned at all 3."""
    if isinstance(best_rank, bool) or not isinstance(best_rank, int) or best_rank < 1:
        raise InvalidInputError(f"best_rank={best_rank!r}: must be an int >= 1")
    if best_rank == 1:
        return 5
    return 4 if best_rank <= 3 else 3


def estimate_quality(*, importance: float, utility: float, hours_since_access: float) -> int:
    """SM-2 quality when no signal exists:
    ``0.4*importance + 0.3*utility + 0.3*exp(-0.05*hours since accessed_at)`` binned at
    .9/.7/.5/.3/.1 -> 5..1, below .1 -> 0."""
    for name, value in (("importance", importance), ("utility", utility),
                        ("hours_since_access", hours_since_access)):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise InvalidInputError(f"{name}={value!r}: must be a finite number")
    score = 0.4 * importance + 0.3 * utility + 0.3 * math.exp(
        -_ESTIMATE_DECAY_PER_HOUR * max(0.0, hours_since_access))
    for q, cut in zip((5, 4, 3, 2, 1), _QUALITY_BINS, strict=True):
        if score >= cut - 1e-12:
            return q
    return 0


def review(engine: MemoryEngine, *, tenant: str) -> ReviewReport:
    """One SM-2 review pass: enriched (not ``skipped``) active memories that are due, in SM-2
    priority order, at most ``review_batch``.

    Quality comes from real signals since the memory's last review first: reported use (a
    reply echoed it, see :func:`report_use`) counts 5; else recall use from the access log
    (rank 1 -> 5, top-3 -> 4, returned -> 3); only without any signal is it estimated
    (:func:`estimate_quality`). Then the SM-2 and utility updates and one ``reviewed`` event
    each.
    """
    engine._check_open()
    cfg = engine.config
    now = engine.clock.now()
    nowts = _ts(now)
    m = S.memories
    cols = [m.c.id, m.c.importance, m.c.utility, m.c.accessed_at, m.c.created_at,
            m.c.easiness, m.c.interval_days, m.c.repetitions, m.c.next_review,
            m.c.last_quality, m.c.last_reviewed_at]
    with engine.sql.connect() as conn:
        rows = _tenant_rows(engine, conn, tenant, cols, m.c.enriched_at.is_not(None),
                            m.c.state != reeval.SKIPPED, m.c.superseded_by.is_(None),
                            sa.or_(m.c.next_review.is_(None), m.c.next_review <= nowts))
    ranked: list[tuple[float, str, Any, sm2.SM2State]] = []
    for r in rows:
        state = sm2.SM2State(easiness=float(r.easiness), interval_days=int(r.interval_days),
                             repetitions=int(r.repetitions),
                             next_review=None if r.next_review is None else _dt(r.next_review),
                             last_quality=int(r.last_quality))
        if sm2.is_due(state, now):
            ranked.append((sm2.priority(state, now), r.id, r, state))
    ranked.sort(key=lambda t: (-t[0], t[1]))
    batch = ranked[:cfg.review_batch]
    ids = [t[1] for t in batch]
    since = {t[1]: (t[2].last_reviewed_at if t[2].last_reviewed_at is not None
                    else float("-inf")) for t in batch}
    used: set[str] = set()
    best_rank: dict[str, int] = {}
    with engine.sql.connect() as conn:
        for chunk in _chunks(ids):
            for mid, at in conn.execute(sa.select(S.memory_events.c.memory_id,
                                                  S.memory_events.c.at).where(
                    S.memory_events.c.memory_id.in_(chunk), S.memory_events.c.tenant == tenant,
                    S.memory_events.c.event == "used")):
                if at > since[mid]:
                    used.add(mid)
            for mid, rank, at in conn.execute(sa.select(
                    S.access_log.c.memory_id, S.access_log.c.rank, S.access_log.c.at).where(
                    S.access_log.c.memory_id.in_(chunk), S.access_log.c.tenant == tenant,
                    S.access_log.c.at <= nowts)):
                if at > since[mid]:
                    best_rank[mid] = min(best_rank.get(mid, rank), int(rank))
    counts = {"use": 0, "recall": 0, "estimate": 0}
    updates: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for _, mid, r, state in batch:
        if mid in used:
            q, source = REACTIVE_USE_QUALITY, "use"
        elif mid in best_rank:
            q, source = quality_from_rank(best_rank[mid]), "recall"
        else:
            q = estimate_quality(importance=float(r.importance), utility=float(r.utility),
                                 hours_since_access=max(0.0, nowts - r.accessed_at) / 3600.0)
            source = "estimate"
        counts[source] += 1
        new_state, _ = sm2.review(state, q, now)
        utility, _ = sm2.update_utility(float(r.utility), q)
        nxt = new_state.next_review
        updates.append(dict(
            b_id=mid, easiness=new_state.easiness, interval_days=new_state.interval_days,
            repetitions=new_state.repetitions, next_review=_ts(nxt) if nxt else None,
            last_quality=new_state.last_quality, utility=utility, last_reviewed_at=nowts))
        events.append(_event_row(
            tenant, mid, "reviewed", nowts,
            {"utility": float(r.utility), "interval_days": state.interval_days,
             "repetitions": state.repetitions, "easiness": state.easiness,
             "next_review": state.next_review.isoformat() if state.next_review else None},
            {"quality": q, "source": source, "utility": utility,
             "interval_days": new_state.interval_days, "repetitions": new_state.repetitions,
             "easiness": new_state.easiness,
             "next_review": nxt.isoformat() if nxt else None}))
    if updates:
        stmt = m.update().where(m.c.id == sa.bindparam("b_id")).values(
            easiness=sa.bindparam("easiness"), interval_days=sa.bindparam("interval_days"),
            repetitions=sa.bindparam("repetitions"), next_review=sa.bindparam("next_review"),
            last_quality=sa.bindparam("last_quality"), utility=sa.bindparam("utility"),
            last_reviewed_at=sa.bindparam("last_reviewed_at"))
        with engine._write, engine.sql.begin() as conn:
            conn.execute(stmt, updates)
            _insert_events(conn, events)
    report = ReviewReport(tenant=tenant, due=len(ranked), reviewed=len(batch),
                          from_use=counts["use"], from_recall=counts["recall"],
                          estimated=counts["estimate"], ids=tuple(ids))
    log.info("review tenant=%s due=%d reviewed=%d from_use=%d from_recall=%d estimated=%d",
             tenant, report.due, report.reviewed, report.from_use, report.from_recall,
             report.estimated, extra={"mnemonia": {"job": "review", **{
                 k: v for k, v in report.as_dict().items() if k != "ids"}}})
    return report


# ----------------------------------------------------------------------------------------
# reported use
# ----------------------------------------------------------------------------------------
def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


def _content_words(text: str) -> set[str]:
    """Lower-cased content words (stop words out, 3+ letters or any digit), lightly stemmed."""
    return {_stem(w) for w in _WORD.findall(text.lower())
            if w not in act.STOP_WORDS and (len(w) >= 3 or any(c.isdigit() for c in w))}


def echoes(reply: str, memory_text: str) -> float:
    """Share of the memory's content words that the reply contains (0 when it has none)."""
    words = _content_words(memory_text)
    if not words:
        return 0.0
    return len(words & _content_words(reply)) / len(words)


def report_use(engine: MemoryEngine, reply: str, recalled_ids: Sequence[str], *,
               tenant: str) -> list[str]:
    """Record which recalled memories a reply used: those whose content the reply echoes
    (at least half of the memory's content words, and two of them when it has two or more).

    Writes one ``used`` event per used memory; the review worker then takes quality 5 for it.
    Ids no longer in the tenant (forgotten meanwhile) are ignored. Returns the used ids.
    """
    engine._check_open()
    if not isinstance(reply, str):
        raise InvalidInputError(f"reply must be a string, got {type(reply).__name__}")
    if isinstance(recalled_ids, str) or not isinstance(recalled_ids, Sequence | set | frozenset):
        raise InvalidInputError(
            f"recalled_ids={recalled_ids!r}: must be a list of memory ids, e.g. result.ids")
    ids = list(dict.fromkeys(recalled_ids))
    for mid in ids:
        if not isinstance(mid, str) or not mid:
            raise InvalidInputError(f"recalled id {mid!r}: must be a non-empty string")
    reply_words = _content_words(reply)
    now = engine.clock.now()
    nowts = _ts(now)
    used: list[str] = []
    events: list[dict[str, Any]] = []
    with engine.sql.connect() as conn:
        rows = engine._rows(conn, tenant, ids)
    for mid in ids:
        r = rows.get(mid)
        if r is None:
            continue
        words = _content_words(r.text)
        if not words:
            continue
        shared = words & reply_words
        share = len(shared) / len(words)
        if share >= ECHO_MIN_SHARE and len(shared) >= min(2, len(words)):
            used.append(mid)
            events.append(_event_row(tenant, mid, "used", nowts, None,
                                     {"quality": REACTIVE_USE_QUALITY,
                                      "overlap": round(share, 3)}))
    if events:
        with engine._write, engine.sql.begin() as conn:
            _insert_events(conn, events)
    return used


# ----------------------------------------------------------------------------------------
# re-evaluation
# ----------------------------------------------------------------------------------------
def _window_inputs(conn: Any, start: float, end: float, disabled: Sequence[str]
                   ) -> tuple[int, dict[str, reeval.HeatInputs]]:
    """Access-log rows in ``(start, end]`` aggregated per memory: recalls, distinct users and
    the mean rank share ``min(1, (rank-1)/max(1, k-1))``.

    The same aggregation as :func:`mnemonia.scoring.reevaluation.aggregate` (a test holds them
    equal), done by the database in one grouped query, so a busy log costs no Python objects
    per row. Returns the number of rows and ``{memory_id: HeatInputs}``.
    """
    al = S.access_log
    share = sa.cast(al.c.rank - 1, sa.Float) / sa.cast(
        sa.case((al.c.k > 1, al.c.k - 1), else_=1), sa.Float)
    share = sa.case((share > 1.0, 1.0), (share < 0.0, 0.0), else_=share)
    q = (sa.select(al.c.memory_id, sa.func.count().label("n"),
                   sa.func.count(sa.distinct(al.c.user_id)).label("users"),
                   sa.func.sum(share).label("shares"))
         .where(al.c.at > start, al.c.at <= end).group_by(al.c.memory_id))
    if disabled:
        q = q.where(al.c.tenant.not_in(list(disabled)))
    inputs: dict[str, reeval.HeatInputs] = {}
    total = 0
    for mid, n, users, shares in conn.execute(q):
        total += int(n)
        inputs[mid] = reeval.HeatInputs(
            recalls=int(n), users=int(users),
            mean_rank_share=min(1.0, max(0.0, float(shares) / int(n))))
    return total, inputs


def reevaluate(engine: MemoryEngine) -> ReevaluationReport:
    """One re-evaluation tick over every tenant (DESIGN section 5).

    Reads the access log since the last successful tick (at most the last hour); per memory
    aggregates recalls, distinct users and mean rank share; older recalls come from the
    memory's decayed counter (half-life one hour), into which this tick's rows are then folded.
    Candidates are active ``skipped``/``batched`` memories not re-evaluated in the last
    ``reevaluation_cooldown`` seconds, at most ``reevaluation_per_tenant_cap`` per tenant,
    hottest first; the ones left out wait for the next tick with their heat (for at most an
    hour), so a busy tenant's cap delays promotions rather than losing them. Heat alone
    decides promotion (never a demotion; skipped can reach immediate in one tick); each
    promotion writes a ``reevaluation_promoted`` event with the old and new state, and a memory
    promoted to ``immediate`` is enriched at once. Tenants in
    ``intelligence_disabled_tenants`` are left alone. Logs one structured line.
    """
    engine._check_open()
    cfg = engine.config
    now = engine.clock.now()
    nowts = _ts(now)
    window = reeval.DEFAULT_WINDOW
    disabled = tuple(sorted(set(cfg.intelligence_disabled_tenants)))
    m = S.memories
    promotions: list[Promotion] = []
    with engine._write, engine.sql.begin() as conn:
        last = engine.sql.kv_get(conn, LAST_TICK_KEY)
        start = nowts - window.total_seconds()
        if last is not None:
            start = max(start, float(last))
        scanned, inputs = _window_inputs(conn, start, nowts, disabled)
        mids = sorted(inputs)
        # Candidates a previous tick had to leave out (cap or cooldown) wait here for their
        # turn, with the heat they had then, for at most one window.
        carried = {mid: e for mid, e in (engine.sql.kv_get(conn, DEFERRED_KEY) or {}).items()
                   if float(e[2]) > nowts - window.total_seconds() and e[0] not in disabled}
        mem: dict[str, Any] = {}
        for chunk in _chunks(sorted(set(mids) | set(carried))):
            for row in conn.execute(sa.select(
                    m.c.id, m.c.tenant, m.c.state, m.c.deleted_at, m.c.last_reevaluated_at,
                    m.c.heat_counter, m.c.heat_at).where(
                    m.c.id.in_(chunk), m.c.status == "committed")):
                mem[row.id] = row
        candidates: list[reeval.Candidate] = []
        heats: dict[str, float] = {}
        heat_time: dict[str, float] = {}
        counters: list[dict[str, Any]] = []
        for mid in [*mids, *(i for i in sorted(carried) if i not in inputs)]:
            r = mem.get(mid)
            if r is None or r.deleted_at is not None or r.tenant in disabled:
                continue
            h, when = (float(carried[mid][1]), float(carried[mid][2])) if mid in carried \
                else (-1.0, nowts)
            if mid in inputs:
                older = 0.0
                if r.heat_at is not None and r.heat_counter:
                    older = reeval.decay_counter(float(r.heat_counter),
                                                 last_at=_dt(r.heat_at), now=now)
                heats[mid] = reeval.heat(inputs[mid], decayed_recalls=older)
                counters.append({"b_id": mid, "heat_counter": older + inputs[mid].recalls,
                                 "heat_at": nowts})
                if heats[mid] >= h:
                    h, when = heats[mid], nowts
            if r.state != reeval.IMMEDIATE:
                heat_time[mid] = when
                candidates.append(reeval.Candidate(
                    memory_id=mid, tenant=r.tenant, state=r.state, heat=h,
                    last_reevaluated_at=None if r.last_reevaluated_at is None
                    else _dt(r.last_reevaluated_at)))
        chosen = reeval.select_candidates(
            candidates, now=now, cooldown=timedelta(seconds=cfg.reevaluation_cooldown),
            per_tenant_cap=cfg.reevaluation_per_tenant_cap)
        picked = {c.memory_id for c in chosen}
        waiting = {c.memory_id: [c.tenant, c.heat, heat_time[c.memory_id]]
                   for c in candidates if c.memory_id not in picked}
        engine.sql.kv_set(conn, DEFERRED_KEY, waiting)
        events: list[dict[str, Any]] = []
        for c in chosen:
            new_state, event = reeval.promote(
                c.memory_id, c.state, c.heat, now=now, batch_threshold=cfg.batch_threshold,
                immediate_threshold=cfg.immediate_threshold)
            if event is None:
                continue
            promotions.append(Promotion(memory_id=c.memory_id, tenant=c.tenant,
                                        old_state=c.state, new_state=new_state, heat=c.heat))
            events.append(_event_row(c.tenant, c.memory_id, "reevaluation_promoted", nowts,
                                     {"state": c.state},
                                     {"state": new_state, "heat": round(c.heat, 6)}))
        for p in promotions:
            conn.execute(m.update().where(m.c.id == p.memory_id).values(state=p.new_state))
        for chunk in _chunks([c.memory_id for c in chosen]):
            conn.execute(m.update().where(m.c.id.in_(chunk)).values(last_reevaluated_at=nowts))
        if counters:
            conn.execute(m.update().where(m.c.id == sa.bindparam("b_id")).values(
                heat_counter=sa.bindparam("heat_counter"), heat_at=sa.bindparam("heat_at")),
                counters)
        _insert_events(conn, events)
        engine.sql.kv_set(conn, LAST_TICK_KEY, nowts)
    enriched = 0
    hot: dict[str, list[str]] = {}
    for p in promotions:
        if p.new_state == reeval.IMMEDIATE:
            hot.setdefault(p.tenant, []).append(p.memory_id)
    for tenant, ids in hot.items():
        with engine.sql.connect() as conn:
            todo = [r[0] for chunk in _chunks(ids) for r in conn.execute(
                sa.select(m.c.id).where(m.c.id.in_(chunk), m.c.enriched_at.is_(None)))]
        _enrich_ids(engine, tenant, todo)
        enriched += len(todo)
    report = ReevaluationReport(
        window_start=_dt(start), window_end=now, scanned=scanned, memories=len(heats),
        candidates=len(candidates), reevaluated=len(chosen), promoted=len(promotions),
        disabled_tenants=disabled, promotions=tuple(promotions), enriched=enriched,
        deferred=len(waiting))
    log.info("reevaluation tick scanned=%d candidates=%d reevaluated=%d promoted=%d",
             report.scanned, report.candidates, report.reevaluated, report.promoted,
             extra={"mnemonia": {"job": "reevaluate", "scanned": report.scanned,
                                 "memories": report.memories, "candidates": report.candidates,
                                 "reevaluated": report.reevaluated,
                                 "promoted": report.promoted,
                                 "window_start": report.window_start.isoformat(),
                                 "window_end": report.window_end.isoformat()}})
    return report


# ----------------------------------------------------------------------------------------
# snapshot
# ----------------------------------------------------------------------------------------
def snapshot(engine: MemoryEngine, *, tenant: str, limit: int | None = None) -> str:
    """The tenant's top enriched memories by priority, rendered as text.

    Only enriched, active, not superseded memories; a consolidated member is represented by
    its concept when that concept qualifies too. ``limit`` defaults to ``config.snapshot_size``.
    Returns ``""`` when there is nothing to show.
    """
    engine._check_open()
    n = engine.config.snapshot_size if limit is None else limit
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"limit={limit!r}: must be an integer >= 1")
    now = engine.clock.now()
    m = S.memories
    cols = [m.c.id, m.c.text, m.c.importance, m.c.created_at, m.c.accessed_at,
            m.c.access_count, m.c.stability, m.c.consolidated_into]
    with engine.sql.connect() as conn:
        rows = _tenant_rows(engine, conn, tenant, cols, m.c.enriched_at.is_not(None),
                            m.c.state != reeval.SKIPPED, m.c.superseded_by.is_(None))
    # A member gives way to its concept when the concept itself qualifies for the snapshot.
    shown = {r.id for r in rows}
    rows = [r for r in rows if r.consolidated_into is None or r.consolidated_into not in shown]
    if not rows:
        return ""
    weights = _weights(engine)
    values = _priority_array(engine, _columns(rows), _ts(now), weights)
    short = _shortlist(values, np.ones(len(rows), bool), n, lowest=False)
    exact = sorted(((_priority_of(engine, rows[i], now, weights), rows[i]) for i in short),
                   key=lambda t: (-t[0], t[1].id))[:n]
    return "\n".join([_SNAPSHOT_HEADER] + [f"- {r.text}" for _, r in exact])


# ----------------------------------------------------------------------------------------
# everything at once
# ----------------------------------------------------------------------------------------
def _tenants(engine: MemoryEngine, tenant: str | None) -> list[str]:
    return [tenant] if tenant is not None else engine.tenants()


def maintain(engine: MemoryEngine, tenant: str | None = None, *,
             on_step: Callable[[str, str | None], None] | None = None) -> MaintenanceReport:
    """Run every job: one re-evaluation tick (global: it reads the shared access log), then per
    tenant the enrichment sweep, automatic eviction (only over ``max_memories``),
    consolidation and the SM-2 review pass.

    Args:
        engine: The engine.
        tenant: One tenant, or ``None`` for all.
        on_step: Called as ``on_step(job, tenant)`` after each step (progress bars).
    """
    engine._check_open()
    reevaluation = reevaluate(engine)
    if on_step is not None:
        on_step("reevaluate", None)
    done: list[TenantMaintenance] = []
    for t in _tenants(engine, tenant):
        e = enrich(engine, tenant=t)
        if on_step is not None:
            on_step("enrich", t)
        v = evict(engine, tenant=t, force=False)
        if on_step is not None:
            on_step("evict", t)
        c = consolidate(engine, tenant=t, summariser=engine.summariser)
        if on_step is not None:
            on_step("consolidate", t)
        r = review(engine, tenant=t)
        if on_step is not None:
            on_step("review", t)
        done.append(TenantMaintenance(tenant=t, enrichment=e, eviction=v, consolidation=c,
                                      review=r))
    report = MaintenanceReport(reevaluation=reevaluation, tenants=tuple(done))
    log.info("maintain %s", " ".join(f"{k}={v}" for k, v in report.counts.items()),
             extra={"mnemonia": {"job": "maintain", **report.counts}})
    return report


# ----------------------------------------------------------------------------------------
# scheduler
# ----------------------------------------------------------------------------------------
class Scheduler:
    """Runs maintenance jobs in a background thread, each at its own cadence.

    When a job is due is judged on ``engine.clock`` (so a :class:`~mnemonia.ManualClock`
    drives it in tests); between checks the thread sleeps ``poll_interval`` real seconds.
    Every job is due once at start. Defaults: :data:`DEFAULT_INTERVALS` (re-evaluation every
    ``config.reevaluation_interval`` = 10 minutes). A failing job is logged and retried at its
    next turn; the thread keeps going. ``stop()`` lets the running job finish, then joins.

    Example:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder()) as engine:
        ...     with Scheduler(engine, intervals={"consolidate": None}) as scheduler:
        ...         pass  # the application runs; maintenance happens in the background
        ...     scheduler.running
        False
    """

    def __init__(self, engine: MemoryEngine, *,
                 intervals: Mapping[str, float | None] | None = None,
                 poll_interval: float = 1.0, tenants: Sequence[str] | None = None) -> None:
        problems: list[str] = []
        merged: dict[str, float | None] = dict(DEFAULT_INTERVALS)
        merged["reevaluate"] = engine.config.reevaluation_interval
        for job, value in (intervals or {}).items():
            if job not in JOBS:
                problems.append(f"unknown job {job!r} (jobs: {', '.join(JOBS)})")
            elif value is not None and (isinstance(value, bool)
                                        or not isinstance(value, int | float)
                                        or not math.isfinite(value) or value <= 0):
                problems.append(f"interval of {job!r} = {value!r}: must be seconds > 0 or None")
            else:
                merged[job] = None if value is None else float(value)
        if isinstance(poll_interval, bool) or not isinstance(poll_interval, int | float) \
                or not math.isfinite(poll_interval) or poll_interval <= 0:
            problems.append(f"poll_interval={poll_interval!r}: must be seconds > 0")
        if problems:
            raise InvalidInputError("; ".join(problems))
        self.engine = engine
        self.intervals: dict[str, float | None] = merged
        self.poll_interval = float(poll_interval)
        self.tenants = None if tenants is None else [engine._tenant(t) for t in tenants]
        self.runs: dict[str, int] = {job: 0 for job in JOBS}
        self.last_reports: dict[str, Any] = {}
        self.errors: list[tuple[str, BaseException]] = []
        self._next: dict[str, datetime | None] = {job: None for job in JOBS}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self, job: str) -> Any:
        eng = self.engine
        if job == "reevaluate":
            return reevaluate(eng)
        tenants = self.tenants if self.tenants is not None else eng.tenants()
        out: dict[str, Any] = {}
        for t in tenants:
            if job == "enrich":
                out[t] = enrich(eng, tenant=t)
            elif job == "evict":
                out[t] = evict(eng, tenant=t, force=False)
            elif job == "consolidate":
                out[t] = consolidate(eng, tenant=t, summariser=eng.summariser)
            else:
                out[t] = review(eng, tenant=t)
        return out

    def run_pending(self) -> dict[str, Any]:
        """Run, now and in this thread, every job whose time has come; returns their reports."""
        done: dict[str, Any] = {}
        with self._lock:
            for job in JOBS:
                every = self.intervals[job]
                if every is None:
                    continue
                now = self.engine.clock.now()
                due = self._next[job]
                if due is not None and now < due:
                    continue
                self._next[job] = now + timedelta(seconds=every)
                try:
                    done[job] = self._run(job)
                except Exception as e:  # a job failure must not kill the thread
                    if self.engine._closed:
                        raise
                    self.errors.append((job, e))
                    log.exception("maintenance job %s failed; it runs again in %g s", job,
                                  every)
                    continue
                self.runs[job] += 1
                self.last_reports[job] = done[job]
        return done

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.engine._closed:
                log.info("scheduler stopping: the engine is closed")
                return
            try:
                self.run_pending()
            except Exception:  # only raised once the engine is closed
                log.info("scheduler stopping: the engine was closed during a job")
                return
            self._stop.wait(self.poll_interval)

    def start(self) -> Scheduler:
        """Start the background thread (a no-op if it is running)."""
        if self.running:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="mnemonia-scheduler",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Ask the thread to stop, let a running job finish, and join it."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise MnemoniaError(
                    f"the maintenance scheduler did not stop within {timeout} s (a job is "
                    "still running); call stop() again to keep waiting")
        self._thread = None

    def __enter__(self) -> Scheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{j}={v:g}s" for j, v in self.intervals.items() if v is not None)
        return f"Scheduler({jobs}, running={self.running})"


# ----------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------
_CLI_JOBS = ("evict", "consolidate", "review", "reevaluate", "enrich", "all")


def _int_fields(data: Mapping[str, Any]) -> dict[str, int]:
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


def run_cli(engine: MemoryEngine, job: str = "all", *, tenant: str | None = None,
            progress: bool = True, console: Any = None) -> dict[str, Any]:
    """What ``mnemonia maintain [JOB] [--tenant T]`` runs: the job(s) with a rich progress
    bar (one step per tenant and job), then a summary table (one row per tenant, one column
    per count); returns the reports as a dict.

    Args:
        engine: The engine.
        job: ``evict`` (an explicit run: the full budget), ``consolidate``, ``review``,
            ``reevaluate``, ``enrich`` or ``all`` (:func:`maintain`: automatic eviction only
            over ``max_memories``).
        tenant: One tenant, or ``None`` for every tenant.
        progress: Show the progress bar and the table (on ``console``).
        console: A ``rich.console.Console`` to print to (default: a new one on stdout).

    Returns:
        ``{"job": job, "counts": {...}, "reports": {...}}``: the totals, and the full
        JSON-safe reports (per tenant; for ``all`` the :class:`MaintenanceReport`). The
        reports may be long (e.g. every evicted id); print ``counts`` for a summary.

    Raises:
        InvalidInputError: An unknown job or a bad tenant name.
    """
    if job not in _CLI_JOBS:
        raise InvalidInputError(f"job={job!r}: must be one of {', '.join(_CLI_JOBS)}")
    if tenant is not None:
        tenant = engine._tenant(tenant)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    out = console if console is not None else Console()
    tenants = _tenants(engine, tenant)
    per_tenant = {"all": 4, "reevaluate": 0}.get(job, 1)
    total = len(tenants) * per_tenant + (1 if job in ("all", "reevaluate") else 0)
    bar = Progress(TextColumn("[bold]maintain[/] {task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=out,
                   disable=not progress, transient=False)
    result: dict[str, Any] = {"job": job, "counts": {}, "reports": {}}
    per_row: dict[str, dict[str, int]] = {}  # table rows: tenant (or "all tenants") -> counts
    with bar:
        task = bar.add_task(job, total=max(1, total))

        def step(name: str, t: str | None) -> None:
            bar.update(task, advance=1, description=f"{name} {t or ''}".strip())

        if job == "all":
            report = maintain(engine, tenant, on_step=step)
            result["reports"] = report.as_dict()
            result["counts"] = report.counts
            for tm in report.tenants:
                per_row[tm.tenant] = {
                    "enriched": tm.enrichment.enriched, "evicted": tm.eviction.evicted,
                    "concepts": tm.consolidation.concepts_created,
                    "consolidated": tm.consolidation.members_consolidated,
                    "reviewed": tm.review.reviewed}
            per_row["re-evaluation (all tenants)"] = {
                "scanned": report.reevaluation.scanned,
                "promoted": report.reevaluation.promoted}
        elif job == "reevaluate":
            rep = reevaluate(engine)
            step("reevaluate", None)
            data = rep.as_dict()
            result["reports"]["reevaluate"] = data
            result["counts"] = _int_fields(data)
            per_row["all tenants"] = result["counts"]
        else:
            jobs: dict[str, Callable[..., Any]] = {
                "evict": evict, "consolidate": consolidate, "review": review, "enrich": enrich}
            fn = jobs[job]
            totals: dict[str, int] = {}
            for t in tenants:
                kwargs: dict[str, Any] = {"tenant": t}
                if job == "consolidate":
                    kwargs["summariser"] = engine.summariser
                data = fn(engine, **kwargs).as_dict()
                step(job, t)
                result["reports"][t] = data
                per_row[t] = _int_fields(data)
                for k, v in per_row[t].items():
                    totals[k] = totals.get(k, 0) + v
            result["counts"] = totals
        bar.update(task, completed=max(1, total))
    if progress:
        columns = list(dict.fromkeys(k for counts in per_row.values() for k in counts))
        table = Table(title=f"mnemonia maintain {job}")
        table.add_column("tenant")
        for c in columns:
            table.add_column(c, justify="right")
        for name, counts in per_row.items():
            table.add_row(name, *(str(counts[c]) if c in counts else "" for c in columns))
        if not per_row:
            table.caption = "no tenants"
        out.print(table)
    return result
