"""The documentation site builds with ``mkdocs build --strict`` (mkdocs.yml, docs/), and that
build is a guard that can fail: a copy of the site with one broken link, anchor or API
reference does not build."""

from __future__ import annotations

import dataclasses
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mnemonia import MnemoniaConfig

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=config.parent, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    out = build(ROOT / "mkdocs.yml", site)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    # the configuration page's table comes from the code: every key is on it
    config_page = (site / "configuration" / "index.html").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(MnemoniaConfig) if f.name not in config_page]
    assert missing == [], missing
    assert "<!-- config-keys -->" not in config_page
    # the API reference is rendered from the docstrings, the notebooks are pages
    api = (site / "reference" / "mnemonia" / "index.html").read_text(encoding="utf-8")
    assert "mnemonia.MemoryEngine.recall" in api and "Recall by spreading activation" in api
    for name in ("lifecycle", "langchain", "llamaindex"):
        assert (site / "notebooks" / name / "index.html").is_file(), name
    # the guides include their example files whole (pymdownx.snippets); the files
    # themselves stay out of the site
    for page, example in [("langmem", "langmem_agent.py"),
                          ("langchain-agents", "langchain_agent.py"),
                          ("langgraph-agents", "langgraph_agent.py"),
                          ("llamaindex-agents", "llamaindex_agent.py"),
                          ("mcp-clients", "claude_desktop_config.json"),
                          ("mcp-clients", "mcp_client.py"), ("mcp-clients", "mcp_inspector.sh")]:
        shown = html.unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text(
            encoding="utf-8")))
        lines = (ROOT / "docs" / "examples" / example).read_text(encoding="utf-8").splitlines()
        assert [line for line in lines if line.strip() not in shown] == [], (page, example)
        assert "--8<--" not in shown, page
    assert not (site / "examples").exists()


def site_copy(tmp_path: Path) -> Path:
    """mkdocs.yml and docs/ copied, the code and the notebooks linked: a site to break."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    for name in ("shared", "packages", "notebooks"):
        (copy / name).symlink_to(ROOT / name, target_is_directory=True)
    return copy


@pytest.mark.parametrize(("page", "broken", "reported"), [
    ("index.md", "See [the missing page](no-such-page.md).", "no-such-page.md"),
    ("index.md", "See [a missing section](configuration.md#no-such-section).",
     "no-such-section"),
    ("reference/mnemonia.md", "::: mnemonia.NoSuchName", "mnemonia.NoSuchName"),
    ("configuration.md", "See [the engine][mnemonia.NoSuchEngine].", "mnemonia.NoSuchEngine"),
    ("langmem.md", '```python\n--8<-- "no_such_example.py"\n```', "no_such_example.py"),
], ids=["page-link", "anchor", "api-object", "cross-reference", "example-file"])
def test_a_broken_link_or_reference_fails_the_build(tmp_path: Path, page: str, broken: str,
                                                    reported: str) -> None:
    copy = site_copy(tmp_path)
    target = copy / "docs" / page
    target.write_text(target.read_text(encoding="utf-8") + f"\n{broken}\n", encoding="utf-8")
    out = build(copy / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0, "the build passed with a broken link or reference"
    assert reported in out.stdout + out.stderr, out.stderr[-3000:]
