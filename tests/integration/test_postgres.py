"""The engine contract with PostgreSQL as the SQL side-store (full-text search in Postgres) and
a Chroma server: the scale-out setup. The test run starts its own PostgreSQL cluster on
127.0.0.1 (as the `postgres` system user when run as root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig, Scheduler
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import StoreUnavailableError

from tests.conftest import _free_port
from tests.contracts.engine import EngineContract

pytestmark = [pytest.mark.integration, pytest.mark.server]
MANUAL = MnemoniaConfig.load(env={}, maintenance="manual")  # maintenance run by hand


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / name).exists():
            return str(root / name)
    return None


class _Cluster:
    """A throwaway PostgreSQL cluster on 127.0.0.1 that a test can stop and start again."""

    def __init__(self, initdb: str, pg_ctl: str) -> None:
        # not under pytest's tmp folder: that one is private to root, and postgres runs as its
        # own user
        self.base = Path(tempfile.mkdtemp(prefix="mnemonia-pg-"))
        self.data = self.base / "data"
        self.port = _free_port()
        self.pg_ctl = pg_ctl
        self.prefix: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.base, "postgres")
            os.chmod(self.base, 0o777)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        subprocess.run([*self.prefix, initdb, "-D", str(self.data), "-A", "trust", "-U",
                        "postgres"], check=True, capture_output=True)
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def start(self) -> None:
        subprocess.run([*self.prefix, self.pg_ctl, "-D", str(self.data), "-l",
                        str(self.base / "log"), "-w", "-o",
                        f"-p {self.port} -k {self.base} -h 127.0.0.1", "start"], check=True,
                       capture_output=True)
        import psycopg

        plain = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        for _ in range(100):
            try:
                with psycopg.connect(plain, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                time.sleep(0.1)

    def stop(self) -> None:
        subprocess.run([*self.prefix, self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w",
                        "stop"], capture_output=True)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[_Cluster]:
    yield from running_cluster()


def running_cluster() -> Iterator[_Cluster]:
    """A new cluster, started, removed when the generator is closed (for fixtures); the test
    is skipped where the PostgreSQL server binaries are missing."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    cluster = _Cluster(initdb, pg_ctl)
    cluster.start()
    yield cluster
    cluster.remove()


@pytest.fixture(scope="session")
def postgres_url(pg_cluster: _Cluster) -> str:
    return pg_cluster.url


def _new_db(url: str) -> str:
    import psycopg

    name = f"m{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url.replace("+psycopg", "") + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{url}/{name}"


