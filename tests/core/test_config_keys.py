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


def test_the_reference_has_one_row_per_key_with_the_config_defaults() -> None:
    rows = config.reference()
    assert [r.name for r in rows] == list(FIELDS)
    defaults = MnemoniaConfig()
    assert {r.name: r.default for r in rows} == defaults.to_dict()
    for r in rows:
        key = declaration(r.name)
        assert key is not None
        assert (r.type, r.allowed, r.doc) == (FIELDS[r.name].type, key.check.allowed(), key.doc)
    by_name = {r.name: r for r in rows}
    assert by_name["hybrid_keyword_weight"].allowed == "[0, 1]"
    assert by_name["retention_half_life"].allowed == "(0, inf)"
    assert by_name["max_memories"].allowed == "None or an integer >= 1"
    assert by_name["max_memories"].type == "int | None"


def table_cells(html_text: str) -> list[list[str]]:
    """The text of every cell of every row of the one table in ``html_text``."""
    from html.parser import HTMLParser

    rows: list[list[str]] = []

    class Cells(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr":
                rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None:
                rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    Cells(convert_charrefs=True).feed(html_text)
    return rows


def expected_cells() -> list[list[str]]:
    return [["Key", "Type", "Default", "Allowed", "Meaning"]] + [
        [r.name, r.type, repr(r.default), r.allowed, " ".join(r.doc.split()).replace("`", "")]
        for r in config.reference()]


def test_the_markdown_reference_is_a_valid_table_for_github_and_mkdocs() -> None:
    """One row per key and five cells in each, as GitHub (markdown-it's GFM tables) and MkDocs
    (Python-Markdown) read it: the pipes of `int | None` stay inside their cell."""
    from markdown_it import MarkdownIt

    text = config.reference_markdown()
    assert text.count("\n") == len(FIELDS) + 2
    gfm = table_cells(MarkdownIt("commonmark").enable("table").render(text))
    assert gfm == expected_cells()
    markdown = pytest.importorskip("markdown")  # MkDocs' renderer
    assert table_cells(markdown.markdown(text, extensions=["tables"])) == expected_cells()


def test_pipes_in_any_cell_are_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    from markdown_it import MarkdownIt

    row = config.ConfigKey("odd", "int | str", "a|b", "1 | 2 or `3`", "Either `x | y` or a | b.")
    monkeypatch.setattr(config, "reference", lambda: [row])
    cells = table_cells(MarkdownIt("commonmark").enable("table").render(
        config.reference_markdown()))
    assert cells[1][:4] == ["odd", "int | str", "'a|b'", "1 | 2 or `3`"]
    # a pipe inside backticks in a doc keeps its backslash in Python-Markdown (no doc has one)
    assert cells[1][4] == "Either x | y or a | b."
