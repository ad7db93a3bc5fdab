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


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    # not under pytest's tmp folder: that one is private to root, and postgres runs as its own user
    base = Path(tempfile.mkdtemp(prefix="mnemonia-pg-"))
    data = base / "data"
    port = _free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(base, "postgres")
        os.chmod(base, 0o777)
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*prefix, initdb, "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                    f"-p {port} -k {base} -h 127.0.0.1", "start"], check=True,
                   capture_output=True)
    import psycopg

    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    for _ in range(100):
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT 1")
            break
        except psycopg.OperationalError:
            time.sleep(0.1)
    yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "fast", "stop"],
                   capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


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
              url: str) -> MemoryEngine:
        e = MemoryEngine.open(chroma_url=url, sql_url=db, clock=clock, config=config,
                              embedder=emb, namespace=ns)
        self._opened.append(e)
        return e

    @pytest.fixture
    def reopen(self, eng: MemoryEngine, clock: ManualClock, config: MnemoniaConfig,  # type: ignore[no-untyped-def]
               real_embedder, chroma_server: str) -> Callable[[], MemoryEngine]:
        def _reopen() -> MemoryEngine:
            eng.close()
            return self._open(self._db, self._ns, clock, config, real_embedder, chroma_server)
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