class TestPostgres(EngineContract):
    @pytest.fixture
    def eng(self, clock: ManualClock, config: MnemoniaConfig, real_embedder,  # type: ignore[no-untyped-def]
            chroma_server: str, postgres_url: str) -> Iterator[MemoryEngine]:
        self._db = _new_db(postgres_url)
        self._ns = f"p{uuid.uuid4().hex[:12]}"
        self._opened: list[MemoryEngine] = []
        yield self._open(self._db, self._ns, clock, config, real_embedder, chroma_server)
        for x in self._opened:
            x.close()

    def _open(self, db: str, ns: str, clock: ManualClock, config: MnemoniaConfig, emb,  # type: ignore[no-untyped-def]
              url: str, **kw) -> MemoryEngine:
        e = MemoryEngine.open(chroma_url=url, sql_url=db, clock=clock, config=config,
                              embedder=emb, namespace=ns, **kw)
        self._opened.append(e)
        return e

    @pytest.fixture
    def reopen(self, eng: MemoryEngine, clock: ManualClock, config: MnemoniaConfig,  # type: ignore[no-untyped-def]
               real_embedder, chroma_server: str) -> Callable[[], MemoryEngine]:
        def _reopen(**kw: object) -> MemoryEngine:
            eng.close()
            return self._open(self._db, self._ns, clock, config, real_embedder, chroma_server,
                              **kw)
        return _reopen

    @pytest.fixture
    def other_engine(self, clock: ManualClock, config: MnemoniaConfig, real_embedder,  # type: ignore[no-untyped-def]
                     chroma_server: str, postgres_url: str) -> Callable[[], MemoryEngine]:
        def _make() -> MemoryEngine:
            return self._open(_new_db(postgres_url), f"q{uuid.uuid4().hex[:12]}", clock, config,
                              real_embedder, chroma_server)
        return _make

    def test_keyword_index_is_postgres_full_text(self, eng: MemoryEngine) -> None:
        m = eng.add("The invoice number is ZX-4471", tenant="kw")
        with eng.sql.connect() as conn:
            hits = eng.sql.keywords.keyword_search(conn, "kw", ["invoice"], 5)
        assert [h[0] for h in hits] == [m.id]

    def test_keyword_search_keeps_to_the_postings_budget_per_tenant(self, eng: MemoryEngine
                                                                     ) -> None:
        """As on SQLite: query words are taken rarest first while their memories in the
        asking tenant fit the budget; a word over it is left out (ranking every memory a
        common word is in read most of a big tenant), and another tenant's use of a word
        does not count."""
        eng.add_many([{"text": f"invoice number {i} for the noisy shop"} for i in range(12)],
                     tenant="noisy")
        q1 = eng.add("the invoice is paid", tenant="quiet")
        q2 = eng.add("paid in full", tenant="quiet")
        with eng.sql.connect() as conn:
            search = eng.sql.keywords.keyword_search
            assert [i for i, _ in search(conn, "quiet", ["invoice", "paid"], 5,
                                         max_postings=3)] == [q1.id, q2.id]
            assert search(conn, "noisy", ["invoice"], 100, max_postings=3) == []
            # the rare word fits, the common one (12 memories) does not
            only = search(conn, "noisy", ["invoice", "7"], 100, max_postings=3)
            assert len(only) == 1 and eng.get(only[0][0], tenant="noisy").text.startswith(
                "invoice number 7 ")
            assert len(search(conn, "noisy", ["invoice"], 100, max_postings=12)) == 12

    def test_doctor_reports_the_keyword_index_as_not_applicable(self, eng: MemoryEngine,
                                                                loaded: dict[str, str]) -> None:
        report = eng.doctor()
        assert report.consistent and report.keyword_index.startswith("n/a")
        health = report.tenant("alice")
        assert health.keyword_rows is None and health.keyword_off is None
        assert health.memories == health.chroma_vectors == health.side_vectors == len(loaded)
        assert report.stray_keyword_rows is None


def test_postgres_outage_typed_error_nothing_half_written(
        pg_cluster: _Cluster, chroma_server: str, clock: ManualClock) -> None:
    """PostgreSQL stops mid-session: every call gets StoreUnavailableError after the bounded
    retries and writes nothing anywhere; once it is back the same engine carries on."""
    cfg = MnemoniaConfig.load(env={}, retry_attempts=3, retry_max_wait=0.2)
    eng = MemoryEngine.open(chroma_url=chroma_server, sql_url=_new_db(pg_cluster.url),
                            config=cfg, clock=clock, embedder=HashingEmbedder(),
                            namespace=f"o{uuid.uuid4().hex[:12]}")
    try:
        kept = eng.add("kept before the outage", tenant="t")
        before = eng.stats("t")
        pg_cluster.stop()
        try:
            with pytest.raises(StoreUnavailableError, match="SQL store"):
                eng.add_many([{"text": "lost in the outage"}, {"text": "also lost"}],
                             tenant="t")
            with pytest.raises(StoreUnavailableError):
                eng.recall("kept before the outage", tenant="t")
            with pytest.raises(StoreUnavailableError):
                eng.feedback(kept.id, 5, tenant="t")
        finally:
            pg_cluster.start()
        assert eng.stats("t") == before
        assert [m.id for m in eng.list(tenant="t")] == [kept.id]
        col = eng.vectors.collection("t", model=eng.embedder.name, dimension=0, create=False)
        assert eng.vectors.count(col) == 1  # no vector was written for the failed add
        assert eng.recall("kept before the outage", tenant="t", k=1).ids == [kept.id]
        eng.add("after the outage", tenant="t")
        assert eng.stats("t")["memories"] == 2
    finally:
        eng.close()


