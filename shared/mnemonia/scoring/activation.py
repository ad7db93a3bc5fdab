"""Hybrid seeding and spreading activation over typed relations.

Seeds come from fusing cosine similarity with keyword overlap; activation then spreads along
relations for a few hops: ``a(v) = max(a(v), a(u) * strength * type_weight * decay)``, with a
penalty for targets in another topic than the query's. Since strength, type weight and decay
are at most 1, a spread activation never exceeds the strongest seed.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from mnemonia.errors import (
    InvalidInputError,
    InvalidStrengthError,
    InvalidWeightsError,
    UnknownRelationTypeError,
    shown,
)
from mnemonia.scoring._common import require_finite, require_int, require_str, require_unit

__all__ = [
    "DEFAULT_CROSS_TOPIC_PENALTY",
    "DEFAULT_DECAY",
    "DEFAULT_DEPTH",
    "DEFAULT_EXTRA_WEIGHT",
    "DEFAULT_KEYWORD_WEIGHT",
    "MIN_TOKEN_LENGTH",
    "RELATION_WEIGHTS",
    "STOP_WORDS",
    "SYMMETRIC_RELATIONS",
    "Activation",
    "Edge",
    "context_lift",
    "expansion_credit",
    "fuse",
    "idf_weight",
    "keyword_overlap",
    "keyword_scorer",
    "names_speaker",
    "query_tokens",
    "relation_weight",
    "spread",
    "validate_strength",
    "weighted_keyword_scorer",
    "weighted_word_scorer",
    "word_tokens",
    "words",
]

STOP_WORDS: frozenset[str] = frozenset(
    (
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and",
        "any", "are", "as", "at", "be", "because", "been", "before", "being", "below",
        "between", "both", "but", "by", "can", "could", "d", "did", "do", "does", "doing",
        "don", "down", "during", "each", "few", "for", "from", "further", "get", "got", "had",
        "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself",
        "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "ll",
        "m", "may", "me", "might", "more", "most", "must", "my", "myself", "no", "nor", "not",
        "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves",
        "out", "over", "own", "re", "s", "same", "shall", "she", "should", "so", "some", "such",
        "t", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
        "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "us",
        "ve", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
        "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
        "yourselves",
    )
)
"""Common English stop words, lower-case (143 words)."""

MIN_TOKEN_LENGTH = 2
DEFAULT_KEYWORD_WEIGHT = 0.3

RELATION_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "implies": 0.9,
        "generalizes": 0.85,
        "specializes": 0.85,
        "part_of": 0.8,
        "context_of": 0.7,
        "causes": 0.7,
        "follows": 0.7,
        "correlates": 0.6,
        "related_to": 0.6,
        "same_entity": 0.6,
        "contradicts": 0.3,
        "supersedes": 0.1,
    }
)
"""Built-in relation types and their spread weights (read-only)."""

SYMMETRIC_RELATIONS: frozenset[str] = frozenset({"related_to", "same_entity", "correlates"})
DEFAULT_EXTRA_WEIGHT = 0.5
"""Weight of a relation type registered in the config without an explicit weight."""
DEFAULT_DEPTH = 2
DEFAULT_DECAY = 0.5
DEFAULT_CROSS_TOPIC_PENALTY = 0.4

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Return the lower-cased word tokens (regex ``\\w+``) of ``text`` in order, repeats kept.

    The one tokenizer of the project: keyword overlap, consolidation's word sets, the
    gatekeeper's distinct tokens, reported use and the hashing embedder all split text here.

    Raises:
        InvalidInputError: ``text`` is not a str.
    """
    return _WORD.findall(require_str(text, "text").lower())


def word_tokens(text: str) -> frozenset[str]:
    """Return the set of lower-cased word tokens (regex ``\\w+``) of ``text``.

    Raises:
        InvalidInputError: ``text`` is not a str.
    """
    return frozenset(words(text))


