"""The fault table of the multi-process tests (issue 31) as markdown: one row per scenario,
its counts summed over every run, and the number of runs.

    FAULT_TABLE_FILE=faults.jsonl .venv/bin/python -m pytest \\
        tests/reliability/test_multiprocess.py -p no:cacheprovider
    .venv/bin/python benchmarks/fault_table.py faults.jsonl

Each line of the file is one run of one scenario, as the tests write it:
``{"scenario": ..., "attempted": .., "acknowledged": .., "failed_typed": .., ...}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COLUMNS = ("attempted", "acknowledged", "failed_typed", "failed_untyped", "lost",
           "duplicates", "refused_opens", "outcome_unknown")
"""The columns shown first; any other numeric field of the rows follows them."""


def load(path: Path) -> list[dict[str, object]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{n}: not JSON: {e}") from e
        if not isinstance(row, dict) or "scenario" not in row:
            raise SystemExit(f"{path}:{n}: not a fault table row (no 'scenario')")
        rows.append(row)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    extra = sorted({k for r in rows for k, v in r.items()
                    if k != "scenario" and k not in COLUMNS and isinstance(v, int | float)})
    columns = [*COLUMNS, *extra]
    sums: dict[str, dict[str, float]] = {}
    runs: dict[str, int] = {}
    for r in rows:
        name = str(r["scenario"])
        runs[name] = runs.get(name, 0) + 1
        total = sums.setdefault(name, dict.fromkeys(columns, 0))
        for c in columns:
            value = r.get(c, 0)
            total[c] += value if isinstance(value, int | float) else 0
    lines = ["| scenario | runs | " + " | ".join(columns) + " |",
             "|---|---:|" + "---:|" * len(columns)]
    for name, total in sums.items():  # in the order the scenarios first appear
        cells = [f"{total[c]:g}" for c in columns]
        lines.append(f"| {name} | {runs[name]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="the JSON-lines file FAULT_TABLE_FILE named")
    args = parser.parse_args()
    rows = load(args.path)
    if not rows:
        raise SystemExit(f"{args.path}: no rows")
    print(table(rows))


if __name__ == "__main__":
    main()
