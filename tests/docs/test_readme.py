"""The README is a front page: the two commands first, exactly as CI runs the second; its
links into the documentation lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

DEMO = "bash scripts/setup.sh && .venv/bin/mnemonia demo"
TESTS = "bash scripts/setup.sh && .venv/bin/python -m pytest"


def test_the_two_commands_come_first() -> None:
    first = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first is not None and README.index("```bash") < README.index("\n## ")
    lines = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert lines == [DEMO, TESTS]


def test_ci_runs_the_readme_s_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TESTS in ci


def test_the_relative_links_lead_to_files() -> None:
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)]+)\)", README)
             if not link.startswith(("http://", "https://", "#"))]
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == [], missing
