"""The writer lease of a process that may share its store with others (server mode).

Every write that leaves memory rows unfinished for a moment ('pending' while the vectors are
written, 'deleting' while they are removed) records its writer (``memory_writers``). The
writer holds the lease ``writer:<holder>`` in ``maintenance_leases`` for as long as its
engine is open, renewed by a daemon thread; repair at another process's open takes only the
unfinished rows of writers whose lease ran out (a crashed process), never a live one's.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from mnemonia.errors import StoreError
from mnemonia.store.kv import WRITER_LEASE
from mnemonia.store.repository import SideStore

__all__ = ["WriterLease", "new_holder"]

log = logging.getLogger("mnemonia.store")


def new_holder() -> str:
    """A writer name unique to this engine: host, process id and a random part."""
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class WriterLease:
    """Holds ``writer:<holder>`` while the engine is open: taken at :meth:`start`, renewed
    every quarter of its length on a daemon thread, dropped at :meth:`stop`."""

    def __init__(self, sql: SideStore, holder: str, *, seconds: float = WRITER_LEASE) -> None:
        self.sql = sql
        self.holder = holder
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> None:
        self.sql.kv.renew_writer(self.holder, now=time.time(), seconds=self.seconds)
        self._thread = threading.Thread(target=self._run, name="mnemonia-writer-lease",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.seconds / 4):
            try:
                self.sql.kv.renew_writer(self.holder, now=time.time(), seconds=self.seconds)
            except StoreError as e:  # an outage: the writes themselves report it
                if not self._failing:
                    log.warning("could not renew the writer lease %s: %s", self.holder, e)
                self._failing = True
            else:
                if self._failing:
                    log.info("the writer lease %s is renewed again", self.holder)
                self._failing = False

    def stop(self) -> None:
        """Stop renewing and give the lease back (a store that does not answer lets it
        run out instead)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.sql.kv.release_writer(self.holder)
        except StoreError as e:
            log.info("could not release the writer lease %s (it runs out): %s", self.holder, e)
