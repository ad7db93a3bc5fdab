"""Every bad input gets a MnemoniaError subclass naming the value and what is allowed, and
writes nothing (stats and the audit trail unchanged)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from mnemonia import MemoryEngine, MnemoniaError
from mnemonia.errors import (
    CrossTenantError,
    InvalidImportanceError,
    InvalidInputError,
    InvalidQualityError,
    InvalidStrengthError,
    InvalidTenantError,
    InvalidTextError,
    MemoryNotFoundError,
    UnknownModeError,
    UnknownRelationTypeError,
)
from mnemonia.store import sql as S


@pytest.fixture
def seeded(engine: MemoryEngine) -> dict[str, str]:
    a = engine.add("Alice plays the violin", tenant="alice")
    b = engine.add("Alice lives in Lisbon", tenant="alice")
    c = engine.add("Bob collects stamps", tenant="bob")
    return {"a": a.id, "b": b.id, "c": c.id}


def _snapshot(engine: MemoryEngine) -> tuple[Any, ...]:
    with engine.sql.connect() as conn:
        counts = tuple(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                       for t in (S.memories, S.relations, S.memory_events, S.access_log,
                                 S.memory_entities))
        rows = conn.execute(sa.select(S.memories).order_by(S.memories.c.id)).fetchall()
    return counts, tuple(tuple(r) for r in rows), repr(engine.stats())


CASES: list[tuple[str, type[MnemoniaError], str, Callable[[MemoryEngine, dict[str, str]], Any]]] = [
    ("empty text", InvalidTextError, "empty", lambda e, i: e.add("", tenant="alice")),
    ("whitespace text", InvalidTextError, "whitespace", lambda e, i: e.add("  \n\t", tenant="alice")),
    ("non-string text", InvalidTextError, "must be a string", lambda e, i: e.add(42, tenant="alice")),
    ("text too long", InvalidTextError, "maximum is 16000",
     lambda e, i: e.add("x" * 16001, tenant="alice")),
    ("importance > 1", InvalidImportanceError, "importance=1.5",
     lambda e, i: e.add("ok", tenant="alice", importance=1.5)),
    ("importance < 0", InvalidImportanceError, "importance=-0.1",
     lambda e, i: e.add("ok", tenant="alice", importance=-0.1)),
    ("importance NaN", InvalidImportanceError, "importance=nan",
     lambda e, i: e.add("ok", tenant="alice", importance=float("nan"))),
    ("bad item in batch", InvalidImportanceError, "item 1: importance=2",
     lambda e, i: e.add_many([{"text": "fine"}, {"text": "bad", "importance": 2}],
                             tenant="alice")),
    ("quality 6", InvalidQualityError, "6", lambda e, i: e.feedback(i["a"], 6, tenant="alice")),
    ("quality -1", InvalidQualityError, "-1", lambda e, i: e.feedback(i["a"], -1, tenant="alice")),
    ("quality 2.5", InvalidQualityError, "2.5",
     lambda e, i: e.feedback(i["a"], 2.5, tenant="alice")),  # type: ignore[arg-type]
    ("quality True", InvalidQualityError, "True",
     lambda e, i: e.feedback(i["a"], True, tenant="alice")),
    ("unknown id", MemoryNotFoundError, "nope", lambda e, i: e.feedback("nope", 4, tenant="alice")),
    ("other tenant's id", MemoryNotFoundError, "tenant 'alice'",
     lambda e, i: e.feedback(i["c"], 4, tenant="alice")),
    ("forget other tenant's id", MemoryNotFoundError, "tenant 'alice'",
     lambda e, i: e.forget(i["c"], tenant="alice")),
    ("relation across tenants", CrossTenantError, "across tenants",
     lambda e, i: e.relate(i["a"], i["c"], "implies", tenant="alice")),
    ("relation to itself", InvalidInputError, "itself",
     lambda e, i: e.relate(i["a"], i["a"], "implies", tenant="alice")),
    ("strength 0", InvalidStrengthError, "0",
     lambda e, i: e.relate(i["a"], i["b"], "implies", tenant="alice", strength=0)),
    ("strength 1.2", InvalidStrengthError, "1.2",
     lambda e, i: e.relate(i["a"], i["b"], "implies", tenant="alice", strength=1.2)),
    ("unknown relation type", UnknownRelationTypeError, "loves",
     lambda e, i: e.relate(i["a"], i["b"], "loves", tenant="alice")),
    ("k 0", InvalidInputError, "k=0", lambda e, i: e.recall("violin", tenant="alice", k=0)),
    ("k -3", InvalidInputError, "k=-3", lambda e, i: e.recall("violin", tenant="alice", k=-3)),
    ("unknown mode", UnknownModeError, "dreamy",
     lambda e, i: e.recall("violin", tenant="alice", mode="dreamy")),
    ("invalid tenant", InvalidTenantError, "tenant='al ice'",
     lambda e, i: e.add("ok", tenant="al ice")),
    ("tenant with slash", InvalidTenantError, "../x",
     lambda e, i: e.recall("ok", tenant="../x")),
    ("empty query", InvalidTextError, "query", lambda e, i: e.recall(" ", tenant="alice")),
    ("future time", InvalidInputError, "in the future",
     lambda e, i: e.add("later", tenant="alice",
                        at=e.clock.now().replace(year=e.clock.now().year + 1))),
    ("naive time", InvalidInputError, "timezone-aware",
     lambda e, i: e.add("naive", tenant="alice", at=e.clock.now().replace(tzinfo=None))),
    ("unknown kind", InvalidInputError, "kind='note'",
     lambda e, i: e.add("ok", tenant="alice", kind="note")),
    ("entity without type", InvalidInputError, "type:name",
     lambda e, i: e.add("ok", tenant="alice", entities=["redis"])),
]


@pytest.mark.parametrize(("name", "exc", "fragment", "call"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_and_writes_nothing(engine: MemoryEngine, seeded: dict[str, str],
                                              name: str, exc: type[MnemoniaError], fragment: str,
                                              call: Callable[..., Any]) -> None:
    before = _snapshot(engine)
    with pytest.raises(exc) as info:
        call(engine, seeded)
    assert isinstance(info.value, MnemoniaError)
    assert fragment in str(info.value), str(info.value)
    assert _snapshot(engine) == before


def test_second_process_gets_a_clear_error(engine: MemoryEngine) -> None:
    from mnemonia.errors import StoreError

    assert engine.path is not None
    with pytest.raises(StoreError, match="one process at a time"):
        MemoryEngine.open(engine.path, embedder=engine.embedder)


def test_other_embedding_model_is_refused_with_a_hint(engine: MemoryEngine) -> None:
    from mnemonia.embeddings import HashingEmbedder
    from mnemonia.errors import EmbeddingModelMismatchError

    engine.add("something", tenant="alice")
    path = engine.path
    engine.close()
    with pytest.raises(EmbeddingModelMismatchError, match="re-embed"):
        MemoryEngine.open(path, embedder=HashingEmbedder(128))
