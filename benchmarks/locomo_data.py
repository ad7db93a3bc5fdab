"""LoCoMo loader, evidence repair and retrieval metric (recall@k over turns).

Data: ``/work/shared/bench/locomo-dev.json`` (see the README next to it; CC BY-NC 4.0,
evaluation only, never ship it inside a package).

Evidence repair rule (``repair_evidence``), applied to every raw evidence string:

1. Split the string on ``;``, ``,`` and whitespace (``"D8:6; D9:17"`` -> two ids).
2. A piece that is an existing ``dia_id`` of the conversation is kept as is.
3. Otherwise take the integers in the piece and build candidate ids from consecutive
   pairs: ``(a, b)`` -> ``Da:b``; ``(a, b, c)`` -> ``Da:b``, ``Db:c`` and ``Da:c``.
   If exactly one candidate exists in the conversation, use it (``"D:11:26"`` -> ``D11:26``).
4. Anything else is dropped: no integers (``"D"``), a well-formed id that does not exist
   (``"D10:19"`` when session 10 has 16 turns), or several existing candidates
   (``"D10:19:22"`` when both ``D10:19`` and ``D10:22`` exist).

Repaired ids are de-duplicated, keeping first-seen order. Scored questions are those of
categories 1-4 (multi-hop, temporal, open-domain, single-hop) whose repaired evidence is
non-empty; category 5 (adversarial) is never scored.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path("/work/shared/bench/locomo-dev.json")
SCORED_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
DEFAULT_KS = (5, 10, 20)

_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_TIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*", re.I
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        [
            "january", "february", "march", "april", "may", "june",
            "july", "august", "september", "october", "november", "december",
        ]
    )
}  # fmt: skip


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    blip_caption: str | None
    session: int
    session_time: datetime  # aware, UTC
    rendered: str  # 'Speaker said, "text"' [+ ' and shared <blip_caption>']


@dataclass(frozen=True)
class Question:
    question: str
    answer: Any  # str in most cases, sometimes int; absent (None) for some category-5 items
    category: int
    evidence: list[str]  # repaired dia_ids, all existing in the conversation
    raw_evidence: list[str] = field(default_factory=list)


@dataclass
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: list[Turn]  # in session then turn order
    sessions: dict[int, datetime]  # session number -> aware UTC time (sessions with turns)
    questions: list[Question]
    ask_time: datetime  # one day after the last session's time

    def turn(self, dia_id: str) -> Turn:
        return self._by_id()[dia_id]

    def _by_id(self) -> dict[str, Turn]:
        cache = self.__dict__.get("_turn_index")
        if cache is None:
            cache = {t.dia_id: t for t in self.turns}
            self.__dict__["_turn_index"] = cache
        return cache


def parse_session_time(s: str) -> datetime:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"`` into an aware UTC datetime."""
    m = _DATE_TIME.fullmatch(s)
    if not m:
        raise ValueError(f"unrecognised LoCoMo date-time: {s!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    mon = _MONTHS.get(month.lower())
    if mon is None:
        raise ValueError(f"unrecognised month in {s!r}")
    return datetime(int(year), mon, int(day), h, int(minute), tzinfo=UTC)


def render_turn(speaker: str, text: str, blip_caption: str | None = None) -> str:
    """``Speaker said, "text"`` plus `` and shared <blip_caption>`` when there is one."""
    out = f'{speaker} said, "{text}"'
    if blip_caption:
        out += f" and shared {blip_caption}"
    return out


def repair_evidence(raw: Iterable[str], valid_ids: set[str] | frozenset[str]) -> list[str]:
    """Repair raw evidence ids against the conversation's ids (rule in the module docstring)."""
    out: list[str] = []
    for item in raw:
        for piece in re.split(r"[;,\s]+", str(item)):
            if not piece:
                continue
            fixed = _repair_one(piece, valid_ids)
            if fixed is not None and fixed not in out:
                out.append(fixed)
    return out


def _repair_one(piece: str, valid_ids: set[str] | frozenset[str]) -> str | None:
    if piece in valid_ids:
        return piece
    nums = [int(x) for x in re.findall(r"\d+", piece)]
    if len(nums) < 2:
        return None
    pairs = list(itertools.pairwise(nums))
    if len(nums) == 3:
        pairs.append((nums[0], nums[2]))
    cands = {f"D{a}:{b}" for a, b in pairs} & set(valid_ids)
    return cands.pop() if len(cands) == 1 else None


def _parse_sample(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    session_nums = sorted(
        int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)) and conv[k]
    )
    turns: list[Turn] = []
    sessions: dict[int, datetime] = {}
    for n in session_nums:
        when = parse_session_time(conv[f"session_{n}_date_time"])
        sessions[n] = when
        for t in conv[f"session_{n}"]:
            cap = t.get("blip_caption") or None
            turns.append(
                Turn(
                    dia_id=t["dia_id"],
                    speaker=t["speaker"],
                    text=t["text"],
                    blip_caption=cap,
                    session=n,
                    session_time=when,
                    rendered=render_turn(t["speaker"], t["text"], cap),
                )
            )
    valid = frozenset(t.dia_id for t in turns)
    questions = [
        Question(
            question=q["question"],
            answer=q.get("answer", q.get("adversarial_answer")),
            category=int(q["category"]),
            evidence=repair_evidence(q.get("evidence", []), valid),
            raw_evidence=list(q.get("evidence", [])),
        )
        for q in sample.get("qa", [])
    ]
    last = sessions[session_nums[-1]]
    return Conversation(
        sample_id=sample["sample_id"],
        speaker_a=conv["speaker_a"],
        speaker_b=conv["speaker_b"],
        turns=turns,
        sessions=sessions,
        questions=questions,
        ask_time=last + timedelta(days=1),
    )


