"""What a statement says, and whether a newer one replaces an older one (DESIGN section 5b).

A statement is read, without a model, into a *slot* and a *value*:

* the **subject**: the speaker for a first-person statement ("I moved to Denver" said by Ana
  is about Ana), else the person it names as its subject ("Rotir's car", "Rotir works at");
* the **attribute**: a kind of fact from :data:`ATTRIBUTES` (home, employer, partner, a
  favourite thing, a deadline, ...), each with its cardinality (``one`` value at a time, or
  ``many``), or, for kinds not in the table, the statement's own content words with the
  value left out (its *frame*);
* the **values**: names, places, numbers, amounts, dates and codes it states, and the words
  left over when two statements of the same frame are compared;
* its **mode**: a question, a hypothetical or a past event states nothing current; a change
  cue ("moved to", "switched to", "no longer", "instead of", "from ... to ...") says that a
  value replaced another; an additive cue ("also", "too", "as well") that it did not; a
  retraction ("I don't have a car anymore") withdraws a value without a new one; a negation
  ("is not rate-limited") contradicts the same statement without it.

:func:`decide` compares an older and a newer statement of the same tenant and answers
``supersedes``, ``contradicts`` or nothing, with the evidence (the shared slot, both
values, the cue, a confidence). Cardinality decides the bare restatements: a ``one``
attribute is replaced by a new value, a ``many`` attribute never is, and an attribute of
unknown cardinality only on an explicit change cue.

Pure standard library, like the rest of :mod:`mnemonia.scoring`: no I/O, no time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from mnemonia.scoring.activation import STOP_WORDS
from mnemonia.scoring.clauses import derived
from mnemonia.scoring.kinds import (
    ATTRIBUTE_PATTERNS,
    ATTRIBUTES,
    MANY,
    ONE,
    WITHDRAWS_TOO,
    alternatives,
    favourite,
    kind_of,
    kind_words,
)
from mnemonia.scoring.stemming import stem

__all__ = ["ATTRIBUTES", "CALENDAR", "FIRST_PERSON", "MANY", "ONE", "Decision", "Statement",
           "analyse", "decide", "differs", "favourite", "kind_lexicon", "kind_of", "kind_words",
           "may_replace", "names_in", "withdraws"]

# Words that name another thing of the same kind: "my office's wifi password" is not "the wifi
# password at my place", "my dream car" is not "my car". A slot with one of these that the
# other statement lacks is another slot.
_QUALIFIER = re.compile(
    r"\b(?:office|work (?:landline|desktop|phone|email|laptop|number|address|computer)"
    r"|desktop|server|landline|emergency|dream|company|van|side gig|side|yearly|annual|travel"
    r"|visa|dentist|appointment|renewal|client|mentor|landlord|flatmate|best friend|school"
    r"|thesis|subscribers|newsletter|tickets|cpu|piano|grocery|shopping|volunteers?"
    r"|originally|ex|former|previous|sister|brother|mother|father|mum|mom|dad|son|daughter"
    r"|kids?|child)\b")
"""Words that name another thing of the same kind: "the wifi password at my office" is not
"the wifi password at my place", "my dream car" is not "my car". A slot with one of these
that the other statement lacks is another slot."""

# The complement of a copula, for values no pattern types ("I'm a nurse", "my favourite
# colour is mint green"): up to three words after it, up to a stop or cue word.
_COMPLEMENT = re.compile(
    r"(?:\b(?:is|are|am|be|become|as|it's|i'm|he's|she's|they're)|'s|'m)"
    r"\s+(?:now\s+|officially\s+|still\s+|currently\s+)?(?:a\s+|an\s+|the\s+)?"
    r"([a-z][a-z-]*(?:\s+[a-z][a-z-]*){0,2})")
_OBJECT = re.compile(r"\b(?:love|loves|like|likes|enjoy|enjoys)\s+([a-z][a-z-]*(?:\s+[a-z][a-z-]*)"
                     r"{0,1})\s+more than\b|\b([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)\s+is\s+"
                     r"(?:my|\w+'s|his|her|their)\s+favou?rite\b")

_CHANGE = re.compile(
    r"\b(?:moved to|moved (?:my|his|her|their|our|\w+'s) [\w ]{0,30}?(?:to|from)|moved from"
    r"|moving to|relocated|switched(?: \w+)? to|switched|changed to|changed|change"
    r"|instead of|no longer|not \w+ anymore|anymore|any more|used to|from [\w$.,%' -]{1,40}? to"
    r"|now|these days|since (?:the|may|june|july|then|last)|update:|updated?|actually"
    r"|new|newly|got promoted|promoted|joined|left|quit|sold|replaced|reset|raised|lowered"
    r"|increased|decreased|cut|adjusted|went from|has now reached|now reached|pushed|is gone"
    r"|split up|broke up|starting (?:this|next|today)|as of|officially|just settled|over)\b")
_ADDITIVE = re.compile(r"\b(?:also|too|as well|on top of|besides|alongside|in addition"
                       r"|another|added|both)\b")
_RETRACT = re.compile(
    r"(?<!won't )(?<!never )(?<!not )(?<!don't )(?<!can't )"
    r"\b(?:no longer|not \w+ (?:anywhere|anyone|anything)|(?:don't|doesn't|do not|does not)"
    r" (?:have|own|work|live|drive) [\w ]{0,30}?(?:anymore|any more)|anymore|any more"
    r"|between jobs|single now|car-free|quit|stopped|cancelled|canceled|broke up|split up"
    r"|not (?:seeing|working|dating) \w+|sold the)\b")
_HYPOTHETICAL = re.compile(
    r"\b(?:might|maybe|perhaps|would|could|if|thinking about|thinking of|considering"
    r"|tempted|someday|some day|one day|plan to|planning|hope|hopes|hoping|want to|wants to"
    r"|would like|dream|should)\b|'d\b")
_PAST = re.compile(r"\b(?:last (?:year|week|weekend|month|summer|spring|winter|autumn|night)"
                   r"|years ago|yesterday|back in|in college|as a kid|once|was \w+ when"
                   r"|visited|spent|interviewed|internship|shadowed|test-drove|rented|tried"
                   r"|wore|painted|submitted|wrote|used \d|skipped|had lunch|had dinner"
                   r"|went on|worked under|worked as|called)\b")
_NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b")
FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|us)\b")
_POSSESSIVE = re.compile(r"\b([A-Z][\w-]+)(?:'s|’s)\b")
_NAME = re.compile(r"\b(?:[A-Z]|[a-z]+[A-Z])[\w'’-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’-]*)*")
_NUMBER = re.compile(
    r"(?:[$€£]\s?)?\d[\d,.]*(?:\s?(?:%|k\b|m\b))?(?:\s\d{2,4})*(?:\s(?:words?|requests?|km|kg"
    r"|miles?|hours?|minutes?|days?|weeks?|months?|years?|percent|dollars|euros|pounds))?")
_CODE = re.compile(r"\b[a-z]+(?:-[a-z0-9]+)+\b|\b\w*\d\w*\b")
_MONTH = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_DATE = re.compile(r"\b(?:" + "|".join(_MONTH) + r")\s+\d{1,2}(?:st|nd|rd|th)?\b|\b\d{1,2}"
                   r"(?:st|nd|rd|th)?\s+(?:" + "|".join(_MONTH) + r")\b|\b\d{4}-\d{2}-\d{2}\b")
_EVENT = re.compile(r"\b(launch|release|meeting|appointment|wedding|interview|exam|flight"
                    r"|surgery|premiere|opening)(?:e?s|ed|ing)?\b")
"""A planned event whose date a clause with a date gives (one date at a time)."""
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b")
_SPLIT = re.compile(r"(?<=[.!?;])\s+")
_WORD = re.compile(r"[a-z0-9][a-z0-9'’-]*")
_DIGIT = re.compile(r"\d").search
# Sentence openers that are capitalised but name nothing.
_OPENERS = frozenset((
    "update", "actually", "home", "since", "starting", "change", "can", "could", "what", "how",
    "any", "remind", "help", "write", "maybe", "if", "turns", "these", "besides", "on", "one",
    "test",
    "coverage", "the", "my", "our", "your", "his", "her", "their", "is", "do", "does", "should",
    "who", "which", "where", "when", "why", "will", "would", "i", "i'm", "i've", "i'd", "we",
    "we're", "we've", "please", "yes", "no", "ok", "okay", "so", "and", "but", "also",
    "starting", "only", "it", "it's", "that", "that's", "there", "there's", "they", "she",
    "he", "you", "a", "an", "in", "at", "for", "to", "from", "with", "after", "before",
    "today", "tonight", "yesterday", "tomorrow", "hey", "hi", "hello", "thanks", "sure",
    "well", "oh", "wow", "great", "good", "nice", "here", "let's", "give", "explain", "did",
    "have", "has", "had", "am", "are", "was", "were", "not", "just", "now", "then", "still",
    "wifi", "api", "mobile", "phone", "rent", "internet", "parking", "petrol", "our", "lots",
    "deadlines", "performance", "wedding", "spam", "writer's", "packing", "groceries",
    "there", "some", "every", "each", "all", "most", "many", "much", "more", "less",
))
CALENDAR = frozenset((*_MONTH, "monday", "tuesday", "wednesday", "thursday", "friday",
                       "saturday", "sunday", "mondays", "tuesdays", "wednesdays", "thursdays",
                       "fridays", "saturdays", "sundays"))
_LED = re.compile(r"\b(?:leads|heads|runs|manages|chairs)\s+((?:[A-Z][\w-]*\s?)+)"
                  r"|((?:[A-Z][\w-]*\s?)+?)\s+is\s+(?:now\s+)?(?:led|headed|run|managed|chaired)"
                  r"\s+by\b")
_DEVICE_RUNS = re.compile(r"\b(?:laptop|computer|pc|desktop|machine|phone|server|tablet)"
                          r"\s+(?:now\s+)?runs\b")
# kinds whose values are often common words ("I'm a nurse", "my laptop runs linux")
_AMOUNTS = frozenset(("budget", "salary", "rent", "quota", "word_target", "coverage", "phone"))
"""Kinds of fact whose value is a number: only a new number replaces one."""
_LOWERCASE_VALUES = frozenset(("job", "os", "car", "leader"))
_NOT_NAMES = frozenset(("let", "having", "that", "it", "what", "there", "here", "he", "she",
                        "who", "everyone", "everybody", "nobody", "somebody", "today", "time",
                        "those", "these", "this", "thanks", "thank"))
_PRONOUNS = frozenset(("i", "i'm", "i've", "i'd", "i'll"))
_NOT_VALUES = frozenset(
    [
        "based", "living", "moving", "thinking", "considering", "tempted", "single", "free",
        "over", "sure", "fine", "here", "there", "ok", "okay", "good", "great", "busy", "tired",
        "allergic", "employed", "dating", "seeing", "working", "aiming", "officially", "going",
        "getting", "trying", "done", "back", "able", "happy", "sorry", "glad", "afraid", "in",
        "on", "at", "with", "for",
    ])
_CUE_WORDS = frozenset(
    [
        "moved", "move", "moving", "relocated", "switched", "changed", "change", "instead",
        "longer", "anymore", "any", "used", "now", "these", "days", "since", "update",
        "updated", "actually", "new", "newly", "promoted", "joined", "left", "quit", "sold",
        "replaced", "reset", "raised", "lowered", "increased", "decreased", "cut", "adjusted",
        "went", "reached", "pushed", "gone", "officially", "starting", "over", "also", "too",
        "well", "top", "besides", "alongside", "addition", "another", "added", "both", "not",
        "no", "never", "don't", "doesn't", "isn't", "aren't", "won't", "can't", "just",
        "recently", "lately",
    ])


@dataclass(frozen=True)
class Statement:
    """One clause read for :func:`decide` (see the module docstring)."""

    subject: str
    """``self:<speaker>`` for first person, ``name:<name>`` for a named subject, or ``""``."""
    attribute: str | None
    cardinality: str | None
    frame: frozenset[str]
    """Content stems with values, the subject, cues and stop words left out."""
    values: frozenset[str]
    """Normalised typed values: names, numbers, amounts, dates, weekdays, codes."""
    words: frozenset[str]
    """Every content stem of the clause (values included)."""
    qualifiers: frozenset[str]
    cue: str | None
    additive: bool
    retraction: bool
    negated: bool
    asserts: bool
    """False for questions, hypotheticals and past events: they state nothing current."""
    text: str = field(compare=False)


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` found: ``kind`` is ``supersedes`` or ``contradicts``."""

    kind: str
    confidence: float
    slot: str
    old_value: str
    new_value: str
    cue: str | None
    reason: str

    def evidence(self) -> dict[str, object]:
        """The JSON-safe evidence kept in the event history."""
        return {"automatic": True, "kind": self.kind, "slot": self.slot,
                "old_value": self.old_value, "new_value": self.new_value, "cue": self.cue,
                "confidence": round(self.confidence, 3), "reason": self.reason}


