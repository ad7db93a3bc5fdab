"""Issue 31: several processes on one server store (Chroma server + PostgreSQL) lose nothing.

Worker processes (``_mp_worker.py``) add memories with explicit ids and report, line by line,
every acknowledged id and every error. Around them the tests open more processes, start
several at the same instant on a brand-new store, kill and restart the Chroma server, and stop
and start PostgreSQL. Afterwards, with the servers up, the test process opens the store and
checks the contract:

- every error a call raised is a ``MnemoniaError``;
- every acknowledged memory is stored with its text and recalled by it (nothing lost), and no
  text is stored twice (a retried add with the same id and text is idempotent);
- every add is acknowledged in the end (retrying after any error stores it);
- opening the store while others write is never refused (``StoreInconsistentError`` or
  anything else), and ``doctor()`` finds the store consistent;
- every worker exits by itself within its deadline plus a bounded grace (no call hangs).

An embedded store (one folder) is the counterpart: a second process is refused with a clear
``StoreError`` and the writer loses nothing.

With ``FAULT_TABLE_FILE=<file>`` each scenario appends its summary row to that JSON-lines
file (``benchmarks/fault_table.py <file>`` prints the table); the row is printed too (-s).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import MemoryNotFoundError, MnemoniaError

from tests.conftest import _chroma_cli, _free_port, wait_for_chroma
from tests.integration.test_postgres import _Cluster, _new_db, running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.server, pytest.mark.slow]

WORKER = Path(__file__).with_name("_mp_worker.py")
ENV = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
RETRY_FOR = 20.0
"""Seconds a worker retries one id before giving it up."""
GRACE = RETRY_FOR + 25.0
"""Seconds past its duration a worker may take (the retries of its last id, open, close)."""
WRITE_PAUSE = 0.02
"""Seconds between two adds of a long-lived writer (keeps the verification short)."""


# -- stores and servers --------------------------------------------------------------------------
@dataclass(frozen=True)
class Store:
    """Where the processes of a scenario meet: a server store, or an embedded folder."""

    chroma_url: str | None = None
    sql_url: str | None = None
    namespace: str = "mnemonia"
    path: Path | None = None

    def args(self) -> list[str]:
        if self.path is not None:
            return ["--path", str(self.path)]
        assert self.chroma_url and self.sql_url
        return ["--chroma-url", self.chroma_url, "--sql-url", self.sql_url,
                "--namespace", self.namespace]

    def open(self, *, verify: bool = True) -> MemoryEngine:
        cfg = MnemoniaConfig.load(env={}, maintenance="manual", retry_attempts=4,
                                  retry_max_wait=0.5)
        if self.path is not None:
            return MemoryEngine.open(self.path, embedder=HashingEmbedder(), config=cfg,
                                     verify=verify)
        return MemoryEngine.open(chroma_url=self.chroma_url, sql_url=self.sql_url,
                                 namespace=self.namespace, embedder=HashingEmbedder(),
                                 config=cfg, verify=verify)


def new_store(cluster: _Cluster, chroma_url: str, *, created: bool = False) -> Store:
    """A brand-new PostgreSQL database and Chroma namespace; ``created``: opened and closed
    once by the test process first (its schema made), for scenarios about something else
    than several processes creating a store at once."""
    store = Store(chroma_url=chroma_url, sql_url=_new_db(cluster.url),
                  namespace=f"mp{uuid.uuid4().hex[:10]}")
    if created:
        store.open().close()
    return store


@pytest.fixture(scope="module")
def cluster() -> Iterator[_Cluster]:
    """This module's own PostgreSQL cluster: the outage scenario stops and starts it, which
    must not disturb the session's cluster that other tests use."""
    yield from running_cluster()