def query_tokens(text: str) -> list[str]:
    """Return a query's content tokens, de-duplicated, in order of first appearance.

    Tokens are lower-cased, split on non-word characters, at least 2 characters long; stop
    words are removed unless nothing would remain (then they are kept).

    Raises:
        InvalidInputError: ``text`` is not a str.
    """
    long_enough = [w for w in words(text) if len(w) >= MIN_TOKEN_LENGTH]
    unique = list(dict.fromkeys(long_enough))
    content = [w for w in unique if w not in STOP_WORDS]
    return content or unique


def keyword_overlap(query_tokens: Sequence[str], memory_tokens: Collection[str]) -> float:
    """Return the share of (distinct) query tokens present in the memory's token set.

    0.0 when there are no query tokens.
    """
    unique = list(dict.fromkeys(query_tokens))
    if not unique:
        return 0.0
    present = memory_tokens if isinstance(memory_tokens, (set, frozenset)) else set(memory_tokens)
    return sum(1 for t in unique if t in present) / len(unique)


def keyword_scorer(query_tokens: Sequence[str]) -> Callable[[str], float]:
    """Return ``f`` with ``f(text) == keyword_overlap(query_tokens, word_tokens(text))``.

    For scoring many memories against one query: ``f`` finds the query's tokens in the text
    with one compiled pattern instead of building the text's token set.
    """
    unique = list(dict.fromkeys(query_tokens))
    n = len(unique)
    words = sorted((t for t in unique if _WORD.fullmatch(t) and t == t.lower()),
                   key=lambda t: (-len(t), t))
    if not words:  # no token could ever be among a text's (lower-case) word tokens

        def nothing(text: str) -> float:
            require_str(text, "text")
            return 0.0

        return nothing
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)")

    def score(text: str) -> float:
        return len(set(pattern.findall(require_str(text, "text").lower()))) / n

    return score


def idf_weight(docs: int, total: int) -> float:
    """Return ``ln((total + 1) / (docs + 0.5))``: the weight of a query word found in ``docs``
    of ``total`` memories (a word nobody used weighs most; one in every memory, least).

    Raises:
        InvalidInputError: ``docs`` or ``total`` negative, or ``docs > total``.
    """
    d = require_int(docs, "docs", minimum=0)
    n = require_int(total, "total", minimum=0)
    if d > n:
        raise InvalidInputError(f"docs={d}: must be at most total={n}")
    return math.log((n + 1) / (d + 0.5))


def expansion_credit(similarity: float, threshold: float) -> float:
    """Return the credit a related word earns for a query word: ``(s - t) / (1 - t)`` for a
    word-vector cosine ``s`` at or over the threshold ``t`` (0 under it, 1 for ``s = 1``).

    Raises:
        InvalidInputError: ``similarity`` not finite, ``threshold`` not in ``[0, 1)``.
    """
    s = require_finite(similarity, "similarity")
    t = require_unit(threshold, "threshold")
    if t >= 1.0:
        raise InvalidInputError(f"threshold={t!r}: must be in [0, 1)")
    return 0.0 if s < t else min(1.0, (s - t) / (1.0 - t))


def weighted_keyword_scorer(weights: Mapping[str, float],
                            expansions: Mapping[str, Mapping[str, float]] | None = None
                            ) -> Callable[[str], float]:
    """Return ``f(text)``: the weighted share of the query words a text contains.

    ``f(text) = sum_t w_t * m_t / sum_t w_t``, where ``m_t`` is 1 when the text contains the
    query word ``t``, else the best credit (in ``[0, 1]``) among ``expansions[t]`` (related
    words) the text contains, else 0. With equal weights and no expansions this is
    :func:`keyword_overlap`. :func:`weighted_word_scorer` scores a text's word set instead.

    Raises:
        InvalidWeightsError: a weight is negative or not finite, or a credit not in ``[0, 1]``.
    """
    of_words = weighted_word_scorer(weights, expansions)

    def score(text: str) -> float:
        return of_words(word_tokens(text))

    return score


