"""What the inspector's pages and its JSON API show, built once for both: JSON-safe dicts of
memories, hits, events and relations, the relation graph's layout, and short report lines."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any
from urllib.parse import quote

from mnemonia.inspection import ForgettingCurve, MemoryDetail
from mnemonia.models import Event, Hit, Memory, Relation

__all__ = ["curve_json", "event_json", "hit_json", "memory_json", "memory_url",
           "relation_graph", "relation_json", "report_line", "snippet", "supersession_json"]

GRAPH_NODES = 16
"""Neighbours drawn in a memory's relation graph (all of them are listed below it)."""


def memory_url(tenant: str, memory_id: str, suffix: str = "") -> str:
    return f"/t/{quote(tenant, safe='')}/memories/{quote(memory_id, safe='')}{suffix}"


def snippet(text: str, width: int = 60) -> str:
    """The first line of ``text``, cut to ``width`` characters."""
    stripped = text.strip()
    line = stripped.splitlines()[0] if stripped else ""
    return line if len(line) <= width else line[:width - 1] + "…"


def memory_json(m: Memory, *, retention: float | None = None) -> dict[str, Any]:
    out = m.to_dict()
    out["deleted"] = m.deleted
    if retention is not None:
        out["retention"] = retention
    return out


def hit_json(h: Hit, rank: int) -> dict[str, Any]:
    return {"rank": rank, "score": h.score, "memory": memory_json(h.memory),
            "explanation": h.explanation.to_dict(), "contradictions": list(h.contradictions),
            "supersedes": list(h.supersedes), "superseded_by": h.superseded_by}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def event_json(e: Event) -> dict[str, Any]:
    return {"event": e.event, "at": e.at.isoformat(), "before": e.before, "after": e.after}


def supersession_json(e: Event | None) -> dict[str, Any] | None:
    """The event that superseded a memory: by whom, when, and the evidence of a detected
    supersession (``None`` for one made by hand)."""
    if e is None:
        return None
    after = e.after or {}
    return {"superseded_by": after.get("superseded_by"), "at": e.at.isoformat(),
            "evidence": after.get("evidence")}


def relation_json(r: Relation) -> dict[str, Any]:
    return {"src": r.src, "dst": r.dst, "type": r.type, "strength": r.strength,
            "created_at": r.created_at.isoformat()}


def curve_json(c: ForgettingCurve) -> dict[str, Any]:
    return {"created_at": c.created_at.isoformat(), "now": c.now.isoformat(),
            "retention_now": c.retention_now, "next_review": _iso(c.next_review),
            "accesses": [a.isoformat() for a in c.accesses], "accesses_total": c.accesses_total,
            "exact": c.exact,
            "past": [[p.at.isoformat(), p.retention] for p in c.past],
            "projected": [[p.at.isoformat(), p.retention] for p in c.projected]}


def relation_graph(tenant: str, detail: MemoryDetail) -> dict[str, Any]:
    """Positions for a small SVG graph: the memory in the middle, its related memories on a
    circle (at most :data:`GRAPH_NODES`), one arrow per relation with its type."""
    me = detail.memory.id
    others = list(dict.fromkeys(r.dst if r.src == me else r.src for r in detail.relations))
    drawn = others[:GRAPH_NODES]
    width, height, radius = (640, 360, 130) if len(drawn) > 4 else (640, 260, 85)
    cx, cy = width / 2, height / 2
    nodes = [{"id": me, "x": cx, "y": cy, "label": snippet(detail.memory.text, 28),
              "href": memory_url(tenant, me), "center": True,
              "deleted": detail.memory.deleted}]
    where = {me: (cx, cy)}
    for i, mid in enumerate(drawn):
        angle = 2 * math.pi * i / max(1, len(drawn)) - math.pi / 2
        x, y = cx + radius * 1.9 * math.cos(angle), cy + radius * math.sin(angle)
        where[mid] = (x, y)
        other = detail.neighbours.get(mid)
        nodes.append({"id": mid, "x": x, "y": y, "center": False,
                      "label": snippet(other.text, 28) if other else mid[:12],
                      "href": memory_url(tenant, mid), "deleted": bool(other and other.deleted)})
    edges = []
    for r in detail.relations:
        if r.src not in where or r.dst not in where:
            continue
        (x1, y1), (x2, y2) = where[r.src], where[r.dst]
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        # stop the arrow at the target node's edge
        x2e, y2e = x2 - (x2 - x1) * 22 / length, y2 - (y2 - y1) * 22 / length
        edges.append({"x1": x1, "y1": y1, "x2": x2e, "y2": y2e, "type": r.type,
                      "strength": r.strength, "lx": (x1 + x2) / 2, "ly": (y1 + y2) / 2 - 4})
    return {"width": width, "height": height, "nodes": nodes, "edges": edges,
            "hidden": len(others) - len(drawn)}


def report_line(entry: dict[str, Any]) -> str:
    """One line of a stored maintenance report: its non-zero counts."""
    report = entry.get("report") or {}
    parts = [f"{k}={v}" for k, v in report.items()
             if isinstance(v, int | float) and not isinstance(v, bool) and v
             and not k.endswith("_total")]
    return ", ".join(parts) or "nothing to do"
