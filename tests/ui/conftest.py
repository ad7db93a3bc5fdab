"""Fixtures of the inspector's tests: a store with every kind of state, and its app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette",
                    reason="the ui extra is not installed (pip install 'mnemonia[ui]')")

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.ui import create_app
from starlette.testclient import TestClient

from tests.conftest import START
from tests.ui.store import Store, build


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    clock = ManualClock(START)
    engine = MemoryEngine.open(tmp_path / "store", clock=clock, embedder=HashingEmbedder(),
                               config=MnemoniaConfig.load(env={}, maintenance="manual"))
    try:
        yield build(engine, clock)
    finally:
        engine.close()


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store.engine), base_url="http://127.0.0.1:8765") as c:
        yield c


@pytest.fixture
def ro_client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store.engine, read_only=True),
                    base_url="http://127.0.0.1:8765") as c:
        yield c