def weighted_word_scorer(weights: Mapping[str, float],
                         expansions: Mapping[str, Mapping[str, float]] | None = None
                         ) -> Callable[[AbstractSet[str]], float]:
    """Return ``f(words)``: :func:`weighted_keyword_scorer` of a text given as its set of
    word tokens (:func:`word_tokens`), for a caller that keeps a text's words.

    Raises:
        InvalidWeightsError: a weight is negative or not finite, or a credit not in ``[0, 1]``.
    """
    credit: dict[str, dict[str, float]] = {}  # text word -> {query word: credit}
    total = 0.0
    for t, w in weights.items():
        require_finite(w, f"weight of {shown(t)}", InvalidWeightsError)
        if w < 0:
            raise InvalidWeightsError(f"weight of {shown(t)}={w!r}: must be >= 0")
        total += w
        credit.setdefault(t, {})[t] = 1.0
        for u, cr in ((expansions or {}).get(t) or {}).items():
            require_unit(cr, f"credit of {shown(u)} for {shown(t)}", InvalidWeightsError)
            if cr > credit.setdefault(u, {}).get(t, 0.0):
                credit[u][t] = cr
    if not credit or total <= 0:

        def nothing(text_words: AbstractSet[str]) -> float:
            return 0.0

        return nothing

    credited = frozenset(credit)

    def score(text_words: AbstractSet[str]) -> float:
        best: dict[str, float] = {}
        # (with a set, intersection walks the smaller side: a text has few words, an
        # expanded query many)
        for u in credited.intersection(text_words):
            for t, cr in credit[u].items():
                if cr > best.get(t, 0.0):
                    best[t] = cr
        # (fsum: correctly rounded, so the sum does not depend on the order the set gave
        # the words in, which changes with the hash seed from one process to the next)
        return min(1.0, math.fsum([weights[t] * m for t, m in best.items()]) / total)

    return score


def names_speaker(query_words: Collection[str], speaker: str) -> bool:
    """True when every word (2+ characters) of ``speaker`` is one of the query's words:
    the query is about what that speaker said."""
    parts = [w for w in words(speaker) if len(w) >= MIN_TOKEN_LENGTH]
    return bool(parts) and all(w in query_words for w in parts)


def context_lift(own: float, context: float, *, weight: float) -> float:
    """Return ``own + weight * context * (1 - own)``: a memory's relevance lifted by the best
    relevance among its neighbours in its session (``context``). A lift never lowers a
    score, and it stays under 1 for relevances in ``[0, 1]``.

    Raises:
        InvalidInputError: ``own`` or ``context`` not finite; ``weight`` negative.
    """
    a = require_finite(own, "own")
    b = require_finite(context, "context")
    g = require_finite(weight, "weight")
    if g < 0:
        raise InvalidInputError(f"weight={g!r}: must be >= 0")
    return lift(a, b, g)


def lift(own: float, context: float, weight: float) -> float:
    """:func:`context_lift` without checks: the recall loop's form (its values are checked
    where they are made; a check per candidate cost more than the lift itself)."""
    return own + weight * context * max(0.0, 1.0 - own)


def fuse(cosine: float, keyword: float, *, keyword_weight: float = DEFAULT_KEYWORD_WEIGHT) -> float:
    """Return ``(1 - w)*cosine + w*keyword``.

    Raises:
        InvalidInputError: ``cosine`` not finite, ``keyword`` or ``keyword_weight`` not in
            ``[0, 1]``.
    """
    c = require_finite(cosine, "cosine")
    k = require_unit(keyword, "keyword")
    w = require_unit(keyword_weight, "keyword_weight")
    return blend(c, k, w)


def blend(cosine: float, keyword: float, keyword_weight: float) -> float:
    """:func:`fuse` without checks: the recall loop's form."""
    return (1.0 - keyword_weight) * cosine + keyword_weight * keyword