def load_locomo(path: str | Path = DEFAULT_PATH) -> list[Conversation]:
    """Load LoCoMo samples; sessions without turns are skipped (conv-26 lists extra dates)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return [_parse_sample(s) for s in data]


def scored_questions(conv: Conversation) -> list[Question]:
    """Questions of categories 1-4 with non-empty repaired evidence."""
    return [q for q in conv.questions if q.category in SCORED_CATEGORIES and q.evidence]


def recall_at_k(ranked_dia_ids: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of (distinct) evidence turns found among the top k of the ranking."""
    ev = set(evidence)
    if not ev:
        raise ValueError("recall_at_k needs non-empty evidence")
    top = set(ranked_dia_ids[:k])
    return len(ev & top) / len(ev)


RankFn = Callable[[Conversation, Question], Sequence[str]]


def evaluate(
    conversations: Sequence[Conversation], rank_fn: RankFn, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, Any]:
    """Mean recall@k over scored questions, overall and per category.

    Returns ``{"ks": [...], "n": int, "overall": {k: mean}, "per_category": {cat: {k: mean}},
    "counts": {cat: n}, "per_question": [(sample_id, question, category, {k: recall})]}``.
    """
    ks = list(ks)
    per_q: list[tuple[str, str, int, dict[int, float]]] = []
    for conv in conversations:
        for q in scored_questions(conv):
            ranked = list(rank_fn(conv, q))
            recalls = {k: recall_at_k(ranked, q.evidence, k) for k in ks}
            per_q.append((conv.sample_id, q.question, q.category, recalls))
    return summarise(per_q, ks)


def summarise(
    per_q: Sequence[tuple[str, str, int, dict[int, float]]], ks: Sequence[int]
) -> dict[str, Any]:
    """Aggregate per-question recalls (as produced in ``evaluate``) into the result dict."""
    ks = list(ks)

    def mean(rows: Sequence[dict[int, float]]) -> dict[int, float]:
        return {k: (sum(r[k] for r in rows) / len(rows) if rows else float("nan")) for k in ks}

    cats = sorted({c for _, _, c, _ in per_q})
    by_cat = {c: [r for _, _, cc, r in per_q if cc == c] for c in cats}
    return {
        "ks": ks,
        "n": len(per_q),
        "overall": mean([r for *_, r in per_q]),
        "per_category": {c: mean(rows) for c, rows in by_cat.items()},
        "counts": {c: len(rows) for c, rows in by_cat.items()},
        "per_question": list(per_q),
    }


def format_table(rows: dict[str, dict[str, Any]]) -> str:
    """One row per method: R@k (percent) per category then overall, plus question counts."""
    if not rows:
        return ""
    first = next(iter(rows.values()))
    ks = list(first["ks"])
    cats = sorted({c for r in rows.values() for c in r["per_category"]})
    groups = [(f"{CATEGORY_NAMES.get(c, c)} (n={first['counts'].get(c, 0)})", c) for c in cats]
    groups.append((f"overall (n={first['n']})", None))
    name_w = max(6, *(len(n) for n in rows))
    cell_w = max(len("/".join(f"{100.0:.1f}" for _ in ks)), *(len(g) for g, _ in groups))

    lines = [
        f"{'method':<{name_w}}  " + "  ".join(f"{g:>{cell_w}}" for g, _ in groups),
        f"{'':<{name_w}}  "
        + "  ".join(f"{'/'.join(f'R@{k}' for k in ks):>{cell_w}}" for _ in groups),
    ]
    lines.append("-" * len(lines[0]))
    for name, res in rows.items():
        cells = []
        for _, c in groups:
            vals = res["overall"] if c is None else res["per_category"].get(c)
            cell = "-" if vals is None else "/".join(f"{100 * vals[k]:.1f}" for k in ks)
            cells.append(f"{cell:>{cell_w}}")
        lines.append(f"{name:<{name_w}}  " + "  ".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    convs = load_locomo()
    for c in convs:
        changed = [
            (q.raw_evidence, q.evidence) for q in c.questions if q.raw_evidence != q.evidence
        ]
        n_scored = len(scored_questions(c))
        print(f"{c.sample_id}: {len(c.turns)} turns, {len(c.sessions)} sessions, {n_scored} scored")
        print(f"  ask at {c.ask_time.isoformat()}; repaired evidence: {changed}")
    print("total scored:", sum(len(scored_questions(c)) for c in convs))
