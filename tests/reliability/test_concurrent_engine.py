"""One engine used by several threads at once while its background maintenance runs (the
default ``maintenance="background"``, cadences shortened so every job runs during the test):
recalls and adds from threads, enrichment, re-evaluation, review, consolidation and the TTL
sweep from the scheduler's thread. Nothing may raise, no recall may return another tenant's
memory, every add that returned must be in the store, and the store must be consistent
afterwards. Real Chroma, real SQLite, the hashing embedder. No timing is asserted
(``benchmarks/concurrency.py`` measures throughput and latency)."""

from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path

import pytest
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder

pytestmark = [pytest.mark.integration]

TENANTS = ("ann", "bob")
TOPICS = ("violin", "garden", "sourdough", "kayak", "chess", "pottery", "telescope", "tea")
CADENCE = 0.2  # seconds between two runs of each maintenance job


def _text(tenant: str, i: int) -> str:
    return f"{tenant} talked about {TOPICS[i % len(TOPICS)]} on day {i} with friend{i % 7}"


def test_recalls_and_adds_from_threads_while_maintenance_runs(tmp_path: Path) -> None:
    cfg = MnemoniaConfig.load(
        env={}, maintenance="background", maintenance_poll_seconds=0.02,
        enrich_interval=CADENCE, reevaluation_interval=CADENCE, review_interval=CADENCE,
        consolidate_interval=CADENCE, evict_interval=CADENCE, expire_interval=CADENCE)
    engine = MemoryEngine.open(tmp_path / "store", embedder=HashingEmbedder(), config=cfg)
    try:
        seeded = {t: [m.id for m in engine.add_many(
            [{"text": _text(t, i), "session_id": f"{t}-s{i // 10}"} for i in range(40)],
            tenant=t)] for t in TENANTS}
        assert engine.scheduler is not None and engine.scheduler.running
        runs_before = sum(engine.scheduler.runs.values())
        stop = threading.Event()
        failures: list[str] = []
        foreign: list[tuple[str, str]] = []
        acked: list[tuple[str, str]] = []
        recalls = [0]
        lock = threading.Lock()

        def reader(r: int) -> None:
            i = 0
            while not stop.is_set():
                tenant = TENANTS[(r + i) % 2]
                try:
                    got = engine.recall(f"what about {TOPICS[i % len(TOPICS)]}? ({r}-{i})",
                                        tenant=tenant, k=5)
                except Exception:
                    failures.append(traceback.format_exc())
                    return
                with lock:
                    recalls[0] += 1
                    foreign.extend((tenant, h.memory.tenant) for h in got.memories
                                   if h.memory.tenant != tenant)
                i += 1

        def writer(w: int) -> None:
            i = 0
            while not stop.is_set() and i < 60:
                tenant = TENANTS[(w + i) % 2]
                mid = f"{tenant}-w{w}-{i}"
                try:
                    engine.add(_text(tenant, 100 + 10 * i + w), tenant=tenant, id=mid,
                               session_id=f"{tenant}-live{w}", importance=0.5 + 0.4 * (i % 2))
                except Exception:
                    failures.append(traceback.format_exc())
                    return
                with lock:
                    acked.append((tenant, mid))
                i += 1

        threads = [threading.Thread(target=reader, args=(r,)) for r in range(4)]
        threads += [threading.Thread(target=writer, args=(w,)) for w in range(2)]
        for th in threads:
            th.start()
        # run until the scheduler has run several jobs while the threads work (bounded)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not failures and (
                sum(engine.scheduler.runs.values()) - runs_before < 12 or len(acked) < 40):
            time.sleep(0.05)
        stop.set()
        for th in threads:
            th.join(timeout=60)

        assert failures == []
        assert engine.scheduler.errors == []
        assert foreign == []
        assert recalls[0] > 0 and len(acked) >= 40
        ran = {job for job, n in engine.scheduler.runs.items() if n}
        assert {"enrich", "reevaluate", "review", "consolidate"} <= ran
        for tenant, mid in acked:
            assert engine.get(mid, tenant=tenant).tenant == tenant
        for tenant in TENANTS:
            stored = {m.id for m in engine.list(tenant=tenant, include_deleted=True)}
            assert set(seeded[tenant]) <= stored
            assert {mid for t, mid in acked if t == tenant} <= stored
        assert engine.doctor().consistent
    finally:
        engine.close()
