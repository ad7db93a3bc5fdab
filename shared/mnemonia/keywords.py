"""The keyword side of recall: query words weighted by how rare they are in the tenant, and
expanded to the words memories use whose word vectors are close to theirs; and the word
vectors that enrichment stores for that.

A query asking "what exercises does John do?" shares no word with "I started a weekend yoga
class"; the word vectors of ``exercises`` and ``yoga`` are close, so that memory earns part of
the word's keyword credit (:func:`mnemonia.scoring.activation.expansion_credit`) and becomes a
keyword candidate. Word vectors come from the store's own embedder, one per word, stored in
the side-store (shared by every tenant of the store, per model) when memories are enriched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np

from mnemonia.caches import TermIndex
from mnemonia.entities import entity_label
from mnemonia.runtime import Runtime
from mnemonia.scoring import activation as act
from mnemonia.scoring.stemming import stem
from mnemonia.store.database import Connection
from mnemonia.store.exact import rows_per_slice
from mnemonia.store.schema import keyword_terms
from mnemonia.store.sql_vectors import LABEL_CHARS

__all__ = ["KeywordQuery", "content_words", "keyword_query", "store_label_vectors",
           "store_term_vectors"]

EXPANSIONS_PER_WORD = 20
"""Related words one query word may match (the closest over the threshold)."""
MIN_WORD = 3
MAX_WORD = 40
KIND_CREDIT = 0.8
"""The keyword credit of a word that names the kind of fact a question asks about, for the
question's word that names it ("boss" for "report" in "who do I report to?")."""
WORD_CACHE = 4096
"""Vectors of query words no memory uses, kept per process (least recently used dropped)."""


@dataclass(frozen=True)
class KeywordQuery:
    """One query's keyword side: the words to search, and the scorer of a memory's words."""

    tokens: list[str]
    search: list[str]
    score_words: Callable[[AbstractSet[str]], float]  # the keyword score of a text's word set
    words: frozenset[str]
    expansions: dict[str, dict[str, float]] = field(default_factory=dict)
    docs: dict[str, int] | None = None  # the tenant's document counts of the words, if read
    _named: dict[str, bool] = field(default_factory=dict)

    def names(self, speaker: str) -> bool:
        """True when the query names ``speaker`` (every word of the name is a query word)."""
        named = self._named.get(speaker)
        if named is None:
            named = self._named[speaker] = act.names_speaker(self.words, speaker)
        return named


def content_words(words: Iterable[str]) -> list[str]:
    """The words worth a word vector: letters only, 3-40 characters, not a stop word."""
    return [w for w in dict.fromkeys(words) if w.isalpha() and MIN_WORD <= len(w) <= MAX_WORD
            and w not in act.STOP_WORDS]


def keyword_query(rt: Runtime, conn: Connection, tenant: str, tokens: Sequence[str],
                  size: int, left_out: Sequence[str] = (),
                  kinds: Mapping[str, Sequence[str]] | None = None) -> KeywordQuery:
    """The keyword side of a query with ``tokens`` over a tenant of ``size`` memories;
    ``left_out``: the indexed texts of memories the recall leaves out, whose words then do
    not count in the words' document frequencies (``size`` already excludes them);
    ``kinds``: query words that name a kind of fact, with the other words naming it
    (:func:`mnemonia.scoring.questions.kind_terms`), credited :data:`KIND_CREDIT`."""
    cfg = rt.config
    qtok = list(dict.fromkeys(tokens))
    expansions = _expansions(rt, conn, qtok) \
        if cfg.keyword_expansion > 0 or cfg.keyword_stem_credit > 0 else {}
    for t, named in (kinds or {}).items():
        if t in qtok and named:
            kept = dict(expansions.get(t, {}))  # (a copy: expansions are cached per word)
            for u in named:
                if kept.get(u, 0.0) < KIND_CREDIT:
                    kept[u] = KIND_CREDIT
            expansions[t] = kept
    related = sorted({u for e in expansions.values() for u in e})
    read = bool(cfg.keyword_idf or related)
    df = rt.sql.keywords.term_docs(conn, tenant, [*qtok, *related], kept=True) if read else {}
    if df and left_out:
        gone = rt.sql.keywords.docs_among(tenant, list(df), left_out)
        df = {w: n for w, n in ((w, n - gone.get(w, 0)) for w, n in df.items()) if n > 0}
    expansions = {t: kept for t, e in expansions.items()
                  if (kept := {u: cr for u, cr in e.items() if df.get(u)})}
    if cfg.keyword_idf:
        # a word no memory of the tenant uses (and that has no related word there) can match
        # nothing: it would only shrink every score, so it does not count
        total = max(size, *df.values()) if df else size
        weights = {t: act.idf_weight(min(df.get(t, 0), total), total)
                   for t in qtok if t in df or t in expansions}
        if not weights:
            weights = dict.fromkeys(qtok, 1.0)
    else:
        weights = dict.fromkeys(qtok, 1.0)
    search = list(dict.fromkeys([*qtok, *(u for e in expansions.values() for u in e)]))
    return KeywordQuery(tokens=qtok, search=search,
                        score_words=act.weighted_word_scorer(weights, expansions),
                        words=act.word_tokens(" ".join(qtok)), expansions=expansions,
                        docs=df if read else None)


