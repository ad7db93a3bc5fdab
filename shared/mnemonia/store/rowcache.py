"""Memory rows (and the keyword index's document counts) kept between recalls, for a
side-store with one writing process.

Recall reads the rows of a few hundred candidates per call; on a tenant asked again and
again most of them are the same rows, read again. An embedded store has one writing process
(its folder lock), and every write of that process goes through a transaction of
:class:`~mnemonia.store.database.Database`, so the process knows when rows can change:

- A write transaction that says which memory rows it changes (a recall's accesses: no text,
  relation or keyword changes) drops those rows when it ends; any other write transaction
  drops every row and every document count.
- A read stores what it read only if no write transaction was open when it began and none
  began or ended while it ran (:attr:`RowCache.generation` moves at both ends of every
  write), so a row read before a commit is never kept after it.

A row handed out is the immutable row object of a read, so nothing a caller does changes
what the next caller gets.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from typing import Any

KEPT_ROWS = 50_000
"""At most this many rows (and as many document counts) are kept; past it the cache starts
again empty. A row of a LoCoMo turn (a sentence or two) takes ~1.4 KB in the process, so
~70 MB at the limit; longer texts take more."""


class RowCache:
    """Rows by memory id (and document counts by keyword term), valid while no write
    transaction has changed them."""

    def __init__(self, limit: int = KEPT_ROWS) -> None:
        self._limit = limit
        self._rows: dict[str, Any] = {}
        self._docs: dict[str, int] = {}
        self._lock = threading.Lock()
        self._writers = 0
        self.generation = 0  # moves when a write transaction begins and when it ends

    def __len__(self) -> int:
        return len(self._rows)

    def write_begins(self) -> None:
        with self._lock:
            self._writers += 1
            self.generation += 1

    def write_ends(self, changed: Collection[str] | None) -> None:
        """A write transaction ended (committed or not): drop the rows it may have changed
        (``changed``: those memory ids; ``None``: any row)."""
        with self._lock:
            self._writers -= 1
            self.generation += 1
            if changed is None:
                self._rows.clear()
                self._docs.clear()
            else:
                for mid in changed:
                    self._rows.pop(mid, None)

    def reading(self) -> int | None:
        """The generation a read starts at, or ``None`` when a write is open (what is read
        then is not kept)."""
        with self._lock:
            return None if self._writers else self.generation

    def get(self, ids: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
        """``(kept rows by id, ids not kept)``."""
        return split_kept(self._rows, ids)

    def keep(self, rows: Mapping[str, Any], since: int | None) -> None:
        """Keep ``rows``, read from generation ``since`` (see :meth:`reading`), unless a
        write began or ended since."""
        self._keep(self._rows, rows, since)

    def docs(self, terms: Iterable[str]) -> tuple[dict[str, int], list[str]]:
        """``(kept document counts by term, terms not kept)``."""
        return split_kept(self._docs, terms)

    def keep_docs(self, counts: Mapping[str, int], since: int | None) -> None:
        """Keep document counts (0 for a term in no memory), as :meth:`keep`."""
        self._keep(self._docs, counts, since)

    def _keep(self, kept: dict[str, Any], values: Mapping[str, Any], since: int | None
              ) -> None:
        if since is None or not values:
            return
        with self._lock:
            if self._writers or self.generation != since:
                return
            if len(kept) + len(values) > self._limit:
                kept.clear()
            kept.update(values)


def split_kept(kept: Mapping[str, Any], keys: Iterable[str]
               ) -> tuple[dict[str, Any], list[str]]:
    """``(the kept values of keys, keys not kept)``, in the order of ``keys``."""
    found: dict[str, Any] = {}
    missing: list[str] = []
    for key in keys:
        value = kept.get(key)
        if value is None:
            missing.append(key)
        else:
            found[key] = value
    return found, missing
