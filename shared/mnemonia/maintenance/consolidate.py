"""Consolidation: near-duplicate memories merge into one ``concept`` (DESIGN section 5).

Candidates come from MinHash LSH (datasketch) over every unconsolidated active memory, each
verified with the exact Jaccard; :func:`mnemonia.scoring.consolidation.group` groups them.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from mnemonia import ingest
from mnemonia.clock import to_ts
from mnemonia.errors import InvalidInputError, shown
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.ranking import priority_of, weights
from mnemonia.maintenance.reports import ConsolidationReport
from mnemonia.runtime import Runtime, Summariser
from mnemonia.scoring import consolidation as cons
from mnemonia.scoring import reevaluation as reeval
from mnemonia.store.repository import chunks
from mnemonia.validation import prepare_many

__all__ = ["LSH_RECALL_AT_THRESHOLD", "MINHASH_PERMUTATIONS", "MINHASH_SEED", "concept_id",
           "concept_item", "consolidate", "lsh_params"]

log = logging.getLogger("mnemonia.maintenance")

MINHASH_PERMUTATIONS = 128
MINHASH_SEED = 1
LSH_RECALL_AT_THRESHOLD = 0.9999
"""LSH banding is chosen so a pair exactly at the Jaccard threshold is a candidate with at
least this probability (more similar pairs even more surely)."""
LISTED_MEMBERS = 100
"""Member ids kept in a concept's metadata and event (relations hold all)."""
WRITE_BATCH = 200
"""Groups written per batch."""


def lsh_params(threshold: float, num_perm: int = MINHASH_PERMUTATIONS) -> tuple[int, int]:
    """Bands and rows for MinHash LSH: the most rows per band (fewest false positives) that
    still make a pair at ``threshold`` a candidate with probability >= LSH_RECALL_AT_THRESHOLD."""
    best = (num_perm, 1)
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if 1.0 - (1.0 - threshold ** r) ** b >= LSH_RECALL_AT_THRESHOLD:
            best = (b, r)
    return best


def similar_sets(token_sets: Sequence[frozenset[str]], threshold: float
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
    bands, rows_per_band = lsh_params(threshold)
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


def concept_id(tenant: str, members: Sequence[str]) -> str:
    digest = hashlib.blake2b("\x1f".join([tenant, *sorted(members)]).encode(),
                             digest_size=12).hexdigest()
    return f"concept-{digest}"


def _clip_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0] or text[:limit - 1]
    return cut.rstrip() + "…"



def _groups(rt: Runtime, rows: list[Any], now: datetime
            ) -> tuple[list[list[str]], dict[str, Any], int, int]:
    """Groups of near-duplicates among ``rows``, the rows in play by id, and the counts of
    candidate and verified pairs."""
    cfg = rt.config
    by_set: dict[frozenset[str], list[str]] = {}
    for r in rows:
        tokens = cons.tokenize(r.text)
        if tokens:  # an empty word set has Jaccard 0 with everything
            by_set.setdefault(tokens, []).append(r.id)
    sets = list(by_set)
    members = [by_set[s] for s in sets]
    similar, candidate_pairs = similar_sets(sets, cfg.consolidation_threshold)
    verified = sum(len(v) for v in similar.values()) // 2
    # Only memories with at least one verified partner can be in a group.
    in_play = [j for j in range(len(sets)) if len(members[j]) > 1 or j in similar]
    set_of = {mid: j for j in in_play for mid in members[j]}
    row_by_id = {r.id: r for r in rows if r.id in set_of}
    w = weights(cfg)
    items = [cons.ConsolidationItem(id=mid, tokens=sets[set_of[mid]],
                                    priority=priority_of(cfg, row_by_id[mid], now, w))
             for mid in set_of]
    groups = cons.group(items, threshold=cfg.consolidation_threshold,
                        min_group=cfg.consolidation_min_group,
                        candidates=_Candidates(set_of, members, similar))
    return [list(g) for g in groups], row_by_id, candidate_pairs, verified


