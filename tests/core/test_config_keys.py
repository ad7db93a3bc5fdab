"""Every config key is declared once, with a check and a doc (issue 32 point 6): a key added
without one fails here, and each key refuses values outside what it declares, by name."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import pytest
from mnemonia import config
from mnemonia import config_checks as checks
from mnemonia.config import MnemoniaConfig
from mnemonia.errors import InvalidConfigError

FIELDS = {f.name: f for f in dataclasses.fields(MnemoniaConfig)}


def declaration(name: str) -> config.Key | None:
    """The key's declaration in its field's metadata, None when it was declared without."""
    found = [m for m in FIELDS[name].metadata.values() if isinstance(m, config.Key)]
    return found[0] if len(found) == 1 else None


def default_of(name: str) -> Any:
    f = FIELDS[name]
    factory: Any = f.default_factory
    return f.default if f.default is not dataclasses.MISSING else factory()


def outside(check: checks.Check) -> list[Any]:
    """Values the declared check must refuse, built from the declaration: just below the
    minimum, just above the maximum, a wrong type, a name not among the choices."""
    if isinstance(check, checks.Number):
        below = check.low if check.low_open else math.nextafter(check.low, -math.inf)
        bad: list[Any] = [below, "0.5", None, True, math.nan, math.inf]
        if math.isfinite(check.high):
            bad.append(check.high if check.high_open else math.nextafter(check.high, math.inf))
        return bad
    if isinstance(check, checks.Integer):
        return [check.minimum - 1, float(check.minimum), True, str(check.minimum)] + (
            [] if check.optional else [None])
    if isinstance(check, checks.Flag):
        return [1, 0, "true", None]
    if isinstance(check, checks.OneOf):
        return ["not-" + check.choices[0], check.choices[0].upper(), None, 1]
    if isinstance(check, checks.Folder):
        return ["", "   ", 3]
    refused = getattr(check, "refused", ())
    assert refused, f"{type(check).__name__}: the test cannot build a value it refuses"
    return list(refused)


def inside(check: checks.Check) -> list[Any]:
    """Values at the declared ends, which the check must accept."""
    if isinstance(check, checks.Number):
        low = math.nextafter(check.low, math.inf) if check.low_open else check.low
        return [low] + ([check.high] if math.isfinite(check.high) and not check.high_open
                        else [])
    if isinstance(check, checks.Integer):
        return [check.minimum, check.minimum + 1] + ([None] if check.optional else [])
    if isinstance(check, checks.Flag):
        return [True, False]
    if isinstance(check, checks.OneOf):
        return list(check.choices)
    return []


def names_the_key(violation: str, name: str) -> bool:
    return re.match(rf"({name}|{config.ENV_PREFIX}{name.upper()})[=\[ ]", violation) is not None


def test_every_key_declares_a_check_and_a_doc() -> None:
    undeclared = [n for n in FIELDS if declaration(n) is None]
    assert not undeclared, (f"config keys without a check and a doc: {undeclared}; declare each "
                            "as `name: type = key(default, check, doc)`")
    for name in FIELDS:
        key = declaration(name)
        assert key is not None and isinstance(key.check, checks.Check), name
        assert isinstance(key.doc, str) and key.doc.strip().endswith("."), name
        assert key.check.allowed(), name
        assert key.check.problems(name, default_of(name)) == [], name


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_value_outside_the_declared_check_is_refused_naming_the_key(name: str) -> None:
    key = declaration(name)
    assert key is not None, f"{name} declares no check"
    for bad in outside(key.check):
        with pytest.raises(InvalidConfigError) as info:
            MnemoniaConfig(**{name: bad})
        assert info.value.violations, (name, bad)
        assert all(names_the_key(v, name) for v in info.value.violations), (
            name, bad, info.value.violations)
    for good in inside(key.check):
        if name in ("batch_threshold", "immediate_threshold"):  # a rule between the two
            good_config = MnemoniaConfig(batch_threshold=good, immediate_threshold=good)
        else:
            good_config = MnemoniaConfig(**{name: good})
        assert getattr(good_config, name) == good


SCALARS = sorted(n for n in FIELDS if isinstance(getattr(declaration(n), "check", None),
                                                   checks.Number | checks.Integer
                                                   | checks.Flag | checks.OneOf))


@pytest.mark.parametrize("name", SCALARS)
def test_an_environment_value_outside_the_check_is_refused_naming_the_variable(
        name: str) -> None:
    key = declaration(name)
    assert key is not None
    if isinstance(key.check, checks.Flag | checks.OneOf):
        texts = ["maybe"]
    else:  # the numbers below or above the range, as text
        texts = [repr(v) for v in outside(key.check)
                 if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    variable = config.ENV_PREFIX + name.upper()
    for text in texts:
        with pytest.raises(InvalidConfigError) as info:
            MnemoniaConfig.from_env({variable: text})
        assert all(names_the_key(v, name) for v in info.value.violations), (
            name, text, info.value.violations)
        assert variable in str(info.value)
