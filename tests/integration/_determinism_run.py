"""One run of ``test_determinism``, in a process of its own (its own ``PYTHONHASHSEED``).

``python _determinism_run.py STORE DATA SAMPLE_ID TURNS OUT`` ingests the first ``TURNS`` turns
of a LoCoMo conversation as an application on a :class:`ManualClock` would: one ``add_many``
per session with the clock at the session's last turn, the background maintenance jobs running
on the clock's moves (enrichment, consolidation, review, re-evaluation, ...). After the second
session three near-duplicate notes are added at the clock's time (equal priorities, so
consolidation's order among them is a tie). At the ask time a few questions are recalled with
``touch=True`` (access counts, the access log), the clock moves on an hour (the jobs run
again), then every scored question of the prefix is recalled with ``recall(k=20, touch=False,
min_activation=0)``.

It writes to ``OUT`` what it made, keyed by the turns' ``dia_id`` (a note, a concept: by its
kind and text), never by memory id (random uuids): every memory's state, every relation, and
the rankings with their scores.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

from benchmarks.locomo_data import load_locomo, scored_questions

TURN_SPACING = timedelta(seconds=10)
NOTES = (
    "Caroline said the LGBTQ support group meeting was really powerful.",
    "Caroline said that the LGBTQ support group meeting was really powerful.",
    "Caroline said the LGBTQ support group meeting was really powerful for her.",
)
TOUCHED = 8  # questions recalled with touch=True before the rankings


def run(store: Path, data: Path, sample_id: str, turns: int) -> dict[str, Any]:
    conv = next(c for c in load_locomo(data) if c.sample_id == sample_id)
    kept = conv.turns[:turns]
    present = {t.dia_id for t in kept}
    questions = [q.question for q in scored_questions(conv) if set(q.evidence) <= present]
    sessions: dict[int, list[Any]] = {}
    for t in kept:
        sessions.setdefault(t.session, []).append(t)
    clock = ManualClock(conv.sessions[min(sessions)])
    tenant = sample_id
    with MemoryEngine.open(store, config=MnemoniaConfig(), clock=clock,
                           embedder=HashingEmbedder(), maintenance="background") as engine:
        for n, number in enumerate(sorted(sessions)):
            start, said = conv.sessions[number], sessions[number]
            clock.set(start + (len(said) - 1) * TURN_SPACING)  # the jobs due run here
            engine.add_many([{
                "text": t.text, "speaker": t.speaker, "at": start + i * TURN_SPACING,
                "session_id": f"{sample_id}-S{number}", "metadata": {"dia_id": t.dia_id},
            } for i, t in enumerate(said)], tenant=tenant)
            if n == 1:
                engine.add_many([{"text": text} for text in NOTES], tenant=tenant)
        clock.set(conv.ask_time)
        for q in questions[:TOUCHED]:
            engine.recall(q, tenant=tenant, k=5, user_id="reader")
        clock.advance(timedelta(hours=1))
        rankings = {q: [(h.memory.id, h.score) for h in engine.recall(
            q, tenant=tenant, k=20, touch=False, min_activation=0).memories]
            for q in questions}
        return _keyed(engine, tenant, rankings)


def _keyed(engine: MemoryEngine, tenant: str, rankings: dict[str, Any]) -> dict[str, Any]:
    memories = engine.list(tenant=tenant, include_deleted=True)
    key = {m.id: m.metadata.get("dia_id") or f"{m.kind}: {m.text}" for m in memories}
    relations = {(r.src, r.dst, r.type): r for m in memories
                 for r in engine.relations(m.id, tenant=tenant)}.values()
    return {
        "memories": {key[m.id]: {
            "state": m.state, "entities": list(m.entities), "importance": m.importance,
            "consolidated_into": key.get(m.consolidated_into or ""),
            "superseded_by": key.get(m.superseded_by or ""), "deleted": m.deleted_at is not None,
            "access_count": m.access_count, "stability": m.stability, "utility": m.utility,
            "sm2": [m.sm2.easiness, m.sm2.interval_days, m.sm2.repetitions,
                    None if m.sm2.next_review is None else m.sm2.next_review.isoformat()],
        } for m in memories},
        "relations": sorted([key.get(r.src, r.src), key.get(r.dst, r.dst), r.type,
                             repr(float(r.strength))] for r in relations),
        "rankings": {q: [[key.get(mid, mid), repr(float(score))] for mid, score in hits]
                     for q, hits in rankings.items()},
    }


if __name__ == "__main__":
    store, data, sample_id, turns, out = sys.argv[1:]
    Path(out).write_text(json.dumps(run(Path(store), Path(data), sample_id, int(turns))))
