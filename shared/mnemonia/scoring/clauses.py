"""Statements said in passing, rewritten into plain clauses for :mod:`~mnemonia.scoring.statements`.

People state a fact inside a request more often than on its own ("Could you review my cover
letter? It says I'm an accountant"; "Tell the courier to ring 0224 225 2319, that's my number
since the switch"; "Help me pick a phone case: mint green would be ideal, it's my favourite
colour"). Read as whole sentences, such messages state nothing: the request's mood (a question,
"would", "if") hides the statement, and the value sits in one clause while the kind of fact is
named in another. This module finds, without a model, the clauses a reader can take as
statements:

* **parts**: a sentence is cut at commas, colons, semicolons and dashes (with a following
  "and", "but", "so", "since" or "because"), so one part's mood does not hide another's;
* **reported content**: "it says I'm an accountant" states "I'm an accountant" (the subject of
  the reporting verb is a document or a pronoun, not a person whose words these are);
* **identification by a demonstrative**: "that's my manager", "it's their favourite colour",
  "that's Nesa's role since the spring" say that the thing just named (a name, a number, a
  code, "a pharmacist", "mint green") is the speaker's or someone's manager, favourite colour
  or role; "that's what I drive now" that the speaker drives it, "that's where Nukei lives" that
  Nukei lives in the place just named. The clause is rewritten with
  that thing in place: "my manager is Serok", "I drive Kia Niro now";
* **a pronoun of place**: "I just settled there" after "near the station in Graz" is
  "I just settled in Graz".

Each derived clause is plain text; the reader reads it like any other clause. Pure standard
library, like the rest of :mod:`mnemonia.scoring`: no I/O, no time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

__all__ = ["derived"]

_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_PART = re.compile(r"\s*(?:[,:;]|\s[-–—])\s+(?:(?:and|but|so|since|because)\s+)?")
_REPORTED = re.compile(
    r"^(?:and\s+)?(?:it|this|that|the \w+|my \w+|your \w+)\s+(?:says|said|states|reads|shows"
    r"|lists|mentions)\s+(?:that\s+)?(?P<content>\w.*)$", re.IGNORECASE)
_DEMONSTRATIVE = re.compile(
    r"^(?:and\s+|since\s+|because\s+)?(?:that|it|this)(?:'s|’s|\s+is)\s+(?:now\s+|also\s+|still\s+)?"
    r"(?P<who>my|our|his|her|their|[A-Z][\w-]*(?:'s|’s))\s+(?P<rest>[a-z].*)$", re.IGNORECASE)
_WHAT = re.compile(
    r"^(?:and\s+|since\s+|because\s+)?(?:that|it|this)(?:'s|’s|\s+is)\s+(?P<wh>what|where|who)\s+"
    r"(?P<who>i|we|he|she|they|[A-Z][\w-]*)\s+(?P<verb>[a-z]+)\b(?P<tail>.*)$", re.IGNORECASE)
_THERE = re.compile(r"\b(?:settled|live[sd]?|living|based|moved|staying|working|work)\s+there\b",
                    re.IGNORECASE)
# the end of a kind's noun: "role since the spring", "manager now"
_NOUN_END = frozenset(("since", "now", "these", "for", "at", "and", "but", "so", "as", "from",
                       "to", "in", "on", "after", "before", "until", "too", "also", "again",
                       "anyway", "though", "right", "today", "this", "then"))
_NUMBERISH = re.compile(r"(?:[$€£]\s?)?\d[\d,.]*(?:\s\d{2,4})*(?:\s?(?:%|k\b))?"
                        r"|\b[a-z]+(?:-[a-z0-9]+)+\b")
_A_THING = re.compile(r"\b(?:a|an)\s+([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)\s*[?.!]?$")
_LEADING = re.compile(r"^(?:something|anything|maybe|probably|definitely)?\s*"
                      r"([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)\s+(?:would|will|could|should|is|"
                      r"looks|sounds|seems|works)\b")
_VAGUE = frozenset(("something", "anything", "maybe", "probably", "definitely"))
_PLACE = re.compile(r"\b(?:in|at|to|near|from)\s+((?:[A-Z][\w'-]*\s?)+)")


def _parts(text: str) -> list[str]:
    out: list[str] = []
    for sentence in _SENTENCE.split(text.strip()):
        for part in _PART.split(sentence.strip()):
            part = part.strip().rstrip(".!;")
            if part:
                out.append(part)
    return out


def _antecedent(previous: str, names: Callable[[str], list[str]], skip: set[str]) -> str | None:
    """The thing ``previous`` names last: a number or code, else a name (not one of ``skip``,
    the subject's), else a trailing "a/an X" ("for a pharmacist?"), else a leading noun phrase
    ("mint green would be ideal")."""
    prev = previous.rstrip("?.! ")
    numbers = [m.group(0).strip(" ,.") for m in _NUMBERISH.finditer(prev)
               if any(ch.isdigit() for ch in m.group(0))]
    if numbers:
        return numbers[-1]
    found = [n for n in names(prev) if n not in skip and n.split()[0] not in _VAGUE]
    if found:
        low = prev.lower()
        name = found[-1]
        at = low.rfind(name)
        return prev[at:at + len(name)] if at >= 0 else name
    thing = _A_THING.search(prev.lower() + "?")
    if thing:
        return thing.group(1)
    lead = _LEADING.match(prev.lower())
    if lead:
        return lead.group(1)
    return None


def _whose(who: str, text: str, names: Callable[[str], list[str]], value: str) -> str | None:
    """The possessive of the clause's owner: ``my``/``our`` as said, a name's as said, and
    ``his``/``her``/``their`` the one person the message names (beside the value), else None."""
    low = who.lower()
    if low in ("my", "our") or low.endswith(("'s", "’s")):
        return who
    people = [n for n in dict.fromkeys(names(text)) if n != value.lower()]
    if len(people) == 1:
        return people[0].title() + "'s"
    return None


def _put_place(place: str, match: re.Match[str]) -> str:
    """'settled there' with 'there' replaced by the place it stands for ('in Lisbon')."""
    return match.group(0)[:-len("there")] + place


def derived(text: str, names: Callable[[str], list[str]]) -> list[str]:
    """The clauses of ``text`` a reader can take as statements besides its sentences (see the
    module docstring); ``names`` lists the names a clause holds, lower-cased."""
    parts = _parts(text)
    if len(parts) < 2:
        return []
    out: list[str] = []
    sentences = [s.strip().rstrip(".!;") for s in _SENTENCE.split(text.strip())]
    for i, part in enumerate(parts):
        reported = _REPORTED.match(part)
        if reported:
            out.append(reported.group("content"))
            continue
        if i == 0:
            if part not in sentences:
                out.append(part)
            continue
        previous = parts[i - 1]
        shown = _DEMONSTRATIVE.match(part)
        if shown:
            words = shown.group("rest").split()
            cut = next((k for k, w in enumerate(words) if k and w.lower() in _NOUN_END),
                       len(words))
            noun, tail = " ".join(words[:cut]), " ".join(words[cut:])
            owner = shown.group("who").lower().removesuffix("'s").removesuffix("’s")
            value = _antecedent(previous, names, {owner})
            whose = value and _whose(shown.group("who"), text, names, value)
            if value and whose:
                out.append(f"{whose} {noun} is {value} {tail}".strip())
            continue
        what = _WHAT.match(part)
        if what:
            who = what.group("who")
            value = _antecedent(previous, names, {who.lower()})
            if value:
                verb, tail = what.group("verb"), what.group("tail")
                into = "in " if what.group("wh") == "where" else ""
                if tail.startswith((" to ", " with ", " for ")) or tail in (" to", " with"):
                    into, tail = tail.split()[0] + " ", tail[len(tail.split()[0]) + 1:]
                out.append(f"{who} {verb} {into}{value}{tail}".strip())
            continue
        if _THERE.search(part):
            places = _PLACE.findall(previous)
            if places:
                there = "in " + places[-1].strip()
                out.append(_THERE.sub(functools.partial(_put_place, there), part))
            continue
        if part not in sentences:
            out.append(part)
    return out
