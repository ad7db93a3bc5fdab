"""Value filters of LangGraph ``search(filter=...)``, the same semantics as ``InMemoryStore``.

A filter maps a field to a value (equality; dicts compare field by field, lists element by
element) or to operators ``$eq $ne $gt $gte $lt $lte $in $nin``. A dotted key (``"a.b"``)
reaches into nested dicts when the value has no such top-level key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["matches"]

_MISSING = object()


def _lookup(value: Mapping[str, Any], key: str) -> Any:
    if key in value:
        return value[key]
    node: Any = value
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x)


def _apply(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value is not _MISSING and value == arg
    if op == "$ne":
        return value is _MISSING or value != arg
    if op == "$in":
        return value is not _MISSING and value in arg
    if op == "$nin":
        return value is _MISSING or value not in arg
    if op in ("$gt", "$gte", "$lt", "$lte"):
        a, b = _number(value), _number(arg)
        if a is None or b is None:
            if isinstance(value, str) and isinstance(arg, str):
                a_s, b_s = value, arg
                return {"$gt": a_s > b_s, "$gte": a_s >= b_s, "$lt": a_s < b_s,
                        "$lte": a_s <= b_s}[op]
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(
        f"unsupported filter operator {op!r}; use $eq, $ne, $gt, $gte, $lt, $lte, $in or $nin")


def _compare(value: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in expected):
            return all(_apply(value, op, arg) for op, arg in expected.items())
        if not isinstance(value, Mapping):
            return False
        return all(_compare(value.get(k, _MISSING), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(expected)
                and all(_compare(a, b) for a, b in zip(value, expected, strict=True)))
    return value is not _MISSING and value == expected


def matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether a stored value passes a LangGraph search filter."""
    if not flt:
        return True
    return all(_compare(_lookup(value, key), expected) for key, expected in flt.items())
