"""Step 1 and 2 of recall (DESIGN section 5): the dense and keyword candidates, admitted
through the gate, and their fusion into seeds."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mnemonia.keywords import keyword_query
from mnemonia.recall.keywords import keyword_part, relevance
from mnemonia.recall.run import KeywordSide, RecallRequest, RecallRun, read
from mnemonia.recall.tenant import session_neighbours, tenant_size
from mnemonia.runtime import Runtime
from mnemonia.scoring import questions
from mnemonia.store.database import Connection
from mnemonia.store.exact import ExactScores
from mnemonia.store.vectors import VectorCollection
from mnemonia.validation import row_embed_text

__all__ = ["PREFILTER_LIMIT", "gather", "keyword_side", "nearest"]

PREFILTER_LIMIT = 2048
"""With a ``where`` condition, the dense pool widens by the share of neighbours that satisfy
it; when it would have to grow past this many, the matching memories are read by SQL and
ranked exactly by their stored vectors instead, if there are at most this many of them (else
the pool keeps widening)."""


def keyword_side(rt: Runtime, req: RecallRequest, col: VectorCollection, qtok: list[str]
                 ) -> KeywordSide:
    """The query's words and the keyword index's candidates with their rows and the stored
    vectors of the visible ones, read on a connection of its own (none needs the query
    vector, so this runs while the query is embedded; the gate's :func:`read` keeps the
    filter and the visibility rules)."""
    cfg = rt.config
    with rt.reading() as conn:
        gone = _left_out(rt, conn, req)
        kinds = questions.kind_terms(req.query) if cfg.slot_weight > 0 and req.query else None
        kq = keyword_query(rt, conn, req.tenant, qtok,
                           tenant_size(rt, conn, req.tenant) - len(gone), gone, kinds)
        hits = rt.sql.keywords.keyword_search(
            conn, req.tenant, kq.search,
            cfg.keyword_candidates and max(cfg.keyword_candidates, req.k),
            max_postings=cfg.keyword_postings, docs=kq.docs)
        rows: dict[str, Any] = {}
        shown = read(rt, conn, req, rows, [i for i, _ in hits])
        # the Python work first, the vectors' read (which releases the GIL) last: the query
        # vector is due by then, and the nearest neighbours are asked for on the main thread
        parts = {i: keyword_part(rt, rows[i], kq) for i in shown}
        around = session_neighbours(rt, conn, req.tenant, set(shown), cfg.context_window,
                                    rows) \
            if cfg.context_weight > 0 and cfg.context_window > 0 and shown else {}
        # (a mirrored collection gives every cosine with the query: nothing to read)
        vectors = rt.candidate_vectors(conn, col, shown) \
            if shown and not rt.vectors.mirrored(col) else {}
    return KeywordSide(query=kq, hits=hits, rows=rows, vectors=vectors, parts=parts,
                       around=around)


def _left_out(rt: Runtime, conn: Connection, req: RecallRequest) -> list[str]:
    """The indexed texts of the active memories ``req.exclude_ids`` names: recall scores as
    if they were not there, so their words do not count in the keyword statistics either."""
    if not req.exclude_ids:
        return []
    rows = rt.sql.memories.rows(conn, req.tenant, sorted(req.exclude_ids))
    return [row_embed_text(r) for r in rows.values() if r.deleted_at is None]


def nearest(rt: Runtime, col: VectorCollection, qvec: np.ndarray, n: int,
            exact: ExactScores | None) -> tuple[int, dict[str, float]]:
    """``(n, {id: cosine})``: the query's ``n`` nearest neighbours, best first (exact for a
    mirrored collection, else Chroma's HNSW answer)."""
    if exact is not None:
        ids, sims = exact.top(n)
        return n, dict(zip(ids, sims, strict=True))
    found, cosines = rt.vectors.query(col, qvec[None, :], n)
    return n, dict(zip(found[0], cosines[0], strict=True))


