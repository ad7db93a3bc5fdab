"""Fixtures of the LangChain adapter tests."""

from __future__ import annotations

import pytest
from mnemonia import MemoryEngine

FACTS = [
    "Alice prefers green tea over coffee in the morning.",
    "Alice's cat is called Miso and loves tuna.",
    "Alice works as a nurse at the city hospital.",
    "The team uses Redis as the cache for the web app.",
    "Alice is learning to play the cello on weekends.",
    "The quarterly report is due on the 30th of June.",
]


def pytest_configure(config: pytest.Config) -> None:
    # `langchain_tests.integration_tests/__init__.py` imports its chat-model suite, which applies
    # `@pytest.mark.benchmark` and `@pytest.mark.vcr` at import time; those plugins are disabled
    # in the root addopts, so under --strict-markers the names must be registered for the import.
    # Only the retriever suite runs here.
    config.addinivalue_line("markers", "benchmark: used by langchain_tests (not run here)")
    config.addinivalue_line("markers", "vcr: used by langchain_tests (not run here)")


@pytest.fixture
def facts(engine: MemoryEngine) -> dict[str, str]:
    """Six facts in tenant ``alice`` of the fast engine; text -> id."""
    mems = engine.add_many([{"text": t, "kind": "fact"} for t in FACTS], tenant="alice")
    return {m.text: m.id for m in mems}
