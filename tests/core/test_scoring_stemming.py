"""The Porter stemmer of the pure scoring core (recall's same-stem keyword matches)."""

from __future__ import annotations

import pytest
from mnemonia.errors import InvalidInputError
from mnemonia.scoring.stemming import stem

# The examples of Porter's paper (1980), each stemmed by the whole algorithm; the stems are
# those of NLTK's PorterStemmer(mode=ORIGINAL_ALGORITHM), the reference implementation, which
# agrees with this one on every word of 3+ letters of the LoCoMo development file.
PAIRS = [
    ("caresses", "caress"), ("ponies", "poni"), ("ties", "ti"), ("caress", "caress"),
    ("cats", "cat"), ("feed", "feed"), ("agreed", "agre"), ("plastered", "plaster"),
    ("bled", "bled"), ("motoring", "motor"), ("sing", "sing"), ("conflated", "conflat"),
    ("troubled", "troubl"), ("sized", "size"), ("hopping", "hop"), ("tanned", "tan"),
    ("falling", "fall"), ("hissing", "hiss"), ("fizzed", "fizz"), ("failing", "fail"),
    ("filing", "file"), ("happy", "happi"), ("sky", "sky"), ("relational", "relat"),
    ("conditional", "condit"), ("rational", "ration"), ("valenci", "valenc"),
    ("digitizer", "digit"), ("conformabli", "conform"), ("radicalli", "radic"),
    ("differentli", "differ"), ("vileli", "vile"), ("analogousli", "analog"),
    ("vietnamization", "vietnam"), ("predication", "predic"), ("operator", "oper"),
    ("feudalism", "feudal"), ("decisiveness", "decis"), ("hopefulness", "hope"),
    ("callousness", "callous"), ("formaliti", "formal"), ("sensitiviti", "sensit"),
    ("sensibiliti", "sensibl"), ("triplicate", "triplic"), ("formative", "form"),
    ("formalize", "formal"), ("electriciti", "electr"), ("electrical", "electr"),
    ("hopeful", "hope"), ("goodness", "good"), ("revival", "reviv"), ("allowance", "allow"),
    ("inference", "infer"), ("airliner", "airlin"), ("gyroscopic", "gyroscop"),
    ("adjustable", "adjust"), ("defensible", "defens"), ("irritant", "irrit"),
    ("replacement", "replac"), ("adjustment", "adjust"), ("dependent", "depend"),
    ("adoption", "adopt"), ("homologou", "homolog"), ("communism", "commun"),
    ("activate", "activ"), ("angulariti", "angular"), ("homologous", "homolog"),
    ("effective", "effect"), ("bowdlerize", "bowdler"), ("probate", "probat"),
    ("rate", "rate"), ("cease", "ceas"), ("controll", "control"), ("roll", "roll"),
    ("generalizations", "gener"), ("oscillators", "oscil"), ("painting", "paint"),
    ("painted", "paint"), ("paints", "paint"), ("cities", "citi"), ("city", "citi"),
    ("kids", "kid"),
]


@pytest.mark.parametrize(("word", "expected"), PAIRS)
def test_the_porter_stems_of_the_papers_examples(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_inflections_share_a_stem_and_short_words_are_their_own() -> None:
    assert len({stem(w) for w in ("paint", "paints", "painted", "painting")}) == 1
    assert stem("hike") == stem("hikes") == stem("hiking")
    assert (stem("is"), stem("a"), stem("")) == ("is", "a", "")


def test_a_word_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="word"):
        stem(b"paint")  # type: ignore[arg-type]
