"""The recall pipeline (DESIGN section 5): dense + keyword candidates, fusion, entity seeds,
bounded spreading activation, scoring by mode, hits with explanations, and the access
side effects. Scoring formulas come from the pure :mod:`mnemonia.scoring` core.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import numpy as np

from mnemonia import entities as ent
from mnemonia.caches import NEAR_LINKS, CueIndex, EntityIndex
from mnemonia.clock import from_ts, to_ts
from mnemonia.keywords import KeywordQuery, keyword_query
from mnemonia.models import Explanation, Hit, Link, RecallResult
from mnemonia.ranking import priority_of, use_record, weights
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring import modes as modes_mod
from mnemonia.scoring import retention as ret
from mnemonia.store.database import Connection
from mnemonia.store.exact import ExactScores
from mnemonia.store.statements import SqlCondition
from mnemonia.store.vectors import VectorCollection
from mnemonia.validation import embed_text, row_embed_text, row_speaker

__all__ = ["Candidates", "RecallRequest", "SeedInfo", "final_score", "recall"]

HIDDEN_RELATIONS = ("contradicts", "supersedes")
"""Relations a hit reports (its contradictions and supersession links)."""
NAME_MATCH_STRENGTH = 0.5
"""Entity similarity credited when a query word names the entity."""
EDGES_PER_SOURCE = 16
"""Strongest relations one memory spreads along per hop."""
QUERY_ENTITIES = 4
"""Entities one query may activate (the strongest by ``s * weight``)."""
MIN_ENTITY_WEIGHT = 0.05
"""Entities linked to nearly every memory carry no signal."""
ENTITY_POOL = 5
"""Linked memories read per entity: ``entity_fanout * ENTITY_POOL``, best fused kept."""
CONTEXT_SOURCES = 10
"""Candidates (the best fused) whose unread session neighbours are read and scored."""
SUMMARY_CHARS = 80
"""Length of the one-line summary of a linked memory in a hit."""
PREFILTER_LIMIT = 2048
"""With a ``where`` condition, the dense pool widens by the share of neighbours that satisfy
it; when it would have to grow past this many, the matching memories are read by SQL and
ranked exactly by their stored vectors instead, if there are at most this many of them (else
the pool keeps widening)."""
WHOLE_TENANT_LINKS = 2_000
"""A tenant with at most this many active memories has each kind of link recall keeps
(``follows``, what spreading follows, contradictions and supersessions) read for all its
memories at once when recall first needs that kind: one read, where a first pass over the
tenant's questions read them a few memories at a time on every recall. A larger tenant's are
read as recall reaches them."""
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


@dataclass(frozen=True)
class RecallRequest:
    """One checked ``recall`` call."""

    query: str
    tenant: str
    k: int
    topic: str | None
    entity: str | None
    episode_k: int
    mode: str
    weights: modes_mod.Mode
    floor: float
    touch: bool
    user_id: str | None
    now: datetime
    include_superseded: bool = False
    where: SqlCondition | None = None  # only memories matching it (a store search's filter)


@dataclass(slots=True)
class SeedInfo:
    """How a memory entered recall: its cosine, keyword share, fused seed, entity boost."""

    cosine: float | None
    keyword: float
    seed: float | None
    fused: float = 0.0
    entity: str | None = None


@dataclass
class KeywordSide:
    """What recall reads before the query vector: the query's words (weighted, with their
    related words), the keyword index's candidates, their rows and their stored vectors."""

    query: KeywordQuery
    hits: list[tuple[str, float]]
    rows: dict[str, Any]
    vectors: dict[str, np.ndarray]
    # of the visible candidates: the query-only part of their relevance (keyword score, and
    # whether the query names their speaker), and their session neighbours
    parts: dict[str, tuple[float, bool]] = field(default_factory=dict)
    around: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class Candidates:
    """Everything recall has read: rows by id, seed information, cosines, seeds; after
    spreading, the activations."""

    rows: dict[str, Any] = field(default_factory=dict)
    info: dict[str, SeedInfo] = field(default_factory=dict)
    cos: dict[str, float] = field(default_factory=dict)
    seeds: dict[str, float] = field(default_factory=dict)
    activations: dict[str, act.Activation] = field(default_factory=dict)
    logits: dict[str, float] = field(default_factory=dict)  # the reranker's, when one ran
    cues: CueIndex | None = None  # the tenant's use cues and use counts
    cue_sims: dict[str, float] = field(default_factory=dict)  # best cue cosine per memory
    priors: dict[str, float] = field(default_factory=dict)  # the lifecycle mode's (_scorer)
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)  # (activation, final)
    exact: ExactScores | None = None  # every memory's cosine, for a mirrored collection


def recall(rt: Runtime, req: RecallRequest) -> RecallResult:
    """Run the pipeline for a checked request."""
    col = rt.collection(req.tenant, create=False)
    if col is None:
        return RecallResult(query=req.query, tenant=req.tenant, mode=req.mode, memories=[])
    if not req.query:
        return _entity_recall(rt, req)
    qtok = act.query_tokens(req.query)
    n_dense = max(rt.config.recall_initial_candidates * 2, 2 * req.k)
    qvec = rt.caches.query_cache.get(req.query)
    if qvec is None:
        # The keyword side reads the side-store while the model embeds the query, and Chroma
        # finds the nearest neighbours while it finishes: model, Chroma and the side-store
        # release the GIL, so on two cores they overlap.
        aside = rt.aside(_keyword_side, rt, req, col, qtok)
        try:
            qvec = query_vector(rt, req.query)
            exact = rt.vectors.scores(col, qvec)
            dense = _nearest(rt, col, qvec, n_dense, exact)
        except BaseException:
            futures.wait([aside])
            raise
        keywords = aside.result()
    else:
        exact = rt.vectors.scores(col, qvec)
        dense = _nearest(rt, col, qvec, n_dense, exact)
        keywords = _keyword_side(rt, req, col, qtok)
    with rt.reading() as conn:
        cands = _activate(rt, conn, col, req, qvec, qtok, keywords, dense, exact)
        hits = _score(rt, conn, req, cands)
    top = hits[:req.k]
    top_ids = {h.memory.id for h in top}
    episodes = [h for h in hits if h.memory.kind == "episode" and h.explanation.path is None
                and h.memory.id not in top_ids][:req.episode_k]
    if req.touch and top:
        _touch(rt, req, top)
    return RecallResult(query=req.query, tenant=req.tenant, mode=req.mode, memories=top,
                        episodes=episodes)