def relation_weight(rel_type: str, extra: Mapping[str, float] | None = None) -> float:
    """Return the spread weight of a relation type.

    Args:
        rel_type: The relation type.
        extra: Types registered in the config with their weights; they also override a
            built-in weight of the same name. Weights must be finite, in ``[0, 1]``.

    Raises:
        UnknownRelationTypeError: The type is neither built in nor in ``extra``; the message
            lists the allowed types.
        InvalidWeightsError: The registered weight is outside ``[0, 1]``.
    """
    if extra is not None and isinstance(rel_type, str) and rel_type in extra:
        return require_unit(extra[rel_type], f"weight of relation type {shown(rel_type)}",
                            InvalidWeightsError)
    if isinstance(rel_type, str) and rel_type in RELATION_WEIGHTS:
        return RELATION_WEIGHTS[rel_type]
    allowed = sorted({*RELATION_WEIGHTS, *(extra or {})})
    raise UnknownRelationTypeError(
        f"unknown relation type {shown(rel_type)}; allowed: {', '.join(allowed)} "
        "(register more types with their weight in the config)"
    )


def validate_strength(s: float) -> float:
    """Return ``s`` as a float if it is a finite relation strength in ``(0, 1]``.

    Raises:
        InvalidStrengthError: Anything else.
    """
    value = require_finite(s, "strength", InvalidStrengthError)
    if not 0.0 < value <= 1.0:
        raise InvalidStrengthError(f"strength must be in (0, 1], got {shown(s)}")
    return value


@dataclass(frozen=True, kw_only=True)
class Edge:
    """A directed relation ``src -> dst`` (followed both ways when its type is symmetric).

    Raises:
        InvalidStrengthError: ``strength`` is not in ``(0, 1]``.
    """

    src: str
    dst: str
    type: str
    strength: float

    def __post_init__(self) -> None:
        require_str(self.src, "src")
        require_str(self.dst, "dst")
        require_str(self.type, "type")
        object.__setattr__(self, "strength", validate_strength(self.strength))


class Activation(NamedTuple):
    """How strongly a memory is activated, and why (a named tuple: :func:`spread` makes one
    per seed, and a dataclass cost three times as much to make).

    Attributes:
        value: The activation.
        source: The memory the best activation came from (``None`` for a pure seed).
        relation: The relation type it came along (``None`` for a pure seed).
        hops: 0 for a seed, else the hop at which the best activation arrived.
        seed: The memory's own seed activation (0.0 if it is not a seed).
    """

    value: float
    source: str | None
    relation: str | None
    hops: int
    seed: float


