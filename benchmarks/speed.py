"""Recall latency and ingest throughput of Mnemonia against the bare pair (the bundled MiniLM
through sentence-transformers + a Chroma collection), and against the same pair on the
engine's own embedder, measured side by side in one run; prints ratios against each.

    .venv/bin/python benchmarks/speed.py --sizes 10000 100000 --queries 200
    .venv/bin/python benchmarks/speed.py --sizes 10000 100000 --enrich
    .venv/bin/python benchmarks/speed.py --sizes 1000000 --vectors --json out.json
    .venv/bin/python benchmarks/speed.py --sizes 10000 --vectors --backend torch
    .venv/bin/python benchmarks/speed.py --again /tmp/mnemonia-speed-100000-XXXX  # kept store

--enrich   session corpus (speakers, places, one-minute turns); recall is measured before and
           after the enrichment sweep (follows / same_entity / related_to relations).
--bare-backend  the bare pair's embedder: sentence-transformers (default, as DESIGN section 8
           and issue 35 define the pair) or onnx / onnx-int8; the second table is always
           the pair on the engine's embedder (--backend), so the pipeline's own cost shows.
--bare-threads  torch threads of a sentence-transformers bare side (default 1: on the shared
           2-core machine two made it slower and erratic under any other load).
--k        results per recall on every side (default 10).
--vectors  fill vectors are synthetic (the model embeds the 2,197 "subject verb object"
           cores once; each memory is its core plus seeded noise, normalised), given to both
           sides alike; queries and the ingest sample still go through the model.

Model fill embeddings and the core embeddings are cached under benchmarks/.cache
(git-ignored). The table shows bare / ours for fill rate (vectors given), ingest rate
(embedding included), recall p50 / p95, a chat turn (add one memory, then recall; after the
last recall round), disk size; peak RSS is the whole process (both stores
open) for that size.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from mnemonia.embeddings import EMBEDDER_BACKENDS
from rich.console import Console
from speed_harness import BARE_BACKENDS, recall_again, run_speed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ingest-sample", type=int, default=1000)
    ap.add_argument("--enrich", action="store_true",
                    help="session corpus; recall again after the enrichment sweep")
    ap.add_argument("--vectors", action="store_true",
                    help="synthetic fill vectors (no fill text embedded)")
    ap.add_argument("--backend", choices=EMBEDDER_BACKENDS,
                    help="the engine's embedder backend (default: the shipped default)")
    ap.add_argument("--bare-backend", choices=BARE_BACKENDS, default="sentence-transformers",
                    help="the bare pair's embedder (default sentence-transformers)")
    ap.add_argument("--bare-threads", type=int, default=1,
                    help="torch threads of a sentence-transformers bare side (default 1)")
    ap.add_argument("--k", type=int, default=10, help="results per recall (default 10)")
    ap.add_argument("--workdir", type=Path, help="where the temporary stores go")
    ap.add_argument("--keep", action="store_true", help="keep the stores")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--again", type=Path, metavar="ROOT",
                    help="only recall again, on a store --keep kept (ROOT: its bare/ and "
                         "mnemonia/ folders); --sizes and the fill options are not used")
    ap.add_argument("--own-index-limit", type=int, metavar="N",
                    help="with --again: the engine's own_index_limit (0: Chroma's query)")
    args = ap.parse_args()
    if args.again is not None:
        own = {} if args.own_index_limit is None else {"own_index_limit": args.own_index_limit}
        row = recall_again(args.again, queries=args.queries, k=args.k, backend=args.backend,
                           bare_backend=args.bare_backend, bare_threads=args.bare_threads,
                           **own)
        print(json.dumps(row, indent=1))
        if args.json:
            args.json.write_text(json.dumps(row, indent=2))
        return
    rows = run_speed(args.sizes, queries=args.queries, ingest_sample=args.ingest_sample,
                     cache_dir=Path(__file__).with_name(".cache"), enrich=args.enrich,
                     vectors=args.vectors, workdir=args.workdir, keep=args.keep,
                     console=Console(width=220), backend=args.backend,
                     bare_backend=args.bare_backend, bare_threads=args.bare_threads, k=args.k)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
