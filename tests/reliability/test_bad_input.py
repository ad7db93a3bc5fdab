"""Every bad input gets a MnemoniaError subclass naming the value and what is allowed, and
writes nothing (stats and the audit trail unchanged). The property-based sweep over every public
method and CLI command is in ``test_fuzz.py``; the store-level failures (a file as the folder,
read-only or damaged files) in ``test_store_errors.py``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from mnemonia import MemoryEngine, MnemoniaError
from mnemonia.errors import (
    InvalidImportanceError,
    InvalidInputError,
    InvalidQualityError,
    InvalidStrengthError,
    InvalidTenantError,
    InvalidTextError,
    MemoryDeletedError,
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
    d = engine.add("Alice once owned a cat", tenant="alice")
    engine.forget(d.id, tenant="alice")
    return {"a": a.id, "b": b.id, "c": c.id, "d": d.id}


def _nested(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cur = out
    for _ in range(depth - 1):
        cur["a"] = {}
        cur = cur["a"]
    return out


def _snapshot(engine: MemoryEngine) -> tuple[Any, ...]:
    with engine.sql.connect() as conn:
        counts = tuple(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                       for t in (S.memories, S.relations, S.memory_events, S.access_log,
                                 S.memory_entities))
        rows = conn.execute(sa.select(S.memories).order_by(S.memories.c.id)).fetchall()
    return counts, tuple(tuple(r) for r in rows), repr(engine.stats())


CASES: list[tuple[str, type[MnemoniaError], str, Callable[[MemoryEngine, dict[str, str]], Any]]] = [
    ("empty text", InvalidTextError, "empty", lambda e, i: e.add("", tenant="alice")),
    ("whitespace text", InvalidTextError, "whitespace",
     lambda e, i: e.add("  \n\t", tenant="alice")),
    ("non-string text", InvalidTextError, "must be a string",
     lambda e, i: e.add(42, tenant="alice")),
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
    # Another tenant's memory is answered exactly like an unknown id (see the test below).
    ("relation across tenants", MemoryNotFoundError, "in tenant 'alice'",
     lambda e, i: e.relate(i["a"], i["c"], "implies", tenant="alice")),
    ("relation to a deleted memory", MemoryDeletedError, "is deleted; restore it first",
     lambda e, i: e.relate(i["a"], i["d"], "implies", tenant="alice")),
    ("relation from a deleted memory", MemoryDeletedError, "engine.restore(",
     lambda e, i: e.relate(i["d"], i["a"], "implies", tenant="alice")),
    ("supersede a deleted memory", MemoryDeletedError, "is deleted",
     lambda e, i: e.supersede(i["d"], i["a"], tenant="alice")),
    ("unsupersede a memory not superseded", InvalidInputError, "is not superseded",
     lambda e, i: e.unsupersede(i["a"], tenant="alice")),
    ("unsupersede another tenant's memory", MemoryNotFoundError, "in tenant 'alice'",
     lambda e, i: e.unsupersede(i["c"], tenant="alice")),
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
    # Defect 7: lone surrogates, metadata of the wrong shape or nested thousands deep.
    ("lone surrogate in text", InvalidTextError, "lone surrogate '\\ud800' at position 3",
     lambda e, i: e.add("abc\ud800", tenant="alice")),
    ("lone surrogate in query", InvalidTextError, "query has a lone surrogate",
     lambda e, i: e.recall("violin \udfff", tenant="alice")),
    ("lone surrogate in a batch", InvalidTextError, "item 1: text has a lone surrogate",
     lambda e, i: e.add_many([{"text": "fine"}, {"text": "\ud800"}], tenant="alice")),
    ("lone surrogate in topic", InvalidInputError, "topic has a lone surrogate",
     lambda e, i: e.add("ok", tenant="alice", topic="\ud800")),
    ("lone surrogate in speaker", InvalidInputError, "speaker has a lone surrogate",
     lambda e, i: e.add("ok", tenant="alice", speaker="Al\ud800")),
    ("lone surrogate in metadata", InvalidInputError, "lone surrogate",
     lambda e, i: e.add("ok", tenant="alice", metadata={"k": "\ud800"})),
    ("lone surrogate in an id", InvalidInputError, "id has a lone surrogate",
     lambda e, i: e.get("\ud800", tenant="alice")),
    ("metadata as a list", InvalidInputError, "metadata=[1, 2]: must be a dict",
     lambda e, i: e.add("ok", tenant="alice", metadata=[1, 2])),
    ("metadata as pairs", InvalidInputError, "must be a dict",
     lambda e, i: e.add("ok", tenant="alice", metadata=[("a", 1)])),
    ("metadata nested 5000 deep", InvalidInputError, "nested more than 32 levels",
     lambda e, i: e.add("ok", tenant="alice", metadata=_nested(5000))),
    ("metadata nested 33 deep", InvalidInputError, "config max_metadata_depth",
     lambda e, i: e.add("ok", tenant="alice", metadata=_nested(33))),
    ("metadata update nested deep", InvalidInputError, "nested more than 32 levels",
     lambda e, i: e.update_metadata(i["a"], tenant="alice", metadata=_nested(5000))),
    ("metadata of 5 MB", InvalidInputError, "the maximum is 65536 (config max_metadata_bytes)",
     lambda e, i: e.add("ok", tenant="alice", metadata={"blob": "x" * 5_000_000})),
    ("metadata of 5 MB in a batch", InvalidInputError, "item 0: metadata is 5000",
     lambda e, i: e.add_many([{"text": "ok", "metadata": {"blob": "x" * 5_000_000}}],
                             tenant="alice")),
    ("metadata update of 5 MB", InvalidInputError, "config max_metadata_bytes",
     lambda e, i: e.update_metadata(i["a"], tenant="alice", metadata={"b": "x" * 5_000_000})),
    ("metadata not JSON", InvalidInputError, "not JSON-safe",
     lambda e, i: e.add("ok", tenant="alice", metadata={"when": e.clock.now()})),
    ("embedding of text", InvalidInputError, "embedding='abc'",
     lambda e, i: e.add_many([{"text": "ok", "embedding": "abc"}], tenant="alice")),
    ("entities as an int", InvalidInputError, "entities=3",
     lambda e, i: e.add("ok", tenant="alice", entities=3)),
    ("hard not a bool", InvalidInputError, "hard='yes'",
     lambda e, i: e.forget(i["a"], tenant="alice", hard="yes")),
    ("list limit negative", InvalidInputError, "limit=-1",
     lambda e, i: e.list(tenant="alice", limit=-1)),
    ("k too large for the store", InvalidInputError, "must be an integer <=",
     lambda e, i: e.recall("violin", tenant="alice", k=10**20)),
    ("importance a huge int", InvalidImportanceError, "importance=",
     lambda e, i: e.add("ok", tenant="alice", importance=10**400)),
    ("on_step not callable", InvalidInputError, "on_step=3",
     lambda e, i: e.maintain(on_step=3)),
    # Found by test_fuzz.py: a replacing vector of the wrong dimension reached Chroma (a
    # StoreError), and a mixed batch could write its new items before the bad one failed.
    ("replace with a vector of another dimension", InvalidInputError, "has dimension 3",
     lambda e, i: e.add_many([{"text": "x", "id": i["a"], "embedding": [1.0] * 3}],
                             tenant="alice", replace=True)),
    ("replace batch: a new item and a bad old one", InvalidInputError, "has dimension 3",
     lambda e, i: e.add_many([{"text": "brand new"},
                              {"text": "x", "id": i["a"], "embedding": [1.0] * 3}],
                             tenant="alice", replace=True)),
    ("aware time outside the UTC range", InvalidInputError, "outside the range",
     lambda e, i: e.add("x", tenant="alice",
                        at=datetime.max.replace(tzinfo=timezone(timedelta(hours=-14))))),
    ("supersede with nested dicts as ids", InvalidInputError, "old_id=",
     lambda e, i: e.supersede(_nested(2000), _nested(2000), tenant="alice")),
    ("unsupersede with a nested dict as id", InvalidInputError, "old_id=",
     lambda e, i: e.unsupersede(_nested(2000), tenant="alice")),
    ("limit nested 2000 deep", InvalidInputError, "must be an integer",
     lambda e, i: e.snapshot("alice", limit=_nested(2000))),
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


def test_no_cross_tenant_leak(engine: MemoryEngine, seeded: dict[str, str]) -> None:
    """An id of another tenant gets, word for word, the answer an unknown id gets (relate,
    supersede, unsupersede, reads), and an explicit id another tenant holds is refused with
    the very words of a clash inside the tenant (add and add_many with replace): nothing
    tells the caller that the id exists elsewhere, let alone where."""
    foreign, unknown = seeded["c"], "no-such-id"

    def answer(call: Callable[[str], Any]) -> tuple[str, str]:
        with pytest.raises(MnemoniaError) as info:
            call(foreign)
        foreign_answer = (type(info.value).__name__, str(info.value).replace(foreign, "<id>"))
        with pytest.raises(MnemoniaError) as info:
            call(unknown)
        assert (type(info.value).__name__, str(info.value).replace(unknown, "<id>")) \
            == foreign_answer
        return foreign_answer

    before = _snapshot(engine)
    kind, message = answer(lambda x: engine.relate(seeded["a"], x, "implies", tenant="alice"))
    assert kind == "MemoryNotFoundError" and message == "no memory with id '<id>' in tenant 'alice'"
    answer(lambda x: engine.relate(x, seeded["a"], "implies", tenant="alice"))
    answer(lambda x: engine.supersede(x, seeded["a"], tenant="alice"))
    answer(lambda x: engine.unsupersede(x, tenant="alice"))
    answer(lambda x: engine.get(x, tenant="alice"))
    answer(lambda x: engine.update_metadata(x, tenant="alice", metadata={"k": 1}))

    def clash(call: Callable[[str], Any]) -> tuple[str, str]:
        with pytest.raises(MnemoniaError) as info:
            call(foreign)
        got = (type(info.value).__name__, str(info.value).replace(foreign, "<id>"))
        own = seeded["b"]
        with pytest.raises(MnemoniaError) as info:
            engine.add("x", tenant="alice", id=own)  # a plain clash inside the tenant
        assert got == (type(info.value).__name__, str(info.value).replace(own, "<id>"))
        return got

    assert "bob" not in clash(lambda x: engine.add("x", tenant="alice", id=x))[1]
    clash(lambda x: engine.add_many([{"text": "x", "id": x}], tenant="alice", replace=True))
    assert _snapshot(engine) == before
    assert engine.get(foreign, tenant="bob").text == "Bob collects stamps"


def test_metadata_limit_applies_to_the_merged_update(engine: MemoryEngine,
                                                     seeded: dict[str, str]) -> None:
    """update_metadata merges: two patches under the limit each may not add up to more."""
    engine.update_metadata(seeded["a"], tenant="alice", metadata={"p": "x" * 40_000})
    before = _snapshot(engine)
    with pytest.raises(InvalidInputError, match=r"metadata is 800\d\d bytes as JSON; the "
                       r"maximum is 65536 \(config max_metadata_bytes\)"):
        engine.update_metadata(seeded["a"], tenant="alice", metadata={"q": "y" * 40_000})
    assert _snapshot(engine) == before


def test_metadata_limits_follow_the_config(tmp_path: Any, clock: Any) -> None:
    from mnemonia import MnemoniaConfig
    from mnemonia.embeddings import HashingEmbedder

    cfg = MnemoniaConfig.load(env={}, max_metadata_bytes=100, max_metadata_depth=2)
    with MemoryEngine.open(tmp_path / "s", config=cfg, clock=clock,
                           embedder=HashingEmbedder()) as engine:
        engine.add("ok", tenant="t", metadata={"a": {"b": 1}, "c": "x" * 50})
        with pytest.raises(InvalidInputError, match="nested more than 2 levels"):
            engine.add("ok", tenant="t", metadata={"a": {"b": [1]}})
        with pytest.raises(InvalidInputError, match="the maximum is 100"):
            engine.add("ok", tenant="t", metadata={"c": "x" * 100})
        assert engine.stats("t")["memories"] == 1


def test_an_import_may_relate_deleted_memories(engine: MemoryEngine,
                                               seeded: dict[str, str]) -> None:
    """The refusal is for callers; an import bringing back the relations of memories that
    were deleted in the exported store passes allow_deleted (lifecycle, not the front door)."""
    from mnemonia import lifecycle

    rel = lifecycle.relate(engine.runtime, "alice", seeded["a"], seeded["d"], "implies", 1.0,
                           allow_deleted=True)
    assert [(r.src, r.dst) for r in engine.relations(seeded["d"], tenant="alice")] == [
        (rel.src, rel.dst)]
    with pytest.raises(MemoryNotFoundError):  # other tenants stay out of reach regardless
        lifecycle.relate(engine.runtime, "alice", seeded["a"], seeded["c"], "implies", 1.0,
                         allow_deleted=True)


def test_open_checks_its_clock(tmp_path: Any) -> None:
    from mnemonia.embeddings import HashingEmbedder

    with pytest.raises(InvalidInputError, match="clock=3: must be a Clock"):
        MemoryEngine.open(tmp_path / "s", clock=3, embedder=HashingEmbedder())  # type: ignore[arg-type]
    assert not (tmp_path / "s").exists()  # refused before the folder is made


def test_relation_to_a_restored_memory_is_accepted(engine: MemoryEngine,
                                                   seeded: dict[str, str]) -> None:
    with pytest.raises(MemoryDeletedError):
        engine.relate(seeded["a"], seeded["d"], "implies", tenant="alice")
    engine.restore(seeded["d"], tenant="alice")
    rel = engine.relate(seeded["a"], seeded["d"], "implies", tenant="alice")
    assert (rel.src, rel.dst) == (seeded["a"], seeded["d"])


@pytest.mark.parametrize("text", ["🙂", "???", "!!! ... ---", "🙂🙂 🎉", "…"])
def test_text_without_letters_or_digits_is_stored(engine: MemoryEngine, text: str) -> None:
    """Defect 4: text with no keyword term (emoji, punctuation) is stored, listed, recalled
    and deleted; before, the empty keyword batch was a raw sqlalchemy ProgrammingError."""
    engine.add("Alice plays the violin", tenant="alice")
    mem = engine.add(text, tenant="alice")
    batch = engine.add_many([{"text": text + " "}, {"text": "?"}], tenant="alice")
    assert engine.get(mem.id, tenant="alice").text == text
    assert {m.id for m in engine.list(tenant="alice")} >= {mem.id, *(m.id for m in batch)}
    hits = engine.recall(text, tenant="alice", k=10, min_activation=0.0)
    assert mem.id in hits.ids
    engine.add_many([{"text": "??", "id": batch[1].id}], tenant="alice", replace=True)
    engine.forget(mem.id, tenant="alice", hard=True)
    with pytest.raises(MemoryNotFoundError):
        engine.get(mem.id, tenant="alice")
    assert engine.recall("violin", tenant="alice").memories[0].memory.text == (
        "Alice plays the violin")


@pytest.mark.integration
def test_emoji_memory_is_recalled_by_its_vector(real_engine: MemoryEngine) -> None:
    """With the real model an emoji has a direction of its own: the emoji query finds the
    emoji memory first, by cosine alone (it has no keyword terms)."""
    for t in ("The deploy runs every Friday", "Alice prefers tea over coffee",
              "The wifi password is on the fridge"):
        real_engine.add(t, tenant="alice")
    smile = real_engine.add("🙂🙂🙂", tenant="alice")
    res = real_engine.recall("🙂", tenant="alice", k=1, min_activation=0.0)
    assert res.ids == [smile.id]
    assert res.memories[0].explanation.keyword in (None, 0.0)


def test_recall_with_a_huge_k_is_answered(engine: MemoryEngine, seeded: dict[str, str]) -> None:
    """k up to the largest stored integer is valid; Chroma takes 32-bit counts, so the vector
    query is capped (found by test_fuzz.py: k=2**31 was a StoreError)."""
    for k in (2**31, 2**63 - 1):
        assert engine.recall("violin", tenant="alice", k=k, touch=False).ids[0] == seeded["a"]
