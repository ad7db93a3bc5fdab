"""Subprocess for the multi-process tests (issue 31): one process of several on one store.

Mode ``add`` opens the store (retrying the open until the deadline if it fails) and adds
memories with explicit ids until the deadline, retrying each add with the same id and text
after any error (bounded by ``--retry-for`` seconds) and counting an id as acknowledged only
once an add of it returned. Mode ``open`` opens the store once, recalls once, adds one memory
(with the same retries), closes and exits.

Every outcome goes to the JSON-lines ``--out`` file, flushed and fsynced line by line, so the
test reads what the process saw even if it has to kill it:

- ``{"ready": t}`` once imported; ``{"opened": t}`` after each successful open;
- ``{"ack": id, "text": text}`` after an add of ``id`` returned;
- ``{"error": type, "mnemonia": bool, "outcome_unknown": bool, "where": ..., "id": ...,
  "msg": ..., "types": [its class and bases]}`` for every exception (``where``: open, add,
  recall, close);
- ``{"gave_up": id}`` when the retries of an id ran out;
- ``{"done": {"attempted": n, "acked": k}}`` at the end.

The process exits 0 whatever the store did (errors are data for the test); anything else means
the harness itself broke.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from typing import Any

from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import MnemoniaError, WriteOutcomeUnknownError

WORDS = ("river", "lamp", "orbit", "cedar", "violet", "harbor", "signal", "maple", "quartz",
         "meadow", "falcon", "copper", "lantern", "glacier", "pepper", "thunder", "velvet",
         "saffron", "canyon", "ember", "willow", "cobalt", "juniper", "marble")


class Out:
    """The JSON-lines report, one durable line per record."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in main()

    def put(self, **rec: Any) -> None:
        self.fh.write(json.dumps(rec) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def error(self, e: BaseException, where: str, mid: str | None = None) -> None:
        unknown = isinstance(e, WriteOutcomeUnknownError)
        self.put(error=type(e).__name__, mnemonia=isinstance(e, MnemoniaError),
                 outcome_unknown=unknown, where=where, id=mid, msg=str(e)[:300],
                 types=[c.__name__ for c in type(e).__mro__])

    def close(self) -> None:
        self.fh.close()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=("add", "open"), default="add")
    p.add_argument("--chroma-url", help="a Chroma server (server store)")
    p.add_argument("--sql-url", help="the side-store's SQLAlchemy URL (server store)")
    p.add_argument("--path", help="an embedded store's folder (instead of the two URLs)")
    p.add_argument("--namespace", default="mnemonia")
    p.add_argument("--tenant", required=True)
    p.add_argument("--name", required=True, help="this writer's name (in ids and texts)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of adding (mode add)")
    p.add_argument("--out", required=True, help="the JSON-lines report file")
    p.add_argument("--start-at", type=float, default=None, help="epoch seconds to start at")
    p.add_argument("--pause", type=float, default=0.0, help="seconds between two adds")
    p.add_argument("--retry-for", type=float, default=20.0,
                   help="seconds one id is retried for before giving it up")
    p.add_argument("--retry-attempts", type=int, default=4)
    p.add_argument("--retry-max-wait", type=float, default=0.5)
    return p.parse_args()


def open_engine(args: argparse.Namespace) -> MemoryEngine:
    cfg = MnemoniaConfig.load(env={}, maintenance="manual", retry_attempts=args.retry_attempts,
                              retry_max_wait=args.retry_max_wait)
    if args.path:
        return MemoryEngine.open(args.path, embedder=HashingEmbedder(), config=cfg)
    return MemoryEngine.open(chroma_url=args.chroma_url, sql_url=args.sql_url,
                             namespace=args.namespace, embedder=HashingEmbedder(), config=cfg)


def memory_text(mid: str, name: str, rng: random.Random) -> str:
    return f"memory {mid} of writer {name}: " + " ".join(rng.sample(WORDS, 5))


def add_one(engine: MemoryEngine, args: argparse.Namespace, out: Out, mid: str,
            text: str) -> bool:
    """Add ``mid`` until an add of it returns (True) or its retries run out (False)."""
    give_up = time.monotonic() + args.retry_for
    while True:
        try:
            engine.add(text, tenant=args.tenant, id=mid)
        except Exception as e:
            out.error(e, "add", mid)
            if time.monotonic() >= give_up:
                out.put(gave_up=mid)
                return False
            time.sleep(0.2)
            continue
        out.put(ack=mid, text=text)
        return True


def try_open(args: argparse.Namespace, out: Out) -> MemoryEngine | None:
    try:
        engine = open_engine(args)
    except Exception as e:
        out.error(e, "open")
        return None
    out.put(opened=time.time())
    return engine


def close(engine: MemoryEngine, out: Out) -> None:
    try:
        engine.close()
    except Exception as e:
        out.error(e, "close")


def run_add(args: argparse.Namespace, out: Out, rng: random.Random) -> tuple[int, int]:
    deadline = time.monotonic() + args.duration
    engine = try_open(args, out)
    while engine is None and time.monotonic() < deadline:
        time.sleep(0.5)
        engine = try_open(args, out)
    if engine is None:
        return 0, 0
    attempted = acked = 0
    try:
        while time.monotonic() < deadline:
            mid = f"{args.name}-{attempted:05d}"
            attempted += 1
            acked += add_one(engine, args, out, mid, memory_text(mid, args.name, rng))
            if args.pause:
                time.sleep(args.pause)
    finally:
        close(engine, out)
    return attempted, acked


def run_open(args: argparse.Namespace, out: Out, rng: random.Random) -> tuple[int, int]:
    engine = try_open(args, out)
    if engine is None:
        return 0, 0
    try:
        try:
            engine.recall(f"what did writer {args.name} say", tenant=args.tenant, touch=False)
        except Exception as e:
            out.error(e, "recall")
        mid = f"{args.name}-00000"
        acked = add_one(engine, args, out, mid, memory_text(mid, args.name, rng))
    finally:
        close(engine, out)
    return 1, int(acked)


def main() -> None:
    args = parse()
    out = Out(args.out)
    rng = random.Random(f"{args.name}:{os.getpid()}")
    try:
        out.put(ready=time.time(), pid=os.getpid())
        if args.start_at is not None:
            time.sleep(max(0.0, args.start_at - time.time()))
        run = run_add if args.mode == "add" else run_open
        attempted, acked = run(args, out, rng)
        out.put(done={"attempted": attempted, "acked": acked})
    finally:
        out.close()


if __name__ == "__main__":
    main()