def names_in(clause: str) -> list[str]:
    found = []
    for m in _NAME.finditer(clause):
        words = m.group(0).split()
        at_start = m.start() == 0 or bool(re.search(r"[.!?,;:]\s*$", clause[:m.start()]))
        while words and (words[0].lower().strip("'’") in _PRONOUNS or (at_start
                         and words[0].lower().strip("'’") in _OPENERS)):
            words, at_start = words[1:], False
        if words and words[0].lower().strip("'’").removesuffix("'s") not in _NOT_NAMES:
            found.append(" ".join(words).lower().removesuffix("'s").removesuffix("’s"))
    return found


def _stems(words: list[str]) -> set[str]:
    return {stem(w.strip("'’")) for w in words if w not in STOP_WORDS and len(w) > 1
            and w.split("'")[0] not in STOP_WORDS and not w.endswith("n't")}


_ASIDE = re.compile(r"\([^()]*\)")
"""A parenthesised aside, whose numbers, dates and codes are not a stated value."""


@lru_cache(maxsize=65536)
def analyse(text: str, speaker: str | None = None) -> tuple[Statement, ...]:
    """Each clause of ``text`` (said by ``speaker``) as a :class:`Statement`."""
    clauses = [c.strip() for c in _SPLIT.split(text.strip()) if c.strip()]
    out = [_clause(c, speaker, text) for c in clauses]
    if len(out) > 1 and any(c.endswith("?") for c in clauses) and any(
            s.asserts for s, c in zip(out, clauses, strict=True) if not c.endswith("?")):
        # a request that states a fact ("How do I set up a printer on Fedora? The laptop
        # has it now"): the value may sit in the question, the statement in another clause
        whole = _clause(" ".join(c.rstrip("?") + ("," if c.endswith("?") else "")
                                 for c in clauses), speaker, text, requests=True)
        out.append(whole)
    for part in derived(text, names_in):
        s = _clause(part, speaker, text)
        if s.attribute is not None and s.asserts and s not in out:
            out.append(s)
    return tuple(out)


