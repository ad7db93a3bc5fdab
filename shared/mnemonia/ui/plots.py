"""Server-side plots of the inspector, as SVG text (matplotlib, no pyplot, no display): a
memory's forgetting curve and a tenant's review schedule. They hold numbers and dates only,
never user text."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from mnemonia.inspection import ForgettingCurve

__all__ = ["forgetting_curve_svg", "review_schedule_svg"]

_RC: Any = {"svg.fonttype": "none", "svg.hashsalt": "mnemonia", "font.size": 9,
       "axes.spines.top": False, "axes.spines.right": False}
PAST = "#2563eb"
AHEAD = "#9333ea"
ACCESS = "#059669"
REVIEW = "#d97706"


def _svg(fig: Figure, prefix: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # inline: no XML prolog or doctype
    # matplotlib names its clip paths and glyphs; two plots on one page must not share names
    return re.sub(r'(id="|url\(#|href="#)', lambda m: m.group(1) + prefix, text)


def forgetting_curve_svg(curve: ForgettingCurve) -> str:
    """Retention over time in days from now: the past (accesses marked), now, and the
    projected curve."""
    def days(at: datetime) -> float:
        return (at - curve.now).total_seconds() / 86400.0

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.5, 3.0))
        ax = fig.add_subplot()
        ax.plot([days(p.at) for p in curve.past], [p.retention for p in curve.past],
                color=PAST, lw=1.8, label="retention (past)")
        ax.plot([days(p.at) for p in curve.projected],
                [p.retention for p in curve.projected], color=AHEAD, lw=1.8, ls="--",
                label="projected")
        if curve.accesses:
            ax.vlines([days(a) for a in curve.accesses], 0, 1, colors=ACCESS, lw=0.8,
                      alpha=0.6, label=f"access ({curve.accesses_total})")
        ax.axvline(0.0, color="#111827", lw=1.0, label="now")
        ax.plot([0.0], [curve.retention_now], "o", color="#111827", ms=4)
        end = curve.projected[-1].at if curve.projected else curve.now
        if curve.next_review is not None and curve.next_review <= end:
            ax.axvline(days(curve.next_review), color=REVIEW, lw=1.0, ls=":",
                       label="next SM-2 review")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("retention")
        ax.set_xlabel("days from now")
        ax.grid(alpha=0.25)
        ax.legend(loc="upper right", fontsize=8, frameon=False)
        return _svg(fig, "fc-")


def review_schedule_svg(schedule: Sequence[tuple[str, int]]) -> str:
    """Reviews per day: due now, then the next days."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.5, 2.6))
        ax = fig.add_subplot()
        labels = [label if label == "due" else label[5:] for label, _ in schedule]
        counts = [n for _, n in schedule]
        colors = [REVIEW] + [PAST] * (len(counts) - 1)
        ax.bar(range(len(counts)), counts, color=colors)
        step = max(1, len(labels) // 10)
        ax.set_xticks(range(0, len(labels), step), labels[::step])
        ax.set_ylabel("memories")
        ax.grid(axis="y", alpha=0.25)
        return _svg(fig, "rs-")
