"""Recall latency and ingest throughput of Mnemonia against a bare Chroma kNN plus query
embedding with the same model, measured side by side in one run; prints ratios.

    .venv/bin/python benchmarks/speed.py --sizes 10000 100000 --queries 200

Fill embeddings are computed once per size and cached under benchmarks/.cache (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from speed_harness import run_speed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ingest-sample", type=int, default=1000)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    rows = run_speed(args.sizes, queries=args.queries, ingest_sample=args.ingest_sample,
                     cache_dir=Path(__file__).with_name(".cache"))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
