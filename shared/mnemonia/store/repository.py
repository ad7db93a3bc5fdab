"""The SQL side-store: the system of record for lifecycle state, relations, logs and the
keyword index. :class:`SideStore` is its composition root: one
:class:`~mnemonia.store.database.Database` (engine, sessions, dialect) and one store class
per concern over it, each the home of its SQL statements:

========================  ==========================================================
``sql.memories``          :class:`~mnemonia.store.memory_rows.MemoryRows`: memory rows
``sql.graph``             :class:`~mnemonia.store.graph.Graph`: relations, entity links
``sql.events``            :class:`~mnemonia.store.events.Events`: audit trail, access log
``sql.keywords``          :class:`~mnemonia.store.keyword_index.KeywordIndex`
``sql.items``             :class:`~mnemonia.store.item_index.ItemIndex`: keyed items
``sql.kv``                :class:`~mnemonia.store.kv.KeyValues`: kv, leases
``sql.collections``       :class:`~mnemonia.store.collection_rows.CollectionRows`
``sql.vectors``           :class:`~mnemonia.store.sql_vectors.SideVectors`
``sql.terms``             :class:`~mnemonia.store.sql_vectors.TermVectors`
``sql.staging``           :class:`~mnemonia.store.staging.Staging`: export, import
``sql.inspect``           :class:`~mnemonia.store.inspect_reads.InspectReads`
========================  ==========================================================

Callers name the concern they use (``rt.sql.memories.rows(...)``). What differs between
SQLite and PostgreSQL is :mod:`mnemonia.store.dialect`; the tables and migrations are in
:mod:`mnemonia.store.schema`. Times are stored as float seconds since the epoch (UTC).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from mnemonia.store.collection_rows import CollectionRows
from mnemonia.store.database import Connection, Database
from mnemonia.store.events import Events
from mnemonia.store.graph import Graph
from mnemonia.store.inspect_reads import InspectReads
from mnemonia.store.item_index import ItemIndex
from mnemonia.store.keyword_index import KeywordIndex
from mnemonia.store.kv import KeyValues
from mnemonia.store.memory_rows import MemoryRows
from mnemonia.store.sql_vectors import SideVectors, TermVectors
from mnemonia.store.staging import Staging

__all__ = ["SideStore"]


class SideStore:
    """SQL half of a Mnemonia store. Thread-safe for one process (one writer at a time)."""

    def __init__(self, url: str, *, attempts: int = 5, max_wait: float = 2.0) -> None:
        self.db = Database(url, attempts=attempts, max_wait=max_wait)
        self.dialect: str = self.db.dialect.name
        """SQLAlchemy's name of the database's dialect (``sqlite``, ``postgresql``, ...)."""
        self.vectors = SideVectors(self.db)
        self.terms = TermVectors(self.db)
        self.keywords = KeywordIndex(self.db)
        self.memories = MemoryRows(self.db, self.vectors, self.keywords)
        self.graph = Graph(self.db)
        self.events = Events(self.db)
        self.items = ItemIndex(self.db)
        self.kv = KeyValues(self.db)
        self.collections = CollectionRows(self.db)
        self.staging = Staging(self.db, self.vectors, self.keywords)
        self.inspect = InspectReads(self.db)

    @property
    def where(self) -> str:
        """The database's URL with any password hidden (for messages)."""
        return self.db.where

    def setup(self) -> list[int]:
        """Apply the migrations not yet applied (:meth:`Database.setup`)."""
        return self.db.setup()

    def keep_rows(self) -> None:
        """Keep the rows recall reads between calls (:meth:`Database.keep_rows`)."""
        self.db.keep_rows()

    def begin(self) -> AbstractContextManager[Connection]:
        """A connection in a transaction, committed on leaving (one writer at a time)."""
        return self.db.begin()

    def connect(self) -> AbstractContextManager[Connection]:
        """A connection for reads."""
        return self.db.connect()

    def snapshot(self) -> AbstractContextManager[Connection]:
        """A read-only transaction that sees one snapshot (:meth:`Database.snapshot`)."""
        return self.db.snapshot()

    def defer(self, write: Callable[[Connection], None], what: str,
              changes: Sequence[str] | None = None) -> None:
        """``write(conn)`` on the writer thread, not waited for (:meth:`Database.defer`)."""
        self.db.defer(write, what, changes)

    def dispose(self) -> None:
        """Finish the deferred writes, then close every pooled connection."""
        self.db.dispose()
