"""The code a user may copy runs as written: every ```python block of the README and of the
documentation pages (docs/), each file's blocks in order in one fresh process (a later block
may use what an earlier one made, as a reader would), in a new temporary folder, so
``./memory`` is a new store. A block that cannot run here (it needs a Chroma server, say) is
preceded by ``<!-- skip: why -->``. A block that includes a file of docs/examples/
(``--8<-- "file"``, the guides' examples) is run by that example's own test, with a
scripted model in place of the LLM; every example is included by a page and named by a
test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
SKIP = re.compile(r"<!-- skip: \S.* -->")
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.M)
EXAMPLES = ROOT / "docs" / "examples"

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNNER = """
import json, sys
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}
for name, code in blocks:
    exec(compile(code, name, "exec"), namespace)
"""


def python_blocks(path: Path) -> list[tuple[str, str]]:
    """``(name, code)`` of the file's python blocks that are not marked to skip."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        before = text[:match.start()].rstrip().splitlines()
        if before and SKIP.fullmatch(before[-1].strip()):
            continue
        if INCLUDE.fullmatch(match.group(1).strip()):
            continue  # a guide's example file: run by its own test
        line = text[:match.start()].count("\n") + 2
        blocks.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


PAGES = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
         if python_blocks(p)]


def run_blocks(path: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    blocks = workdir / "blocks.json"
    blocks.write_text(json.dumps(python_blocks(path)), encoding="utf-8")
    return subprocess.run([sys.executable, "-c", RUNNER, str(blocks)], cwd=workdir,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_python_blocks_run(page: Path, tmp_path: Path) -> None:
    out = run_blocks(page, tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]


def test_the_readme_quick_start_prints_what_it_shows(tmp_path: Path) -> None:
    out = run_blocks(ROOT / "README.md", tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Maya is allergic to peanuts cos="), out.stdout
    assert lines[1:3] == ["RELEVANT MEMORY", "- Maya is allergic to peanuts"], out.stdout


def test_the_pages_mark_few_blocks_to_skip() -> None:
    """Skipping is for what cannot run in the test suite, and says why."""
    skipped = {str(p.relative_to(ROOT)): len(SKIP.findall(p.read_text(encoding="utf-8")))
               for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]}
    assert {p: n for p, n in skipped.items() if n} == {"docs/server-mode.md": 1}
    assert len(PAGES) >= 8 and ROOT / "README.md" in PAGES


def test_every_example_is_included_by_a_page_and_run_by_a_test() -> None:
    examples = sorted(p.name for p in EXAMPLES.iterdir() if p.is_file())
    pages = [p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md")]
    included = sorted({name for text in pages for name in INCLUDE.findall(text)})
    assert included == examples
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")
                      if p.name.startswith("test_"))
    assert [name for name in examples if Path(name).stem not in tests] == []
