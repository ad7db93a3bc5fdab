"""Vectors kept in the side-store: each memory's embedding (``memory_vectors``, float32 bytes,
what recall and export read without asking Chroma) and the word vectors of keyword expansion
(``term_vectors``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from mnemonia.store.changes import Changes
from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import memory_vectors, term_vectors
from mnemonia.store.statements import chunks

__all__ = ["LABEL_CHARS", "SideVectors", "TermVectors", "label_model"]


class SideVectors:
    """``memory_vectors``: one float32 vector per memory."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def vectors_put(self, conn: Connection, items: Sequence[tuple[str, Any]], *,
                    replace: bool = False) -> None:
        """Store ``(memory_id, vector)`` pairs as float32 bytes (``replace``: over old ones)."""
        if not items:
            return
        if replace:
            self.vectors_delete(conn, [i for i, _ in items])
        conn.execute(memory_vectors.insert(), [
            {"memory_id": i, "vector": _f32_bytes(v)} for i, v in items])

    def vectors_get(self, conn: Connection, ids: Sequence[str]) -> dict[str, bytes]:
        """The stored vectors (float32 bytes) of those of ``ids`` that have one."""
        out: dict[str, bytes] = {}
        for chunk in chunks(list(ids), 500):
            out.update((r[0], bytes(r[1])) for r in self.db.fetch(
                conn, "SELECT memory_id, vector FROM memory_vectors "
                f"WHERE memory_id IN ({self.db.in_marks(len(chunk))})", chunk))
        return out

    def vectors_of(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """``(found, rows)``: those of ``ids`` that have a stored vector as long as the first
        one read, and those vectors as the rows of one matrix (made from their bytes at once,
        not vector by vector), read on a connection of their own that does not wait for
        deferred writes (:meth:`Database.peek <mnemonia.store.database.Database.peek>`: none
        changes a vector): what an exact-search mirror is read from
        (:class:`~mnemonia.store.chroma.ChromaIndex`)."""
        with self.db.peek() as conn:
            stored = self.vectors_get(conn, ids)
        if not stored:
            return [], np.zeros((0, 0), dtype=np.float32)
        size = len(next(iter(stored.values())))
        found = [i for i, blob in stored.items() if len(blob) == size]
        rows = np.frombuffer(b"".join(stored[i] for i in found), dtype=np.float32)
        return found, rows.reshape(len(found), -1)

    def vectors_delete(self, conn: Connection, ids: Iterable[str]) -> None:
        for chunk in chunks(list(ids), 500):
            conn.execute(memory_vectors.delete().where(memory_vectors.c.memory_id.in_(chunk)))


class TermVectors:
    """``term_vectors``: a vector per word and embedding model (keyword expansion)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def term_vectors_missing(self, conn: Connection, model: str, terms: Iterable[str]
                             ) -> list[str]:
        """Those of ``terms`` that have no word vector for ``model`` yet."""
        terms = sorted(set(terms))
        have = {r[0] for r in self._stored(conn, model, terms, "term")}
        return [t for t in terms if t not in have]

    def term_vectors_put(self, conn: Connection, model: str,
                         items: Sequence[tuple[str, Any]]) -> None:
        """Store ``(term, vector)`` pairs; a term another process stored first is kept."""
        if not items:
            return
        self.db.report(Changes(words=True, terms=frozenset(t for t, _ in items)))
        self.db.insert_or_ignore(conn, term_vectors, [
            {"model": model, "term": t, "vector": _f32_bytes(v)} for t, v in items])

    def term_vectors_all(self, conn: Connection, model: str) -> tuple[list[str], np.ndarray]:
        """Every word with a vector for ``model``, and those vectors as rows."""
        rows = self.db.fetch(conn, "SELECT term, vector FROM term_vectors WHERE model = ? "
                          "ORDER BY term", (model,))
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return ([r[0] for r in rows],
                np.stack([_f32_vector(r[1]) for r in rows]))

    def term_vectors_of(self, conn: Connection, model: str, terms: Iterable[str]
                        ) -> dict[str, np.ndarray]:
        """``{term: its vector}`` of those of ``terms`` that have one for ``model``."""
        return {r[0]: _f32_vector(r[1])
                for r in self._stored(conn, model, sorted(set(terms)), "term, vector")}

    def _stored(self, conn: Connection, model: str, terms: Sequence[str], columns: str
                ) -> Iterator[Any]:
        """``columns`` of the stored word vectors of ``terms`` for ``model`` (500 a read)."""
        for chunk in chunks(terms, 500):
            yield from self.db.fetch(
                conn, f"SELECT {columns} FROM term_vectors WHERE model = ? AND term IN "
                f"({self.db.in_marks(len(chunk))})", (model, *chunk))

    def label_vectors_missing(self, conn: Connection, model: str, labels: Iterable[str]
                              ) -> list[str]:
        """Those of the entity ``labels`` that have no stored label vector for ``model``."""
        return self.term_vectors_missing(conn, label_model(model), labels)

    def label_vectors_put(self, conn: Connection, model: str,
                          items: Sequence[tuple[str, Any]]) -> None:
        """Store ``(entity label, vector)`` pairs (a label another process stored first is
        kept). Kept beside the word vectors under :func:`label_model`, which no word index
        reads: a label is not a word of any memory's text."""
        self.db.insert_or_ignore(conn, term_vectors, [
            {"model": label_model(model), "term": t, "vector": _f32_bytes(v)} for t, v in items])

    def label_vectors_of(self, conn: Connection, model: str, labels: Iterable[str]
                         ) -> dict[str, np.ndarray]:
        """``{label: its vector}`` of those of the entity ``labels`` that have one stored."""
        return self.term_vectors_of(conn, label_model(model), labels)

    def term_vector_count(self, conn: Connection, model: str) -> int:
        return int(conn.execute(sa.select(sa.func.count()).select_from(term_vectors).where(
            term_vectors.c.model == model)).scalar_one())



LABEL_CHARS = 200
"""Entity labels longer than this (``term_vectors.term``'s size) are not stored (recall
embeds them when it needs them)."""


def label_model(model: str) -> str:
    """The ``term_vectors.model`` key of ``model``'s entity label vectors."""
    return model + "#labels"


def _f32_bytes(vector: Any) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def _f32_vector(stored: Any) -> np.ndarray:
    """The vector :func:`_f32_bytes` stored."""
    return np.frombuffer(bytes(stored), dtype=np.float32)
