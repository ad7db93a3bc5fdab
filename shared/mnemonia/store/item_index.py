"""Keyed items (:mod:`mnemonia.items`) are memories whose metadata holds
``{ITEM_KEY: {...}}``; their path, key, update and expiry times are indexed expressions of
the metadata (migration 9), so every read here walks an index and stops at its LIMIT."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import ITEM_KEY
from mnemonia.store.statements import COMMITTED_SQL, SqlCondition, all_of, chunks, not_

__all__ = ["ItemIndex"]


class ItemIndex:
    """Reads of keyed items, and the SQL conditions their filters become."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _items_sql(self) -> dict[str, str]:
        return self.db.dialect.item_expressions()

    def _live(self, now: float) -> SqlCondition:
        """Committed, not deleted, not expired at ``now``. (The status is written so that no
        index serves it: without statistics SQLite would rather take the status index and
        sort the whole namespace than walk the item index in order.)"""
        x = self._items_sql()
        return SqlCondition(f"{COMMITTED_SQL} AND m.deleted_at IS NULL AND "
                            f"({x['expires']} IS NULL OR {x['expires']} > ?)", (now,))

    def item_filter(self, flt: Mapping[str, Any]) -> SqlCondition:
        """A checked value filter (:func:`mnemonia.validation.item_filter`) as SQL on the
        item's value: every entry must hold."""
        compiler = self.db.dialect.json_filter()
        return all_of([compiler.field(key, expected) for key, expected in flt.items()])

    def item_condition(self, path: str, *, now: float, where: SqlCondition | None = None,
                       indexed: bool | None = None) -> SqlCondition:
        """An item at ``path``, not expired, ``indexed`` (or not) if asked, matching
        ``where``: what recall's candidate rows must satisfy in a store search."""
        x = self._items_sql()
        # ``|| ''``: not the indexed expression, so a read by id (recall's candidate rows)
        # keeps its primary-key lookups instead of walking the namespace's path index
        cond = SqlCondition(f"({x['path']} || '') = ? AND ({x['expires']} IS NULL OR "
                            f"{x['expires']} > ?)", (path, now))
        if indexed is not None:
            cond = cond.and_(self.item_indexed(indexed))
        return cond.and_(where)

    def item_indexed(self, indexed: bool) -> SqlCondition:
        """Items written with a text to search (``indexed``), or without one."""
        flag = self.db.dialect.json_filter().eq((ITEM_KEY, "indexed"), False)
        return not_(flag) if indexed else flag

    def item_rows(self, conn: Connection, path: str, keys: Sequence[str]) -> list[Any]:
        """``(id, tenant, deleted_at, metadata, expires)`` of the committed items of ``keys``
        at ``path``, deleted and expired ones too (one index read per chunk of keys)."""
        x = self._items_sql()
        out: list[Any] = []
        for chunk in chunks(list(keys)):
            out += self.db.fetch(conn, (
                f"SELECT m.id, m.tenant, m.deleted_at, m.metadata, {x['expires']} AS expires "
                f"FROM memories AS m WHERE {x['path']} = ? AND {x['key']} IN "
                f"({self.db.in_marks(len(chunk))}) AND {COMMITTED_SQL}"),
                (path, *chunk), named=True)
        return out

    def item_page(self, conn: Connection, path: str, *, now: float,
                  where: SqlCondition | None, limit: int, offset: int = 0) -> list[Any]:
        """``(id, metadata)`` of live items at ``path`` matching ``where``, last updated
        first (then by key, descending): a walk of the (path, updated, key) index that stops
        after ``offset + limit`` matches."""
        x = self._items_sql()
        cond = self._live(now).and_(where)
        return self.db.fetch(conn, (
            f"SELECT m.id, m.metadata FROM memories AS m WHERE {x['path']} = ? AND ({cond.sql}) "
            f"ORDER BY {x['updated']} DESC, {x['key']} DESC LIMIT ? OFFSET ?"),
            (path, *cond.params, limit, offset), named=True)

    def next_item_path(self, conn: Connection, low: str, high: str | None, *, now: float,
                       inclusive: bool = False) -> str | None:
        """The first path with a live item after ``low`` (or at it, ``inclusive``) and
        before ``high``: one step of a loose index scan, so listing namespaces costs one
        index seek per namespace listed, whatever their sizes."""
        x = self._items_sql()
        live = self._live(now)
        upper, bound = (f" AND {x['path']} < ?", (high,)) if high is not None else ("", ())
        rows = self.db.fetch(conn, (
            f"SELECT {x['path']} FROM memories AS m WHERE {x['path']} {'>=' if inclusive else '>'}"
            f" ?{upper} AND {live.sql} ORDER BY {x['path']} LIMIT 1"),
            (low, *bound, *live.params))
        return str(rows[0][0]) if rows else None

    def matching_ids(self, conn: Connection, tenant: str, where: SqlCondition, limit: int
                     ) -> list[str]:
        """Up to ``limit`` ids of active memories of ``tenant`` matching ``where``."""
        return [r[0] for r in self.db.fetch(conn, (
            f"SELECT m.id FROM memories AS m WHERE m.tenant = ? AND {COMMITTED_SQL} "
            f"AND m.deleted_at IS NULL AND ({where.sql}) LIMIT ?"),
            (tenant, *where.params, limit))]

    def expired_items(self, conn: Connection, now: float, limit: int) -> list[tuple[str, str]]:
        """``(id, tenant)`` of up to ``limit`` items whose time ran out by ``now``."""
        x = self._items_sql()
        return [(r[0], r[1]) for r in self.db.fetch(conn, (
            f"SELECT m.id, m.tenant FROM memories AS m WHERE {x['expires']} <= ? "
            f"AND {COMMITTED_SQL} LIMIT ?"), (now, limit))]