def _clause(clause: str, speaker: str | None, text: str, *, requests: bool = False
            ) -> Statement:
    low = clause.lower().replace("’", "'")
    question = clause.rstrip().endswith("?")
    names = [n for n in names_in(clause) if n not in CALENDAR]
    possessive = [m.group(1).lower() for m in _POSSESSIVE.finditer(clause)
                  if m.group(1).lower() not in _OPENERS | _NOT_NAMES]
    first = bool(FIRST_PERSON.search(low))
    lead = re.sub(r"^(?:actually|update|so|well|also|oh|and|but|now)\W+", "", low)
    subject_name: str | None = None
    if possessive:
        subject_name = possessive[0]
    elif re.match(r"^(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our|me)\b|^\w+ and i\b", lead):
        pass
    elif names and (lead.startswith(names[0]) or (not first and not re.search(
            r"\b(?:is|are|was|were|be|to|by|from|at|in|on)\s+(?:now\s+)?"
            + re.escape(names[0]), low))):
        subject_name = names[0]  # "Remind Rotir to pack": a name, not a stated value
    if subject_name is not None:
        subject = f"name:{subject_name}"
    elif first:
        subject = f"self:{(speaker or '').strip().lower()}"
    else:
        subject = ""
    values: set[str] = set()
    # an aside in parentheses ("(note 3)", "(ticket 4471)") states no value of the fact
    spans: list[tuple[int, int]] = [m.span() for m in _ASIDE.finditer(low)]
    for rx in (_DATE, _NUMBER):
        for m in rx.finditer(low):
            v = m.group(0).strip(" ,.")
            if any(ch.isdigit() for ch in v) and not any(a <= m.start() < b for a, b in spans):
                values.add(re.sub(r"[\s,]", "", v))
                spans.append(m.span())
    for m in _WEEKDAY.finditer(low):
        if any(a <= m.start() < b for a, b in spans):
            continue
        values.add(m.group(1))
        spans.append(m.span())
    for m in _CODE.finditer(low):
        # ("car-free", "one-to-one" name a kind of fact, not a value of it)
        if not any(a <= m.start() < b for a, b in spans) and (
                _DIGIT(m.group(0)) or kind_of(m.group(0))[0] is None):
            values.add(m.group(0))
    subject_words = set(subject_name.split()) if subject_name else set()
    for n in names:
        if n != subject_name and n not in subject_words:
            values.add(n)
    led = _LED.search(clause)
    if led and _DEVICE_RUNS.search(low):
        led = None  # "my laptop runs Linux": an operating system, not a leader
    if led:  # "Lee Chen leads Project Atlas": the slot is Project Atlas's leader
        lead_name = (led.group(1) or led.group(2)).strip().lower()
        subject, subject_name = f"name:{lead_name}", lead_name
        values = {v for v in values if v != lead_name}
        values |= {n for n in names if n != lead_name}
    masked = low
    for v in sorted(values, key=len, reverse=True):
        if not v.isdigit() and len(v) > 2 and v in masked:
            masked = masked.replace(v, " ")
    attribute, cardinality = favourite(low) or kind_of(masked)
    event = _EVENT.search(low) if attribute in (None, "home") and _DATE.search(low) else None
    if event is not None:  # "the launch moved to April 28th": the launch's date, not a home
        attribute, cardinality = f"{stem(event.group(1))} date", ONE
        if subject_name is None:  # "we are launching", "the launch": the event's own slot
            subject = f"event:{stem(event.group(1))}"
    if attribute is not None and (attribute.startswith("favourite") or attribute == "job"
                                  or (not values and attribute in _LOWERCASE_VALUES)):
        complements = _complements(low, attribute)
        values |= complements
        for v in complements:  # "high school teacher" names no other school
            masked = masked.replace(v, " ")
    words = _WORD.findall(low)
    all_stems = _stems(words)
    value_words = {w for v in values for w in _WORD.findall(v)}
    frame = _stems([w for w in words if w not in value_words and w not in subject_words
                    and not _DIGIT(w)
                    and w.removesuffix("'s") not in subject_words and w not in _CUE_WORDS])
    cue_match = _cue(low, attribute)
    asserts = requests or (not question and not _HYPOTHETICAL.search(low) and not (
        _PAST.search(low) and not cue_match))
    qualifiers = frozenset(m.group(0) for m in _QUALIFIER.finditer(masked))
    return Statement(
        subject=subject, attribute=attribute, cardinality=cardinality, frame=frozenset(frame),
        values=frozenset(values), words=frozenset(all_stems), qualifiers=qualifiers,
        cue=cue_match.group(0) if cue_match else None,
        additive=bool(_ADDITIVE.search(low)), retraction=bool(_RETRACT.search(low)),
        negated=bool(_NEGATION.search(low)), asserts=asserts, text=text)