def term_index(rt: Runtime, conn: Connection) -> TermIndex:
    """Every stored word vector of the store's model, read once and kept; the words writes
    stored since are read in (:meth:`RecallCache.new_terms`), not every word again."""
    idx = rt.caches.term_index
    if idx is None:
        terms, matrix = rt.sql.terms.term_vectors_all(conn, rt.embedder.name)
        idx = TermIndex(terms=terms, matrix=matrix if terms else None,
                        position={t: i for i, t in enumerate(terms)})
        rt.caches.term_index = idx
    with rt.caches.terms_reading:  # (one recall at a time appends to the index's rows)
        new = rt.caches.new_terms(idx)
        if new:
            grown = _read_in(rt, conn, idx, new)
            rt.caches.keep_term_index(idx, grown)
            idx = grown
    return idx


def _read_in(rt: Runtime, conn: Connection, idx: TermIndex, words: set[str]) -> TermIndex:
    """``idx`` with the stored vectors of ``words`` appended (a new index sharing the old
    one's rows: a recall may be using it); words not stored go back to be read later."""
    found = rt.sql.terms.term_vectors_of(conn, rt.embedder.name, words - idx.position.keys())
    rt.caches.terms_unread(words - found.keys() - idx.position.keys())
    if not found:
        return idx
    add = sorted(found)
    n, dim = len(idx.terms), len(found[add[0]])
    buffer = idx.matrix.base if idx.matrix is not None and idx.matrix.base is not None \
        else idx.matrix
    if buffer is None or buffer.shape[1] != dim or buffer.shape[0] < n + len(add):
        # room for as many again (appends cost the new rows, not a copy of every row)
        grown = np.zeros((max(2 * (n + len(add)), 256), dim), dtype=np.float32)
        if idx.matrix is not None and n:
            grown[:n] = idx.matrix
        buffer = grown
    buffer[n:n + len(add)] = np.stack([found[t] for t in add])
    position = dict(idx.position)
    position.update((t, n + j) for j, t in enumerate(add))
    stems = None
    if idx.stems is not None:
        stems = dict(idx.stems)
        for t in add:
            root = stem(t)
            stems[root] = [*stems.get(root, ()), t]
    return TermIndex(terms=[*idx.terms, *add], matrix=buffer[:n + len(add)],
                     position=position, stems=stems)


def _word_vectors(rt: Runtime, idx: TermIndex, words: Sequence[str]) -> np.ndarray:
    """Vectors of ``words``: stored ones, cached ones, the rest embedded now (and cached)."""
    cache = rt.caches.word_vectors
    missing = [w for w in words if w not in idx.position and w not in cache]
    if missing:
        for w, v in zip(missing, rt.embedder.embed_documents(missing), strict=True):
            cache[w] = np.asarray(v, dtype=np.float32)
        while len(cache) > WORD_CACHE:
            cache.popitem(last=False)
    rows = []
    for w in words:
        if w in idx.position and idx.matrix is not None:
            rows.append(idx.matrix[idx.position[w]])
        else:
            cache.move_to_end(w)
            rows.append(cache[w])
    return np.stack(rows)


