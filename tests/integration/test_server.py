"""The same engine contract against a real Chroma server (`chroma run`, started by the test
run on 127.0.0.1) with a SQL side-store given by URL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig

from tests.contracts.engine import EngineContract

pytestmark = [pytest.mark.integration, pytest.mark.server]


class TestServer(EngineContract):
    @pytest.fixture
    def eng(self, tmp_path: Path, clock: ManualClock, config: MnemoniaConfig, real_embedder,
            chroma_server: str) -> Iterator[MemoryEngine]:  # type: ignore[no-untyped-def]
        self._ns = f"t{uuid.uuid4().hex[:12]}"
        self._opened: list[MemoryEngine] = []
        e = self._open(tmp_path / "side.sqlite3", clock, config, real_embedder, chroma_server,
                       self._ns)
        yield e
        for x in self._opened:
            x.close()

    def _open(self, db: Path, clock: ManualClock, config: MnemoniaConfig, emb, url: str,  # type: ignore[no-untyped-def]
              ns: str, **kw) -> MemoryEngine:
        e = MemoryEngine.open(chroma_url=url, sql_url=f"sqlite:///{db}", clock=clock,
                              config=config, embedder=emb, namespace=ns, **kw)
        self._opened.append(e)
        return e

    @pytest.fixture
    def reopen(self, eng: MemoryEngine, tmp_path: Path, clock: ManualClock,
               config: MnemoniaConfig, real_embedder, chroma_server: str  # type: ignore[no-untyped-def]
               ) -> Callable[[], MemoryEngine]:
        def _reopen(**kw: object) -> MemoryEngine:
            eng.close()
            return self._open(tmp_path / "side.sqlite3", clock, config, real_embedder,
                              chroma_server, self._ns, **kw)
        return _reopen

    @pytest.fixture
    def other_engine(self, tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
                     real_embedder, chroma_server: str) -> Callable[[], MemoryEngine]:  # type: ignore[no-untyped-def]
        def _make() -> MemoryEngine:
            return self._open(tmp_path / "other.sqlite3", clock, config, real_embedder,
                              chroma_server, f"o{uuid.uuid4().hex[:12]}")
        return _make

    def test_recall_finds_what_another_engine_on_the_server_added(
            self, eng: MemoryEngine, tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
            real_embedder, chroma_server: str) -> None:  # type: ignore[no-untyped-def]
        # another process may write a server's collections: recall asks Chroma's index every
        # time (an embedded store's small tenants are searched in a copy of their vectors)
        eng.add("The staging cluster runs on Kubernetes", tenant="shared")
        assert eng.recall("what runs the staging cluster?", tenant="shared", k=1).memories
        other = self._open(tmp_path / "side.sqlite3", clock, config, real_embedder,
                           chroma_server, self._ns)
        cat = other.add("Our office cat is named Miso", tenant="shared")
        hit = eng.recall("what is the name of the office cat?", tenant="shared",
                         k=1).memories[0]
        assert hit.id == cat.id
        qv = real_embedder.embed_query("what is the name of the office cat?")
        col = eng.vectors.collection("shared", model=eng.embedder.name, dimension=0,
                                     create=False)
        assert hit.explanation.cosine == pytest.approx(
            float(eng.vectors.get_vectors(col, [cat.id])[cat.id] @ qv), abs=1e-5)
        assert eng.vectors.exact_limit == 0 and not eng.vectors.mirrored(col)

    def test_server_unreachable_gives_typed_error(self, tmp_path: Path, config: MnemoniaConfig,
                                                  real_embedder) -> None:  # type: ignore[no-untyped-def]
        from mnemonia.errors import StoreUnavailableError

        cfg = config.replace(retry_attempts=2, retry_max_wait=0.1)
        with pytest.raises(StoreUnavailableError, match="attempts"):
            MemoryEngine.open(chroma_url="http://127.0.0.1:9", sql_url=f"sqlite:///{tmp_path}/x.db",
                              config=cfg, embedder=real_embedder)