def consolidate(rt: Runtime, *, tenant: str,
                summariser: Summariser | None = None) -> ConsolidationReport:
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
    rt.check_open()
    if summariser is not None and not callable(summariser):
        raise InvalidInputError(f"summariser={shown(summariser)}: must be a callable texts -> text")
    now = rt.now()
    with rt.reading() as conn:
        rows = rt.sql.active_rows(conn, tenant, (
            "id", "text", "importance", "created_at", "accessed_at", "access_count",
            "stability", "state", "topic", "entities", "kind"),
            unconsolidated=True, not_kind="concept")
    groups, row_by_id, candidate_pairs, verified = _groups(rt, rows, now)
    created: list[str] = []
    consolidated = 0
    for batch in chunks(groups, WRITE_BATCH):
        made, marked = _write_concepts(rt, tenant, [list(g) for g in batch], row_by_id,
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
    remember(rt, "consolidate", report, tenant)
    return report


def concept_item(rt: Runtime, tenant: str, group: list[str], rows: Mapping[str, Any],
                 summariser: Summariser | None) -> dict[str, Any]:
    """The ``add_many`` item of the concept that stands for ``group``."""
    texts = [rows[i].text for i in group]
    if summariser is not None:
        text = summariser(list(texts))
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(
                f"the summariser returned {shown(text)} for {len(texts)} texts; it must return a "
                "non-empty string")
    else:
        text = cons.merge_texts(texts)
    entities: list[str] = []
    for i in group:
        entities += [e for e in json.loads(rows[i].entities) if e not in entities]
    topics = {rows[i].topic for i in group}
    return {"id": concept_id(tenant, group), "kind": "concept",
            "text": _clip_text(text, rt.config.max_text_chars),
            "importance": sum(float(rows[i].importance) for i in group) / len(group),
            "entities": entities, "topic": topics.pop() if len(topics) == 1 else None,
            "metadata": {"consolidated_from": list(group[:LISTED_MEMBERS]),
                         "consolidated_count": len(group)}}


class _Marking:
    """The writes that tie members to their concepts, gathered for one transaction."""

    def __init__(self) -> None:
        self.edges: dict[tuple[str, str, str], float] = {}
        self.events: list[dict[str, Any]] = []
        self.marks: list[dict[str, Any]] = []
        self.raised: list[dict[str, Any]] = []
        self.to_enrich: list[str] = []
        self.marked = 0


def _mark_group(rt: Runtime, tenant: str, group: list[str], cid: str, free: list[str],
                concept: Any, rows: Mapping[str, Any], nowts: float, w: _Marking) -> None:
    w.marks += [{"b_id": mid, "consolidated_into": cid} for mid in free]
    w.marked += len(free)
    w.events += [rt.sql.event_row(tenant, mid, "consolidated", nowts,
                                  {"consolidated_into": None}, {"consolidated_into": cid})
                 for mid in free]
    w.events.append(rt.sql.event_row(tenant, cid, "consolidated", nowts, None,
                                     {"members": free[:LISTED_MEMBERS], "count": len(free)}))
    w.edges.update({(mid, cid, "part_of"): 1.0 for mid in free})
    # A concept stands for its members: at least the highest state among them.
    top = max((rows[i].state for i in group), key=reeval.state_rank)
    current = concept.state
    if reeval.state_rank(top) > reeval.state_rank(current):
        w.raised.append({"b_id": cid, "state": top})
        current = top
    if current == reeval.IMMEDIATE and concept.enriched_at is None:
        w.to_enrich.append(cid)


def _write_concepts(rt: Runtime, tenant: str, groups: list[list[str]],
                    rows: Mapping[str, Any], summariser: Summariser | None
                    ) -> tuple[list[str], int]:
    cids = [concept_id(tenant, g) for g in groups]
    with rt.reading() as conn:
        # A concept id is derived from its members: one left by an interrupted run is reused.
        existing = set(rt.sql.select_ids(conn, cids, committed=True))
    new_items = [concept_item(rt, tenant, g, rows, summariser)
                 for g, cid in zip(groups, cids, strict=True) if cid not in existing]
    if new_items:
        ingest.add(rt, tenant, prepare_many(new_items, rt.now(),
                                            max_chars=rt.config.max_text_chars))
    nowts = to_ts(rt.now())
    w = _Marking()
    with rt.writing() as conn:
        states = rt.sql.columns_of(conn, cids, ("state", "enriched_at"))
        still = set(rt.sql.select_ids(conn, [i for g in groups for i in g],
                                      consolidated=False, deleted=False))
        for group, cid in zip(groups, cids, strict=True):
            free = [i for i in group if i in still]  # group order: seed first
            if cid not in states or not free:
                continue
            still.difference_update(free)
            _mark_group(rt, tenant, group, cid, free, states[cid], rows, nowts, w)
        rt.sql.update_each(conn, w.marks, ("consolidated_into",))
        rt.sql.update_each(conn, w.raised, ("state",))
        rt.links_written(tenant, {m for src, dst, _ in w.edges for m in (src, dst)})
        rt.sql.insert_edges(conn, tenant, w.edges, nowts)
        rt.sql.insert_events(conn, w.events)
    if w.to_enrich:
        ingest.enrich_ids(rt, tenant, w.to_enrich)
    rt.forget_entities(tenant)
    created = [c for c in cids if c not in existing and c in states]
    return created, w.marked
