"""Several engines on one server store (Chroma server + PostgreSQL), made to meet at the exact
moments that lost memories before: a second engine opening while a write of the first is
under way, a writer whose lease ran out, a commit that fails after the vectors were written,
and an add retried after an error. Faults are injected into the real stores' calls; the
stores themselves are real."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import (
    InvalidInputError,
    StoreError,
    StoreUnavailableError,
    StoreWriteTakenOverError,
    WriteOutcomeUnknownError,
)
from mnemonia.store.retry import FailureLog

from tests.integration.test_postgres import _new_db, pg_cluster  # noqa: F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.server]
CFG = MnemoniaConfig.load(env={}, maintenance="manual", retry_attempts=2, retry_max_wait=0.05)


@pytest.fixture
def store(pg_cluster: Any, chroma_server: str) -> Iterator[Callable[[], MemoryEngine]]:  # noqa: F811
    """Opens engines on one new server store; closes them all at the end."""
    db, ns = _new_db(pg_cluster.url), f"s{uuid.uuid4().hex[:12]}"
    opened: list[MemoryEngine] = []

    def open_() -> MemoryEngine:
        e = MemoryEngine.open(chroma_url=chroma_server, sql_url=db, namespace=ns,
                              embedder=HashingEmbedder(), config=CFG)
        opened.append(e)
        return e

    yield open_
    for e in opened:
        e.close()


def _held_upsert(eng: MemoryEngine) -> tuple[threading.Event, threading.Event]:
    """Make ``eng``'s next vector write wait: returns (reached, release)."""
    reached, release = threading.Event(), threading.Event()
    upsert = eng.vectors.upsert

    def held(*args: Any, **kw: Any) -> None:
        reached.set()
        assert release.wait(30)
        upsert(*args, **kw)

    eng.vectors.upsert = held  # type: ignore[method-assign]
    return reached, release


def _add_in_thread(eng: MemoryEngine, text: str, mid: str) -> tuple[threading.Thread, dict]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["memory"] = eng.add(text, tenant="t", id=mid)
        except Exception as e:
            out["error"] = e

    th = threading.Thread(target=run)
    th.start()
    return th, out


def test_opening_during_a_write_leaves_it_alone(store: Callable[[], MemoryEngine]) -> None:
    writer = store()
    writer.add("first memory of the tenant", tenant="t")
    reached, release = _held_upsert(writer)
    th, out = _add_in_thread(writer, "the write under way while another engine opens", "m-1")
    assert reached.wait(30)  # the row is pending, its vector not written yet
    other = store()  # its repair sees the pending row of a live writer
    assert other.doctor().consistent
    release.set()
    th.join(30)
    assert "error" not in out and out["memory"].id == "m-1"
    assert other.get("m-1", tenant="t").text == "the write under way while another engine opens"
    assert other.recall("the write under way while another engine opens", tenant="t",
                        k=1).ids == ["m-1"]
    third = store()  # and later opens are not refused
    assert third.doctor().consistent and third.stats("t")["memories"] == 2


def test_a_write_taken_over_after_its_lease_ran_out_is_undone_and_says_so(
        store: Callable[[], MemoryEngine]) -> None:
    writer = store()
    writer.add("first memory of the tenant", tenant="t")
    reached, release = _held_upsert(writer)
    th, out = _add_in_thread(writer, "a write whose process stalled", "m-2")
    assert reached.wait(30)
    writer.runtime.lease.stop()  # the stalled process's lease runs out
    other = store()  # takes the abandoned pending row over and undoes it
    release.set()
    th.join(30)
    assert isinstance(out.get("error"), StoreWriteTakenOverError), out
    assert "nothing of it is stored" in str(out["error"])
    assert other.stats("t")["memories"] == 1
    report = other.doctor()
    assert report.consistent and report.tenant("t").chroma_vectors == 1  # no vector left


def test_a_commit_that_cannot_be_made_or_undone_is_outcome_unknown_and_a_retry_is_idempotent(
        store: Callable[[], MemoryEngine], monkeypatch: pytest.MonkeyPatch) -> None:
    eng = store()
    sql = eng.sql

    def down(*_: Any, **__: Any) -> Any:
        raise StoreUnavailableError("the SQL store stopped answering (injected)")

    monkeypatch.setattr(sql.memories, "mark_committed", down)
    monkeypatch.setattr(sql.memories, "mark_deleting", down)
    with pytest.raises(WriteOutcomeUnknownError) as info:
        eng.add_many([{"text": "kept through the outage", "id": "u-1"},
                      {"text": "and this one too", "id": "u-2"}], tenant="t")
    assert info.value.ids == ["u-1", "u-2"] and "idempotent" in str(info.value)
    monkeypatch.undo()
    again = eng.add_many([{"text": "kept through the outage", "id": "u-1"},
                          {"text": "and this one too", "id": "u-2"}], tenant="t")
    assert [m.id for m in again] == ["u-1", "u-2"]
    assert eng.stats("t")["memories"] == 2 and eng.doctor().consistent
    assert eng.recall("kept through the outage", tenant="t", k=1).ids == ["u-1"]


