"""A simple rule-based entity extractor (pluggable: any ``Callable[[str], list[str]]``).

Entities are ``type:name`` strings. The default finds runs of capitalised words that are not
sentence-initial function words ("Caroline", "New York") and ``#tags``, typed ``name`` and
``tag``. Explicit ``entities=`` passed to ``add`` are kept as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from mnemonia.errors import InvalidInputError, shown
from mnemonia.scoring.activation import STOP_WORDS

__all__ = ["EntityExtractor", "entity_label", "extract_entities", "normalise_entities"]

EntityExtractor = Callable[[str], list[str]]

_CAPS = re.compile(r"\b([A-Z][\w'’-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’-]*)*)")
_TAG = re.compile(r"#(\w{2,})")
_ENTITY = re.compile(r"^[a-z][a-z0-9_]{0,31}:\S.{0,199}$")
_SKIP = {"i", "i'm", "i've", "i'll", "i'd", "oh", "ok", "okay", "yes", "no", "hey", "hi",
         "hello", "wow", "thanks", "thank", "sure", "yeah", "well", "so", "but", "and", "also",
         "that's", "it's", "what's", "let's", "don't", "can't", "mon", "tue", "wed", "thu",
         "fri", "sat", "sun", "monday", "tuesday", "wednesday", "thursday", "friday",
         "saturday", "sunday", "today", "yesterday", "tomorrow"}


def entity_label(entity: str) -> str:
    """The lower-cased name part of ``type:name``."""
    return entity.split(":", 1)[1].strip().lower() if ":" in entity else entity.strip().lower()


def extract_entities(text: str) -> list[str]:
    """Rule-based ``type:name`` entities found in ``text``."""
    found: list[str] = []
    for match in _CAPS.finditer(text):
        words = match.group(1).split()
        while words and (words[0].lower().strip("'’") in STOP_WORDS
                         or words[0].lower() in _SKIP):
            words = words[1:]
        if not words:
            continue
        name = " ".join(words).strip("'’-")
        if len(name) < 3:
            continue
        found.append(f"name:{name.lower()}")
    found += [f"tag:{t.lower()}" for t in _TAG.findall(text)]
    return list(dict.fromkeys(found))


def normalise_entities(entities: Iterable[str] | None) -> list[str]:
    """Validate explicit ``type:name`` entities; the name part is lower-cased."""
    if entities is None:
        return []
    if isinstance(entities, str | bytes | Mapping) or not isinstance(entities, Iterable):
        raise InvalidInputError(
            f"entities={shown(entities)}: expected a list of 'type:name' strings, e.g. "
            "['tool:redis']"
        )
    out: list[str] = []
    for ent in entities:
        if not isinstance(ent, str) or ":" not in ent:
            raise InvalidInputError(
                f"entity {shown(ent)}: expected a 'type:name' string such as 'person:alice'"
            )
        kind, name = ent.split(":", 1)
        value = f"{kind.strip().lower()}:{' '.join(name.split()).lower()}"
        if not _ENTITY.match(value):
            raise InvalidInputError(
                f"entity {shown(ent)}: type must match [a-z][a-z0-9_]* and the name be "
                "1-200 chars"
            )
        out.append(value)
    return list(dict.fromkeys(out))
