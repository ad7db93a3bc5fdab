"""Fixtures for the LlamaIndex adapter tests, and the warnings llama-index emits on its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llama_index.core.memory import Memory
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

from tests.contracts.llama_index_helpers import memory_factory

_HERE = Path(__file__).parent

# Warnings raised inside llama-index itself that no caller can avoid (llama-index-core 0.14):
_LLAMA_INDEX_WARNINGS = [
    # workflows' Workflow.__init__ runs inspect.getmembers() over the agent, a pydantic model,
    # which touches pydantic's deprecated instance attributes (__fields__, model_fields, ...).
    "ignore:The `__fields__` attribute is deprecated:DeprecationWarning",
    "ignore:The `__fields_set__` attribute is deprecated:DeprecationWarning",
    "ignore:Accessing the 'model_computed_fields' attribute on the instance:DeprecationWarning",
    "ignore:Accessing the 'model_fields' attribute on the instance:DeprecationWarning",
    # ReActAgent.take_step checks ctx.is_running inside its own step.
    "ignore:is_running called from within a step:DeprecationWarning",
    # Memory.from_defaults() keeps its chat in an in-memory aiosqlite database it never
    # closes; the connection warns when collected. Tests use `li_memory` (closed properly);
    # only the docstring examples show the plain default.
    r"ignore:Exception ignored in. <function Connection.__del__:"
    "pytest.PytestUnraisableExceptionWarning",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Apply the ignores above to the tests of this folder only."""
    for item in items:
        if _HERE in Path(str(item.path)).parents:
            for spec in _LLAMA_INDEX_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture
def open_engine(tmp_path: Path, clock: ManualClock, config: MnemoniaConfig,
                hashing_embedder: HashingEmbedder) -> Iterator[Callable[..., MemoryEngine]]:
    """Open (or reopen) an engine on the store of the ``engine`` fixture's kind; closed after."""
    opened: list[MemoryEngine] = []

    def open_(path: Path | None = None, **kwargs: object) -> MemoryEngine:
        eng = MemoryEngine.open(path or tmp_path / "other-store", config=kwargs.pop(
            "config", config), clock=clock, embedder=hashing_embedder, **kwargs)  # type: ignore[arg-type]
        opened.append(eng)
        return eng

    yield open_
    for eng in opened:
        eng.close()



@pytest.fixture
def li_memory(tmp_path: Path) -> Callable[..., Memory]:
    """LlamaIndex ``Memory.from_defaults`` whose chat store is closed properly."""
    return memory_factory(tmp_path)