def _similarities(words: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``words @ matrix.T``, in slices small enough that OpenBLAS computes each on the calling
    thread. Recall computes this on a helper thread while the model embeds the query on the
    other core: one product over every stored word made OpenBLAS start its own threads, which
    then competed with the model for the cores (and spun after it), so nothing overlapped."""
    step = rows_per_slice(words.shape[0] * words.shape[1])
    if matrix.shape[0] <= step:
        return np.asarray(words @ matrix.T)
    return np.concatenate([words @ matrix[at:at + step].T
                           for at in range(0, matrix.shape[0], step)], axis=1)


def _expansions(rt: Runtime, conn: Connection, qtok: Sequence[str]
                ) -> dict[str, dict[str, float]]:
    """``{query word: {related word: credit}}`` over the store's words: those whose word
    vectors are near (``keyword_expansion``) and those of the same stem
    (``keyword_stem_credit``). Each query word's expansion is kept until enrichment stores
    new words."""
    idx = term_index(rt, conn)
    if not idx.terms:
        return {}
    words = content_words(qtok)
    known = rt.caches.word_expansions
    todo = [w for w in words if w not in known]
    if todo:
        cfg = rt.config
        for word, related in zip(todo, _near_words(rt, idx, todo), strict=True):
            if cfg.keyword_stem_credit > 0:
                for u in sorted(_stem_groups(idx).get(stem(word), ())):
                    if u != word and related.get(u, 0.0) < cfg.keyword_stem_credit:
                        related[u] = cfg.keyword_stem_credit
            known[word] = related
        while len(known) > WORD_CACHE:
            del known[next(iter(known))]
    return {w: known[w] for w in words if known[w]}


def _near_words(rt: Runtime, idx: TermIndex, words: list[str]) -> list[dict[str, float]]:
    """Per word, the stored words whose word vectors reach ``keyword_expansion`` (at most
    :data:`EXPANSIONS_PER_WORD`), with their credit; none when expansion is off."""
    theta = rt.config.keyword_expansion
    if theta <= 0 or idx.matrix is None:
        return [{} for _ in words]
    sims = _similarities(_word_vectors(rt, idx, words), idx.matrix)
    n = min(EXPANSIONS_PER_WORD + 1, sims.shape[1])
    out = []
    terms = idx.terms
    for row, word in zip(sims, words, strict=True):
        # the n nearest, equal similarities by word (not by where a word sits in the index:
        # words stored later are appended)
        least = max(theta, float(np.partition(row, row.shape[0] - n)[row.shape[0] - n]))
        near = sorted((-float(row[j]), terms[j]) for j in np.flatnonzero(row >= least).tolist())
        out.append({t: act.expansion_credit(-s, theta) for s, t in near[:n] if t != word})
    return out


def _stem_groups(idx: TermIndex) -> dict[str, list[str]]:
    """``{Porter stem: the stored words with it}``, built on first use per word index."""
    if idx.stems is None:
        groups: dict[str, list[str]] = {}
        for t in idx.terms:
            groups.setdefault(stem(t), []).append(t)
        idx.stems = groups
    return idx.stems


def store_label_vectors(rt: Runtime, conn: Connection, entities: Iterable[str]) -> int:
    """Embed and store the labels of ``entities`` that have no label vector yet (recall's
    entity index reads them, so a tenant's first recall in a process embeds none); returns
    how many. Called where entity links are written."""
    labels = [lb for lb in dict.fromkeys(entity_label(e) for e in entities)
              if lb and len(lb) <= LABEL_CHARS]
    missing = rt.sql.terms.label_vectors_missing(conn, rt.embedder.name, labels) \
        if labels else []
    if not missing:
        return 0
    vectors = rt.embedder.embed_documents(missing)
    rt.sql.terms.label_vectors_put(conn, rt.embedder.name,
                                   list(zip(missing, vectors, strict=True)))
    return len(missing)


def store_term_vectors(rt: Runtime, conn: Connection, texts: Iterable[str]) -> int:
    """Embed and store the words of ``texts`` that have no word vector yet; returns how many."""
    words = content_words(w for text in texts for w in keyword_terms(text, ""))
    missing = rt.sql.terms.term_vectors_missing(conn, rt.embedder.name, words) if words else []
    if not missing:
        return 0
    vectors = rt.embedder.embed_documents(missing)
    rt.sql.terms.term_vectors_put(conn, rt.embedder.name, list(zip(missing, vectors, strict=True)))
    return len(missing)
