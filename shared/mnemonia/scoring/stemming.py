"""The Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", Program 14(3),
1980), as the paper gives it.

Recall lets a query word match the stored words that share its stem ("painting" and
"paints" count for "painted"): :func:`mnemonia.keywords.keyword_query` groups the store's
words by :func:`stem`. Only equality of stems matters there, so a stem need not be a word
("cities" and "city" both give "citi").

Pure standard library, like the rest of :mod:`mnemonia.scoring`.
"""

from __future__ import annotations

from functools import lru_cache

from mnemonia.errors import InvalidInputError

__all__ = ["stem"]

_VOWELS = frozenset("aeiou")

_STEP2 = (("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
          ("izer", "ize"), ("abli", "able"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
          ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
          ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
          ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"))
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
          ("ful", ""), ("ness", ""))
_STEP4 = ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
          "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize")


def _consonant(w: str, i: int) -> bool:
    """A letter other than a, e, i, o, u, and other than a y after a consonant."""
    if w[i] in _VOWELS:
        return False
    if w[i] == "y":
        return i == 0 or not _consonant(w, i - 1)
    return True


def _measure(s: str) -> int:
    """``m`` of the paper: how many vowel-consonant sequences ``s`` has ([C](VC)^m[V])."""
    m, vowel = 0, False
    for i in range(len(s)):
        consonant = _consonant(s, i)
        if vowel and consonant:
            m += 1
        vowel = not consonant
    return m


def _has_vowel(s: str) -> bool:
    return any(not _consonant(s, i) for i in range(len(s)))


def _double_consonant(s: str) -> bool:
    return len(s) >= 2 and s[-1] == s[-2] and _consonant(s, len(s) - 1)


def _cvc(s: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (``*o`` of the paper)."""
    n = len(s)
    return (n >= 3 and _consonant(s, n - 3) and not _consonant(s, n - 2)
            and _consonant(s, n - 1) and s[-1] not in "wxy")


def _replace(w: str, rules: tuple[tuple[str, str], ...], least: int) -> str:
    """The first rule whose suffix ends ``w`` applies when the stem's measure is over
    ``least``; later rules are not tried either way."""
    for suffix, repl in rules:
        if w.endswith(suffix):
            s = w[:-len(suffix)]
            return s + repl if _measure(s) > least else w
    return w


def _step1(w: str) -> str:
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    cut = ""
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w, cut = w[:-2], "ed"
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w, cut = w[:-3], "ing"
    if cut:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_consonant(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    return w


def _step4(w: str) -> str:
    for suffix in _STEP4:
        if w.endswith(suffix):
            s = w[:-len(suffix)]
            if _measure(s) > 1 and (suffix != "ion" or s.endswith(("s", "t"))):
                return s
            return w
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        s = w[:-1]
        m = _measure(s)
        if m > 1 or (m == 1 and not _cvc(s)):
            w = s
    if _measure(w) > 1 and _double_consonant(w) and w.endswith("l"):
        w = w[:-1]
    return w


def stem(word: str) -> str:
    """The Porter stem of a lower-case ``word`` (words of one or two letters are their own
    stem).

    Raises:
        InvalidInputError: ``word`` is not a str.
    """
    if not isinstance(word, str):
        raise InvalidInputError(f"word={word!r}: must be a str")
    if len(word) <= 2:
        return word
    return _porter(word)


@lru_cache(maxsize=1 << 16)
def _porter(word: str) -> str:
    # a conversation repeats its words: reading a memory's clauses stems every word, and
    # most were stemmed before (6,760 LoCoMo and update-set texts: 5.6 s -> see the commit)
    w = _step1(word)
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    return _step5(_step4(w))