def test_a_commit_that_fails_once_is_finished(store: Callable[[], MemoryEngine],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    eng = store()
    commit = eng.sql.memories.mark_committed
    calls: list[int] = []

    def once(*args: Any, **kw: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise StoreUnavailableError("the SQL store stopped answering (injected)")
        return commit(*args, **kw)

    monkeypatch.setattr(eng.sql.memories, "mark_committed", once)
    assert eng.add("finished on the second try", tenant="t", id="f-1").id == "f-1"
    assert len(calls) == 2 and eng.stats("t")["memories"] == 1


def test_a_failed_write_taken_back_means_nothing_stored(store: Callable[[], MemoryEngine],
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    eng = store()

    def down(*_: Any, **__: Any) -> Any:
        raise StoreUnavailableError("the SQL store stopped answering (injected)")

    monkeypatch.setattr(eng.sql.memories, "mark_committed", down)
    with pytest.raises(StoreUnavailableError) as info:
        eng.add("never stored", tenant="t", id="n-1")
    assert not isinstance(info.value, WriteOutcomeUnknownError)
    monkeypatch.undo()
    assert eng.stats("t")["memories"] == 0 and eng.doctor().consistent
    assert eng.add("never stored", tenant="t", id="n-1").id == "n-1"  # written afresh
    assert eng.stats("t")["memories"] == 1


def test_a_half_done_write_not_retried_is_finished_at_close(
        store: Callable[[], MemoryEngine], monkeypatch: pytest.MonkeyPatch) -> None:
    eng = store()

    def down(*_: Any, **__: Any) -> Any:
        raise StoreUnavailableError("the SQL store stopped answering (injected)")

    monkeypatch.setattr(eng.sql.memories, "mark_committed", down)
    monkeypatch.setattr(eng.sql.memories, "mark_deleting", down)
    with pytest.raises(WriteOutcomeUnknownError):
        eng.add("left pending", tenant="t", id="p-1")
    monkeypatch.undo()
    eng.close()  # finishes its own pending write: the vector is in Chroma
    other = store()
    assert other.get("p-1", tenant="t").text == "left pending"
    assert other.doctor().consistent


def test_the_same_id_with_another_text_is_still_refused(store: Callable[[], MemoryEngine]
                                                        ) -> None:
    eng = store()
    eng.add("one text", tenant="t", id="x-1")
    assert eng.add("one text", tenant="t", id="x-1").id == "x-1"  # a retry
    with pytest.raises(InvalidInputError, match="already exist"):
        eng.add("another text", tenant="t", id="x-1")
    with pytest.raises(InvalidInputError, match="already exist"):
        eng.add("one text", tenant="u", id="x-1")  # ids are unique in the whole store
    assert eng.stats()["memories"] == 1


def test_an_outage_is_one_log_line_per_kind_with_counts(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    now = [0.0]
    failures = FailureLog(logging.getLogger("mnemonia.test"), every=60, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="mnemonia.test"):
        for i in range(50):
            now[0] = i
            failures.failed("recording an access", StoreUnavailableError("down"))
        failures.failed("recording a review", StoreUnavailableError("down"))
        now[0] = 61
        failures.failed("recording an access", StoreUnavailableError("down"))
        failures.succeeded()
    lines = [r.getMessage() for r in caplog.records]
    assert all(r.exc_info is None for r in caplog.records)
    assert lines == [
        "recording an access (StoreUnavailableError) failed: down; further failures of this "
        "kind are counted",
        "recording a review (StoreUnavailableError) failed: down; further failures of this "
        "kind are counted",
        "recording an access (StoreUnavailableError) failed 50 more times in the last 61 s: "
        "down",
        "recording an access (StoreUnavailableError) works again (0 failures since the last "
        "report)",
        "recording a review (StoreUnavailableError) works again (0 failures since the last "
        "report)",
    ]


def test_a_transient_chroma_server_error_is_retried(engine: MemoryEngine) -> None:
    """Chroma's 'Error creating hnsw segment reader: Nothing found on disk' (a server that
    restarted answers it for a moment) goes through the retries like a network error."""
    from chromadb.errors import InternalError

    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise InternalError("Error creating hnsw segment reader: Nothing found on disk")
        return "answered"

    assert engine.vectors._call(flaky) == "answered" and len(calls) == 3

    def broken() -> str:
        raise InternalError("some other internal error")

    with pytest.raises(StoreError, match="some other internal error"):
        engine.vectors._call(broken)  # not transient: one attempt, a typed error
