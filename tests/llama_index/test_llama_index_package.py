"""The ``llama-index-memory-mnemonia`` distribution: public API, PEP 420 namespace layout,
and the usage examples in the class docstrings, run as doctests."""

from __future__ import annotations

import doctest
import gc
import importlib.metadata
import re
import tempfile
import tomllib
from pathlib import Path

import llama_index.memory.mnemonia as pkg
import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.memory.types import BaseMemory
from llama_index.memory.mnemonia import MnemoniaMemory, MnemoniaMemoryBlock, MnemoniaRetriever
from mnemonia import ManualClock, MemoryEngine
from mnemonia.embeddings import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2] / "packages" / "llama-index-memory-mnemonia"


def test_public_api_is_pinned() -> None:
    assert pkg.__all__ == ["MnemoniaMemory", "MnemoniaMemoryBlock", "MnemoniaRetriever",
                           "__version__"]
    for name in pkg.__all__:
        assert hasattr(pkg, name)


def test_version_matches_the_distribution() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert pkg.__version__ == declared == importlib.metadata.version(
        "llama-index-memory-mnemonia")


def test_pep_420_namespace_layout() -> None:
    assert not (ROOT / "llama_index" / "__init__.py").exists()
    assert not (ROOT / "llama_index" / "memory" / "__init__.py").exists()
    assert (ROOT / "llama_index" / "memory" / "mnemonia" / "__init__.py").exists()
    typed = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("py.typed"))
    assert typed == ["llama_index/memory/mnemonia/py.typed"]
    # the package lives beside llama-index-core in the shared `llama_index` namespace
    import llama_index
    import llama_index.core
    assert len(list(llama_index.__path__)) >= 2
    assert Path(pkg.__file__).resolve().is_relative_to(ROOT)
    assert not Path(llama_index.core.__file__).resolve().is_relative_to(ROOT)


def test_classes_extend_the_llama_index_bases() -> None:
    assert issubclass(MnemoniaMemory, BaseMemory)
    assert issubclass(MnemoniaMemoryBlock, BaseMemoryBlock)
    assert issubclass(MnemoniaRetriever, BaseRetriever)


@pytest.mark.parametrize("cls", [MnemoniaMemory, MnemoniaMemoryBlock, MnemoniaRetriever])
def test_docstring_example_runs(cls: type, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples use mkdtemp()
    tests = [t for t in doctest.DocTestFinder().find(cls, cls.__name__) if t.examples]
    assert tests, f"{cls.__name__} has no usage example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    gc.collect()  # Memory's default store leaks a connection: collect it here (see conftest)
    assert runner.failures == 0, f"{runner.failures} failing example(s) in {cls.__name__}"


def test_without_an_engine_the_adapters_share_the_embedded_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock,
        hashing_embedder: HashingEmbedder) -> None:
    """``engine=None`` opens the default store (``./memory``) once per process (an embedded
    store allows one open engine), shared by every adapter (``MemoryEngine.shared()``). The
    bundled model is swapped for the hashing embedder here to keep the test fast."""
    monkeypatch.chdir(tmp_path)
    real_open = MemoryEngine.open.__func__  # type: ignore[attr-defined]
    opened: list[MemoryEngine] = []

    def open_default(cls: type[MemoryEngine], path: object = None, **kwargs: object
                     ) -> MemoryEngine:
        assert path == (tmp_path / "memory").resolve() and not kwargs  # the default store
        eng = real_open(cls, tmp_path / "memory", clock=clock, embedder=hashing_embedder)
        opened.append(eng)
        return eng

    monkeypatch.setattr(MemoryEngine, "open", classmethod(open_default))
    try:
        memory = MnemoniaMemory(tenant="alice")
        block = MnemoniaMemoryBlock(tenant="alice")
        retriever = MnemoniaRetriever(tenant="alice")
        assert memory.engine is block.engine is retriever.engine is opened[0]
        assert len(opened) == 1
    finally:
        for eng in opened:
            eng.close()


def test_distribution_metadata_for_pypi_and_llamahub() -> None:
    """What PyPI and LlamaHub show: classifiers (typed), project URLs, a README whose links
    work off GitHub (absolute), and the LlamaHub table LlamaIndex's own packages carry."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project, hub = meta["project"], meta["tool"]["llamahub"]
    assert "Typing :: Typed" in project["classifiers"]
    urls = project["urls"]
    assert urls["Repository"].startswith("https://github.com/")
    assert all(u.startswith(urls["Repository"]) for u in urls.values())
    assert hub["import_path"] == pkg.__name__
    assert sorted(hub["class_authors"]) == [n for n in pkg.__all__ if n != "__version__"]
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert links and all(link.startswith("https://") for link in links), links
    assert f"pip install {project['name']}" in readme


def test_the_memory_trims_with_llama_index_s_own_buffer() -> None:
    """No token trimming of our own: the short-term window is ``ChatMemoryBuffer.get``."""
    import inspect

    from llama_index.memory.mnemonia import _private, base

    assert "ChatMemoryBuffer.from_defaults" in inspect.getsource(base.MnemoniaMemory)
    assert not hasattr(_private, "trim_history")