def _complements(low: str, attribute: str | None) -> set[str]:
    """Untyped values: the object of a favourite, or a copula's complement."""
    found = set()
    for m in _OBJECT.finditer(low):
        found.add(next(g for g in m.groups() if g))
    if not found:
        # each copula in turn: in "Rotir's job title is nurse" the complement of "'s" ends
        # at "is", whose own complement is the value
        pos = 0
        while (c := _COMPLEMENT.search(low, pos)) is not None:
            pos = c.start(1)
            kept: list[str] = []
            for w in c.group(1).split():
                if not kept and w in ("not", "never", "no"):
                    continue
                if w in STOP_WORDS or w in _CUE_WORDS or w in _NOT_VALUES:
                    break
                kept.append(w)
            if kept:
                found.add(" ".join(kept))
    if attribute is not None:
        noun = attribute.removeprefix("favourite ")
        found = {v for v in found if v != noun and not v.startswith(noun + " ")
                 and kind_of(v)[0] != attribute}  # "car-free" names the kind, not a car
    return found


def _mentions(s: Statement, value: str) -> bool:
    low = s.text.lower().replace("’", "'")
    return value in low or value in {re.sub(r"[\s,]", "", v) for v in s.values}


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def withdraws(s: Statement, attribute: str | None) -> bool:
    """Whether ``s`` withdraws a value of ``attribute`` (its own kind, or a related one when
    it retracts without naming a value)."""
    return attribute is not None and (s.attribute == attribute or (
        s.retraction and not s.values and WITHDRAWS_TOO.get(s.attribute or "") == attribute))


