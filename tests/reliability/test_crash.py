"""SIGKILL a process in the middle of add_many, reopen, and check that every memory add_many
returned for is there and nothing exists in only one store (real model, Chroma, SQLite)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from mnemonia import MemoryEngine
from mnemonia.store import sql as S

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WRITER = Path(__file__).with_name("_crash_writer.py")


def _store_ids(engine: MemoryEngine, tenant: str
               ) -> tuple[set[str], set[str], set[str], set[str]]:
    with engine.sql.connect() as conn:
        rows = conn.execute(sa.select(S.memories.c.id, S.memories.c.status).where(
            S.memories.c.tenant == tenant)).fetchall()
        fts = {r[0] for r in conn.exec_driver_sql("SELECT memory_id FROM memories_kw")}
        vectors = {r[0] for r in conn.exec_driver_sql("SELECT memory_id FROM memory_vectors")}
    col = engine.vectors.collection(tenant, model=engine.embedder.name, dimension=0,
                                    create=False)
    chroma = set(col.get(include=[])["ids"]) if col is not None else set()
    assert all(status == "committed" for _, status in rows), "a half-done write was not repaired"
    return {r[0] for r in rows}, chroma, fts, vectors


@pytest.mark.parametrize("kill_after", [1, 3, 6])
def test_sigkill_during_add_many(tmp_path: Path, kill_after: int, real_embedder) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(WRITER), str(store), "32"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # Wait for the first batch to land, then let it run a while and kill it mid-flight.
    first = proc.stdout.readline() if proc.stdout else ""
    assert first.strip(), proc.stderr.read() if proc.stderr else "writer produced nothing"
    time.sleep(kill_after * 0.5)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    lines = [first, *rest.splitlines()]
    promised = {i for line in lines for i in line.split()}
    assert proc.returncode == -signal.SIGKILL

    with MemoryEngine.open(store, embedder=real_embedder) as engine:
        sql_ids, chroma_ids, fts_ids, vector_ids = _store_ids(engine, "crash")
        assert promised <= sql_ids, f"{len(promised - sql_ids)} returned memories were lost"
        assert sql_ids == chroma_ids, "a memory exists in only one store"
        assert fts_ids == sql_ids, "keyword index out of step"
        assert vector_ids == sql_ids, "side-store vectors out of step"
        hit = engine.recall("crash test memory number 3 about topic 3", tenant="crash", k=1)
        assert hit.memories
