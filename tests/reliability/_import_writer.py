"""Subprocess for the import crash tests: imports a file in batches of 4 memories and, at the
chosen Chroma upsert, prints HANG and sleeps until it is killed.

Usage: _import_writer.py STORE FILE ON_CONFLICT CALL before|after NOW
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import Any

from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig, transfer
from mnemonia.embeddings import HashingEmbedder

MANUAL = MnemoniaConfig.load(env={}, maintenance="manual")  # maintenance run by hand


def main() -> None:
    store, path, on_conflict, call, when, now = sys.argv[1:7]
    transfer.format.BATCH = 4
    engine = MemoryEngine.open(store, config=MANUAL,
                               clock=ManualClock(datetime.fromisoformat(now)),
                               embedder=HashingEmbedder())
    upsert = engine.vectors.upsert
    calls = 0

    def hang_at_call(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == int(call) and when == "before":
            print("HANG", flush=True)
            time.sleep(600)
        upsert(*args, **kwargs)
        if calls == int(call):
            print("HANG", flush=True)
            time.sleep(600)

    engine.vectors.upsert = hang_at_call  # type: ignore[method-assign]
    engine.import_(path, on_conflict=on_conflict)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