def query_vector(rt: Runtime, query: str) -> np.ndarray:
    vec = rt.caches.query_cache.get(query)
    if vec is None:
        vec = rt.embedder.embed_query(query)
        rt.caches.query_cache.put(query, vec)
    return vec


def visible(r: Any, topic: str | None, superseded: bool = False) -> bool:
    """Not deleted, not superseded (unless ``superseded`` asks for them too), and in the
    topic (or untopiced) when one is asked."""
    if r.deleted_at is not None or (r.superseded_by is not None and not superseded):
        return False
    return topic is None or r.topic is None or r.topic == topic


# -- 1. dense + keyword candidates ------------------------------------------------------------
def _keyword_side(rt: Runtime, req: RecallRequest, col: VectorCollection, qtok: list[str]
                  ) -> KeywordSide:
    """The query's words and the keyword index's candidates with their rows and the stored
    vectors of the visible ones, read on a connection of its own (none needs the query
    vector, so this runs while the query is embedded)."""
    cfg = rt.config
    with rt.reading() as conn:
        kq = keyword_query(rt, conn, req.tenant, qtok, _tenant_size(rt, conn, req.tenant))
        hits = rt.sql.keywords.keyword_search(
            conn, req.tenant, kq.search,
            cfg.keyword_candidates and max(cfg.keyword_candidates, req.k),
            max_postings=cfg.keyword_postings, docs=kq.docs)
        rows = rt.sql.memories.rows(conn, req.tenant, [i for i, _ in hits], edges=True,
                                    where=req.where, kept=True) if hits else {}
        shown = [i for i, _ in hits
                 if i in rows and visible(rows[i], req.topic, req.include_superseded)]
        # the Python work first, the vectors' read (which releases the GIL) last: the query
        # vector is due by then, and the nearest neighbours are asked for on the main thread
        parts = {i: keyword_part(rt, rows[i], kq) for i in shown}
        around = _session_neighbours(rt, conn, req, set(shown), cfg.context_window, rows) \
            if cfg.context_weight > 0 and cfg.context_window > 0 and shown else {}
        # (a mirrored collection gives every cosine with the query: nothing to read)
        vectors = rt.candidate_vectors(conn, col, shown) \
            if shown and not rt.vectors.mirrored(col) else {}
    return KeywordSide(query=kq, hits=hits, rows=rows, vectors=vectors, parts=parts,
                       around=around)


def _nearest(rt: Runtime, col: VectorCollection, qvec: np.ndarray, n: int, exact: ExactScores | None
             ) -> tuple[int, dict[str, float]]:
    """``(n, {id: cosine})``: the query's ``n`` nearest neighbours, best first (exact for a
    mirrored collection, else Chroma's HNSW answer)."""
    if exact is not None:
        ids, sims = exact.top(n)
        return n, dict(zip(ids, sims, strict=True))
    found, cosines = rt.vectors.query(col, qvec[None, :], n)
    return n, dict(zip(found[0], cosines[0], strict=True))


def _cosines(rt: Runtime, conn: Connection, col: VectorCollection, qvec: np.ndarray,
             ids: Sequence[str], exact: ExactScores | None,
             read: Mapping[str, np.ndarray] | None = None) -> dict[str, float]:
    """``{id: cosine with the query}`` of ``ids``: from the exact scores of a mirrored
    collection, else (and for any it lacks) from their stored vectors (``read``: those
    already read)."""
    out = exact.of(ids) if exact is not None else {}
    rest = [i for i in ids if i not in out]
    if rest:
        vecs = {i: read[i] for i in rest if i in read} if read else {}
        need = [i for i in rest if i not in vecs]
        if need:
            vecs.update(rt.candidate_vectors(conn, col, need))
        out.update({i: float(v @ qvec) for i, v in vecs.items()})
    return out


