"""Fixtures for the maintenance tests: engines with config overrides (real Chroma + SQLite,
hashing embedder, the test's ManualClock)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

EngineFactory = Callable[..., MemoryEngine]


@pytest.fixture
def make_engine(tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
                hashing_embedder: HashingEmbedder) -> Iterator[EngineFactory]:
    """Open engines (real Chroma + SQLite, hashing embedder, the test's ManualClock) with
    config overrides: ``make_engine(max_memories=30)``."""
    opened: list[MemoryEngine] = []

    def factory(name: str = "store", **overrides: Any) -> MemoryEngine:
        cfg = config.replace(**overrides) if overrides else config
        eng = MemoryEngine.open(tmp_path / name, config=cfg, clock=clock,
                                embedder=hashing_embedder)
        opened.append(eng)
        return eng

    yield factory
    for eng in opened:
        eng.close()