class ChromaServer:
    """A `chroma run` server of one test, which it can SIGKILL and start again (same port,
    same data folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [_chroma_cli(), "run", "--path", str(self.folder / "db"), "--host", "127.0.0.1",
                 "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT, env=ENV)
        wait_for_chroma(self.url, self.proc, self.log)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


# -- workers -------------------------------------------------------------------------------------
@dataclass
class Worker:
    name: str
    store: Store
    tenant: str
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    deadline: float  # monotonic time it must have exited by
    exit_problem: str | None = None  # set by finish(): it hung, or exited with an error
    finished: bool = False

    def records(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        text = self.out.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines(keepends=True)
                if line.endswith("\n")]


@pytest.fixture
def spawned() -> Iterator[list[Worker]]:
    """The workers a test started; any still running at teardown is killed."""
    workers: list[Worker] = []
    yield workers
    for w in workers:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait(timeout=30)


def start_worker(spawned: list[Worker], folder: Path, store: Store, tenant: str, name: str, *,
                 mode: str = "add", duration: float = 0.0, start_at: float | None = None,
                 pause: float = 0.0) -> Worker:
    out, err = folder / f"{name}.jsonl", folder / f"{name}.stderr"
    cmd = [sys.executable, str(WORKER), "--mode", mode, *store.args(), "--tenant", tenant,
           "--name", name, "--duration", str(duration), "--out", str(out),
           "--pause", str(pause), "--retry-for", str(RETRY_FOR)]
    if start_at is not None:
        cmd += ["--start-at", str(start_at)]
    with open(err, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh, env=ENV)
    wait = max(0.0, (start_at or 0.0) - time.time())
    worker = Worker(name, store, tenant, proc, out, err,
                    time.monotonic() + wait + duration + GRACE)
    spawned.append(worker)
    return worker


def wait_for_record(worker: Worker, key: str, timeout: float = 60.0) -> bool:
    """Wait until the worker reported a record with ``key`` (False: it exited or timed out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(key in r for r in worker.records()):
            return True
        if worker.proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def finish(worker: Worker) -> None:
    """Wait for the worker up to its deadline; kill it if it hangs. Idempotent."""
    if worker.finished:
        return
    worker.finished = True
    try:
        rc = worker.proc.wait(timeout=max(0.1, worker.deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        worker.proc.kill()
        worker.proc.wait(timeout=30)
        worker.exit_problem = (f"worker {worker.name} hung: still running past its deadline "
                               f"+ {GRACE:.0f} s grace (killed)")
        return
    if rc != 0:
        tail = worker.err.read_text(errors="replace")[-1500:]
        worker.exit_problem = f"worker {worker.name} exited with code {rc}: {tail}"


# -- the check -----------------------------------------------------------------------------------
@dataclass
class Findings:
    """What the workers reported and what the stores hold afterwards."""

    stores: list[Store] = field(default_factory=list)
    # (store, tenant) -> id -> text of every acknowledged add
    acked: dict[tuple[Store, str], dict[str, str]] = field(default_factory=dict)
    attempted: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "who: Type: message" of refused opens
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unrecallable: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the verification itself hit


def gather(workers: list[Worker]) -> Findings:
    """Wait for every worker and add up what they reported."""
    found = Findings()
    for w in workers:
        finish(w)
        if w.exit_problem:
            found.hung.append(w.exit_problem)
        if w.store not in found.stores:
            found.stores.append(w.store)
        acked = found.acked.setdefault((w.store, w.tenant), {})
        seen: set[str] = set()
        done: dict[str, int] | None = None
        for r in w.records():
            if "ack" in r:
                acked[r["ack"]] = r["text"]
                seen.add(r["ack"])
            elif "error" in r:
                found.errors.append({**r, "worker": w.name})
                if r["where"] == "open":
                    found.refused.append(f"{w.name}: {r['error']}: {r['msg']}")
                if r.get("id"):
                    seen.add(r["id"])
            elif "done" in r:
                done = r["done"]
        found.attempted += done["attempted"] if done is not None else len(seen)
    return found


def short(items: list[str], n: int = 3) -> str:
    return "; ".join(items[:n]) + (f" (+{len(items) - n} more)" if len(items) > n else "")


def open_for_check(store: Store, found: Findings) -> MemoryEngine | None:
    """The store opened by the test process; a refused open is counted, and the store is then
    opened without the check at open to still measure what it holds."""
    try:
        return store.open()
    except Exception as e:
        found.refused.append(f"test process: {type(e).__name__}: {str(e)[:300]}")
        found.errors.append({"worker": "test process", "where": "open",
                             "error": type(e).__name__, "mnemonia": isinstance(e, MnemoniaError),
                             "msg": str(e)[:300]})
    try:
        return store.open(verify=False)
    except Exception as e:
        found.problems.append(f"cannot open the store even with verify=False: "
                              f"{type(e).__name__}: {str(e)[:300]}")
        return None


def examine_tenant(eng: MemoryEngine, tenant: str, acked: dict[str, str],
                   found: Findings) -> None:
    for mid, text in acked.items():
        try:
            stored = eng.get(mid, tenant=tenant)
        except MemoryNotFoundError:
            found.lost.append(mid)
            continue
        if stored.text != text:
            found.lost.append(f"{mid} (text changed to {stored.text!r})")
            continue
        ids = eng.recall(text, tenant=tenant, k=1, touch=False).ids
        if ids[:1] != [mid]:
            found.unrecallable.append(f"{mid} (recall gave {ids})")
    texts = Counter(m.text for m in eng.list(tenant=tenant))
    found.duplicates += [f"{t!r} x{c}" for t, c in texts.items() if c > 1]


def examine(found: Findings) -> None:
    """Open each store (servers up) and check every acknowledged memory, the duplicates and
    the doctor's report."""
    for store in found.stores:
        eng = open_for_check(store, found)
        if eng is None:
            continue
        try:
            for (where, tenant), acked in found.acked.items():
                if where == store:
                    examine_tenant(eng, tenant, acked, found)
            doctor = eng.doctor()
            if not doctor.consistent:
                found.inconsistent += [f"{t.tenant}: {t.problems} problems ({t})"
                                       for t in doctor.tenants if t.problems]
        except Exception as e:
            found.problems.append(f"verification failed: {type(e).__name__}: {str(e)[:300]}")
        finally:
            eng.close()


def summary_row(scenario: str, found: Findings) -> dict[str, Any]:
    acknowledged = sum(len(a) for a in found.acked.values())
    return {"scenario": scenario, "attempted": found.attempted, "acknowledged": acknowledged,
            "failed_typed": sum(1 for e in found.errors if e["mnemonia"]),
            "failed_untyped": sum(1 for e in found.errors if not e["mnemonia"]),
            "lost": len(found.lost), "duplicates": len(found.duplicates),
            "refused_opens": len(found.refused),
            "outcome_unknown": sum(1 for e in found.errors if e.get("outcome_unknown")),
            "not_acknowledged": found.attempted - acknowledged,
            "unrecallable": len(found.unrecallable),
            "inconsistent": int(bool(found.inconsistent)), "hung": len(found.hung)}


def violations(found: Findings, row: dict[str, Any]) -> list[str]:
    """Every way the scenario broke the contract, the most telling first."""
    out: list[str] = []
    if found.refused:
        out.append(f"{len(found.refused)} refused opens: {short(found.refused)}")
    if found.lost:
        out.append(f"{len(found.lost)} acknowledged memories lost: {short(found.lost, 5)}")
    if found.duplicates:
        out.append(f"{len(found.duplicates)} texts stored more than once: "
                   f"{short(found.duplicates)}")
    untyped = [f"{e['worker']} {e['where']}: {e['error']}: {e['msg']}"
               for e in found.errors if not e["mnemonia"]]
    if untyped:
        out.append(f"{len(untyped)} errors are no MnemoniaError: {short(untyped)}")
    if found.inconsistent:
        out.append(f"doctor() finds the store inconsistent: {short(found.inconsistent)}")
    if row["not_acknowledged"]:
        out.append(f"{row['not_acknowledged']} of {row['attempted']} adds never acknowledged "
                   f"despite {RETRY_FOR:.0f} s of retries with the same id and text")
    if found.unrecallable:
        out.append(f"{len(found.unrecallable)} acknowledged memories not recalled by their "
                   f"own text: {short(found.unrecallable)}")
    return out + found.hung + found.problems


def report(scenario: str, found: Findings) -> None:
    """Print and record the summary row, then assert the contract (every violation listed)."""
    row = summary_row(scenario, found)
    print(f"\nfault table row: {json.dumps(row)}")
    kinds = Counter(f"{e['where']}:{e['error']}" for e in found.errors)
    if kinds:
        print(f"errors recorded: {dict(kinds)}")
    table = os.environ.get("FAULT_TABLE_FILE")
    if table:
        with open(table, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    broken = violations(found, row)
    assert not broken, f"{scenario}:" + "\n  ".join(["", *broken])


def check(scenario: str, workers: list[Worker]) -> None:
    """Wait for the workers, examine their stores, report and assert."""
    found = gather(workers)
    examine(found)
    report(scenario, found)


# -- scenarios -----------------------------------------------------------------------------------
def test_processes_opening_while_one_writes_lose_nothing(
        cluster: _Cluster, chroma_server: str, tmp_path: Path, spawned: list[Worker]) -> None:
    """One long-lived writer; meanwhile ten short-lived processes, one after another, open the
    store, recall, add one memory and close."""
    store = new_store(cluster, chroma_server)
    # no pause: the writer is always in the middle of an add when another process opens
    writer = start_worker(spawned, tmp_path, store, "shared", "writer", duration=18)
    assert wait_for_record(writer, "ack"), "the writer acknowledged nothing"
    openers = []
    for i in range(10):
        opener = start_worker(spawned, tmp_path, store, "shared", f"opener{i}", mode="open")
        finish(opener)  # one after another (gather() reports a problem it had)
        openers.append(opener)
    check("opens while one writes", [writer, *openers])


def test_two_long_lived_writers_agree(cluster: _Cluster, chroma_server: str, tmp_path: Path,
                                      spawned: list[Worker]) -> None:
    """Two writers on one tenant and a third on another, for about 20 s; the second and third
    open the store while the first is writing."""
    store = new_store(cluster, chroma_server)
    first = start_worker(spawned, tmp_path, store, "shared", "a", duration=20,
                         pause=WRITE_PAUSE)
    assert wait_for_record(first, "ack"), "the first writer acknowledged nothing"
    others = [start_worker(spawned, tmp_path, store, tenant, name, duration=18,
                           pause=WRITE_PAUSE) for tenant, name in (("shared", "b"),
                                                                   ("other", "c"))]
    check("two long-lived writers", [first, *others])


def test_three_processes_open_a_new_store_at_once(
        cluster: _Cluster, chroma_server: str, tmp_path: Path, spawned: list[Worker]) -> None:
    """Three rounds: a new database and namespace, three processes that open it at the same
    instant and each add to the same new tenant: every open and every add succeeds."""
    workers: list[Worker] = []
    for round_ in range(3):
        store = new_store(cluster, chroma_server)
        start_at = time.time() + 3.0  # after all three imported mnemonia
        group = [start_worker(spawned, tmp_path, store, "fresh", f"r{round_}p{i}", mode="open",
                              start_at=start_at) for i in range(3)]
        for w in group:
            finish(w)
            ready = next((r["ready"] for r in w.records() if "ready" in r), None)
            if ready is not None and ready > start_at:
                print(f"note: {w.name} was ready only {ready - start_at:.2f} s after the start")
        workers += group
    check("three open a new store at once", workers)


def test_chroma_server_killed_and_restarted_under_load(
        cluster: _Cluster, tmp_path: Path, spawned: list[Worker]) -> None:
    """Two writers for about 22 s on this test's own Chroma server, which is SIGKILLed and
    started again (same port, same data) three times."""
    server = ChromaServer(tmp_path / "chroma")
    server.folder.mkdir()
    server.start()
    try:
        store = new_store(cluster, server.url, created=True)
        writers = [start_worker(spawned, tmp_path, store, "shared", name, duration=22,
                                pause=WRITE_PAUSE) for name in ("a", "b")]
        assert all(wait_for_record(w, "ack") for w in writers), "a writer acknowledged nothing"
        for _ in range(3):
            time.sleep(3.0)
            server.kill()
            time.sleep(1.5)
            server.start()
        check("chroma server killed and restarted", writers)
    finally:
        server.kill()


def test_postgres_stopped_and_started_under_load(
        cluster: _Cluster, chroma_server: str, tmp_path: Path, spawned: list[Worker]) -> None:
    """Two writers for about 22 s while this module's PostgreSQL stops for 2 s and starts
    again, twice."""
    store = new_store(cluster, chroma_server, created=True)
    writers = [start_worker(spawned, tmp_path, store, "shared", name, duration=22,
                            pause=WRITE_PAUSE) for name in ("a", "b")]
    assert all(wait_for_record(w, "ack") for w in writers), "a writer acknowledged nothing"
    try:
        for _ in range(2):
            time.sleep(4.0)
            cluster.stop()
            time.sleep(2.0)
            cluster.start()
    except BaseException:
        with contextlib.suppress(subprocess.CalledProcessError):  # it may be running
            cluster.start()  # never leave the module's cluster down
        raise
    check("postgres stopped and started", writers)


def test_embedded_store_refuses_a_second_process(tmp_path: Path,
                                                 spawned: list[Worker]) -> None:
    """An embedded store is one process's: a second process opening the folder gets a
    StoreError saying so, and the writer's acknowledged memories are all there after it
    closes."""
    store = Store(path=tmp_path / "store")
    writer = start_worker(spawned, tmp_path, store, "solo", "writer", duration=4,
                          pause=WRITE_PAUSE)
    assert wait_for_record(writer, "ack"), "the writer acknowledged nothing"
    second = start_worker(spawned, tmp_path, store, "solo", "second", mode="open")
    finish(second)
    assert second.exit_problem is None, second.exit_problem
    opens = [r for r in second.records() if "opened" in r or r.get("where") == "open"]
    assert len(opens) == 1 and "opened" not in opens[0], \
        f"the second process opened the embedded store the writer holds: {opens}"
    refusal = opens[0]
    assert "StoreError" in refusal["types"] and refusal["mnemonia"], refusal
    assert "open in another process" in refusal["msg"], refusal["msg"]
    check("embedded store, second process", [writer])
