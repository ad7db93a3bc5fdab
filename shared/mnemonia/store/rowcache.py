"""Memory rows (and the keyword index's document counts) kept between recalls, for a
side-store with one writing process.

Recall reads the rows of a few hundred candidates per call; on a tenant asked again and
again most of them are the same rows, read again. An embedded store has one writing process
(its folder lock), and every write of that process goes through a transaction of
:class:`~mnemonia.store.database.Database`, so the process knows when rows can change. A
write transaction is one of three kinds:

- **named**: it says before it begins which memory rows it changes, and changes no text,
  relation or keyword count (a recall's accesses);
- **recorded**: the database records the rows and counts it changes as it writes them
  (SQLite: temporary triggers of its connection, :meth:`Dialect.changed_keys
  <mnemonia.store.dialect.Dialect.changed_keys>`), and says so when it ends;
- **unknown**: anything else (another database, or a bulk write that changed more than
  :data:`~mnemonia.store.dialect.CHANGED_KEYS`); it may have changed any row and count.

When a write ends, the rows and counts it changed are dropped (an unknown one: all of them).
A read keeps what it read (:meth:`RowCache.keep`, from the :attr:`RowCache.generation` it
began at) only if, when it is kept, no recorded or unknown write is open and no unknown one
ended since the read began; and of the rows or counts a write changed, it keeps
none that a named write still has open or that a write changed after the read began. So a
row read before a commit is never kept after it, while a row no write touched stays kept
through the writes beside it: recalls beside one another's accesses, beside a chat app's
adds and beside the maintenance jobs keep what they read.

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
        self._writers = 0  # open writes that do not name their rows
        self._wide = 0  # the generation the last unknown write ended at
        self._open: dict[str, int] = {}  # rows that open named writes change (how many)
        # row / count -> the generation a write that changed it ended at
        self._changed: dict[str, int] = {}
        self._changed_docs: dict[str, int] = {}
        self._floor = 0  # reads begun before it keep nothing (``_changed`` started again then)
        self.generation = 0  # moves when a write transaction begins and when it ends

    def __len__(self) -> int:
        return len(self._rows)

    def write_begins(self, named: Collection[str] | None = None) -> None:
        """A write transaction begins; ``named``: the only memory rows it changes, when it
        says so (the same value goes to :meth:`write_ends`)."""
        with self._lock:
            self.generation += 1
            if named is None:
                self._writers += 1
            else:
                for mid in named:
                    self._open[mid] = self._open.get(mid, 0) + 1

    def write_ends(self, named: Collection[str] | None = None, *,
                   changed: Collection[str] | None = None, terms: Collection[str] = ()
                   ) -> None:
        """A write transaction ended (committed or not). ``named``: as given to
        :meth:`write_begins`; else ``changed`` and ``terms``: the memory rows and keyword
        counts it was recorded to change; neither: it may have changed any row and count."""
        with self._lock:
            self.generation += 1
            at = self.generation
            if named is not None:
                self._drop(named, (), at)
                for mid in named:
                    left = self._open.get(mid, 0) - 1
                    if left > 0:
                        self._open[mid] = left
                    else:
                        self._open.pop(mid, None)
                return
            self._writers -= 1
            if changed is None:
                self._wide = at
                self._rows.clear()
                self._docs.clear()
                return
            self._drop(changed, terms, at)

    def reading(self) -> int:
        """The generation a read starts at (hand it to :meth:`keep`)."""
        with self._lock:
            return self.generation

    def get(self, ids: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
        """``(kept rows by id, ids not kept)``."""
        return split_kept(self._rows, ids)

    def keep(self, rows: Mapping[str, Any], since: int) -> None:
        """Keep ``rows``, read from generation ``since`` (:meth:`reading`), as the module
        says: nothing while a recorded or unknown write is open or when an unknown one
        ended since; of the rest, the rows no named write has open and no write
        changed since."""
        self._keep(self._rows, self._changed, rows, since, self._open)

    def docs(self, terms: Iterable[str]) -> tuple[dict[str, int], list[str]]:
        """``(kept document counts by term, terms not kept)``."""
        return split_kept(self._docs, terms)

    def keep_docs(self, counts: Mapping[str, int], since: int) -> None:
        """Keep document counts (0 for a term in no memory), as :meth:`keep` (a named write
        changes no count)."""
        self._keep(self._docs, self._changed_docs, counts, since, {})

    def _keep(self, kept: dict[str, Any], changed: dict[str, int], values: Mapping[str, Any],
              since: int, opened: Mapping[str, int]) -> None:
        if not values:
            return
        with self._lock:
            if self._writers or self._wide > since or since < self._floor:
                return
            fresh = {k: v for k, v in values.items()
                     if k not in opened and changed.get(k, since) <= since}
            if not fresh:
                return
            if len(kept) + len(fresh) > self._limit:
                kept.clear()
            kept.update(fresh)

    # -- the lock held ---------------------------------------------------------------------
    def _drop(self, rows: Iterable[str], terms: Iterable[str], at: int) -> None:
        """Drop ``rows`` and the counts of ``terms``, changed by a write that ended at
        generation ``at``."""
        for kept, changed, keys in ((self._rows, self._changed, rows),
                                    (self._docs, self._changed_docs, terms)):
            for key in keys:
                kept.pop(key, None)
                changed[key] = at
        if len(self._changed) + len(self._changed_docs) > self._limit:
            self._changed.clear()  # what came before is forgotten: so are older reads
            self._changed_docs.clear()
            self._floor = at


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
