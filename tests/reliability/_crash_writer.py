"""Subprocess for the crash test: adds batches forever, printing the ids each add_many
returned, until it is killed."""

from __future__ import annotations

import sys

from mnemonia import MemoryEngine


def main() -> None:
    path, batch = sys.argv[1], int(sys.argv[2])
    engine = MemoryEngine.open(path)
    n = 0
    while True:
        items = [{"text": f"crash test memory number {n + i} about topic {(n + i) % 17}",
                  "session_id": "crash"} for i in range(batch)]
        mems = engine.add_many(items, tenant="crash")
        n += batch
        print(" ".join(m.id for m in mems), flush=True)


if __name__ == "__main__":
    main()
