"""Consolidation: near-duplicate memories merge into one ``concept`` (DESIGN section 5).

Candidates come from MinHash LSH (datasketch) over every unconsolidated active memory, each
verified with the exact Jaccard; :func:`mnemonia.scoring.consolidation.group` groups them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia import ingest
from mnemonia import validation as check
from mnemonia.caches import Changes
from mnemonia.clock import to_ts
from mnemonia.errors import InvalidInputError, shown
from mnemonia.maintenance.journal import remember
from mnemonia.maintenance.reports import ConsolidationReport
from mnemonia.ranking import priority_of, weights
from mnemonia.runtime import Runtime, Summariser
from mnemonia.scoring import consolidation as cons
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import statements
from mnemonia.store.statements import chunks
from mnemonia.validation import prepare_many

__all__ = ["LSH_RECALL_AT_THRESHOLD", "MINHASH_PERMUTATIONS", "MINHASH_SEED", "concept_id",
           "concept_item", "consolidate", "lsh_params"]

log = logging.getLogger("mnemonia.maintenance")

MINHASH_PERMUTATIONS = 256
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

    Candidates come from MinHash LSH over every set (no sample), each verified with the exact
    Jaccard. Returns ``{index: {similar indices}}`` (symmetric) and the number of distinct
    candidate pairs LSH proposed.

    The signatures are datasketch's (its permutations and word hash), computed for all sets at
    once with numpy; only one 64-bit key per set and band is kept. The bands are then joined
    one at a time, and a pair is counted in the first band where its keys agree (read from
    the keys), so no table of pairs seen is kept: memory is linear in the number of sets.
    """
    similar: dict[int, set[int]] = {}
    if len(token_sets) < 2:
        return similar, 0
    keys = _band_keys(token_sets, *lsh_params(threshold))
    candidates = 0
    for band in range(keys.shape[1]):
        column = keys[:, band]
        order = np.argsort(column, kind="stable")
        ordered = column[order]
        same = np.flatnonzero(ordered[1:] == ordered[:-1])
        if not len(same):
            continue
        for left, right in _run_pairs(order, same):
            if band:  # counted (and verified) in an earlier band already?
                earlier = (keys[left, :band] == keys[right, :band]).any(axis=1)
                left, right = left[~earlier], right[~earlier]
            candidates += len(left)
            for a, b in zip(left.tolist(), right.tolist(), strict=True):
                if cons.jaccard(token_sets[a], token_sets[b]) >= threshold:
                    similar.setdefault(a, set()).add(b)
                    similar.setdefault(b, set()).add(a)
    return similar, candidates


_WORDS_PER_CHUNK = 8192
"""Words whose permuted hash values are computed at once."""
_WORD_SLOTS = 1 << 17
"""Word slots (sets x their padded length) whose signatures are computed at once."""
_PAIRS_PER_CHUNK = 65536
"""Candidate pairs checked against the earlier bands at once."""


