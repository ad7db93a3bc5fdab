"""The engine contract with PostgreSQL as the SQL side-store (full-text search in Postgres) and
a Chroma server: the scale-out setup. The test run starts its own PostgreSQL cluster on
127.0.0.1 (as the `postgres` system user when run as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import StoreUnavailableError

from tests.conftest import _free_port
from tests.contracts.engine import EngineContract

pytestmark = [pytest.mark.integration, pytest.mark.server]


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
            hits = eng.sql.keyword_search(conn, "kw", ["invoice"], 5)
        assert [h[0] for h in hits] == [m.id]

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