def _cue(low: str, attribute: str | None) -> re.Match[str] | None:
    """The clause's first change cue; "new" before a word of another kind of fact is none
    ("the team bought a new laptop" changes no team)."""
    for m in _CHANGE.finditer(low):
        if m.group(0) == "new" and attribute is not None:
            after = _WORD.findall(low[m.end():m.end() + 40])[:1]
            other = kind_of(after[0])[0] if after else None
            if other is not None and other != attribute:
                continue
        return m
    return None


@lru_cache(maxsize=64)
def kind_lexicon(attribute: str) -> tuple[str, ...]:
    """The single words that name a kind of fact in :data:`ATTRIBUTES` (each alternative of
    its pattern that is one plain word: "manager": boss, manager, managers), change cues and
    stop words left out: the words a statement of that kind may name it by."""
    pattern = next((p for name, _, p in ATTRIBUTE_PATTERNS if name == attribute), "")
    found: set[str] = set()
    for alt in alternatives(pattern):
        m = re.fullmatch(r"\\b([a-z][a-z-]+?)(s\?|\[sd\]\?|\(\?:[a-z|]+\)\?)?\\b"
                         r"(?:\(\?![^)]*\))?", alt)
        if m:
            found.update((m.group(1), m.group(1) + "s") if m.group(2) else (m.group(1),))
    return tuple(sorted(w for w in found if len(w) > 2 and w not in STOP_WORDS
                        and w not in _CUE_WORDS))


