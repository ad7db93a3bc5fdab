"""Filters on the JSON inside a memory's metadata (keyed items' values), one spelling per
database: :class:`SqliteJson` (``json_type`` / ``json_extract``) and :class:`PostgresJson`
(``jsonb``); :class:`mnemonia.store.dialect.Dialect` hands out its database's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mnemonia.store.schema import ITEM_KEY
from mnemonia.store.statements import FALSE, SqlCondition, all_of, any_of, not_

__all__ = ["JsonFilter", "Path", "PostgresJson", "SqliteJson"]

_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_SQLITE_TYPES = {"object": ("object",), "array": ("array",), "string": ("text",),
                 "null": ("null",), "number": ("integer", "real")}
_ITEM_VALUE = (ITEM_KEY, "value")
Path = tuple[str | int, ...]


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


class JsonFilter:
    """Predicates on the JSON inside ``m.metadata``; the leaves are spelled by each dialect's
    subclass (SQLite's ``json_type`` / ``json_extract``, PostgreSQL's ``jsonb``). Each one is
    TRUE or FALSE, never NULL (a missing field is FALSE), so NOT and OR of them mean what
    they say.

    Semantics are JSON's (what PostgreSQL's jsonb compares): ``true`` is not ``1``,
    ``1`` equals ``1.0``, objects compare by keys and lists by position.
    """

    # -- leaves (per dialect) ------------------------------------------------------------------
    def type_is(self, path: Path, kind: str) -> SqlCondition:
        raise NotImplementedError

    def present(self, path: Path) -> SqlCondition:
        raise NotImplementedError

    def eq(self, path: Path, value: Any) -> SqlCondition:
        """The JSON value at ``path`` equals a scalar (or, on PostgreSQL, any) ``value``."""
        raise NotImplementedError

    def length_is(self, path: Path, n: int) -> SqlCondition:
        raise NotImplementedError

    def compare(self, path: Path, op: str, arg: Any) -> SqlCondition:
        """Numbers with numbers, strings with strings (code-point order); else FALSE."""
        if not (_number(arg) or isinstance(arg, str)):
            return FALSE
        return self._compare(path, _COMPARE[op], arg)

    def _compare(self, path: Path, sym: str, arg: Any) -> SqlCondition:
        raise NotImplementedError

    def exact(self, path: Path, value: Any) -> SqlCondition:
        """Equal as JSON: objects with the same keys, lists of the same length."""
        raise NotImplementedError

    # -- structure -------------------------------------------------------------------------
    def match(self, path: Path, expected: Any) -> SqlCondition:
        """LangGraph's filter value: operators, else a dict matches the fields it names
        (recursively), a list element by element, a scalar by equality."""
        if isinstance(expected, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in expected):
                return all_of([self.operator(path, op, arg) for op, arg in expected.items()])
            return all_of([self.type_is(path, "object"),
                           *(self.match((*path, k), v) for k, v in expected.items())])
        if isinstance(expected, list | tuple):
            return all_of([self.length_is(path, len(expected)),
                           *(self.match((*path, i), v) for i, v in enumerate(expected))])
        return self.eq(path, expected)

    def operator(self, path: Path, op: str, arg: Any) -> SqlCondition:
        if op == "$eq":
            return self.exact(path, arg)
        if op == "$ne":
            return not_(self.exact(path, arg))
        if op in ("$in", "$nin"):
            either = any_of([self.exact(path, a) for a in arg])
            return either if op == "$in" else not_(either)
        return self.compare(path, op, arg)

    def field(self, key: str, expected: Any) -> SqlCondition:
        """One top-level filter entry: ``key`` is a field of the value or, when the value has
        no such field and ``key`` has dots, a path into nested objects (``"meta.lang"``)."""
        cond = self.match((*_ITEM_VALUE, key), expected)
        if "." not in key:
            return cond
        nested = self.match((*_ITEM_VALUE, *key.split(".")), expected)
        there = self.present((*_ITEM_VALUE, key))
        return SqlCondition(f"CASE WHEN {there.sql} THEN ({cond.sql}) ELSE ({nested.sql}) END",
                            there.params + cond.params + nested.params)


class SqliteJson(JsonFilter):
    """:class:`JsonFilter` leaves in SQLite's JSON functions."""

    @staticmethod
    def _path(path: Path) -> str:
        # Labels are quoted as the stored JSON spells them (json.dumps escapes), which is
        # what SQLite's path lookup compares; '"' cannot be quoted (validation refuses it).
        return "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{json.dumps(p)[1:-1]}"'
                             for p in path)

    def type_is(self, path: Path, kind: str) -> SqlCondition:
        names = _SQLITE_TYPES[kind]
        return SqlCondition(f"COALESCE(json_type(m.metadata, ?) IN ({','.join('?' * len(names))})"
                            ", FALSE)", (self._path(path), *names))

    def present(self, path: Path) -> SqlCondition:
        return SqlCondition("json_type(m.metadata, ?) IS NOT NULL", (self._path(path),))

    def eq(self, path: Path, value: Any) -> SqlCondition:
        p = self._path(path)
        if value is None or isinstance(value, bool):
            name = "null" if value is None else ("true" if value else "false")
            return SqlCondition("COALESCE(json_type(m.metadata, ?) = ?, FALSE)", (p, name))
        kind = "number" if _number(value) else "string"
        typed = self.type_is(path, kind)
        return SqlCondition(f"{typed.sql} AND COALESCE(json_extract(m.metadata, ?) = ?, FALSE)",
                            (*typed.params, p, value))

    def length_is(self, path: Path, n: int) -> SqlCondition:
        return SqlCondition("COALESCE(json_type(m.metadata, ?) = 'array' AND "
                            "json_array_length(m.metadata, ?) = ?, FALSE)",
                            (self._path(path), self._path(path), n))

    def _compare(self, path: Path, sym: str, arg: Any) -> SqlCondition:
        typed = self.type_is(path, "number" if _number(arg) else "string")
        return SqlCondition(f"{typed.sql} AND COALESCE(json_extract(m.metadata, ?) {sym} ?, "
                            "FALSE)", (*typed.params, self._path(path), arg))

    def exact(self, path: Path, value: Any) -> SqlCondition:
        if isinstance(value, Mapping):
            count = SqlCondition("(SELECT count(*) FROM json_each(m.metadata, ?)) = ?",
                                 (self._path(path), len(value)))
            return all_of([self.type_is(path, "object"), count,
                           *(self.exact((*path, k), v) for k, v in value.items())])
        if isinstance(value, list | tuple):
            return all_of([self.length_is(path, len(value)),
                           *(self.exact((*path, i), v) for i, v in enumerate(value))])
        return self.eq(path, value)