def _candidates(rt: Runtime, conn: Connection, col: VectorCollection, req: RecallRequest,
                qvec: np.ndarray, side: KeywordSide, dense: tuple[int, dict[str, float]],
                exact: ExactScores | None) -> Candidates:
    """Dense and keyword candidates, the dense pool (``dense``: the first round of
    :func:`_nearest`) widened until enough visible remain."""
    c = Candidates(rows=dict(side.rows), exact=exact)
    n_dense, got = dense
    while True:
        c.rows.update(rt.sql.memories.rows(conn, req.tenant, [i for i in got if i not in c.rows],
                                           edges=True, where=req.where, kept=True))
        shown = [i for i in got
                 if i in c.rows and visible(c.rows[i], req.topic, req.include_superseded)]
        if len(shown) >= min(n_dense // 2, req.k) or len(got) < n_dense:
            break
        if req.where is None:
            n_dense *= 4
        else:
            # a filter: widen as far as its share of the neighbours says (twice over); when
            # that is far, a selective filter is cheaper read by SQL and ranked exactly
            wider = max(n_dense * 4, math.ceil(2 * n_dense * req.k / max(1, len(shown))))
            ranked = _prefiltered(rt, conn, col, req, qvec, n_dense, c) \
                if wider > PREFILTER_LIMIT else None
            if ranked is not None:
                got = ranked
                shown = [i for i in got
                         if i in c.rows and visible(c.rows[i], req.topic, req.include_superseded)]
                break
            n_dense = wider
        n_dense, got = _nearest(rt, col, qvec, n_dense, exact)
    c.cos.update({i: got[i] for i in shown})
    # the keyword candidates' cosines (their stored vectors were read beside the embedding,
    # unless the collection is mirrored)
    c.cos.update(_cosines(rt, conn, col, qvec, [i for i in side.parts if i not in c.cos],
                          exact, side.vectors))
    return c


def _prefiltered(rt: Runtime, conn: Connection, col: VectorCollection, req: RecallRequest,
                 qvec: np.ndarray, n: int, c: Candidates) -> dict[str, float] | None:
    """The ``n`` memories matching ``req.where`` nearest to the query, ranked exactly by their
    stored vectors (their rows read into ``c``), when at most :data:`PREFILTER_LIMIT` match:
    a selective filter, for which widening the nearest neighbours would read most of the
    tenant to find enough. ``None`` when more match (widening then finds them soon)."""
    if req.where is None:
        return None
    ids = rt.sql.items.matching_ids(conn, req.tenant, req.where, PREFILTER_LIMIT + 1)
    if len(ids) > PREFILTER_LIMIT:
        return None
    cosines = _cosines(rt, conn, col, qvec, ids, c.exact)
    order = list(cosines)
    if not order:
        return {}
    sims = np.array([cosines[i] for i in order])
    got = {order[j]: float(sims[j]) for j in np.argsort(-sims, kind="stable")[:n]}
    c.rows.update(rt.sql.memories.rows(conn, req.tenant, [i for i in got if i not in c.rows],
                                       edges=True, where=req.where, kept=True))
    return got


# -- 2. fusion --------------------------------------------------------------------------------
def keyword_text(rt: Runtime, r: Any, speaker: str | None = None) -> str:
    """The text a query's words are matched against in fusion: the indexed text (the
    ``speaker``'s, when given, else read from the row) plus, with ``keyword_dates``, the
    memory's date (``on 7 February 2022``, UTC), so a query that names a month or a year
    matches what was said then."""
    text = embed_text(r.text, speaker) if speaker is not None else row_embed_text(r)
    if not rt.config.keyword_dates:
        return text
    day, second = divmod(r.created_at, 86400.0)
    if second >= 86400.0 - 1e-6:  # within a microsecond of midnight from_ts may round up
        day = from_ts(r.created_at).toordinal() - _EPOCH_ORDINAL
    return text + _on_day(int(day))


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


@functools.lru_cache(maxsize=4096)
def _on_day(day: int) -> str:
    """`` on 7 February 2022`` for a day counted from 1970-01-01 (UTC)."""
    when = date.fromordinal(_EPOCH_ORDINAL + day)
    return f" on {when.day} {MONTHS[when.month - 1]} {when.year}"


def keyword_words(rt: Runtime, r: Any) -> tuple[frozenset[str], str | None]:
    """The words of a memory row's :func:`keyword_text` and its speaker, kept per memory
    (read back only while its text, metadata and time are unchanged)."""
    kept = rt.caches.keyword_words.get(r.id)
    if kept is not None and kept[0] == r.text and kept[1] == r.metadata \
            and kept[2] == r.created_at:
        return kept[3], kept[4]
    speaker = row_speaker(r)
    words = act.word_tokens(keyword_text(rt, r, speaker))
    rt.caches.keep_keyword_words(r.id, (r.text, r.metadata, r.created_at, words, speaker))
    return words, speaker


def keyword_part(rt: Runtime, r: Any, kq: KeywordQuery) -> tuple[float, bool]:
    """``(keyword score, whether the query names the speaker)`` of one memory row: the part
    of its relevance that needs no query vector (the speaker is only looked at when
    ``speaker_weight`` counts it)."""
    words, speaker = keyword_words(rt, r)
    named = rt.config.speaker_weight > 0 and speaker is not None and kq.names(speaker)
    return kq.score_words(words), named


def relevance(rt: Runtime, r: Any, cosine: float, kq: KeywordQuery,
              part: tuple[float, bool] | None = None) -> tuple[float, float]:
    """``(keyword, fused)`` of one memory row: cosine fused with the keyword score, plus
    ``speaker_weight`` when the query names the memory's speaker (at most 1). ``part``: its
    :func:`keyword_part`, when already known."""
    cfg = rt.config
    kw, named = keyword_part(rt, r, kq) if part is None else part
    fused = act.blend(max(0.0, cosine), kw, cfg.hybrid_keyword_weight)
    if named:
        fused = min(1.0, fused + cfg.speaker_weight)
    return kw, fused


def _fuse(rt: Runtime, c: Candidates, side: KeywordSide, floor: float) -> None:
    cfg = rt.config
    kq, parts = side.query, side.parts
    for mid, cos in c.cos.items():
        kw, fused = relevance(rt, c.rows[mid], cos, kq, parts.get(mid))
        c.info[mid] = SeedInfo(cosine=cos, keyword=kw, seed=fused, fused=fused)
        if fused >= cfg.initial_threshold or floor == 0:
            c.seeds[mid] = fused


# -- 2b. session context ----------------------------------------------------------------------
def _session_neighbours(rt: Runtime, conn: Connection, req: RecallRequest, ids: set[str],
                        window: int, rows: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``{id: memories at most window turns before or after it}`` along ``follows``. Each
    memory's links, and its neighbourhood, are read once and kept (:meth:`RecallCache.links_of`)
    until a write that changes them; a memory whose row (in ``rows``) says it has no
    relations is not asked."""

    def read(ask: list[str]) -> dict[str, tuple[str, ...]]:
        got: dict[str, set[str]] = {m: set() for m in ask}
        linked = [m for m in ask if m not in rows or rows[m].has_edges]
        for src, dst, _, _ in rt.sql.graph.typed_links(conn, req.tenant, linked, ("follows",)) \
                if linked else ():
            if src in got:
                got[src].add(dst)
            if dst in got:
                got[dst].add(src)
        return {m: tuple(sorted(n)) for m, n in got.items()}

    def near(ask: list[str]) -> dict[str, tuple[str, ...]]:
        adjacent: dict[str, tuple[str, ...]] = {}
        frontier, seen = set(ask), set(ask)
        for _ in range(window):
            if not frontier:
                break
            adjacent.update(rt.caches.links_of(req.tenant, "follows", frontier, read))
            frontier = {n for m in frontier for n in adjacent[m]} - seen
            seen |= frontier
        out: dict[str, tuple[str, ...]] = {}
        for mid in ask:
            ring, found = {mid}, set[str]()
            for _ in range(window):
                ring = {n for m in ring for n in adjacent.get(m, ())} - found - {mid}
                found |= ring
            out[mid] = tuple(sorted(found))
        return out

    # a memory whose row says it has no relations has no neighbours (nothing to keep)
    alone = {m for m in ids if m in rows and not getattr(rows[m], "has_edges", True)}
    out: dict[str, tuple[str, ...]] = dict.fromkeys(alone, ())
    if len(alone) < len(ids):
        _whole_tenant(rt, conn, req.tenant, "follows", read)
        # (a neighbourhood spans several memories' links: any write of the tenant's relations
        # drops every kept one, see RecallCache.changing)
        out.update(rt.caches.links_of(req.tenant, f"{NEAR_LINKS}{window}", ids - alone, near))
    return out


def _whole_tenant(rt: Runtime, conn: Connection, tenant: str, kind: str,
                  read: Callable[[list[str]], Mapping[str, tuple[Any, ...]]]) -> None:
    """Keep the links of ``kind`` of every active memory of a small tenant
    (:data:`WHOLE_TENANT_LINKS`) when none are kept yet; ``read`` as for
    :meth:`RecallCache.links_of`."""
    if rt.caches.kept_links(tenant, kind) or _tenant_size(rt, conn, tenant) > WHOLE_TENANT_LINKS:
        return
    ids = [r[0] for r in rt.sql.memories.active_rows(conn, tenant, ["id"])]
    if ids:
        rt.caches.links_of(tenant, kind, ids, read)


def _context(rt: Runtime, conn: Connection, col: VectorCollection, req: RecallRequest,
             qvec: np.ndarray, side: KeywordSide, c: Candidates) -> None:
    """Step 2b: each candidate's relevance is lifted by the best relevance among the
    memories at most ``context_window`` turns from it in its session
    (:func:`mnemonia.scoring.activation.context_lift`); those neighbours are scored too and
    join the candidates (the answer often sits right after the turn that names the topic)."""
    cfg = rt.config
    neighbours = cfg.context_weight > 0 and cfg.context_window > 0
    if not c.info or not (neighbours or cfg.session_weight > 0):
        return
    kq = side.query
    around: dict[str, tuple[str, ...]] = {}
    if neighbours:  # the keyword candidates' were read beside the query embedding
        around = {m: side.around[m] for m in c.info if m in side.around}
        around.update(_session_neighbours(rt, conn, req, set(c.info) - set(around),
                                          cfg.context_window, c.rows))
    # new memories are read around the strongest candidates only
    sources = heapq.nsmallest(CONTEXT_SOURCES, [(-i.fused, m) for m, i in c.info.items()])
    new = sorted({n for _, m in sources for n in around.get(m, ())} - set(c.info))
    if new:
        c.rows.update(rt.sql.memories.rows(conn, req.tenant, [i for i in new if i not in c.rows],
                                           edges=True, kept=True))
        new = [i for i in new if i in c.rows
               and visible(c.rows[i], req.topic, req.include_superseded)]
        c.cos.update(_cosines(rt, conn, col, qvec, [i for i in new if i not in c.cos],
                              c.exact))
        for i in new:
            if i in c.cos:
                kw, fused = relevance(rt, c.rows[i], c.cos[i], kq)
                c.info[i] = SeedInfo(cosine=c.cos[i], keyword=kw, seed=fused, fused=fused)
    session_best = _session_best(c) if cfg.session_weight > 0 else {}
    # (the loop form of act.context_lift: the weights were checked with the config)
    infos, rows, seeds = c.info, c.rows, c.seeds
    context_weight, session_weight = cfg.context_weight, cfg.session_weight
    threshold, keep_all = cfg.initial_threshold, req.floor == 0
    relevances = {mid: info.fused for mid, info in infos.items()}  # (all >= 0)
    for mid, info in infos.items():
        best = 0.0
        for n in around.get(mid, ()):
            f = relevances.get(n)
            if f is not None and f > best:
                best = f
        info.seed = act.lift(info.fused, best, context_weight)
        if session_best:
            sid = rows[mid].session_id
            if sid in session_best:
                # the session's support counts in proportion to the turn's own relevance, so
                # a turn unrelated to the query is not lifted by a strong match in its session
                info.seed = act.lift(info.seed, session_best[sid] * info.fused, session_weight)
        if info.seed >= threshold or keep_all:
            seeds[mid] = info.seed
        else:
            seeds.pop(mid, None)


def _session_best(c: Candidates) -> dict[str, float]:
    """``{session_id: best relevance among the candidates of that session}``."""
    best: dict[str, float] = {}
    for mid, info in c.info.items():
        sid = c.rows[mid].session_id
        if sid is not None:
            best[sid] = max(best.get(sid, 0.0), info.fused)
    return best


def _activate(rt: Runtime, conn: Connection, col: VectorCollection, req: RecallRequest,
              qvec: np.ndarray, qtok: list[str], side: KeywordSide,
              dense: tuple[int, dict[str, float]], exact: ExactScores | None) -> Candidates:
    kq = side.query
    c = _candidates(rt, conn, col, req, qvec, side, dense, exact)
    _fuse(rt, c, side, req.floor)
    _context(rt, conn, col, req, qvec, side, c)
    # 3. entities (only boosts that could reach the top k are worth reading)
    if isinstance(req.weights, modes_mod.LifecyclePrior):  # use counts and cue matches
        c.cues = cue_index(rt, conn, req.tenant)
        _cue_matches(req.weights, qvec, c)
    bound = _spread_bound(rt, c, req)
    if _entity_seeds(rt, conn, col, req, qvec, qtok, kq, c, bound):
        bound = _spread_bound(rt, c, req)  # (new seeds can only raise it)
    # 4. spreading: only the spread_frontier most activated memories spread per hop, each
    # along its EDGES_PER_SOURCE strongest relations, and only where the spread value
    # could still matter (reach the top k, or pass the floor).
    cfg = rt.config
    spreader = _Spreader(rt, conn, req, c, bound)
    c.activations = act.spread(
        c.seeds, spreader, depth=cfg.spread_depth, decay=cfg.spread_decay,
        type_weights=rt.type_weights or None, topics=spreader.topics, query_topic=req.topic,
        cross_topic_penalty=cfg.cross_topic_penalty, max_frontier=cfg.spread_frontier)
    if req.entity is not None:
        linked = rt.sql.graph.entity_members(conn, req.tenant, req.entity)
        c.activations = {m: a for m, a in c.activations.items() if m in linked}
    return c


# -- 3. entities ------------------------------------------------------------------------------
def _tenant_size(rt: Runtime, conn: Connection, tenant: str) -> int:
    """Active memories of the tenant (the keyword and entity weights' N), read once per
    entity index."""
    idx = entity_index(rt, conn, tenant)
    if idx.active is None:
        idx.active = rt.sql.memories.active_count(conn, tenant)
    return idx.active


def entity_index(rt: Runtime, conn: Connection, tenant: str) -> EntityIndex:
    """The tenant's entity index (names, document frequencies, label vectors), cached."""
    idx = rt.caches.entity_indexes.get(tenant)
    if idx is not None:
        return idx
    epoch = rt.caches.index_epoch(tenant)
    rows = rt.sql.graph.entity_counts(conn, tenant)
    names = [r[0] for r in rows]
    labels = [ent.entity_label(n) for n in names]
    df = {r[0]: int(r[1]) for r in rows}
    # Label vectors outlive the index (which every add drops): only new labels are embedded.
    known = rt.caches.label_vectors
    new = [lb for lb in dict.fromkeys(labels) if lb not in known]
    if new:
        known.update(zip(new, rt.embedder.embed_documents(new), strict=True))
    matrix = np.stack([known[lb] for lb in labels]) if labels else None
    idx = EntityIndex(labels=labels, names=names, df=df, matrix=matrix)
    rt.caches.keep_index(rt.caches.entity_indexes, tenant, idx, epoch)
    return idx


def _by_word(idx: EntityIndex) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    if idx.by_word is None:
        by_word: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for name, label in zip(idx.names, idx.labels, strict=True):
            parts = tuple(w for w in label.split() if len(w) >= 3)
            if parts:
                by_word.setdefault(parts[0], []).append((name, parts))
        idx.by_word = by_word
    return idx.by_word


def _entity_strengths(rt: Runtime, idx: EntityIndex, qvec: np.ndarray, qtok: list[str]
                      ) -> dict[str, float]:
    """Entities the query names (every 3+ character word of the name is a query word) or
    resembles (label cosine >= ``entity_similarity_threshold``), with their strength."""
    words = {t for t in act.word_tokens(" ".join(qtok)) if len(t) >= 3}
    strength: dict[str, float] = {}
    by_word = _by_word(idx)
    for word in words:
        for name, parts in by_word.get(word, ()):
            if all(w in words for w in parts):
                strength[name] = NAME_MATCH_STRENGTH
    if idx.matrix is not None:
        sims = idx.matrix @ qvec
        for j in np.nonzero(sims >= rt.config.entity_similarity_threshold)[0]:
            name = idx.names[int(j)]
            strength[name] = max(strength.get(name, 0.0), float(sims[j]))
    return strength


def _weighted_entities(rt: Runtime, conn: Connection, tenant: str, idx: EntityIndex,
                       strength: Mapping[str, float], bound: float
                       ) -> list[tuple[float, str, float, float]]:
    """``(s*weight, name, s, weight)`` of the entities worth reading, strongest first."""
    if idx.active is None:
        idx.active = rt.sql.memories.active_count(conn, tenant)
    total = max(1, idx.active)
    weighted = []
    for name, s in strength.items():
        df = min(total, max(1, idx.df.get(name, 1)))
        weight = math.log((total + 1) / df) / math.log(total + 1)
        if weight >= MIN_ENTITY_WEIGHT and 0.8 * s * weight >= bound:
            weighted.append((s * weight, name, s, weight))
    weighted.sort(key=lambda t: (-t[0], t[1]))
    return weighted[:QUERY_ENTITIES]


def _entity_seeds(rt: Runtime, conn: Connection, col: VectorCollection, req: RecallRequest,
                  qvec: np.ndarray, qtok: list[str], kq: KeywordQuery,
                  c: Candidates, bound: float = 0.0) -> bool:
    """Step 3: entities the query names or resembles boost their memories; whether any
    seed was set or raised.

    An entity's strength ``s`` is ``NAME_MATCH_STRENGTH`` when every 3+ character word of
    its name is a query word, else the cosine of its label to the query when that reaches
    ``entity_similarity_threshold``. Its weight ``ln((N+1)/df) / ln(N+1)`` (N active
    memories, df of them linked to it) discounts entities spread over much of the tenant
    (a speaker's name in a long chat); under ``MIN_ENTITY_WEIGHT`` it is ignored. The
    ``QUERY_ENTITIES`` strongest entities (by ``s*weight``) each seed at most
    ``entity_fanout`` memories, best fused first: ``seed = max(seed,
    0.8*s*importance*weight)``. An entity whose boost could not reach ``bound`` (the
    activation a memory needs to reach the top k, or the floor) is skipped.
    """
    if rt.config.entity_fanout == 0:
        return False
    idx = entity_index(rt, conn, req.tenant)
    if not idx.names:
        return False
    strength = _entity_strengths(rt, idx, qvec, qtok)
    if not strength:
        return False
    boosted = False
    for _, name, s, weight in _weighted_entities(rt, conn, req.tenant, idx, strength, bound):
        boosted |= _boost_entity(rt, conn, col, req, qvec, kq, c, (name, s, weight), bound)
    return boosted


def _boost_entity(rt: Runtime, conn: Connection, col: VectorCollection, req: RecallRequest,
                  qvec: np.ndarray, kq: KeywordQuery, c: Candidates,
                  entity: tuple[str, float, float], bound: float) -> bool:
    """Seed the best fused memories linked to one ``(name, strength, weight)`` entity;
    whether any seed was set or raised."""
    cfg = rt.config
    name, s, weight = entity
    # only memories important enough for their boost to reach the bound
    least = bound / (0.8 * s * weight)
    linked = rt.sql.graph.entity_members_by_importance(conn, req.tenant, name, least,
                                                       cfg.entity_fanout * ENTITY_POOL)
    new = [i for i in linked if i not in c.rows]
    if new:
        c.rows.update(rt.sql.memories.rows(conn, req.tenant, new, edges=True, where=req.where,
                                           kept=True))
    linked = [i for i in linked
              if i in c.rows and visible(c.rows[i], req.topic, req.include_superseded)]
    need = [i for i in linked if i not in c.cos]
    if need:
        c.cos.update(_cosines(rt, conn, col, qvec, need, c.exact))
    for i in linked:
        if i not in c.info:
            kw, fused = relevance(rt, c.rows[i], c.cos.get(i, 0.0), kq)
            c.info[i] = SeedInfo(cosine=c.cos.get(i), keyword=kw, seed=None, fused=fused)
    linked.sort(key=lambda i: (-(c.info[i].seed or c.info[i].fused), i))
    boosted = False
    for i in linked[:cfg.entity_fanout]:
        boost = 0.8 * s * c.rows[i].importance * weight
        if boost > c.seeds.get(i, 0.0) and boost >= bound:
            c.seeds[i] = boost
            c.info[i].entity = name
            boosted = True
    return boosted


# -- 3b. use cues -----------------------------------------------------------------------------
def cue_index(rt: Runtime, conn: Connection, tenant: str) -> CueIndex:
    """The tenant's use cues (the queries its memories were used for, embedded) and use
    counts, cached until the next use is recorded."""
    idx = rt.caches.cue_indexes.get(tenant)
    if idx is not None:
        return idx
    epoch = rt.caches.index_epoch(tenant)
    record = use_record(rt.sql, conn, tenant)
    ids = [mid for mid, _ in record.cues]
    queries = [q for _, q in record.cues]
    new = [q for q in dict.fromkeys(queries) if q not in rt.caches.cue_vectors]
    if new:
        rt.caches.cue_vectors.update(zip(new, (query_vector(rt, q) for q in new), strict=True))
    matrix = np.stack([rt.caches.cue_vectors[q] for q in queries]) if queries else None
    idx = CueIndex(ids=ids, queries=queries, matrix=matrix, uses=record.uses,
                   fails=record.fails)
    rt.caches.keep_index(rt.caches.cue_indexes, tenant, idx, epoch)
    return idx


def _cue_matches(weights: modes_mod.LifecyclePrior, qvec: np.ndarray, c: Candidates) -> None:
    """Step 3b (lifecycle mode): the best cue cosine with this query of each used memory
    that has a cue over ``cue_threshold`` (a lower one does not move its prior)."""
    idx = c.cues
    if idx is None or idx.matrix is None:
        return
    sims = idx.matrix @ qvec
    for j in np.nonzero(sims > weights.cue_threshold)[0].tolist():
        mid, sim = idx.ids[j], float(sims[j])
        if sim > c.cue_sims.get(mid, -1.0):
            c.cue_sims[mid] = sim


# -- 4. spreading -----------------------------------------------------------------------------
def _spread_bound(rt: Runtime, c: Candidates, req: RecallRequest) -> float:
    """The least spread activation that can still change what ``recall`` returns.

    Below the floor a memory is dropped anyway. And since spreading only raises
    activations, the k-th best seed score is a floor for the k-th best final score; a
    memory whose activation ``a`` gives at most ``w_sim*a + (1 - w_sim)`` (the lifecycle
    mode: ``a*ceiling + tie``) cannot beat it, so activations under the mode's
    ``least_activation(kth)`` need not be spread at all.
    """
    weights, k = req.weights, req.k
    if req.entity is not None or (isinstance(weights, modes_mod.ModeWeights)
                                  and weights.sim <= 0):
        return req.floor
    score, rows = _scorer(rt, req, c), c.rows
    scores = sorted([score(m, a) for m, a in c.seeds.items()
                     if m in rows and rows[m].consolidated_into is None], reverse=True)
    if len(scores) < k:
        return req.floor
    if isinstance(weights, modes_mod.LifecyclePrior):
        return max(req.floor, weights.least_activation(scores[k - 1], _ceiling(weights, c)))
    return max(req.floor, weights.least_activation(scores[k - 1]))


def _ceiling(weights: modes_mod.LifecyclePrior, c: Candidates) -> float:
    """The largest prior of this recall: 1 where nothing was used (the bound is then as
    tight as relevance's), else the best used memory's prior for this query."""
    cues = c.cues
    if cues is None or not cues.uses:
        return 1.0 + weights.practice_gain
    # the prior grows with uses and cue: without a cue match the most used memory has the
    # largest; the few with one are checked each
    best = weights.prior(uses=max(cues.uses.values()), practice=1.0)
    return max([best, *(weights.prior(uses=cues.uses.get(mid, 0), cue=sim, practice=1.0)
                        for mid, sim in c.cue_sims.items())])


class _Spreader:
    """The neighbours function of :func:`mnemonia.scoring.activation.spread`: reads the
    edges of a frontier from the side-store, strongest first, within the bound."""

    def __init__(self, rt: Runtime, conn: Connection, req: RecallRequest, c: Candidates,
                 bound: float) -> None:
        self.rt, self.conn, self.req, self.c, self.bound = rt, conn, req, c, bound
        self.topics = {mid: r.topic for mid, r in c.rows.items()}
        spread_types = set(act.RELATION_WEIGHTS) | set(rt.type_weights)
        self.type_weight = {t: act.relation_weight(t, rt.type_weights or None)
                            for t in spread_types}
        self.symmetric = sorted(act.SYMMETRIC_RELATIONS)
        self.decay = rt.config.spread_decay

    def __call__(self, given: Collection[str]) -> list[act.Edge]:
        level = given if isinstance(given, Mapping) else dict.fromkeys(given, 1.0)
        rows = self.c.rows
        frontier = {m for m, a in level.items() if a * self.decay >= self.bound
                    and m in rows and rows[m].has_edges}
        if not frontier:
            return []
        edges = self._choose(self._spread_lists(frontier), level)
        new = [i for i in {e.dst for e in edges} | {e.src for e in edges} if i not in rows]
        if new:
            rows.update(self.rt.sql.memories.rows(self.conn, self.req.tenant, new, edges=True,
                                                  kept=True, where=self.req.where))
            self.topics.update({i: rows[i].topic for i in new if i in rows})
        # Another topic does not stop spreading: the target is reached at x cross_topic_penalty
        # (scoring.activation.spread reads the topics).
        old = self.req.include_superseded
        return [e for e in edges
                if e.src in rows and e.dst in rows
                and visible(rows[e.src], None, old) and visible(rows[e.dst], None, old)]

    def _spread_lists(self, frontier: set[str]) -> dict[str, tuple[Any, ...]]:
        """``{id: what it spreads along}`` for ``frontier``: its edges of a spreading type
        (``Graph.edges_around``: those leaving it, and the strongest of the symmetric
        types that point at it), strongest first, as ``(-weight, other end, type, src,
        strength)``. Each memory's are read once and kept (:meth:`RecallCache.links_of`) until a
        write that changes them."""
        type_weight = self.type_weight

        def read(ask: list[str]) -> dict[str, tuple[Any, ...]]:
            got: dict[str, list[Any]] = {m: [] for m in ask}
            for src, dst, rtype, strength, incoming in self.rt.sql.graph.edges_around(
                    self.conn, self.req.tenant, ask, self.symmetric, EDGES_PER_SOURCE):
                tw = type_weight.get(rtype)
                if tw is None:
                    continue  # not a spreading type
                w = strength * tw
                if incoming:  # a symmetric edge: its target spreads back to its source
                    got[dst].append((-w, src, rtype, src, strength))
                else:
                    got[src].append((-w, dst, rtype, src, strength))
            return {m: tuple(sorted(out)) for m, out in got.items()}

        _whole_tenant(self.rt, self.conn, self.req.tenant, "spread", read)
        return self.rt.caches.links_of(self.req.tenant, "spread", frontier, read)

    def _choose(self, lists: Mapping[str, tuple[Any, ...]], level: Mapping[str, float]
                ) -> list[act.Edge]:
        """Each frontier memory spreads along its EDGES_PER_SOURCE strongest edges only,
        so a hub (a memory many others link to) costs no more than any other memory; and
        only along those whose spread can reach the bound (a list is strongest first, so
        the first that cannot ends it)."""
        decay, bound = self.decay, self.bound
        chosen: dict[tuple[str, str, str], act.Edge] = {}
        for source, out in lists.items():
            a = level[source]
            for nw, other, rtype, src, strength in out[:EDGES_PER_SOURCE]:
                if a * -nw * decay < bound:
                    break
                dst = other if src == source else source
                if (src, dst, rtype) not in chosen:
                    chosen[(src, dst, rtype)] = act.Edge(src=src, dst=dst, type=rtype,
                                                         strength=strength)
        return list(chosen.values())


# -- 5. scoring -------------------------------------------------------------------------------
def retention_of(rt: Runtime, r: Any, now: datetime) -> float:
    return ret.retained((now - from_ts(r.accessed_at)).total_seconds(), r.importance,
                        r.stability, rt.config.retention_half_life)


def practice_of(r: Any, now: datetime, half_hours: float) -> float:
    """The ACT-R strength of a memory row's accesses (0 when never accessed)."""
    if not r.access_count:
        return 0.0
    nowts = to_ts(now)
    return modes_mod.practice_strength(
        access_count=int(r.access_count), hours_since_access=(nowts - r.accessed_at) / 3600.0,
        lifetime_hours=(nowts - r.created_at) / 3600.0, half_hours=half_hours)


def final_score(rt: Runtime, r: Any, activation: float, weights: modes_mod.Mode,
                now: datetime, c: Candidates | None = None) -> float:
    """The mode's final score of one memory row at ``activation`` (``c``: the recall's use
    counts and cue matches, for the lifecycle mode)."""
    if isinstance(weights, modes_mod.LifecyclePrior):
        return weights.apply(min(1.0, activation), float(r.importance),
                             _prior(r, weights, now, c))
    if weights.is_relevance:
        return weights.sim * min(1.0, activation)  # relevance: nothing else to read
    R = retention_of(rt, r, now) if weights.rec > 0.0 else 0.0
    return modes_mod.final_score(activation=min(1.0, activation), importance=r.importance,
                                 retention=R, utility=r.utility, weights=weights)


def _scored(rt: Runtime, req: RecallRequest, c: Candidates, mid: str, activation: float
            ) -> float:
    """:func:`final_score` of a candidate in this recall, kept by activation (the spreading
    bound asks for every seed twice, and the ranking again for most of them)."""
    kept = c.scores.get(mid)
    if kept is not None and kept[0] == activation:
        return kept[1]
    score = final_score(rt, c.rows[mid], activation, req.weights, req.now, c)
    if c.cues is not None or not isinstance(req.weights, modes_mod.LifecyclePrior):
        c.scores[mid] = (activation, score)  # (the lifecycle prior: once the cues are known)
    return score


def _scorer(rt: Runtime, req: RecallRequest, c: Candidates) -> Callable[[str, float], float]:
    """``score(id, activation)``: a candidate's final score in this recall. The lifecycle
    mode's (the default) is computed here, each memory's prior once (known once the cues are
    matched); the other modes' by :func:`_scored`, kept per activation."""
    weights = req.weights
    if not isinstance(weights, modes_mod.LifecyclePrior) or c.cues is None:
        return functools.partial(_scored, rt, req, c)
    rows, priors, now = c.rows, c.priors, req.now

    def score(mid: str, activation: float) -> float:
        r = rows[mid]
        prior = priors.get(mid)
        if prior is None:
            prior = priors[mid] = _prior(r, weights, now, c)
        return weights.apply(min(1.0, activation), float(r.importance), prior)

    return score


def _prior(r: Any, weights: modes_mod.LifecyclePrior, now: datetime, c: Candidates | None
           ) -> float:
    """The lifecycle mode's prior of one memory row in this recall (its uses, failures, cue
    match and practice)."""
    practice = practice_of(r, now, weights.practice_half_hours) \
        if weights.practice_gain > 0 else 0.0
    if c is not None and c.cues is not None and (r.id in c.cues.uses or r.id in c.cues.fails):
        return weights.prior(uses=c.cues.uses.get(r.id, 0), fails=c.cues.fails.get(r.id, 0),
                             cue=c.cue_sims.get(r.id, 0.0), practice=practice)
    # never used: the prior is 1 (with practice off)
    return weights.prior(practice=practice) if practice else 1.0


def _ranked(rt: Runtime, req: RecallRequest, c: Candidates
            ) -> list[tuple[float, str, act.Activation]]:
    """Activated memories over the floor by final score: the top ``k``, then the first
    ``episode_k`` direct episode hits; members whose concept is present give way to it."""
    rows, score, floor = c.rows, _scorer(rt, req, c), req.floor
    prelim = [(score(mid, a.value), mid, a) for mid, a in c.activations.items()
              if a.value >= floor and mid in rows]
    prelim.sort(key=lambda t: (-t[0], t[1]))
    present = {mid for _, mid, _ in prelim}
    prelim = [t for t in prelim if rows[t[1]].consolidated_into not in present]
    if rt.reranker is not None and prelim:
        prelim = _rerank(rt, req, c, prelim)
    extra = [t for t in prelim[req.k:] if rows[t[1]].kind == "episode"
             and not (t[2].source and t[2].relation)][:req.episode_k]
    return prelim[:req.k] + extra


def _rerank(rt: Runtime, req: RecallRequest, c: Candidates,
            prelim: list[tuple[float, str, act.Activation]]
            ) -> list[tuple[float, str, act.Activation]]:
    """The cross-encoder re-scores the best ``rerank_candidates`` (at least ``k``):
    ``0.4*score + 0.6*sigmoid(logit)``; the rest keep their order after them."""
    n = max(req.k, rt.config.rerank_candidates)
    head, tail = prelim[:n], prelim[n:]
    logits = rt.reranker(req.query, [c.rows[mid].text for _, mid, _ in head])  # type: ignore[misc]
    blended = [(modes_mod.rerank_blend(score, logit), mid, a)
               for (score, mid, a), logit in zip(head, logits, strict=True)]
    for (_, mid, _), logit in zip(head, logits, strict=True):
        c.logits[mid] = logit
    blended.sort(key=lambda t: (-t[0], t[1]))
    return blended + tail


def _explanation(rt: Runtime, req: RecallRequest, r: Any, a: act.Activation | None,
                 meta: SeedInfo | None, score: float, links: tuple[Link, ...],
                 logit: float | None = None, uses: int = 0) -> Explanation:
    return Explanation(
        cosine=meta.cosine if meta else None, keyword=meta.keyword if meta else None,
        seed=a.seed if a is not None and a.seed > 0 else None,
        path=(a.source, a.relation) if a is not None and a.source and a.relation else None,
        entity=meta.entity if meta else req.entity if a is None else None,
        activation=a.value if a is not None else 1.0, importance=r.importance,
        retention=retention_of(rt, r, req.now), utility=r.utility, mode=req.mode, score=score,
        links=links, rerank=logit, uses=uses)


def _hits(rt: Runtime, conn: Connection, req: RecallRequest,
          ranked: list[tuple[float, str, act.Activation | None]], c: Candidates) -> list[Hit]:
    """Hits with explanations, contradiction and supersession links (with a summary of the
    other memory) for ``ranked`` ``(score, id, activation)``."""
    ids = [mid for _, mid, _ in ranked]
    # a row read with ``edges`` says whether the memory has any relation to look up
    links = _links(rt, conn, req.tenant,
                   [i for i in ids if getattr(c.rows[i], "has_edges", True)])
    others = {o for contra, sup in links.values() for o in (*contra, *sup)}
    others |= {c.rows[i].superseded_by for i in ids if c.rows[i].superseded_by}
    summaries = {o: summary(r.text) for o, r in rt.sql.memories.rows(
        conn, req.tenant, sorted(others), kept=True).items()} if others else {}
    hits = []
    for score, mid, a in ranked:
        r = c.rows[mid]
        contra, sup = links.get(mid, ((), ()))
        named = tuple(Link(kind=kind, id=o, summary=summaries.get(o, ""))
                      for kind, group in (("contradicts", contra), ("supersedes", sup),
                                          ("superseded_by", (r.superseded_by,)
                                           if r.superseded_by else ()))
                      for o in group) if contra or sup or r.superseded_by else ()
        exp = _explanation(rt, req, r, a, c.info.get(mid), score, named, c.logits.get(mid),
                           c.cues.uses.get(mid, 0) if c.cues is not None else 0)
        hits.append(Hit(memory=rt.sql.memories.to_memory(r), score=score, explanation=exp,
                        contradictions=contra, supersedes=sup, superseded_by=r.superseded_by))
    return hits


def _score(rt: Runtime, conn: Connection, req: RecallRequest, c: Candidates) -> list[Hit]:
    """Hits for the top ``k`` and, after them, for the first ``episode_k`` direct episode
    hits (what ``recall`` returns), so the work past scoring does not grow with the
    activated set."""
    ranked: list[tuple[float, str, act.Activation | None]] = list(_ranked(rt, req, c))
    return _hits(rt, conn, req, ranked, c)


def _links(rt: Runtime, conn: Connection, tenant: str, ids: list[str]
           ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """``{id: (the memories it contradicts, those it supersedes)}``, each memory's read once
    and kept (:meth:`RecallCache.links_of`) until a write that changes its relations."""

    def read(ask: list[str]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        contra: dict[str, set[str]] = {m: set() for m in ask}
        sup: dict[str, set[str]] = {m: set() for m in ask}
        for src, dst, rtype, _ in rt.sql.graph.typed_links(conn, tenant, ask, HIDDEN_RELATIONS):
            if rtype == "contradicts":
                for one, other in ((src, dst), (dst, src)):
                    if one in contra:
                        contra[one].add(other)
            elif src in sup:
                sup[src].add(dst)
        return {m: (tuple(sorted(contra[m])), tuple(sorted(sup[m]))) for m in ask}

    if not ids:
        return {}
    _whole_tenant(rt, conn, tenant, "hidden", read)
    return rt.caches.links_of(tenant, "hidden", ids, read)


def summary(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first line of ``text``, cut at a word to at most ``limit`` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) <= limit:
        return line
    return (line[:limit - 1].rsplit(" ", 1)[0] or line[:limit - 1]).rstrip() + "…"


def _entity_recall(rt: Runtime, req: RecallRequest) -> RecallResult:
    """``recall(entity=...)`` without a query: the entity's memories ranked by the lifecycle
    (the composite priority: importance, recency, access, retention)."""
    w = weights(rt.config)
    with rt.reading() as conn:
        ids = sorted(rt.sql.graph.entity_members(conn, req.tenant, req.entity or ""))
        c = Candidates(rows=rt.sql.memories.rows(conn, req.tenant, ids, where=req.where))
        shown = {i: r for i, r in c.rows.items() if visible(r, req.topic, req.include_superseded)}
        ranked = sorted(((priority_of(rt.config, r, req.now, w), i) for i, r in shown.items()
                         if r.consolidated_into not in shown), key=lambda t: (-t[0], t[1]))
        hits = _hits(rt, conn, req, [(p, i, None) for p, i in ranked[:req.k]], c)
    if req.touch and hits:
        _touch(rt, req, hits)
    return RecallResult(query=req.query, tenant=req.tenant, mode=req.mode, memories=hits)


# -- 7. side effects --------------------------------------------------------------------------
def _touch(rt: Runtime, req: RecallRequest, hits: list[Hit]) -> None:
    """The recall's accesses, written on the side-store's writer thread while the caller
    uses the answer (every later read of this process waits for them)."""
    cfg = rt.config
    if req.query:
        rt.caches.note_queries(req.tenant, [h.memory.id for h in hits], req.query)
    accessed = [(h.memory.id, h.score) for h in hits]
    at = to_ts(req.now)
    rt.sql.defer(lambda conn: rt.sql.events.record_access(
        conn, req.tenant, accessed, k=req.k, user_id=req.user_id, at=at,
        growth=cfg.stability_growth, cap=cfg.stability_cap),
        what=f"recording the accesses of a recall on tenant {req.tenant!r}",
        changes=[mid for mid, _ in accessed])