def _slot(a: Statement, b: Statement) -> tuple[str, float, str | None] | None:
    """``(slot, match, cardinality)`` when ``a`` and ``b`` fill the same slot (``b`` may
    withdraw a related kind: :data:`WITHDRAWS_TOO`), else None."""
    if a.attribute is not None and a.attribute == b.attribute:
        return a.attribute, 1.0, a.cardinality
    if a.attribute is not None and withdraws(b, a.attribute):
        return a.attribute, 1.0, a.cardinality
    if a.attribute is None or b.attribute is None or a.attribute.startswith(
            "favourite") != b.attribute.startswith("favourite"):
        j = _jaccard(a.frame, b.frame) if a.frame or b.frame else 1.0
        if j < 0.5 or ((a.frame or b.frame) and not (a.frame & b.frame)):
            return None
        return " ".join(sorted(a.frame & b.frame)), j, None
    return None


def _typed(old: Statement, new: Statement) -> bool:
    """Whether ``new`` gives another typed value (a name, number, date or code, not a
    copula's complement) of the same one-valued kind of fact as ``old``, both about a named
    or first-person subject ("the team reviewed ... in Cusco" and "the team needs ... in
    Oslo" say two things, no new value of one): said inside a
    request ("Can you draft a bio? I do backend work at Zeitraik Systems"), the value
    still replaces the old one, however much else the message says."""
    return (bool(old.subject) and old.attribute is not None
            and old.attribute == new.attribute and old.cardinality == ONE
            and not old.attribute.startswith("favourite")
            and old.attribute not in _LOWERCASE_VALUES and bool(new.values - old.values))


_REPLACING = re.compile(r"\b(?:sold|replaced|switched|swapped|traded|instead|left|quit|no longer"
                        r"|used to|moved)\b")
"""Cues that say a thing gave way to another ("sold ... and bought", "instead of"), not
merely that something is new or now."""


