"""Consolidation: near-duplicate memories (Jaccard over word sets) group into one concept.

Grouping is deterministic: memories are taken by priority, highest first (ties by id); each
not-yet-grouped memory seeds a group of the not-yet-grouped memories whose Jaccard with the
seed meets the threshold. Candidate pairs may be pre-filtered (e.g. by MinHash LSH) through
``candidates``; the Jaccard check here is always exact.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from mnemonia.errors import InvalidInputError, shown
from mnemonia.scoring._common import require_finite, require_int, require_str
from mnemonia.scoring.activation import word_tokens

__all__ = [
    "DEFAULT_MIN_GROUP",
    "DEFAULT_THRESHOLD",
    "ConsolidationItem",
    "group",
    "jaccard",
    "merge_texts",
    "tokenize",
]

DEFAULT_THRESHOLD = 0.7
DEFAULT_MIN_GROUP = 2

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")
_TRAILING_PUNCT = ".!?;:,\u2026"
_TERMINAL = (".", "!", "?", "\u2026")


def tokenize(text: str) -> frozenset[str]:
    """Return the set of lower-cased word tokens (regex ``\\w+``) of ``text``.

    Raises:
        InvalidInputError: ``text`` is not a str.
    """
    return word_tokens(text)


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """Return ``|a & b| / |a | b|`` of two token sets (0.0 when both are empty)."""
    sa = a if isinstance(a, (set, frozenset)) else frozenset(a)
    sb = b if isinstance(b, (set, frozenset)) else frozenset(b)
    union = len(sa | sb)
    if union == 0:
        return 0.0
    return len(sa & sb) / union


@dataclass(frozen=True, kw_only=True)
class ConsolidationItem:
    """A memory as consolidation sees it: id, word set, priority, and ``seq``, its place in the
    order memories were stored (of equal priorities the first stored seeds first; ids, random
    uuids, decide only what ``seq`` leaves tied, so groups are the same in every process)."""

    id: str
    tokens: frozenset[str]
    priority: float
    seq: int = 0

    def __post_init__(self) -> None:
        require_str(self.id, "id")
        require_int(self.seq, "seq", minimum=0)
        if not isinstance(self.tokens, frozenset):
            if isinstance(self.tokens, str) or not isinstance(self.tokens, Iterable):
                raise InvalidInputError(
                    f"tokens must be a frozenset of str (see tokenize()), got {shown(self.tokens)}"
                )
            object.__setattr__(self, "tokens", frozenset(self.tokens))
        object.__setattr__(self, "priority", require_finite(self.priority, "priority"))


def group(
    items: Iterable[ConsolidationItem],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_group: int = DEFAULT_MIN_GROUP,
    candidates: Mapping[str, Collection[str]] | None = None,
) -> list[list[str]]:
    """Group near-duplicates deterministically.

    Items are sorted by priority descending (ties by ``seq``, then id, ascending). Each item
    not yet in a group seeds a group of the not-yet-grouped items whose Jaccard with the seed is
    ``>= threshold`` (only those listed in ``candidates[seed]`` when ``candidates`` is given;
    a seed missing from ``candidates`` has none). Groups smaller than ``min_group`` are
    dropped, and their members stay available to later seeds.

    Args:
        items: The memories to group (ids must be unique).
        threshold: Jaccard threshold, in ``(0, 1]``.
        min_group: Smallest group kept, an int ``>= 2``.
        candidates: Optional pre-filtered neighbour ids per seed id.

    Returns:
        Groups of ids, each seed first, then members by priority desc, seq and id asc; groups
        in seed order. The result does not depend on the order of ``items``.

    Raises:
        InvalidInputError: Bad threshold or min_group, or duplicate ids.
    """
    limit = require_finite(threshold, "threshold")
    if not 0.0 < limit <= 1.0:
        raise InvalidInputError(f"threshold must be in (0, 1], got {shown(threshold)}")
    smallest = require_int(min_group, "min_group", minimum=2)
    by_id: dict[str, ConsolidationItem] = {}
    for item in items:
        if not isinstance(item, ConsolidationItem):
            raise InvalidInputError(f"items must be ConsolidationItem objects, got {shown(item)}")
        if item.id in by_id:
            raise InvalidInputError(f"item ids must be unique, got {shown(item.id)} twice")
        by_id[item.id] = item

    def order(item: ConsolidationItem) -> tuple[float, int, str]:
        return (-item.priority, item.seq, item.id)

    ordered = sorted(by_id.values(), key=order)
    grouped: set[str] = set()
    groups: list[list[str]] = []
    for seed in ordered:
        if seed.id in grouped:
            continue
        if candidates is None:
            pool: Iterable[ConsolidationItem] = ordered
        else:
            pool = [by_id[i] for i in set(candidates.get(seed.id, ())) if i in by_id]
        members = sorted(
            (
                other
                for other in pool
                if other.id != seed.id
                and other.id not in grouped
                and jaccard(seed.tokens, other.tokens) >= limit
            ),
            key=order,
        )
        if 1 + len(members) >= smallest:
            ids = [seed.id, *(m.id for m in members)]
            grouped.update(ids)
            groups.append(ids)
    return groups


def _sentence_key(sentence: str) -> str:
    return _SPACE.sub(" ", sentence.lower()).strip().rstrip(_TRAILING_PUNCT).strip()


def merge_texts(texts: Iterable[str]) -> str:
    """Join texts in order, dropping sentences already seen.

    Sentences are split after ``.``, ``!`` or ``?`` followed by whitespace and compared
    lower-cased, with whitespace collapsed and trailing punctuation stripped. Kept sentences
    are joined with one space; a kept piece that does not end a sentence gets a ``.`` when
    something follows it, so merged fragments stay readable.

    Raises:
        InvalidInputError: ``texts`` is a single str or contains a non-str.
    """
    if isinstance(texts, str):
        raise InvalidInputError("texts must be an iterable of str, not a single str")
    seen: set[str] = set()
    kept: list[str] = []
    for text in texts:
        require_str(text, "each text")
        for raw in _SENTENCE_END.split(text.strip()):
            sentence = _SPACE.sub(" ", raw).strip()
            key = _sentence_key(sentence)
            if not key or key in seen:
                continue
            seen.add(key)
            kept.append(sentence)
    pieces = [
        s if index == len(kept) - 1 or s.endswith(_TERMINAL) else s + "."
        for index, s in enumerate(kept)
    ]
    return " ".join(pieces)
