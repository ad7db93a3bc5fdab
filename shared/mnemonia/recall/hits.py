"""Step 6 and 7 of recall: hits with their explanations, contradictions and supersession
links, and the side effects of a recall (access counts, stability, the access log)."""

from __future__ import annotations

from typing import Any

from mnemonia.clock import to_ts
from mnemonia.models import Explanation, Hit, Link
from mnemonia.ranking import retention_of
from mnemonia.recall.run import Candidates, RecallRequest, SeedInfo
from mnemonia.recall.tenant import hidden_links
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.store.database import Connection

__all__ = ["SUMMARY_CHARS", "explanation", "hits", "summary", "touch"]

SUMMARY_CHARS = 80
"""Length of the one-line summary of a linked memory in a hit."""


def explanation(rt: Runtime, req: RecallRequest, r: Any, a: act.Activation | None,
                 meta: SeedInfo | None, score: float, links: tuple[Link, ...],
                 logit: float | None = None, uses: int = 0) -> Explanation:
    return Explanation(
        cosine=meta.cosine if meta else None, keyword=meta.keyword if meta else None,
        seed=a.seed if a is not None and a.seed > 0 else None,
        path=(a.source, a.relation) if a is not None and a.source and a.relation else None,
        entity=meta.entity if meta else req.entity if a is None else None,
        activation=a.value if a is not None else 1.0, importance=r.importance,
        retention=retention_of(rt.config, r, req.now), utility=r.utility, mode=req.mode,
        score=score, links=links, rerank=logit, uses=uses)


def hits(rt: Runtime, conn: Connection, req: RecallRequest,
          ranked: list[tuple[float, str, act.Activation | None]], c: Candidates) -> list[Hit]:
    """Hits with explanations, contradiction and supersession links (with a summary of the
    other memory) for ``ranked`` ``(score, id, activation)``."""
    ids = [mid for _, mid, _ in ranked]
    # a row read with ``edges`` says whether the memory may have a relation to look up
    links = hidden_links(rt, conn, req.tenant,
                   [i for i in ids if getattr(c.rows[i], "has_edges", True)])
    others = {o for contra, sup in links.values() for o in (*contra, *sup)}
    others |= {c.rows[i].superseded_by for i in ids if c.rows[i].superseded_by}
    summaries = {o: summary(r.text) for o, r in rt.sql.memories.rows(
        conn, req.tenant, sorted(others), kept=True).items()} if others else {}
    # the evidence of detected supersessions: on the older memory of each pair
    olds = {o for _, sup in links.values() for o in sup}
    olds |= {i for i in ids if c.rows[i].superseded_by}
    evidence = rt.sql.events.evidence_of(conn, req.tenant, sorted(olds)) if olds else {}

    def why(kind: str, mid: str, other: str) -> str:
        old, new = (other, mid) if kind == "supersedes" else (mid, other)
        ev = evidence.get(old) if kind != "contradicts" else None
        if not ev or ev.get("superseded_by") != new:
            return ""
        cue = f", cue '{ev['cue']}'" if ev.get("cue") else ""
        return (f"{ev.get('slot', '')}: {ev.get('old_value', '')} -> {ev.get('new_value', '')}"
                f"{cue}, confidence {ev.get('confidence', '')}")

    hits = []
    for score, mid, a in ranked:
        r = c.rows[mid]
        contra, sup = links.get(mid, ((), ()))
        named = tuple(Link(kind=kind, id=o, summary=summaries.get(o, ""),
                           evidence=why(kind, mid, o))
                      for kind, group in (("contradicts", contra), ("supersedes", sup),
                                          ("superseded_by", (r.superseded_by,)
                                           if r.superseded_by else ()))
                      for o in group) if contra or sup or r.superseded_by else ()
        exp = explanation(rt, req, r, a, c.info.get(mid), score, named, c.logits.get(mid),
                           c.cues.uses.get(mid, 0) if c.cues is not None else 0)
        hits.append(Hit(memory=rt.sql.memories.to_memory(r), score=score, explanation=exp,
                        contradictions=contra, supersedes=sup, superseded_by=r.superseded_by))
    return hits


def summary(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first line of ``text``, cut at a word to at most ``limit`` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) <= limit:
        return line
    return (line[:limit - 1].rsplit(" ", 1)[0] or line[:limit - 1]).rstrip() + "…"


def touch(rt: Runtime, req: RecallRequest, hits: list[Hit]) -> None:
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