def _replaced(old: Statement, new: Statement) -> tuple[str, float, str | None] | None:
    """The slot of ``old`` when ``new``, of no known kind, names ``old``'s value beside a
    new one with a change cue ("Krilula sold the Volvo V60 and bought a Fiat Panda" after
    "Krilula's car is a Volvo V60"): the old value retired by name is the slot."""
    if old.attribute is None or new.attribute is not None or not (
            new.retraction or (new.cue and _REPLACING.search(new.cue))):
        return None
    if not (new.values - old.values) or not any(_mentions(new, v) for v in old.values):
        return None
    return old.attribute, 0.8, old.cardinality


def differs(a: Statement, b: Statement) -> bool:
    """Whether ``a`` and ``b`` state different values for the same slot of the same subject
    (a slot not known to hold many values): consolidation never merges such a pair, so a
    concept never holds two versions of one fact."""
    if a.subject != b.subject or a.qualifiers != b.qualifiers or not a.asserts or not b.asserts:
        return False
    found = _slot(a, b)
    return (found is not None and found[2] != MANY and bool(a.values - b.values)
            and bool(b.values - a.values))


def may_replace(new: Statement) -> bool:
    """Whether ``new`` could be the later side of a :func:`decide` at all (it asserts, and
    states a value, a retraction or a negation); when no clause of a memory can, the older
    memory of a pair need not be analysed."""
    return new.asserts and bool(new.values or new.retraction or new.negated)


def decide(old: Statement, new: Statement, *, threshold: float = 0.5) -> Decision | None:
    """Whether ``new`` (the later statement) supersedes or contradicts ``old``.

    Both must be about the same subject and the same slot (the same attribute, no qualifier
    on one side only; or, for an attribute not in :data:`ATTRIBUTES`, frames of Jaccard 0.5
    or more). Then: a retraction of the slot supersedes; a new value supersedes a ``one``
    attribute, or any attribute with a change cue, unless ``new`` is additive; the same
    value negated on one side only contradicts. ``None`` when the confidence is under
    ``threshold``."""
    if old.subject != new.subject or not old.asserts or not may_replace(new):
        return None
    if not old.subject and (old.attribute is None or new.attribute is None):
        # no subject and no known kind of fact: "It's huge" / "It's definitely changed"
        return None
    if old.qualifiers != new.qualifiers or not old.values:
        return None
    if not new.cue and len(new.frame - old.frame) > 2 and not _typed(old, new):
        return None  # much more said than a restatement of the slot: another statement
    found = _slot(old, new) or _replaced(old, new)
    if found is None:
        return None
    slot, match, card = found
    if slot in _AMOUNTS and not new.retraction and not any(
            _DIGIT(v) for v in new.values - old.values):
        return None  # "planned the budget review" after "... in Tallinn": no new amount
    subject = old.subject.split(":", 1)[1] if old.subject else "-"
    where = f"{subject} / {slot}"
    old_only = old.values - new.values
    retired = sorted(v for v in old.values if _mentions(new, v))
    cue = new.cue
    if new.negated != old.negated and not new.retraction and not cue and (
            old.values == new.values):
        conf = 0.6 + 0.4 * match
        if conf < threshold:
            return None
        return Decision("contradicts", conf, where, ", ".join(sorted(old.values)) or "yes",
                        ", ".join(sorted(new.values)) or "no", None,
                        "the same statement negated")
    if new.additive or (card == MANY and not (new.retraction and retired)):
        return None
    if new.retraction and (not new.values - old.values or retired):
        conf = 0.5 + 0.3 * match + (0.2 if card == ONE else 0.0)
        reason = "a retraction of the slot"
    else:
        new_values = new.values - old.values
        if old.values and new.values and not old_only and not retired:
            return None  # the same value restated
        if not new_values and (not cue or not (old.words - new.words - old.frame)):
            return None  # the old value restated, in other words or with more said
        if card != ONE and not cue:
            return None  # unknown cardinality: only an explicit change cue replaces
        conf = 0.35 + 0.35 * match + (0.2 if cue else 0.0) + (0.1 if retired else 0.0) + (
            0.1 if card == ONE else 0.0)
        reason = "a new value" + (f" with the cue '{cue}'" if cue else "")
    conf = min(1.0, conf)
    if conf < threshold:
        return None
    return Decision("supersedes", conf, where, ", ".join(sorted(old.values)) or old.text,
                    ", ".join(sorted(new.values - old.values)) or new.text, cue, reason)
