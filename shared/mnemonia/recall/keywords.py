"""The memory side of keyword matching: the text a query's words are matched against, its
words (kept per memory), and a memory's relevance (its cosine fused with the keyword score).
"""

from __future__ import annotations

import functools
from datetime import date
from typing import Any

from mnemonia.clock import from_ts
from mnemonia.keywords import KeywordQuery
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.validation import embed_text, row_embed_text, row_speaker

__all__ = ["MONTHS", "keyword_part", "keyword_text", "keyword_words", "relevance"]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


def keyword_text(rt: Runtime, r: Any, speaker: str | None = None) -> str:
    """The text a query's words are matched against in fusion: the indexed text (the
    ``speaker``'s, when given, else read from the row) plus, with ``keyword_dates``, the
    memory's date (``on 7 February 2022``, UTC), so a query that names a month or a year
    matches what was said then."""
    text = embed_text(r.text, speaker) if speaker is not None else row_embed_text(r)
    if not rt.config.keyword_dates:
        return text
    day, second = divmod(r.created_at, 86400.0)
    if second >= 86400.0 - 1e-6:  # within a microsecond of midnight from_ts may round up
        day = from_ts(r.created_at).toordinal() - _EPOCH_ORDINAL
    return text + _on_day(int(day))


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


@functools.lru_cache(maxsize=4096)
def _on_day(day: int) -> str:
    """`` on 7 February 2022`` for a day counted from 1970-01-01 (UTC)."""
    when = date.fromordinal(_EPOCH_ORDINAL + day)
    return f" on {when.day} {MONTHS[when.month - 1]} {when.year}"


def keyword_words(rt: Runtime, r: Any) -> tuple[frozenset[str], str | None]:
    """The words of a memory row's :func:`keyword_text` and its speaker, kept per memory
    (read back only while its text, metadata and time are unchanged)."""
    kept = rt.caches.keyword_words.get(r.id)
    if kept is not None and kept[0] == r.text and kept[1] == r.metadata \
            and kept[2] == r.created_at:
        return kept[3], kept[4]
    speaker = row_speaker(r)
    words = act.word_tokens(keyword_text(rt, r, speaker))
    rt.caches.keep_keyword_words(r.id, (r.text, r.metadata, r.created_at, words, speaker))
    return words, speaker


def keyword_part(rt: Runtime, r: Any, kq: KeywordQuery) -> tuple[float, bool]:
    """``(keyword score, whether the query names the speaker)`` of one memory row: the part
    of its relevance that needs no query vector (the speaker is only looked at when
    ``speaker_weight`` counts it)."""
    words, speaker = keyword_words(rt, r)
    named = rt.config.speaker_weight > 0 and speaker is not None and kq.names(speaker)
    return kq.score_words(words), named


def relevance(rt: Runtime, r: Any, cosine: float, kq: KeywordQuery,
              part: tuple[float, bool] | None = None) -> tuple[float, float]:
    """``(keyword, fused)`` of one memory row: cosine fused with the keyword score, plus
    ``speaker_weight`` when the query names the memory's speaker (at most 1). ``part``: its
    :func:`keyword_part`, when already known."""
    cfg = rt.config
    kw, named = keyword_part(rt, r, kq) if part is None else part
    fused = act.blend(max(0.0, cosine), kw, cfg.hybrid_keyword_weight)
    if named:
        fused = min(1.0, fused + cfg.speaker_weight)
    return kw, fused
