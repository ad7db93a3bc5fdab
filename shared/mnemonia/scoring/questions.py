"""What a question asks about, read without a model (DESIGN section 5b): whether it asks for
a value that may since have been replaced (:func:`asks_about_past`), who and which kind of
fact it asks about (:func:`asked`), and how well a memory's statements fit that
(:func:`agreement`), which recall's slot ranking reads. The statements themselves are read by
:mod:`mnemonia.scoring.statements`.

Pure standard library, like the rest of :mod:`mnemonia.scoring`: no I/O, no time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from mnemonia.scoring.statements import (
    ATTRIBUTES,
    CALENDAR,
    FIRST_PERSON,
    ONE,
    Statement,
    favourite,
    kind_lexicon,
    kind_of,
    names_in,
    withdraws,
)

__all__ = ["Asked", "agreement", "asked", "asks_about_past", "kind_terms"]


_PAST_QUERY = re.compile(
    r"\b(?:before|used to|previous(?:ly)?|former(?:ly)?|earlier|originally|no longer"
    r"|anymore|any more|back then|in the past|old|older)\b"
    r"|\b(?:did|had) (?:i|we|you|he|she|they|\w+) (?:live|work|drive|report to|date|own)\b")


def asks_about_past(query: str) -> bool:
    """Whether a question asks for a value that may since have been replaced ("where did I
    live before Denver?", "what was my old number?"): recall then shows superseded
    memories too, each marked ``SUPERSEDED BY``."""
    return bool(_PAST_QUERY.search(query.lower()))


@dataclass(frozen=True)
class Asked:
    """What a question asks about, as :func:`asked` reads it: the people it names, whether
    it asks about the asker ("my", "I"), and the kind of fact."""

    names: frozenset[str]
    self_: bool
    attribute: str | None
    cardinality: str | None = None
    event: bool = False
    """Whether it asks what happened ("what damage happened to John's car?"), not for a
    value."""

    @property
    def slot(self) -> bool:
        """Whether it asks for the one value of a slot of someone ("who is Datour's
        manager?", "where do I live?"), not for one of many ("what does Ana like?") nor
        for what happened."""
        return self.cardinality == ONE and bool(self.names or self.self_) and not self.event


_QUESTION_WORDS = frozenset(("who", "what", "which", "where", "when", "why", "how", "whom",
                             "whose", "is", "are", "do", "does", "did", "can", "could"))


_EVENT_QUESTION = re.compile(r"\bhappen(?:s|ed|ing)?\b")
_WHERE_WORK = re.compile(r"\bwhere (?:do|does|did) \w+(?: \w+)? work\b")


@lru_cache(maxsize=4096)
def asked(query: str) -> Asked:
    """The subject and kind of fact a question asks about ("Who is Datour's manager?":
    Datour, manager; "What do I do for a living?": the asker, job)."""
    text = query.strip()
    low = text.lower().replace("’", "'")
    acronyms = {w.lower() for w in re.findall(r"\b[A-Z]{2,}\b", text)}  # OS, LGBTQ, CEO
    names = frozenset(n for n in names_in(text) if n not in CALENDAR and n not in acronyms
                      and n.split()[0] not in _QUESTION_WORDS)
    masked = low
    for n in names:
        masked = masked.replace(n, " ")
    # "where does she work?" asks for a workplace
    attribute, cardinality = favourite(low) or (
        ("employer", ONE) if _WHERE_WORK.search(low) else kind_of(masked))
    return Asked(names=names, self_=bool(FIRST_PERSON.search(low)), attribute=attribute,
                 cardinality=cardinality, event=bool(_EVENT_QUESTION.search(low)))


def agreement(question: Asked, memory: Sequence[Statement]) -> tuple[int, str | None]:
    """How well a memory's clauses fit what a question asks, and the slot the memory fills
    when it answers it.

    Per clause: +1 for the same subject, -1 for another one (another person named, or first
    person where the question names someone who did not say it), +1 for the same kind of
    fact, -1 for another known kind; a clause with no subject or no known kind adds nothing
    for it; a clause that states nothing current (a question, a hypothetical, a past event)
    counts at most 1. The best clause counts (-2 to 2). The slot (``subject / attribute``) is given
    when that clause fits both ways, its kind holds one value and it states one (or retracts
    it): of two memories that fill it, the later states what is current."""
    best, slot = None, None
    for s in memory:
        score = 0
        if s.subject and (question.names or question.self_):
            who, _, name = s.subject.partition(":")
            score += 1 if name in question.names or (question.self_ and who == "self") else -1
        if question.attribute is not None and s.attribute is not None:
            score += 1 if withdraws(s, question.attribute) else -1
        if not s.asserts:
            score = min(score, 1)  # a question, hypothetical or past event states no fact
        if best is None or score > best:
            best = score
            slot = f"{s.subject} / {question.attribute}" if score == 2 \
                and s.cardinality == ONE and (s.values or s.retraction) else None
    return best or 0, slot


_WORDS = re.compile(r"[a-z][a-z'-]+")
_VALUE_QUESTION = re.compile(r"(?:who|whom|what|where|which)\b(?!\s+(?:did|was|were|had)\b)")
"""A question that asks for a value now ("who is ...", "where does ..."), not what happened
("when did ...", "what did ...") nor yes or no ("would ...", "does ...")."""
_NOT_NOW = re.compile(r"\b(?:did|was|were|had|will|might|could|would|should|wants?|after|before"
                      r"|during|likely|visited|goals?)\b")
SLOT_QUESTION_WORDS = 10
"""A question that asks for a slot's value is short: "Who does Dreimek report to?", "What is
Nesa's job title?"; of LoCoMo dev's questions naming a kind of fact, the longer ones ask
about something else ("What is John's number one goal in his basketball career?")."""
_NOT_KIND = frozenset(("who", "what", "which", "where", "when", "how", "do", "does", "did", "is",
                       "are", "the", "for", "to", "my", "your", "at", "in", "of", "a", "an"))


@lru_cache(maxsize=4096)
def kind_terms(query: str) -> dict[str, tuple[str, ...]]:
    """For a question about one person's one-valued slot (:attr:`Asked.slot`): each word of
    the question that names the kind of fact ("report" in "who do I report to?", "living"
    in "what do I do for a living?"), with the other words that name that kind
    (:func:`~mnemonia.scoring.statements.kind_words`: boss, manager, ...). Recall's keyword
    side credits those as related words, so a memory that names the slot in other words
    ("My boss is Tadrek") is a candidate for the question. Empty for any other question."""
    question = asked(query)
    low = query.strip().lower().replace("’", "'")
    if not question.slot or question.attribute is None or not _VALUE_QUESTION.match(low) \
            or _NOT_NOW.search(low) or len(low.split()) > SLOT_QUESTION_WORDS:
        return {}
    related = kind_lexicon(question.attribute)
    if not related:
        return {}
    found = _WHERE_WORK.search(low) if question.attribute == "employer" else None
    if found is None:
        pattern = next((p for name, _, p in ATTRIBUTES if name == question.attribute), None)
        found = pattern.search(low) if pattern is not None else None
    if found is None:
        return {}
    names = {w for n in question.names for w in n.split()}
    if len(low[:found.start()].split()) > SLOT_QUESTION_WORDS // 2 or re.match(
            r"[\w-]*-", low[found.start():]):
        return {}  # the kind named late ("... in his basketball career"), or "career-high"
    named = [w for w in _WORDS.findall(found.group(0)) if w not in _NOT_KIND and w not in names]
    return {w: tuple(u for u in related if u != w) for w in dict.fromkeys(named)}
