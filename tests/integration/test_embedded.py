"""The engine contract on the embedded store: real model, PersistentClient, SQLite file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig

from tests.contracts.engine import EngineContract

pytestmark = pytest.mark.integration


class TestEmbedded(EngineContract):
    @pytest.fixture
    def eng(self, tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
            real_embedder) -> Iterator[MemoryEngine]:  # type: ignore[no-untyped-def]
        self._opened: list[MemoryEngine] = []
        e = MemoryEngine.open(tmp_path / "store", clock=clock, config=config,
                              embedder=real_embedder)
        self._opened.append(e)
        yield e
        for x in self._opened:
            x.close()

    @pytest.fixture
    def reopen(self, eng: MemoryEngine, tmp_path: Path, clock: ManualClock,
               config: MnemoniaConfig, real_embedder) -> Callable[[], MemoryEngine]:  # type: ignore[no-untyped-def]
        def _reopen(**kw: object) -> MemoryEngine:
            eng.close()
            e = MemoryEngine.open(tmp_path / "store", clock=clock, config=config,
                                  embedder=real_embedder, **kw)  # type: ignore[arg-type]
            self._opened.append(e)
            return e
        return _reopen

    @pytest.fixture
    def other_engine(self, tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
                     real_embedder) -> Callable[[], MemoryEngine]:  # type: ignore[no-untyped-def]
        def _make() -> MemoryEngine:
            e = MemoryEngine.open(tmp_path / "other", clock=clock, config=config,
                                  embedder=real_embedder)
            self._opened.append(e)
            return e
        return _make
