"""The keyword index: indexing memories' texts and searching them (SQLite FTS5 with bm25;
PostgreSQL full-text search on a generated column; none elsewhere: the dialect says how).

bm25 ranking scores every memory a query word occurs in, so a word found in a large share of
a big store would make keyword search grow with the store. Query words are taken rarest
first while their total number of postings (in the asking tenant) stays within a budget
(``MnemoniaConfig.keyword_postings``); the words left out are the most common ones, whose
idf is the smallest anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from mnemonia.config import DEFAULT_KEYWORD_POSTINGS
from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import keyword_terms, tenant_token

__all__ = ["MAX_KEYWORD_POSTINGS", "KeywordIndex"]


MAX_KEYWORD_POSTINGS = DEFAULT_KEYWORD_POSTINGS

_WORD = re.compile(r"\w+")


class KeywordIndex:
    """The keyword index of memory texts, by tenant-prefixed terms."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def description(self) -> str:
        """What the index is, for the doctor's report."""
        return self.db.dialect.keyword_index

    @property
    def table(self) -> bool:
        """The index is a table of its own (SQLite's ``memories_kw``): it can disagree with
        ``memories`` and be counted, and the inspector walks it for word searches."""
        return self.db.dialect.keyword_table

    def fts_insert(self, conn: Connection, rows: Sequence[tuple[str, str, str]]) -> None:
        """Index ``(memory_id, tenant, text)`` rows (and count their terms' documents) where
        the keyword index is a table of its own (PostgreSQL keeps a generated tsvector
        column)."""
        self.db.dialect.index_keywords(conn, rows)

    def fts_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        self.db.dialect.unindex_keywords(self.db, conn, list(ids))

    def keyword_search(
        self, conn: Connection, tenant: str, tokens: Sequence[str], limit: int,
        max_postings: int = MAX_KEYWORD_POSTINGS, docs: Mapping[str, int] | None = None,
    ) -> list[tuple[str, float]]:
        """Best keyword matches as ``(memory_id, score)``, best first (bm25 / ts_rank).

        On SQLite and PostgreSQL the query words are limited to a postings budget (rarest
        first in the tenant), so the cost stays bounded however large the store grows.
        ``docs``: what :meth:`term_docs` answered for these words, when the caller has read
        it (SQLite; PostgreSQL counts each word up to the budget itself). Other
        dialects have no keyword index here: recall runs on the vectors alone.
        """
        words = [t for t in tokens if _WORD.fullmatch(t)]
        if not words or limit <= 0:
            return []
        return self.db.dialect.keyword_search(self.db, conn, tenant, words, limit,
                                              max_postings, docs)

    def term_docs(self, conn: Connection, tenant: str, words: Sequence[str], *,
                  kept: bool = False) -> dict[str, int]:
        """``{word: memories of the tenant that contain it}`` for the single-term ``words``
        (folded as the keyword index folds them); words in none are left out. ``kept``:
        counts kept by :meth:`keep_rows` may answer, and those read are kept (recall)."""
        token = tenant_token(tenant)
        split = {w: keyword_terms(w, token) for w in dict.fromkeys(words)}
        terms = {w: t[0] for w, t in split.items() if len(t) == 1}
        if not terms:
            return {}
        return self.db.dialect.term_docs(self.db, conn, tenant, terms, self.db.kept(kept))

    def docs_among(self, tenant: str, words: Sequence[str], texts: Iterable[str]
                   ) -> dict[str, int]:
        """``{word: how many of the indexed texts ``texts`` contain it}``, folded as
        :meth:`term_docs` folds the words (what to take off its counts for memories a recall
        leaves out)."""
        token = tenant_token(tenant)
        split = {w: keyword_terms(w, token) for w in dict.fromkeys(words)}
        terms = {w: t[0] for w, t in split.items() if len(t) == 1}
        out: dict[str, int] = {}
        for text in texts:
            held = set(keyword_terms(text, token))
            for w, term in terms.items():
                if term in held:
                    out[w] = out.get(w, 0) + 1
        return out

    def recount_keyword_terms(self, conn: Connection) -> None:
        """Recompute every term's document frequency (``keyword_df``) from the index itself,
        after rows were put back or taken out by a repair."""
        self.db.dialect.recount_keyword_terms(conn)
