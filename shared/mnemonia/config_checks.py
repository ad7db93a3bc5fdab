"""What a config key accepts: a small declarative check per key of
:class:`~mnemonia.config.MnemoniaConfig` (``key(default, check, doc)``).

A check gives the problems of a value (each naming the key, the value and what is allowed),
parses a ``MNEMONIA_*`` environment text and turns a JSON shape into the one the config holds;
:func:`mnemonia.config.reference` shows its :meth:`Check.allowed` text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from mnemonia.errors import shown

__all__ = ["SECONDS", "Check", "Flag", "Folder", "Integer", "Number", "OneOf", "RelationTypes",
           "TenantNames"]


class Check:
    """What a key accepts: the problems of a value (each naming the key, the value and
    :meth:`allowed`), how a ``MNEMONIA_*`` text parses, and how a JSON or environment shape
    becomes the one the dataclass holds. The kinds: :class:`Number`, :class:`Integer`,
    :class:`Flag`, :class:`OneOf`, :class:`Folder`, and checks of their own for the odd keys
    (:class:`RelationTypes`, :class:`TenantNames`: these list values they refuse in
    ``refused``, for the tests)."""

    def allowed(self) -> str:  # what follows "must be" in a message
        raise NotImplementedError

    def accepts(self, v: Any) -> bool:
        raise NotImplementedError

    def problems(self, name: str, v: Any) -> list[str]:
        return [] if self.accepts(v) else [f"{name}={shown(v)}: must be {self.allowed()}"]

    def parse(self, raw: str) -> Any:  # ValueError: unparsable
        return raw.strip()

    def shape(self, v: Any) -> Any:
        return v


@dataclass(frozen=True)
class Number(Check):
    """A finite float from ``low`` to ``high``, each end closed unless said open (an infinite
    ``high`` is open): ``Number(0, 1)`` is [0, 1], ``SECONDS`` is (0, inf)."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def allowed(self) -> str:
        left = "(" if self.low_open else "["
        if math.isinf(self.high):
            return f"{left}{self.low:g}, inf)"
        return f"{left}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"

    def problems(self, name: str, v: Any) -> list[str]:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return [f"{name}={shown(v)}: must be a finite number in {self.allowed()}"]
        ok_low = v > self.low if self.low_open else v >= self.low
        ok_high = v < self.high if self.high_open else v <= self.high
        return [] if ok_low and ok_high else [f"{name}={shown(v)}: must be in {self.allowed()}"]

    def parse(self, raw: str) -> Any:
        return _number(float, raw.strip(), "a number")


SECONDS = Number(0, low_open=True)
"""A duration: seconds > 0."""


@dataclass(frozen=True)
class Integer(Check):
    """An int (not a bool) ``>= minimum``; with ``optional``, ``None`` too (``none``, ``null``
    or empty in the environment)."""

    minimum: int
    optional: bool = False

    def allowed(self) -> str:
        return f"{'None or ' if self.optional else ''}an integer >= {self.minimum}"

    def accepts(self, v: Any) -> bool:
        return (self.optional and v is None) or (
            not isinstance(v, bool) and isinstance(v, int) and v >= self.minimum)

    def parse(self, raw: str) -> Any:
        text = raw.strip()
        if self.optional and text.lower() in ("", "none", "null"):
            return None
        return _number(int, text, "an integer")


@dataclass(frozen=True)
class Flag(Check):
    """A bool (``1/true/yes/on``, ``0/false/no/off`` in the environment)."""

    def allowed(self) -> str:
        return "true or false"

    def accepts(self, v: Any) -> bool:
        return isinstance(v, bool)

    def parse(self, raw: str) -> Any:
        text = raw.strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected true or false")


@dataclass(frozen=True)
class OneOf(Check):
    """One of a few names."""

    choices: tuple[str, ...]

    def allowed(self) -> str:
        return "one of " + ", ".join(self.choices)

    def accepts(self, v: Any) -> bool:
        return isinstance(v, str) and v in self.choices


@dataclass(frozen=True)
class Folder(Check):
    """``None`` or a folder path (an empty environment value is ``None``)."""

    def allowed(self) -> str:
        return "None or a folder path (non-empty str)"

    def accepts(self, v: Any) -> bool:
        return v is None or (isinstance(v, str) and bool(v.strip()))

    def parse(self, raw: str) -> Any:
        return raw if raw.strip() else None


@dataclass(frozen=True)
class RelationTypes(Check):
    """A mapping relation type -> spread weight (a JSON object in the environment)."""

    refused: ClassVar = ([("causes", 0.5)], {"Causes": 0.5}, {"causes": 0}, {"causes": 1.5})

    def allowed(self) -> str:
        return "a mapping name -> weight: names match [a-z][a-z0-9_]{0,40}, weights in (0, 1]"

    def problems(self, name: str, v: Any) -> list[str]:
        if not isinstance(v, Mapping):
            return [f"{name}={shown(v)}: must be a mapping name -> weight"]
        problems = []
        for rel, w in v.items():
            if not isinstance(rel, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", rel):
                problems.append(f"{name} key {shown(rel)}: must match [a-z][a-z0-9_]*")
            if isinstance(w, bool) or not isinstance(w, int | float) or not 0 < w <= 1:
                problems.append(f"{name}[{shown(rel)}]={shown(w)}: weight must be in (0, 1]")
        return problems

    def parse(self, raw: str) -> Any:
        try:
            value = json.loads(raw.strip())
        except ValueError as e:
            raise ValueError(f"expected a JSON object ({e})") from e
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        return value

    def shape(self, v: Any) -> Any:
        return dict(v) if isinstance(v, Mapping) else v


@dataclass(frozen=True)
class TenantNames(Check):
    """A tuple of tenant names (a JSON list, a comma-separated environment value)."""

    refused: ClassVar = ("alice", ("alice", 3), {"alice"})

    def allowed(self) -> str:
        return "a tuple of tenant names"

    def accepts(self, v: Any) -> bool:
        return isinstance(v, tuple) and all(isinstance(t, str) for t in v)

    def parse(self, raw: str) -> Any:
        return tuple(p.strip() for p in raw.split(",") if p.strip())

    def shape(self, v: Any) -> Any:
        return tuple(v) if isinstance(v, list) else v


def _number(kind: Callable[[str], Any], text: str, what: str) -> Any:
    try:
        return kind(text)
    except ValueError as e:
        raise ValueError(f"expected {what}") from e