_LEASE_HOLDER = r'''
import sys, time
from pathlib import Path
from mnemonia import MemoryEngine, MnemoniaConfig, Scheduler
from mnemonia.embeddings import HashingEmbedder

chroma_url, sql_url, namespace, marker = sys.argv[1:5]

def slow_summariser(texts):
    Path(marker).write_text("holding")
    time.sleep(6)
    return " / ".join(texts)

engine = MemoryEngine.open(chroma_url=chroma_url, sql_url=sql_url, namespace=namespace,
                           embedder=HashingEmbedder(), summariser=slow_summariser,
                           config=MnemoniaConfig.load(env={}, maintenance="manual"))
only = {"enrich": None, "evict": None, "review": None, "reevaluate": None, "expire": None,
        "consolidate": 60}
scheduler = Scheduler(engine, intervals=only)
done = scheduler.run_pending()
print("ran", sorted(done), scheduler.runs["consolidate"], flush=True)
engine.close()
'''


def test_two_processes_run_each_job_one_at_a_time_through_a_lease(
        pg_cluster: _Cluster, chroma_server: str, tmp_path: Path) -> None:
    """Two processes open one server store (Chroma server + PostgreSQL): while one runs a job
    (it holds the job's lease row), the other skips that job; a crashed holder's lease runs
    out and the job is taken over."""
    sql_url, ns = _new_db(pg_cluster.url), f"l{uuid.uuid4().hex[:12]}"
    cfg = MnemoniaConfig.load(env={}, maintenance="manual")
    eng = MemoryEngine.open(chroma_url=chroma_server, sql_url=sql_url, namespace=ns,
                            embedder=HashingEmbedder(), config=cfg)
    marker = tmp_path / "holding"
    only = {"enrich": None, "evict": None, "review": None, "reevaluate": None, "expire": None,
            "consolidate": 60}
    try:
        eng.add_many([{"text": "The deploy runs every Friday at noon"},
                      {"text": "the deploy runs every friday at noon."}], tenant="ops")
        holder = subprocess.Popen(
            [sys.executable, "-c", _LEASE_HOLDER, chroma_server, sql_url, ns, str(marker)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert holder.poll() is None, holder.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the other process never started its job"
            time.sleep(0.1)
        mine = Scheduler(eng, intervals=only)
        assert mine.run_pending() == {}  # consolidation is running in the other process
        assert mine.runs["consolidate"] == 0
        assert eng.sql.kv.lease_holder("consolidate", now=time.time()) not in (None, mine.holder)
        out, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err[-3000:]
        assert out.strip().splitlines()[-1] == "ran ['consolidate'] 1"
        assert eng.stats("ops")["by_kind"]["concept"] == 1  # made once, by the other process
        assert eng.sql.kv.lease_holder("consolidate", now=time.time()) is None  # given back
        again = Scheduler(eng, intervals=only)
        assert set(again.run_pending()) == {"consolidate"}

        # a holder that dies without giving its lease back: the lease runs out
        crash = subprocess.run(
            [sys.executable, "-c",
             "import os, sys, time\n"
             "from mnemonia.store.repository import SideStore\n"
             "s = SideStore(sys.argv[1])\n"
             "assert s.kv.acquire_lease('review', 'crashed', now=time.time(), seconds=3)\n"
             "os.kill(os.getpid(), 9)\n", sql_url], capture_output=True, text=True, check=False)
        assert crash.returncode == -9
        assert not eng.sql.kv.acquire_lease("review", "survivor", now=time.time(), seconds=60)
        time.sleep(3.2)
        assert eng.sql.kv.acquire_lease("review", "survivor", now=time.time(), seconds=60)
    finally:
        eng.close()


def test_export_import_lossless_atomic_on_postgres(postgres_url: str, chroma_server: str,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Format 2 through PostgreSQL and a Chroma server: a store with every kind of state
    round-trips to the very same export file; skip twice changes nothing; replace swaps the
    file's version in; a failure in the middle of an import leaves nothing."""
    from mnemonia import transfer

    from tests.reliability.transfer_helpers import CountingEmbedder, build_rich_store

    now = build_rich_store(tmp_path / "source")
    original = tmp_path / "original.jsonl"
    with MemoryEngine.open(tmp_path / "source", config=MANUAL,
                           clock=ManualClock(now), embedder=HashingEmbedder()) as e:
        e.export(original)

    def server(embedder: HashingEmbedder | None = None) -> MemoryEngine:
        return MemoryEngine.open(chroma_url=chroma_server, sql_url=db,
                                 config=MANUAL, clock=ManualClock(now),
                                 embedder=embedder or HashingEmbedder(), namespace=ns)

    def export(name: str) -> bytes:
        with server() as e:
            e.export(tmp_path / name)
        return (tmp_path / name).read_bytes()

    db, ns = _new_db(postgres_url), f"x{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(transfer.format, "BATCH", 4)
    with server(CountingEmbedder(fail_on_call=2)) as e:
        with pytest.raises(RuntimeError, match="injected"):
            e.import_(original)
        assert e.tenants() == [] and e.stats()["memories"] == 0
    with server() as e:
        assert e.import_(original) == 15
    assert export("copy.jsonl") == original.read_bytes()
    with server() as e:
        assert e.import_(original, on_conflict="skip") == 0
    assert export("skipped.jsonl") == original.read_bytes()

    records = [json.loads(line) for line in original.read_text().splitlines()]
    for r in records:
        if r["type"] == "memory":
            r["text"] += " (edited)"
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in records))
    with server(CountingEmbedder(fail_on_call=3)) as e, pytest.raises(RuntimeError,
                                                                      match="injected"):
        e.import_(edited, on_conflict="replace")
    assert export("after-failure.jsonl") == original.read_bytes()
    with server() as e:
        assert e.import_(edited, on_conflict="replace") == 15
        assert e.recall("green tea (edited)", tenant="alice", k=1, touch=False).ids == ["a-tea"]
    assert export("replaced.jsonl") == edited.read_bytes()


def test_keyed_items_on_postgres(postgres_url: str, tmp_path: Path, clock: ManualClock) -> None:
    """The keyed-item SQL on PostgreSQL (jsonb, COLLATE "C" paths, the migration's expression
    indexes): value filters agree with the reference used on SQLite, with and without a
    query; listing, paging, TTL expiry and the sweep."""
    from datetime import timedelta

    from hypothesis import HealthCheck, given, settings
    from mnemonia.models import ItemWrite

    from tests.integration.test_items import CASES, expected, filters, put_corpus

    eng = MemoryEngine.open(tmp_path / "pg-items", sql_url=_new_db(postgres_url), config=MANUAL,
                            clock=clock, embedder=HashingEmbedder())
    try:
        put_corpus(eng)
        for flt, keys in CASES:
            assert {i.key for i in eng.items.search(("c",), filter=flt, limit=100)} == keys, flt
            assert {i.key for i in eng.items.search(("c",), query="value", filter=flt,
                                                    limit=100, touch=False)} == keys, flt

        @settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow,
                                         HealthCheck.function_scoped_fixture])
        @given(flt=filters)
        def agrees(flt: dict[str, object]) -> None:
            got = {i.key for i in eng.items.search(("c",), filter=flt, limit=100)}
            assert got == expected(flt), flt

        agrees()
        namespaces = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("a b",), ("a\x01",),
                      ("a", "\x02"), ("a-", "x"), ("b", "a"), ("ü",)]
        eng.items.put([ItemWrite(namespace=ns, key="k", value={"i": i}, text=f"note {i}")
                       for i, ns in enumerate(namespaces)], space="ns")
        assert eng.items.namespaces(space="ns") == sorted(namespaces)  # code-point order
        assert eng.items.namespaces(space="ns", match=[("prefix", ("a",))], max_depth=2) == [
            ("a",), ("a", "\x02"), ("a", "b")]
        assert eng.items.namespaces(space="ns", limit=2, offset=3) == sorted(namespaces)[3:5]
        eng.items.put([ItemWrite(namespace=("t",), key="gone", value={}, text="soon", ttl=1),
                       ItemWrite(namespace=("t",), key="kept", value={}, text="later")])
        clock.advance(timedelta(minutes=2))
        assert [i.key for i in eng.items.search(("t",))] == ["kept"]
        assert eng.items.get(("t",), ["gone", "kept"]).keys() == {"kept"}
        assert eng.items.sweep() == 1
        assert eng.stats(eng.items.tenant(("t",)))["memories"] == 1
    finally:
        eng.close()


