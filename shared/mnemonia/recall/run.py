"""One recall call: its request (:class:`RecallRequest`), its state (:class:`RecallRun`), and
the one gate every candidate passes (:meth:`RecallRun.admit`).

Whatever brings a memory into recall (the dense neighbours, the keyword index, a session
neighbour, an entity, a relation spread along) hands its ids to the gate, which reads their
rows with the request's filter, drops those recall must not show, computes their cosine with
the query and their relevance (cosine fused with the keyword score), and records how each came
in. So a candidate source cannot forget the filter or a visibility rule, and every source
scores the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import numpy as np

from mnemonia.caches import CueIndex
from mnemonia.keywords import KeywordQuery
from mnemonia.recall.keywords import relevance
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring.questions import asks_about_past
from mnemonia.store.database import Connection
from mnemonia.store.exact import ExactScores
from mnemonia.store.statements import SqlCondition
from mnemonia.store.vectors import VectorCollection
from mnemonia.validation import RecallArgs

__all__ = ["VIA", "Candidates", "KeywordSide", "RecallRequest", "RecallRun", "SeedInfo",
           "cosines", "read", "visible"]

VIA = ("dense", "keyword", "context", "entity", "update")
"""How a scored candidate came in (:attr:`SeedInfo.via`): the query's nearest neighbours, the
keyword index, a session neighbour of a strong candidate, an entity the query names or
resembles, the current version of a candidate a newer memory superseded. Memories reached
by spreading pass :func:`read` only (they are not scored by the query)."""


@dataclass(frozen=True)
class RecallRequest(RecallArgs):
    """One checked ``recall`` call: its checked arguments (:class:`RecallArgs`), the time it
    runs at and an optional filter."""

    now: datetime
    where: SqlCondition | None = None  # only memories matching it (a store search's filter)

    @classmethod
    def of(cls, args: RecallArgs, *, now: datetime, where: SqlCondition | None = None
           ) -> RecallRequest:
        """The request for ``recall``'s checked arguments (:func:`validation.recall_args`)
        at ``now``, with an optional filter."""
        checked = {f.name: getattr(args, f.name) for f in fields(RecallArgs)}
        # a question about an old value ("where did I live before Denver?") may need the
        # superseded version: it is shown too, marked SUPERSEDED BY
        checked["include_superseded"] = args.include_superseded or asks_about_past(args.query)
        return cls(**checked, now=now, where=where)


@dataclass(slots=True)
class SeedInfo:
    """How a memory entered recall: its cosine, keyword share, seed (its relevance, then
    lifted by its context), relevance (``fused``), the entity that boosted it, and ``via``."""

    cosine: float | None
    keyword: float
    seed: float | None
    fused: float = 0.0
    entity: str | None = None
    via: str = "dense"


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


def visible(r: Any, topic: str | None, superseded: bool = False) -> bool:
    """Not deleted, not superseded (unless ``superseded`` asks for them too), and in the
    topic (or untopiced) when one is asked."""
    if r.deleted_at is not None or (r.superseded_by is not None and not superseded):
        return False
    return topic is None or r.topic is None or r.topic == topic


def read(rt: Runtime, conn: Connection, req: RecallRequest, rows: dict[str, Any],
         ids: Iterable[str], *, topic: bool = True) -> list[str]:
    """The first half of the gate: the rows of ``ids`` not yet in ``rows`` read into it
    (with the request's filter: a row that does not match it is not read), and those of
    ``ids`` recall may show, in their order. ``topic=False``: the request's topic does not
    hide a memory (spreading reaches other topics, at a penalty)."""
    ids = list(ids)
    new = [i for i in ids if i not in rows]
    if new:
        rows.update(rt.sql.memories.rows(conn, req.tenant, new, edges=True, where=req.where,
                                         kept=True))
    shown_topic = req.topic if topic else None
    return [i for i in ids if i in rows and i not in req.exclude_ids
            and visible(rows[i], shown_topic, req.include_superseded)]


def cosines(rt: Runtime, conn: Connection, col: VectorCollection, qvec: np.ndarray,
            ids: Sequence[str], exact: ExactScores | None,
            known: Mapping[str, np.ndarray] | None = None) -> dict[str, float]:
    """``{id: cosine with the query}`` of ``ids``: from the exact scores of a mirrored
    collection, else (and for any it lacks) from their stored vectors (``known``: those
    already read)."""
    out = exact.of(ids) if exact is not None else {}
    rest = [i for i in ids if i not in out]
    if rest:
        vecs = {i: known[i] for i in rest if i in known} if known else {}
        need = [i for i in rest if i not in vecs]
        if need:
            vecs.update(rt.candidate_vectors(conn, col, need))
        out.update({i: float(v @ qvec) for i, v in vecs.items()})
    return out


@dataclass
class RecallRun:
    """One recall call: the runtime, its read connection, the request, the query (vector,
    tokens, keyword side), the collection, and the candidates read so far (``c``). The steps
    of the pipeline are functions of the run."""

    rt: Runtime
    conn: Connection
    req: RecallRequest
    col: VectorCollection
    qvec: np.ndarray
    qtok: list[str]
    side: KeywordSide
    c: Candidates

    @property
    def kq(self) -> KeywordQuery:
        return self.side.query

    def similar(self, mid: str) -> bool:
        """Whether a candidate's cosine with the query reaches ``min_similarity``: it then
        passes the seed threshold and the floor whatever its keyword share (a paraphrase
        that shares no word with the question)."""
        cos = self.c.cos.get(mid)
        return cos is not None and cos >= self.rt.config.min_similarity

    def read(self, ids: Iterable[str], *, topic: bool = True) -> list[str]:
        """:func:`read` into this run's rows."""
        return read(self.rt, self.conn, self.req, self.c.rows, ids, topic=topic)

    def cosines(self, ids: Sequence[str]) -> dict[str, float]:
        """:func:`cosines` of ``ids`` with this run's query (the keyword side's vectors
        already read are used)."""
        return cosines(self.rt, self.conn, self.col, self.qvec, ids, self.c.exact,
                       self.side.vectors)

    def admit(self, ids: Iterable[str], *, via: str,
              known: Mapping[str, float] | None = None) -> list[str]:
        """The gate: read the rows of ``ids`` (with the filter), keep the visible ones,
        compute the cosine (``known``: cosines the source already has) and relevance of those
        not admitted before and record them with ``via``. A memory whose vector cannot be read
        has no cosine and is not admitted. Returns the admitted ids, in their order (those
        admitted before included)."""
        if via not in VIA:
            raise ValueError(f"via={via!r}: must be one of {VIA}")
        c = self.c
        shown = self.read(ids)
        fresh = [i for i in shown if i not in c.info]
        if known is not None:
            c.cos.update({i: known[i] for i in fresh if i in known and i not in c.cos})
        need = [i for i in fresh if i not in c.cos]
        if need:
            c.cos.update(self.cosines(need))
        parts = self.side.parts
        for i in fresh:
            cos = c.cos.get(i)
            if cos is None:
                continue
            kw, fused = relevance(self.rt, c.rows[i], cos, self.kq, parts.get(i))
            c.info[i] = SeedInfo(cosine=cos, keyword=kw, seed=fused, fused=fused, via=via)
        return [i for i in shown if i in c.info]
