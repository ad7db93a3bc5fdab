"""The inspector's memory list on a PostgreSQL side-store (a cluster this test run starts on
127.0.0.1): filters, word search (a substring match there) and keyset paging."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.ui import create_app
from starlette.testclient import TestClient

from tests.conftest import START
from tests.integration.test_postgres import _new_db, pg_cluster, postgres_url  # noqa: F401
from tests.ui.store import SECRET, Store, build

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_store(tmp_path: Path, postgres_url: str) -> Iterator[Store]:  # noqa: F811
    clock = ManualClock(START)
    engine = MemoryEngine.open(tmp_path / "chroma", sql_url=_new_db(postgres_url), clock=clock,
                               embedder=HashingEmbedder(),
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    try:
        yield build(engine, clock)
    finally:
        engine.close()


def test_memory_list_on_postgres(pg_store: Store) -> None:
    s = pg_store
    assert s.engine.sql.dialect == "postgresql"
    with TestClient(create_app(s.engine), base_url="http://127.0.0.1") as c:
        def ids(**params: str) -> set[str]:
            r = c.get("/api/t/alice/memories", params=params)
            assert r.status_code == 200, r.text
            return {m["id"] for m in r.json()["items"]}

        assert ids(state="pinned") == {s.ids["pinned"]}
        assert ids(deleted="yes") == {s.ids["forgotten"]}
        assert ids(state="superseded") == {s.ids["old_plan"]}
        assert ids(topic="travel", kind="episode") == {s.ids["old_plan"], s.ids["new_plan"]}
        assert {s.ids["dup1"], s.ids["dup2"]} <= ids(q="DEPLOY friday")
        assert ids(q="50%_") == set()  # LIKE wildcards are matched literally
        assert ids(q="locker", deleted="all") == set()
        got: list[str] = []
        nxt = None
        while True:
            body = c.get("/api/t/alice/memories", params={
                "deleted": "all", "limit": 4, **({"page": nxt} if nxt else {})}).json()
            got += [m["id"] for m in body["items"]]
            nxt = body["next_page"]
            if nxt is None:
                break
        every = [m.id for m in s.engine.list(tenant="alice", include_deleted=True)]
        assert got == list(reversed(every))
        for url in ("/", "/t/alice/due", "/t/alice/fading", f"/t/alice/memories/{s.ids['xss']}"):
            r = c.get(url)
            assert r.status_code == 200 and SECRET not in r.text