def gather(run: RecallRun, dense: tuple[int, dict[str, float]]) -> None:
    """Steps 1-2: the dense candidates (``dense``: the first round of :func:`nearest`), the
    pool widened until enough visible remain, then the keyword candidates, each admitted
    through the gate; those whose relevance reaches ``initial_threshold`` or whose cosine
    reaches ``min_similarity`` (all, with a zero floor) become seeds."""
    req, c = run.req, run.c
    n_dense, got = dense
    while True:
        shown = run.read(got)
        if len(shown) >= min(n_dense // 2, req.k) or len(got) < n_dense:
            break
        if req.where is None:
            n_dense *= 4
        else:
            # a filter: widen as far as its share of the neighbours says (twice over); when
            # that is far, a selective filter is cheaper read by SQL and ranked exactly
            wider = max(n_dense * 4, math.ceil(2 * n_dense * req.k / max(1, len(shown))))
            ranked = _prefiltered(run, n_dense) if wider > PREFILTER_LIMIT else None
            if ranked is not None:
                got = ranked
                break
            n_dense = wider
        n_dense, got = nearest(run.rt, run.col, run.qvec, n_dense, c.exact)
    admitted = run.admit(got, via="dense", known=got)
    # the keyword candidates (their stored vectors were read beside the embedding, unless
    # the collection is mirrored)
    first = set(admitted)
    admitted += [i for i in run.admit(run.side.parts, via="keyword") if i not in first]
    if not req.include_superseded:
        first = set(admitted)
        admitted += [i for i in _newer_versions(run, got) if i not in first]
    threshold, keep_all = run.rt.config.initial_threshold, req.floor == 0
    for mid in admitted:
        fused = c.info[mid].fused
        if fused >= threshold or keep_all or run.similar(mid):
            c.seeds[mid] = fused


VERSION_HOPS = 8
"""How far a chain of supersessions is followed to the current version."""


def _newer_versions(run: RecallRun, dense: dict[str, float]) -> list[str]:
    """Step 2 for updated facts: a dense or keyword candidate that recall hides because a
    newer memory superseded it brings the current version of its fact in, with the old
    one's relevance when that is higher. A later version is often worded unlike the
    question ("I don't have a manager anymore" for "who do I report to?"), while the first
    statement matched it: the match belongs to the fact, and the fact's current value is
    the newer memory. Returns the versions admitted."""
    c = run.c
    hidden = {i: dense.get(i) for i in (*dense, *(i for i, _ in run.side.hits))
              if i in c.rows and c.rows[i].superseded_by is not None
              and c.rows[i].deleted_at is None and i not in run.req.exclude_ids}
    if not hidden:
        return []
    unknown = [i for i, cos in hidden.items() if cos is None]
    cosines = run.cosines(unknown) if unknown else {}
    known = {old: cos for old, got in hidden.items()
             if (cos := cosines.get(old) if got is None else got) is not None}
    currents = _currents(run, list(known))
    inherited: dict[str, float] = {}
    for old, current in currents.items():
        _, fused = relevance(run.rt, c.rows[old], known[old], run.kq)
        inherited[current] = max(inherited.get(current, 0.0), fused)
    admitted = run.admit(sorted(inherited), via="update")
    for mid in admitted:
        info = c.info[mid]
        if inherited[mid] > info.fused:
            info.fused = info.seed = inherited[mid]
    return admitted


def _currents(run: RecallRun, olds: list[str]) -> dict[str, str]:
    """``{old: the newest version of its fact recall may show}`` for those of ``olds`` that
    have one (following ``superseded_by`` at most :data:`VERSION_HOPS` times), the versions
    of every chain read at once, one read per hop: in server mode a read is a round trip."""
    rows = run.c.rows
    at = {old: old for old in olds}  # old -> the version reached, hidden too
    out: dict[str, str] = {}
    for _ in range(VERSION_HOPS):
        nxt = {old: n for old, mid in at.items() if (n := rows[mid].superseded_by) is not None}
        if not nxt:
            break
        shown = set(run.read(dict.fromkeys(nxt.values())))
        # a version recall may show ends its chain; one read but hidden (superseded in turn)
        # goes on; one not read (deleted, or filtered out) ends it without a version
        out.update({old: n for old, n in nxt.items() if n in shown})
        at = {old: n for old, n in nxt.items() if n not in shown and n in rows}
    return out


def _prefiltered(run: RecallRun, n: int) -> dict[str, float] | None:
    """The ``n`` memories matching ``req.where`` nearest to the query, ranked exactly by their
    stored vectors (their rows read through the gate), when at most :data:`PREFILTER_LIMIT`
    match: a selective filter, for which widening the nearest neighbours would read most of
    the tenant to find enough. ``None`` when more match (widening then finds them soon)."""
    req = run.req
    if req.where is None:
        return None
    ids = run.rt.sql.items.matching_ids(run.conn, req.tenant, req.where, PREFILTER_LIMIT + 1)
    if len(ids) > PREFILTER_LIMIT:
        return None
    cosines = run.cosines(ids)
    order = list(cosines)
    if not order:
        return {}
    sims = np.array([cosines[i] for i in order])
    got = {order[j]: float(sims[j]) for j in np.argsort(-sims, kind="stable")[:n]}
    run.read(got)
    return got
