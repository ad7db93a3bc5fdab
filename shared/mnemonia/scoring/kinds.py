"""The kinds of fact a statement may be about (DESIGN section 5b): home, employer, partner,
a favourite thing, a deadline, ... each with its cardinality (``one`` value at a time, or
``many``), read from the words of a clause by :func:`kind_of`, and the words that name each
kind (:func:`kind_words`). :mod:`mnemonia.scoring.statements` reads statements with them.

Pure standard library, like the rest of :mod:`mnemonia.scoring`: no I/O, no time.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mnemonia.scoring.activation import STOP_WORDS

__all__ = ["ATTRIBUTES", "ATTRIBUTE_PATTERNS", "MANY", "ONE", "WITHDRAWS_TOO", "alternatives",
           "favourite", "kind_of", "kind_words", "literals"]

ONE, MANY = "one", "many"

# (attribute, cardinality, pattern over the lower-cased clause). The first that matches
# names the attribute; specific kinds come before the general ones they overlap with.
ATTRIBUTE_PATTERNS: tuple[tuple[str, str, str], ...] = (
    ("password", ONE, r"\bpassword\b|\bpasscode\b|\bwi-?fi\b"),
    ("phone", ONE, r"\bphone\b|\bmobile\b|\b(?:phone|mobile|cell) number\b|\breach \w+ on\b"
                   r"|\bcall \w+ on\b|\bnumber (?:changed|is)\b|\bmy number\b|\bnumber should\b"),
    ("email", ONE, r"\be-?mail(?: address)?\b"),
    ("deadline", ONE, r"\bdeadline\b|\bdue\b|\bpushed \w+ .*\bto\b"),
    ("coverage", ONE, r"\bcoverage\b|\bcovered by tests\b"),
    ("quota", ONE, r"\bquota\b|\brequests? (?:a|per) day\b|\bapi limit\b|\brate limit\b"),
    ("word_target", ONE, r"\bwords? (?:a|per) week\b|\bword (?:target|goal|count goal)\b"
                         r"|\bweekly (?:word )?(?:target|goal)\b"),
    ("budget", ONE, r"\bbudget\b|\bspends? (?:at most|up to)\b|\bspends? each month\b"
                    r"|\bcan \w+ spend\b"),
    ("salary", ONE, r"\bsalary\b|\bearns?\b|\bpaid\b"),
    ("rent", ONE, r"\brent\b"),
    ("gym", ONE, r"\bgym\b"),
    ("team", ONE, r"\bteam\b"),
    ("manager", ONE, r"\bmanager\b|\bboss\b|\breports? to\b|\bone-to-one with\b"
                     r"|\bapproves [\w']+ leave\b|\bmanagers?\b"),
    ("partner", ONE, r"\bpartner\b|\brelationship\b|\bdating\b"
                     r"|\b(?:i'm|am|is|are|been|not) seeing\b|\bgirlfriend\b"
                     r"|\bboyfriend\b|\bwife\b|\bhusband\b|\bmarried\b|\bsplit up\b"
                     r"|\bbroke up\b|\bsingle now\b|\bdate night\b"),
    ("leader", ONE, r"\bled by\b|\bleads?\b|\bheaded by\b|\bheads\b|\bin charge of\b"
                    r"|\bceo\b|\bchair(?:ed)? by\b|\bmanaged by\b|\bowned by\b"),
    ("os", ONE, r"\blaptop\b|\boperating system\b|\bos\b"),
    ("language", MANY, r"\bspeaks?\b|\blanguages?\b|\bconversation in\b|\bget by in\b"
                       r"|\bpicked up \w+ on top\b"),
    ("allergy", MANY, r"\ballerg\w*"),
    ("pet", MANY, r"\bpets?\b|\badopted\b|\banimals?\b|\bfeed\b|\bdog\b|\bcat\b"),
    ("hobby", MANY, r"\bhobb\w*|\bfree time\b|\bfor fun\b|\btook up\b|\bclub\b"),
    ("music", MANY, r"\bmusic\b|\blisten\w*\b|\bgenres?\b|\bplaylist\b"),
    ("food", MANY, r"\bfood\b|\bdish\w*|\beat\w*\b|\brestaurant\b|\bcraving\b|\bcuisine\b"),
    ("car", ONE, r"\bcar\b|\bcars\b|\bdrives?\b|\bdriving\b|\bdrove\b|\bcar-free\b"),
    ("job", ONE, r"\bjob title\b|\bwork(?:s|ing)? as (?:a|an)\b|\bfor a living\b|\bcareers?\b"
                 r"|\bpromoted\b|\brole\b|\bprofession\b|\boccupation\b|\bjob\b(?! at)"
                 r"|^(?:i'm|i am|\w+ is) (?:a|an) \w+(?: \w+)?\.?$|\bnow (?:a|an)\b"
                 r"|\bofficially (?:a|an)\b|\bbecome (?:a|an)\b|\bused to be (?:a|an)\b"),
    ("employer", ONE, r"\bwork(?:s|ing|ed)? (?:at|for)\b|\bemployed\b|\bemployer\b|\bjobs\b"
                      r"|\bjoined\b|\bjob at\b|\bcompany\b|\bquit\b|\bbetween jobs\b"
                      r"|\bnot working\b|\bjob\b|\bcv\b|\bfirst day at\b|\bwork at\b"),
    ("home", ONE, r"\blive[sd]?\b|\bliving\b(?! room)|\bbased in\b|\bhome\b|\bmoved to\b|\bmove\b"
                  r"|\bmoving\b|\brelocat\w*|\bsettled\b|\breside\w*|\baddress\b|\bcity\b"),
    ("likes", MANY, r"\blikes?\b|\bloves?\b|\benjoys?\b|\bfan of\b|\binto\b"),
    ("visited", MANY, r"\bvisited\b|\bbeen to\b|\btravel\w*\b|\btrip\b"),
    ("friend", MANY, r"\bfriends?\b"),
    ("owns", MANY, r"\bown\b|\bowns\b|\bhave (?:a|an|two|three)\b|\bhas (?:a|an|two|three)\b"),
)
ATTRIBUTES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (name, card, re.compile(pattern)) for name, card, pattern in ATTRIBUTE_PATTERNS)
"""``(attribute, cardinality, pattern)``: the kinds of fact whose cardinality is known."""


def alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a regular expression."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        depth += ch == "("
        depth -= ch == ")"
        if ch == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*out, pattern[start:]]


def _group_end(alt: str) -> int:
    """The index of the parenthesis that closes the group ``alt`` starts with."""
    depth = 0
    for i, ch in enumerate(alt):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i
    raise ValueError(f"unbalanced group in {alt!r}")


def literals(pattern: str) -> frozenset[str] | None:
    """Strings one of which every match of ``pattern`` contains (the literal start of each
    alternative), or None when an alternative starts with no literal."""
    found: set[str] = set()
    for alt in alternatives(pattern):
        if not alt.startswith(("^", "\\b")):
            return None  # may match inside a word: no word start to look for
        alt = alt.removeprefix("^").removeprefix("\\b")
        if alt.startswith("(?:"):
            end = _group_end(alt)
            if alt[end + 1:end + 2] in ("?", "*", "{"):
                return None
            inner = literals("|".join("\\b" + a for a in alternatives(alt[3:end])))
            if inner is None:
                return None
            found |= inner
            continue
        lit = re.match(r"[a-z0-9 '-]*", alt).group(0)  # type: ignore[union-attr]
        if alt[len(lit):len(lit) + 1] in ("?", "*", "{"):
            lit = lit[:-1]
        if not lit:
            return None
        found.add(lit)
    return frozenset(found)


_PREFIX = 3


def _triggers() -> tuple[tuple[int, ...], dict[str, tuple[int, ...]]]:
    """The kinds of fact always read, and per word start (its first three letters, or the
    whole of a shorter literal) the kinds a word so starting may state."""
    always: list[int] = []
    by_start: dict[str, set[int]] = {}
    for i, (_, _, pattern) in enumerate(ATTRIBUTE_PATTERNS):
        lits = literals(pattern)
        if lits is None:
            always.append(i)
            continue
        for lit in lits:
            by_start.setdefault(lit[:_PREFIX], set()).add(i)
    return tuple(always), {k: tuple(sorted(v)) for k, v in by_start.items()}


_ALWAYS, _BY_START = _triggers()
_STARTS = re.compile(rf"\b(?=(\w.{{0,{_PREFIX - 1}}}))").findall
"""Every match of a kind's pattern starts a word with one of its literals: a clause none of
whose words starts so skips the pattern (most clauses of a chat state no kind of fact, and
each of the ~30 patterns was searched in each: 1.2 s of 3.6 s over 6,760 chat texts)."""


def favourite(low: str) -> tuple[str, str] | None:
    """``("favourite <noun>", ONE)`` when the clause names a favourite, else None."""
    fav = _FAVOURITE.search(low)
    return None if fav is None else (f"favourite {next(g for g in fav.groups() if g)}", ONE)


def kind_of(masked: str) -> tuple[str | None, str | None]:
    """The first kind of fact of :data:`ATTRIBUTES` whose pattern ``masked`` matches."""
    starts: set[str] = set()
    for w in _STARTS(masked):
        starts.update((w[:1], w[:2], w))
    read = set(_ALWAYS)
    for start in starts & _BY_START.keys():
        read.update(_BY_START[start])
    for i in sorted(read):
        name, card, pattern = ATTRIBUTES[i]
        if pattern.search(masked):
            return name, card
    return None, None

_FAVOURITE = re.compile(r"\bfavou?rite (\w+)|\bmore than any other (\w+)"
                        r"|\bwhich (\w+) (?:do|does) \w+ like best\b")


WITHDRAWS_TOO = {"job": "employer", "employer": "job"}
"""A retraction that names no value withdraws this kind of fact too: "I don't have a job
anymore" leaves no employer, "I'm not working anywhere" no job title."""


@lru_cache(maxsize=64)
def kind_words(attribute: str) -> tuple[str, ...]:
    """The whole words that name a kind of fact in :data:`ATTRIBUTES` ("manager": boss,
    manager, report), and those of the kind a retraction of it withdraws too: what to look
    for, beside the subject, among older statements of that kind."""
    kinds = {attribute, WITHDRAWS_TOO.get(attribute, attribute)}
    found: set[str] = set()
    for name, _, pattern in ATTRIBUTE_PATTERNS:
        if name in kinds:
            found.update(w for w in (lit.strip() for lit in literals(pattern) or ())
                         if w.isalpha() and len(w) > 2 and w not in STOP_WORDS)
    return tuple(sorted(found))
