"""Knowledge updates: a new memory that states a new value for what an older memory of the
same tenant stated supersedes it, with no LLM (DESIGN section 5b).

:func:`detect` runs inside ingest's write transaction, for every new memory (whatever the
gatekeeper's state): its candidates are the memories the vector index already found
nearest to it at ingest, plus the keyword index's best matches for the values it names
(never a scan of the tenant). Each candidate pair is read by
:func:`mnemonia.scoring.statements.decide` in the order of the memories' own time
(``at``), not of insertion: importing an older statement after a newer one supersedes the
older one. The decision is an event with its evidence (the slot, both values, the cue, the
confidence); a pair the user kept apart (``engine.unsupersede``) is never decided again.
Nothing is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from mnemonia import lifecycle
from mnemonia import validation as check
from mnemonia.clock import from_ts
from mnemonia.runtime import Runtime
from mnemonia.scoring import statements
from mnemonia.validation import PreparedMemory

__all__ = ["KEYWORD_CANDIDATES", "detect", "judge", "read_ahead"]

log = logging.getLogger("mnemonia.updates")

KEYWORD_CANDIDATES = 8
"""Keyword-index matches on a new memory's values read as candidates, beside its vector
neighbours."""

Near = list[tuple[str, float]]
Fact = tuple[str, str | None, float, str | None]
"""A memory as detection reads it: text, speaker, its own time, what supersedes it."""


def judge(old_text: str, old_speaker: str | None, new_text: str, new_speaker: str | None,
          threshold: float) -> statements.Decision | None:
    """The most confident decision over the clause pairs of two memories (``old`` the
    earlier), or None; of equally confident ones, the first that names the new value."""
    best: statements.Decision | None = None
    later = [b for b in statements.analyse(new_text, new_speaker) if statements.may_replace(b)]
    if not later:  # nothing the later text says can replace a value: no need to read the older
        return None
    for a in statements.analyse(old_text, old_speaker):
        for b in later:
            d = statements.decide(a, b, threshold=threshold)
            if d is not None and (best is None or (d.confidence, d.new_value != new_text)
                                  > (best.confidence, best.new_value != new_text)):
                best = d
    return best


def _value_words(p: PreparedMemory) -> list[str]:
    words: list[str] = []
    for s in statements.analyse(p.text, p.metadata.get("speaker")):
        for v in sorted(s.values):
            words += [w for w in v.split() if len(w) > 2]
    return list(dict.fromkeys(words))


def _slot_words(p: PreparedMemory) -> list[str]:
    """For a retraction or a change of a known kind of fact ("I don't have a manager
    anymore"): its subject (a named one, or the speaker, whose name the keyword index holds)
    and the words of that kind, to find the older statements of the slot, which may share no
    value and few words with it."""
    speaker = p.metadata.get("speaker")
    words: list[str] = []
    for s in statements.analyse(p.text, speaker):
        if not s.asserts or s.attribute is None or not (s.retraction or s.cue):
            continue
        who, _, name = s.subject.partition(":")
        subject = name if who == "name" else speaker if who == "self" else None
        if subject:
            words += [w for w in subject.lower().split() if len(w) > 2]
            words += statements.kind_words(s.attribute)
    return list(dict.fromkeys(words))


def _search_words(p: PreparedMemory) -> list[list[str]]:
    """The keyword searches of a new memory: its values' words and, for a retraction or a
    change, its slot's words (lower-cased, as the keyword index folds them)."""
    out = []
    for words in (_value_words(p), _slot_words(p)):
        folded = list(dict.fromkeys(w.lower() for w in words))
        if folded:
            out.append(folded)
    return out


def _searches(rt: Runtime, conn: Any, tenant: str, items: Sequence[PreparedMemory]
              ) -> tuple[dict[str, list[list[str]]], dict[str, int]]:
    """Each new memory's keyword searches, and the tenant's document counts of all their
    words, read at once (each search would read its own: in server mode a round trip per
    memory)."""
    searches = {p.id: _search_words(p) for p in items}
    words = sorted({w for found in searches.values() for ws in found for w in ws})
    return searches, rt.sql.keywords.term_docs(conn, tenant, words) if words else {}


def _keyword_candidates(rt: Runtime, conn: Any, tenant: str, p: PreparedMemory,
                        searches: list[list[str]], docs: dict[str, int]) -> set[str]:
    """The keyword index's best matches for a new memory's values and, for a retraction or
    a change, for its slot's words (never the memory itself); ``searches`` and ``docs``
    from :func:`_searches`."""
    ids: set[str] = set()
    for words in searches:
        ids.update(o for o, _ in rt.sql.keywords.keyword_search(
            conn, tenant, words, KEYWORD_CANDIDATES, docs=docs) if o != p.id)
    return ids


def read_ahead(rt: Runtime, tenant: str, items: Sequence[PreparedMemory]) -> None:
    """What :func:`detect` will read of a batch that needs no vector, read while the model
    embeds it (on a helper thread: the model releases the interpreter): the statements of
    the new texts and of their keyword candidates, which :func:`statements.analyse` keeps
    per text. Only a cache is filled: :func:`detect` reads everything again inside the
    write, so a memory stored meanwhile is not missed.

    ``add_many`` of 1,000 memories on a 10,000-memory store (``benchmarks/speed.py``): the
    statement analysis was ~20% of it, after the embedding (~60%)."""
    if not rt.config.detect_updates or not items:
        return
    with rt.reading() as conn:
        wanted: set[str] = set()
        searches, docs = _searches(rt, conn, tenant, items)
        for p in items:
            wanted |= _keyword_candidates(rt, conn, tenant, p, searches[p.id], docs)
        rows = rt.sql.memories.rows(conn, tenant, sorted(wanted)) if wanted else {}
    for r in rows.values():
        statements.analyse(r.text, check.row_speaker(r))


def detect(rt: Runtime, conn: Any, tenant: str, items: Sequence[tuple[PreparedMemory, Near]],
           nowts: float) -> int:
    """Supersessions and contradictions between new memories and their candidates (other
    new ones of the batch included); returns the decisions recorded."""
    cfg = rt.config
    if not cfg.detect_updates or not items:
        return 0
    new = {p.id: p for p, _ in items}
    cands: dict[str, set[str]] = {}
    searches, docs = _searches(rt, conn, tenant, [p for p, _ in items])
    for p, near in items:
        cands[p.id] = {o for o, _ in near if o != p.id} | _keyword_candidates(
            rt, conn, tenant, p, searches[p.id], docs)
    wanted = sorted({o for ids in cands.values() for o in ids} - set(new))
    rows = rt.sql.memories.rows(conn, tenant, wanted) if wanted else {}
    kept_apart = rt.sql.events.kept_apart(conn, tenant, sorted({*new, *wanted}))

    def facts(mid: str) -> Fact | None:
        if mid in new:
            p = new[mid]
            return p.text, p.metadata.get("speaker"), p.at, None
        r = rows.get(mid)
        if r is None or r.deleted_at is not None or r.kind == "concept":
            return None
        return r.text, check.row_speaker(r), float(r.created_at), r.superseded_by

    decided = 0
    superseded: dict[str, str | None] = {}  # this batch's decisions: old -> new
    done: set[frozenset[str]] = set()
    for p, _ in items:
        for other in sorted(cands[p.id]):
            pair = frozenset((p.id, other))
            if pair in done or pair in kept_apart:
                continue
            done.add(pair)
            a, b = facts(p.id), facts(other)
            if a is None or b is None:
                continue
            # the earlier statement is the old one; equal times keep insertion order
            (old_id, old), (new_id, nw) = sorted(
                ((p.id, a), (other, b)),
                key=lambda t: (t[1][2], 0 if t[0] != p.id else 1))
            d = judge(old[0], old[1], nw[0], nw[1], cfg.update_threshold)
            if d is None:
                continue
            if d.kind == "contradicts":
                rt.sql.graph.upsert_relation(conn, tenant, new_id, old_id, "contradicts",
                                             min(1.0, d.confidence), nowts)
                rt.sql.events.event(conn, tenant, new_id, "contradiction", nowts, None,
                                    {"contradicts": old_id, "evidence": d.evidence()})
                decided += 1
                continue
            if not _nearer(nw[2], superseded.get(old_id, old[3]), facts):
                continue
            superseded[old_id] = new_id
            lifecycle.supersede_in(rt, conn, tenant, old_id, new_id, from_ts(nowts),
                                   d.evidence())
            decided += 1
    if decided:
        log.info("updates tenant=%s decided=%d", tenant, decided)
    return decided


def _nearer(at: float, current: str | None, facts: Callable[[str], Fact | None]) -> bool:
    """Whether a version at ``at`` should supersede a memory superseded by ``current`` (or
    by nothing): only a nearer newer version takes the place of the one it has, so any order
    of adding gives the same chain; a superseder not read here is left in place."""
    if current is None:
        return True
    then = facts(current)
    return then is not None and then[2] > at
