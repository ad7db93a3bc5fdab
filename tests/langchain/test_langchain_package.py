"""The public surface of ``langchain_mnemonia``: names, version, extras, docstring examples."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import langchain_mnemonia
import pytest

REPO = Path(__file__).resolve().parents[2]


def test_all_is_pinned() -> None:
    assert langchain_mnemonia.__all__ == [
        "MnemoniaChatMessageHistory",
        "MnemoniaMemory",
        "MnemoniaRetriever",
        "MnemoniaStore",
        "__version__",
    ]
    for name in langchain_mnemonia.__all__:
        assert getattr(langchain_mnemonia, name) is not None


def test_version_matches_the_distribution() -> None:
    from importlib.metadata import version

    assert langchain_mnemonia.__version__ == version("langchain-mnemonia")


def test_public_classes_subclass_the_langchain_bases() -> None:
    from langchain_classic.base_memory import BaseMemory
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.retrievers import BaseRetriever
    from langgraph.store.base import BaseStore

    assert issubclass(langchain_mnemonia.MnemoniaRetriever, BaseRetriever)
    assert issubclass(langchain_mnemonia.MnemoniaChatMessageHistory, BaseChatMessageHistory)
    assert issubclass(langchain_mnemonia.MnemoniaMemory, BaseMemory)
    assert issubclass(langchain_mnemonia.MnemoniaStore, BaseStore)


def test_unknown_attribute() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = langchain_mnemonia.NoSuchThing  # type: ignore[attr-defined]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


_HIDE = """
import sys
class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {hidden!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
"""


def test_core_imports_without_the_extras_and_never_langchain_or_community() -> None:
    code = _HIDE.format(hidden={"langchain_classic", "langgraph"}) + """
import langchain_mnemonia
from langchain_mnemonia import MnemoniaRetriever, MnemoniaChatMessageHistory
bad = sorted(m for m in sys.modules if m.split('.')[0] in
             {'langchain', 'langchain_community', 'langchain_classic', 'langgraph'})
print('loaded:', bad)
"""
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert "loaded: []" in out.stdout


def test_with_the_extras_still_never_langchain_or_community() -> None:
    out = _run("""
import sys, langchain_mnemonia
langchain_mnemonia.MnemoniaMemory, langchain_mnemonia.MnemoniaStore
print('loaded:', sorted(m for m in sys.modules
                        if m.split('.')[0] in {'langchain', 'langchain_community'}))
""")
    assert out.returncode == 0, out.stderr
    assert "loaded: []" in out.stdout


@pytest.mark.parametrize(("name", "hidden", "extra"), [
    ("MnemoniaMemory", "langchain_classic", "legacy"),
    ("MnemoniaStore", "langgraph", "langgraph"),
])
def test_missing_extra_names_the_pip_line(name: str, hidden: str, extra: str) -> None:
    code = _HIDE.format(hidden={hidden}) + f"""
import langchain_mnemonia
try:
    langchain_mnemonia.{name}
except ImportError as e:
    print(type(e).__name__, '|', e, '|', type(e.__cause__).__name__)
else:
    print('no error')
"""
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert f'pip install "langchain-mnemonia[{extra}]"' in out.stdout
    assert out.stdout.startswith("MissingDependencyError")
    assert out.stdout.strip().endswith("ModuleNotFoundError")  # chained `from e`


@pytest.mark.parametrize(("module", "cls"), [
    ("retrievers", "MnemoniaRetriever"),
    ("chat_history", "MnemoniaChatMessageHistory"),
    ("memory", "MnemoniaMemory"),
    ("store", "MnemoniaStore"),
])
def test_class_docstring_example_runs(module: str, cls: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # examples use mkdtemp()
    mod = importlib.import_module(f"langchain_mnemonia.{module}")
    tests = [t for t in doctest.DocTestFinder().find(getattr(mod, cls), cls, module=mod)
             if t.name == cls]
    assert len(tests) == 1 and len(tests[0].examples) >= 5, f"{cls} has no usage example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(tests[0])
    result = runner.summarize(verbose=False)
    assert result.failed == 0
    assert any(p.name != "" for p in tmp_path.iterdir())  # the example really ran here


def test_adapters_without_an_engine_share_the_embedded_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # building the pydantic adapters opens no database (no side effect in a validator) ...
    retriever = langchain_mnemonia.MnemoniaRetriever(tenant="alice")
    memory = langchain_mnemonia.MnemoniaMemory(tenant="alice")
    assert retriever.engine is None and memory.engine is None
    assert not (tmp_path / "memory").exists()
    history = langchain_mnemonia.MnemoniaChatMessageHistory(tenant="alice", session_id="s")
    try:
        history.add_user_message("Alice drinks green tea")
        # ... and the first use opens the shared default, the one the others use
        assert retriever.invoke("tea")[0].page_content == "Alice drinks green tea"
        assert memory.load_memory_variables({"input": "what does Alice drink?"})["history"]
        store = langchain_mnemonia.MnemoniaStore()
        assert retriever.engine is history.engine is memory.engine is store.engine
        assert history.engine.path == (tmp_path / "memory").resolve()
    finally:
        history.engine.close()


def test_distribution_metadata_for_pypi() -> None:
    """Classifiers (typed), project URLs, and a README whose links work on PyPI."""
    import re
    import tomllib

    root = REPO / "packages" / "langchain-mnemonia"
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert "Typing :: Typed" in project["classifiers"]
    urls = project["urls"]
    assert urls["Repository"].startswith("https://github.com/")
    assert all(u.startswith(urls["Repository"]) for u in urls.values())
    readme = (root / "README.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert links and all(link.startswith("https://") for link in links), links
    assert (root / "langchain_mnemonia" / "py.typed").exists()


@pytest.mark.parametrize(("module", "cls"), [
    ("retrievers", "MnemoniaRetriever"),
    ("chat_history", "MnemoniaChatMessageHistory"),
    ("memory", "MnemoniaMemory"),
    ("store", "MnemoniaStore"),
])
def test_docstrings_follow_the_integration_template(module: str, cls: str) -> None:
    """LangChain's integration template: Setup (the pip line), Key init args, Instantiate,
    Usage sections, in that order."""
    doc = getattr(importlib.import_module(f"langchain_mnemonia.{module}"), cls).__doc__ or ""
    heads = [doc.find(f"\n    {h}:\n") for h in ("Setup", "Key init args", "Instantiate",
                                                 "Usage")]
    assert all(h > 0 for h in heads) and heads == sorted(heads), heads
    assert "pip install -U" in doc