def test_entity_link_order_migration_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    """Migration 12 on PostgreSQL: entity links of an older store get their memory's ``seq``
    (under the migration lock), and an entity's first linked memories are the first stored."""
    from tests.integration.test_side_store import check_entity_link_order_migration

    db = _new_db(postgres_url)
    check_entity_link_order_migration(lambda: MemoryEngine.open(
        tmp_path / "pg-links", sql_url=db, config=MANUAL, embedder=HashingEmbedder()))


def test_the_counts_are_kept_on_every_write_on_postgres(postgres_url: str,
                                                       tmp_path: Path) -> None:
    """Migration 17 on PostgreSQL: the triggers keep each tenant's entity document counts
    and active memories on every kind of write, and the migration counts an older store in
    (the script of ``test_kept_counts.py``)."""
    from tests.integration.test_kept_counts import check_kept_counts

    db = _new_db(postgres_url)
    check_kept_counts(lambda: MemoryEngine.open(tmp_path / "pg-kept", sql_url=db, config=MANUAL,
                                                embedder=HashingEmbedder()), tmp_path)


def test_keyword_counts_migration_on_postgres(postgres_url: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 15 on a PostgreSQL store made before it: ``keyword_df`` is filled from
    every memory row, tenant by tenant (pages of 3 rows here, so that the pages cross
    tenants), with the counts the writes keep since (the speaker's words included, long
    terms under their digest)."""
    from mnemonia.store import schema

    db = _new_db(postgres_url)

    def opened() -> MemoryEngine:
        return MemoryEngine.open(tmp_path / "pg-df", sql_url=db, config=MANUAL,
                                 embedder=HashingEmbedder())

    with opened() as eng:
        for tenant in ("a", "b", "c"):
            mems = eng.add_many([
                {"text": f"the kettle in {tenant} boils", "speaker": "Ana"},
                {"text": "Crème brûlée at the café", "metadata": {"speaker": "Bo"}},
                {"text": "kettle " + "y" * 300},
                {"text": "the teapot cracked"}], tenant=tenant)
            eng.forget(mems[3].id, tenant=tenant, hard=True)
        with eng.sql.connect() as conn:
            kept = dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").all())
        with eng.sql.begin() as conn:  # the store as it was before migration 15
            conn.exec_driver_sql("DROP TABLE keyword_df")
            conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 15")
    monkeypatch.setattr(schema, "_BACKFILL_PAGE", 3)
    with opened() as eng, eng.sql.connect() as conn:
        assert dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").all()) == kept
        assert eng.sql.keywords.term_docs(conn, "b", ["kettle", "said", "cafe", "teapot",
                                                      "y" * 300]) == {
            "kettle": 2, "said": 2, "cafe": 1, "y" * 300: 1}
    assert kept[schema.tenant_token("a") + "kettle"] == 2 and len(kept) == 3 * 13


def test_doctor_repair_counts_the_keyword_terms_again_on_postgres(postgres_url: str,
                                                                   tmp_path: Path) -> None:
    """PostgreSQL's keyword counts are compared with nothing at open (a process of an older
    version writes memories without counting them): ``doctor(repair=True)`` counts them
    again from the memories, and recall reads the repaired counts."""
    db = _new_db(postgres_url)
    with MemoryEngine.open(tmp_path / "pg-recount", sql_url=db, config=MANUAL,
                           embedder=HashingEmbedder()) as eng:
        eng.add_many([{"text": "the kettle boils", "speaker": "Ana"},
                      {"text": "the kettle leaks"}, {"text": "a teapot"}], tenant="t")
        with eng.sql.connect() as conn:
            kept = dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").all())
        with eng.sql.begin() as conn:  # as an older process would leave them, and worse
            conn.exec_driver_sql("UPDATE keyword_df SET docs = docs + 5")
            conn.exec_driver_sql("DELETE FROM keyword_df WHERE term LIKE '%teapot'")
            conn.exec_driver_sql("INSERT INTO keyword_df VALUES ('tnothere', 3)")
        assert eng.doctor(repair=True).consistent
        with eng.sql.connect() as conn:
            assert dict(conn.exec_driver_sql("SELECT term, docs FROM keyword_df").all()) == kept
            assert eng.sql.keywords.term_docs(conn, "t", ["kettle", "teapot", "said"]) == {
                "kettle": 2, "teapot": 1, "said": 1}


def test_a_fast_filled_store_is_analysed_so_keyword_search_reads_the_word_postings(
        postgres_url: str, chroma_server: str) -> None:
    """A new store filled faster than autovacuum's first pass has no column statistics: the
    planner then took the status index as selective for ``committed`` (nearly every row)
    and filtered the whole tenant by the words. No keyword search goes through the status
    index, analysed or not; and once ``memories`` outgrows its last analysis (twice the
    pages, at least ``STATISTICS_PAGES``) the next committed write analyses it."""
    import sqlalchemy as sa
    from mnemonia.store.dialect import STATISTICS_PAGES

    db, ns = _new_db(postgres_url), f"a{uuid.uuid4().hex[:12]}"
    words = ["alpha", "brook", "cedar", "dune", "ember", "fjord", "grove", "heath"]

    def notes(start: int, n: int) -> list[dict[str, str]]:
        return [{"text": f"note {i} about the {words[i % 8]} walk and the rest of the day, "
                         f"written down at length {i * 7}"} for i in range(start, start + n)]

    with MemoryEngine.open(chroma_url=chroma_server, sql_url=db, config=MANUAL,
                           embedder=HashingEmbedder(), namespace=ns) as e:
        def analysed() -> tuple[int, bool]:
            with e.sql.connect() as conn:
                pages = conn.exec_driver_sql(
                    "SELECT pg_relation_size('memories') / current_setting('block_size')::int"
                    ).scalar()
                done = conn.exec_driver_sql(
                    "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables "
                    "WHERE relname = 'memories'").scalar()
            return int(pages), bool(done)

        def search(word: str) -> tuple[list[str], str]:
            """The hits of a keyword search for ``word``, and the plan of its statement."""
            sent: list[tuple[str, object]] = []

            def keep(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
                if "ts_rank" in statement:
                    sent.append((statement, parameters))

            sa.event.listen(e.sql.db.engine, "before_cursor_execute", keep)
            try:
                with e.sql.connect() as conn:
                    hits = e.sql.keywords.keyword_search(conn, "big", [word], 5)
            finally:
                sa.event.remove(e.sql.db.engine, "before_cursor_execute", keep)
            (statement, parameters), = sent
            with e.sql.connect() as conn:
                plan = conn.exec_driver_sql("EXPLAIN " + statement, parameters)  # type: ignore[arg-type]
                return [h[0] for h in hits], "\n".join(r[0] for r in plan)

        first = e.add("the quokka crossed the road", tenant="big")
        e.add_many(notes(0, 300), tenant="big")
        pages, done = analysed()
        assert pages < STATISTICS_PAGES and not done  # small: nothing to refresh yet
        hits, plan = search("quokka")
        assert hits == [first.id] and "ix_memories_status" not in plan, plan
        n = 300
        while pages < 2 * STATISTICS_PAGES:
            e.add_many(notes(n, 1000), tenant="big")
            n += 1000
            pages, done = analysed()
        assert done
        second = e.add("a second quokka", tenant="big")
        hits, plan = search("quokka")
        assert set(hits) == {first.id, second.id} and "ix_memories_status" not in plan, plan