def spread(
    seeds: Mapping[str, float],
    neighbours: Callable[[Collection[str]], Iterable[Edge]],
    *,
    depth: int = DEFAULT_DEPTH,
    decay: float = DEFAULT_DECAY,
    type_weights: Mapping[str, float] | None = None,
    topics: Mapping[str, str | None] | None = None,
    query_topic: str | None = None,
    cross_topic_penalty: float = DEFAULT_CROSS_TOPIC_PENALTY,
    max_frontier: int | None = None,
    order: Callable[[str], int] | None = None,
) -> dict[str, Activation]:
    """Spread activation from seeds along relations, hop by hop (max aggregation).

    Each hop asks ``neighbours(frontier)`` for the edges touching the frontier (the ids whose
    activation rose in the previous hop; the seeds at first), passed as a read-only mapping
    ``id -> activation`` so a caller may leave out edges too weak to matter to it, and follows
    ``src -> dst``, plus
    ``dst -> src`` for symmetric types. A candidate is
    ``a(u) * strength * type_weight * decay``, times ``cross_topic_penalty`` when
    ``query_topic`` is given and the target's known topic (``topics.get(target)``) is another
    one; a target missing from ``topics`` or with topic ``None`` is not penalised. Within a
    hop, sources use the activations from the end of the previous hop; among equal candidates
    for one target the first ``(source, relation)`` wins (sources in ``order``), so the result
    does not depend on edge order.

    ``max_frontier`` bounds the work of a hop: only the ``max_frontier`` most activated ids of
    the frontier spread (ties broken by ``order``). A weak memory's spread carries a fraction
    of an already weak activation, so it rarely reaches a top-k list; the bound keeps the
    number of edges read per query independent of the graph's size.

    Args:
        seeds: Seed activation per memory id, finite and ``>= 0``.
        neighbours: Returns the edges touching any of the given ids (a mapping from each
            frontier id to its activation).
        depth: Hops to spread, an int ``>= 0``.
        decay: Per-hop factor, in ``(0, 1]``.
        type_weights: Extra relation types and weights (overriding built-in ones).
        topics: Topic per memory id, for the cross-topic penalty.
        query_topic: The query's topic, if any.
        cross_topic_penalty: Factor for targets in another topic, in ``[0, 1]``.
        max_frontier: How many of the frontier's most activated ids spread per hop, an int
            ``>= 1``; ``None`` (default) for all of them.
        order: ``order(id)``: where an id stands among equals (e.g. the order the memories
            were stored, so that ties fall the same way whatever the ids are); ties of equal
            ``order`` (and every tie when it is ``None``, the default) are broken by id.

    Returns:
        ``{memory_id: Activation}`` for every seed and every memory reached.

    Raises:
        UnknownRelationTypeError: An edge has an unregistered type.
        InvalidStrengthError: An edge strength is outside ``(0, 1]``.
        InvalidInputError: A bad seed, depth, decay or penalty.
    """
    hops_total = require_int(depth, "depth", minimum=0)
    factor = require_finite(decay, "decay")
    if not 0.0 < factor <= 1.0:
        raise InvalidInputError(f"decay must be in (0, 1], got {shown(decay)}")
    penalty = require_unit(cross_topic_penalty, "cross_topic_penalty")
    beam = None if max_frontier is None else require_int(max_frontier, "max_frontier", minimum=1)
    if query_topic is not None:
        require_str(query_topic, "query_topic")

    result: dict[str, Activation] = {}
    for mid, value in seeds.items():
        require_str(mid, "seed id")
        a = value if type(value) is float and math.isfinite(value) \
            else require_finite(value, f"seed activation of {shown(mid)}")
        if a < 0.0:
            raise InvalidInputError(
                f"seed activation of {shown(mid)} must be >= 0, got {shown(value)}")
        result[mid] = Activation(a, None, None, 0, a)

    def penalised(target: str, value: float) -> float:
        if query_topic is None or topics is None:
            return value
        topic = topics.get(target)
        if topic is not None and topic != query_topic:
            return value * penalty
        return value

    def place(mid: str) -> tuple[int, str]:
        return (0 if order is None else order(mid), mid)

    def bounded(ids: Iterable[str]) -> frozenset[str]:
        if beam is None:
            return frozenset(ids)
        ranked = heapq.nsmallest(beam, [(-result[m].value, place(m)) for m in ids])
        return frozenset([m for _, (_, m) in ranked])

    frontier = bounded(result)
    for hop in range(1, hops_total + 1):
        if not frontier:
            break
        snapshot = {mid: act.value for mid, act in result.items()}
        best: dict[str, tuple[float, str, str]] = {}
        for edge in neighbours(MappingProxyType({mid: snapshot[mid] for mid in frontier})):
            if not isinstance(edge, Edge):
                raise InvalidInputError(f"neighbours() must yield Edge objects, got {shown(edge)}")
            weight = relation_weight(edge.type, type_weights)
            strength = validate_strength(edge.strength)
            moves = [(edge.src, edge.dst)]
            if edge.type in SYMMETRIC_RELATIONS:
                moves.append((edge.dst, edge.src))
            for source, target in moves:
                if source not in frontier:
                    continue
                candidate = penalised(target, snapshot[source] * strength * weight * factor)
                if candidate <= 0.0:
                    continue
                current = best.get(target)
                if current is None or candidate > current[0] or (
                    candidate == current[0]
                    and (place(source), edge.type) < (place(current[1]), current[2])
                ):
                    best[target] = (candidate, source, edge.type)
        raised: set[str] = set()
        for target, (candidate, source, relation) in best.items():
            previous = result.get(target)
            if previous is not None and candidate <= previous.value:
                continue
            result[target] = Activation(candidate, source, relation, hop,
                                        previous.seed if previous is not None else 0.0)
            raised.add(target)
        frontier = bounded(raised)
    return result