class PostgresJson(JsonFilter):
    """:class:`JsonFilter` leaves in PostgreSQL's ``jsonb``."""

    @staticmethod
    def _at(path: Path) -> SqlCondition:
        """The jsonb value at ``path`` (NULL when missing)."""
        return SqlCondition("(m.metadata::jsonb #> CAST(? AS text[]))",
                            ([str(p) for p in path],))

    def type_is(self, path: Path, kind: str) -> SqlCondition:
        at = self._at(path)
        return SqlCondition(f"COALESCE(jsonb_typeof({at.sql}) = ?, FALSE)", (*at.params, kind))

    def present(self, path: Path) -> SqlCondition:
        at = self._at(path)
        return SqlCondition(f"({at.sql}) IS NOT NULL", at.params)

    def eq(self, path: Path, value: Any) -> SqlCondition:
        at = self._at(path)
        return SqlCondition(f"COALESCE({at.sql} = CAST(? AS jsonb), FALSE)",
                            (*at.params, json.dumps(value)))

    def length_is(self, path: Path, n: int) -> SqlCondition:
        at = self._at(path)
        return SqlCondition(f"CASE WHEN jsonb_typeof({at.sql}) = 'array' THEN "
                            f"jsonb_array_length({at.sql}) = ? ELSE FALSE END",
                            (*at.params, *at.params, n))

    def _compare(self, path: Path, sym: str, arg: Any) -> SqlCondition:
        at = self._at(path)
        kind, cast = ("number", "::float8") if _number(arg) else ("string", ' COLLATE "C"')
        return SqlCondition(f"CASE WHEN jsonb_typeof({at.sql}) = '{kind}' THEN "
                            f"({at.sql} #>> '{{}}'){cast} {sym} ? ELSE FALSE END",
                            (*at.params, *at.params, arg))

    def exact(self, path: Path, value: Any) -> SqlCondition:
        return self.eq(path, value)  # jsonb equality is exactly that
