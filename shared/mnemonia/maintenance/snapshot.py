"""The snapshot: a tenant's top enriched memories by priority, rendered as text (memory
adapters may inject it beside what they recall)."""

from __future__ import annotations

import numpy as np

from mnemonia.clock import to_ts
from mnemonia.errors import InvalidInputError, shown
from mnemonia.ranking import columns, priority_array, priority_of, shortlist, weights
from mnemonia.runtime import Runtime
from mnemonia.scoring import reevaluation as reeval

__all__ = ["SNAPSHOT_HEADER", "snapshot"]

SNAPSHOT_HEADER = "MEMORY SNAPSHOT"
_COLUMNS = ("id", "seq", "text", "importance", "created_at", "accessed_at", "access_count",
            "stability", "consolidated_into")


def snapshot(rt: Runtime, *, tenant: str, limit: int | None = None) -> str:
    """The tenant's top enriched memories by priority, rendered as text.

    Only enriched, active, not superseded memories; a consolidated member is represented by
    its concept when that concept qualifies too. ``limit`` defaults to ``config.snapshot_size``.
    Returns ``""`` when there is nothing to show.
    """
    rt.check_open()
    n = rt.config.snapshot_size if limit is None else limit
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"limit={shown(limit)}: must be an integer >= 1")
    now = rt.now()
    with rt.reading() as conn:
        rows = rt.sql.memories.active_rows(conn, tenant, _COLUMNS, enriched=True,
                                           not_state=reeval.SKIPPED, unsuperseded=True)
    # A member gives way to its concept when the concept itself qualifies for the snapshot.
    listed = {r.id for r in rows}
    rows = [r for r in rows if r.consolidated_into is None or r.consolidated_into not in listed]
    if not rows:
        return ""
    w = weights(rt.config)
    values = priority_array(rt.config, columns(rows), to_ts(now), w)
    short = shortlist(values, np.ones(len(rows), bool), n, lowest=False)
    exact = sorted(((priority_of(rt.config, rows[i], now, w), rows[i]) for i in short),
                   key=lambda t: (-t[0], t[1].seq))[:n]  # equal: the first stored first
    return "\n".join([SNAPSHOT_HEADER] + [f"- {r.text}" for _, r in exact])
