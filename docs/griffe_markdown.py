"""A griffe extension of the documentation site (mkdocs.yml, mkdocstrings ``extensions:``).

The code's docstrings are Google style, read as Markdown by mkdocstrings, but they carry a few
reST habits of the Python world that Markdown would show as they are written:

- Sphinx roles (``:class:`~mnemonia.Scheduler```, ``:meth:`open```) become code spans
  (``Scheduler``, ``open``);
- a section title followed by a blank line (the template's ``Instantiate:``, ``Usage:``)
  loses the blank line, so griffe shows it like the others (an admonition), not as an
  indented code block; the ``Key init args:`` entries (``name: type`` over an indented
  description) become a list;
- ``.. code-block:: bash`` directives (LangChain's integration template) become fenced blocks;
- doctest lines outside an ``Examples:`` section (where griffe reads them itself) become
  ``pycon`` fenced blocks: in ``Example:`` (an admonition to griffe) and the template's
  ``Instantiate:`` and ``Usage:``, Markdown would join them into one paragraph and read
  ``['a']`` followed by ``[1, 2]`` as a reference link.

Only what mkdocstrings renders changes; the docstrings in the code stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const|ref):`([^`]+)`")
DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(?:code-block|code|sourcecode)::\s*(\S*)\s*$")
SECTION = re.compile(r"^([A-Z][\w ]*):\s*$")
EXAMPLE_SECTIONS = {"Examples"}  # griffe reads doctests there; "Example:" is an admonition


def _role(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    titled = re.fullmatch(r"(.*?)\s*<(.+)>", target)
    if titled:
        return f"`{titled.group(1)}`"
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _fence(out: list[str], indent: str, lang: str, body: list[str]) -> None:
    if out and out[-1].strip() and not SECTION.match(out[-1]):
        out.append("")
    out.append(f"{indent}```{lang}")
    out.extend(body)
    out.append(f"{indent}```")


def _sections(lines: list[str]) -> list[str]:
    """Titles followed by blank lines then an indented block lose the blank lines; the
    entries of ``Key init args:`` become list items."""
    out: list[str] = []
    init_args = False
    for i, line in enumerate(lines):
        if SECTION.match(line):
            init_args = line.strip() == "Key init args:"
        elif line.strip() and _indent(line) == 0:
            init_args = False
        if not line.strip() and out and SECTION.match(out[-1]):
            rest = next((x for x in lines[i:] if x.strip()), "")
            if _indent(rest) > 0:
                continue
        if init_args and line.strip() and _indent(line) == 4:
            name, _, kind = line.strip().partition(":")
            line = f"    - `{name}`" + (f" ({kind.strip()}):" if kind.strip() else ":")
        elif init_args and line.strip() and _indent(line) > 4:
            line = "      " + line.strip()
        out.append(line)
    return out


def to_markdown(text: str) -> str:
    """The docstring ``text`` (already dedented) with its reST habits in Markdown."""
    lines = _sections(ROLE.sub(_role, text).split("\n"))
    out: list[str] = []
    in_examples = False
    i = 0
    while i < len(lines):
        line = lines[i]
        section = SECTION.match(line)
        if section:
            in_examples = section.group(1) in EXAMPLE_SECTIONS
        elif line.strip() and _indent(line) == 0:
            in_examples = False
        directive = DIRECTIVE.match(line)
        if directive:
            indent, lang = directive.group(1), directive.group(2)
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            body: list[str] = []
            block_indent: int | None = None
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > len(indent)):
                if block_indent is None and lines[i].strip():
                    block_indent = _indent(lines[i])
                body.append(lines[i])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            cut = block_indent or 0
            _fence(out, indent, lang, [indent + b[cut:] if b.strip() else "" for b in body])
            if i < len(lines) and lines[i].strip():
                out.append("")
            continue
        if line.lstrip().startswith(">>>") and not in_examples:
            indent = line[:_indent(line)]
            body = []
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) >= len(indent):
                body.append(lines[i])
                i += 1
            _fence(out, indent, "pycon", body)
            if i < len(lines) and lines[i].strip():
                out.append("")
            continue
        out.append(line)
        i += 1
    return "\n".join(out).rstrip()


class MarkdownDocstrings(griffe.Extension):
    """Rewrites each docstring's reST habits as Markdown before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