def _band_keys(token_sets: Sequence[frozenset[str]], bands: int, rows: int) -> np.ndarray:
    """One uint64 key per set and band: the band's ``rows`` MinHash values mixed together."""
    from datasketch import MinHash
    from datasketch.hashfunc import sha1_hash32
    from datasketch.minhash import _max_hash, _mersenne_prime

    words: dict[str, int] = {}
    flat = np.fromiter((words.setdefault(w, len(words)) for s in token_sets for w in s),
                       dtype=np.int64)
    sizes = np.fromiter((len(s) for s in token_sets), dtype=np.int64, count=len(token_sets))
    if not sizes.all():
        raise ValueError("similar_sets needs non-empty word sets")
    a, b = MinHash(num_perm=MINHASH_PERMUTATIONS, seed=MINHASH_SEED).permutations
    used = bands * rows
    a, b = a[:used], b[:used]
    hashed = np.fromiter((sha1_hash32(w.encode("utf-8")) for w in words), dtype=np.uint64,
                         count=len(words))
    # Per word, its value under every permutation (as datasketch computes it, uint64 wrapping).
    permuted = np.empty((len(words), used), dtype=np.uint32)
    for start in range(0, len(words), _WORDS_PER_CHUNK):
        hv = hashed[start:start + _WORDS_PER_CHUNK, None]
        permuted[start:start + _WORDS_PER_CHUNK] = ((hv * a + b) % np.uint64(_mersenne_prime)
                                                   ) & np.uint64(_max_hash)
    mixers = np.random.default_rng(MINHASH_SEED).integers(
        1, 2 ** 63, size=rows, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    keys = np.empty((len(token_sets), bands), dtype=np.uint64)
    starts = np.cumsum(sizes) - sizes
    # Sets by size, so a chunk pads little: each row of a chunk is padded (with its own
    # first word) to the chunk's longest set, and a chunk holds at most _WORD_SLOTS words.
    by_size = np.argsort(sizes, kind="stable")
    ascending = sizes[by_size]
    first = 0
    while first < len(by_size):
        # a count c with c * (the longest of those c sets) <= _WORD_SLOTS, at least one set
        reach = min(first + _WORD_SLOTS // int(ascending[first]), len(by_size))
        last = first + max(1, _WORD_SLOTS // int(ascending[reach - 1]))
        chunk = by_size[first:last]
        longest = int(sizes[chunk[-1]])
        offsets = np.minimum(np.arange(longest), sizes[chunk, None] - 1)
        signature = permuted[flat[starts[chunk, None] + offsets]].min(axis=1)
        banded = signature.reshape(len(chunk), bands, rows).astype(np.uint64)
        keys[chunk] = (banded * mixers).sum(axis=2, dtype=np.uint64)
        first = last
    return keys


def _run_pairs(order: np.ndarray, same: np.ndarray
               ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The pairs (smaller index first) within each run of equal keys of a sorted band, in
    chunks. ``same`` holds the positions ``i`` where sorted keys ``i`` and ``i + 1`` agree."""
    # Runs of equal keys: maximal stretches of consecutive positions in ``same``.
    breaks = np.flatnonzero(np.diff(same) != 1)
    run_starts = np.concatenate(([same[0]], same[breaks + 1]))
    run_ends = np.concatenate((same[breaks], [same[-1]])) + 2  # exclusive
    lengths = run_ends - run_starts
    pairs = lengths == 2
    if pairs.any():  # most runs are a single pair: all of them at once
        x, y = order[run_starts[pairs]], order[run_starts[pairs] + 1]
        for at in range(0, len(x), _PAIRS_PER_CHUNK):
            xs, ys = x[at:at + _PAIRS_PER_CHUNK], y[at:at + _PAIRS_PER_CHUNK]
            yield np.minimum(xs, ys), np.maximum(xs, ys)
    for start, end in zip(run_starts[~pairs].tolist(), run_ends[~pairs].tolist(), strict=True):
        members = np.sort(order[start:end])
        i, j = np.triu_indices(len(members), 1)
        for at in range(0, len(i), _PAIRS_PER_CHUNK):
            yield members[i[at:at + _PAIRS_PER_CHUNK]], members[j[at:at + _PAIRS_PER_CHUNK]]


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
                                    priority=priority_of(cfg, row_by_id[mid], now, w),
                                    seq=int(row_by_id[mid].seq))
             for mid in set_of]
    groups = cons.group(items, threshold=cfg.consolidation_threshold,
                        min_group=cfg.consolidation_min_group,
                        candidates=_Candidates(set_of, members, similar))
    kept = [g for g in (_one_version_each(list(grp), row_by_id) for grp in groups)
            if len(g) >= cfg.consolidation_min_group]
    return kept, row_by_id, candidate_pairs, verified


def _one_version_each(group: list[str], rows: Mapping[str, Any]) -> list[str]:
    """``group`` without the members that state another value for a slot an earlier member
    fills ("X is A" and "X is B" stay apart: a concept never holds two versions of a fact)."""
    kept: list[str] = []
    for mid in group:
        mine = statements.analyse(rows[mid].text, check.row_speaker(rows[mid]))
        if not any(statements.differs(a, b) for other in kept
                   for a in statements.analyse(rows[other].text, check.row_speaker(rows[other]))
                   for b in mine):
            kept.append(mid)
    return kept


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
        rows = rt.sql.memories.active_rows(conn, tenant, (
            "id", "seq", "text", "importance", "created_at", "accessed_at", "access_count",
            "stability", "state", "topic", "entities", "kind", "metadata"),
            unconsolidated=True, unsuperseded=True, not_kind="concept")
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
    w.events += [rt.sql.events.event_row(tenant, mid, "consolidated", nowts,
                                         {"consolidated_into": None}, {"consolidated_into": cid})
                 for mid in free]
    w.events.append(rt.sql.events.event_row(tenant, cid, "consolidated", nowts, None,
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
        existing = set(rt.sql.memories.select_ids(conn, cids, committed=True))
    new_items = [concept_item(rt, tenant, g, rows, summariser)
                 for g, cid in zip(groups, cids, strict=True) if cid not in existing]
    if new_items:
        ingest.add(rt, tenant, prepare_many(new_items, rt.now(),
                                            max_chars=rt.config.max_text_chars))
    nowts = to_ts(rt.now())
    w = _Marking()
    # (marking members consolidated_into a concept, raising its state, linking them part_of
    # it: no memory comes or goes and no entity link changes, so recall's entity index stays;
    # the relations it writes are reported by the store, the rows followed by its row cache)
    with rt.writing(Changes(tenant=tenant)) as conn:
        states = rt.sql.memories.columns_of(conn, cids, ("state", "enriched_at"))
        still = set(rt.sql.memories.select_ids(conn, [i for g in groups for i in g],
                                               consolidated=False, deleted=False))
        for group, cid in zip(groups, cids, strict=True):
            free = [i for i in group if i in still]  # group order: seed first
            if cid not in states or not free:
                continue
            still.difference_update(free)
            _mark_group(rt, tenant, group, cid, free, states[cid], rows, nowts, w)
        rt.sql.memories.update_each(conn, w.marks, ("consolidated_into",))
        rt.sql.memories.update_each(conn, w.raised, ("state",))
        rt.sql.graph.insert_edges(conn, tenant, w.edges, nowts)
        rt.sql.events.insert_events(conn, w.events)
    if w.to_enrich:
        ingest.enrich_ids(rt, tenant, w.to_enrich)
    created = [c for c in cids if c not in existing and c in states]
    return created, w.marked
