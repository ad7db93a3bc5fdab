"""Engine features beyond the contract: topics, entities, framework embedders, server faults."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import StoreUnavailableError

from tests.conftest import _chroma_cli, _free_port


def test_topic_filter_keeps_topic_and_untopiced(engine: MemoryEngine) -> None:
    a = engine.add("deploy the web app with docker compose", tenant="t", topic="work")
    b = engine.add("deploy the garden sprinkler schedule", tenant="t", topic="home")
    c = engine.add("deploy notes without a topic", tenant="t")
    res = engine.recall("deploy", tenant="t", k=5, topic="work", min_activation=0)
    assert set(res.ids) == {a.id, c.id}
    assert b.id not in res.ids


def test_cross_topic_spread_is_penalised(engine: MemoryEngine) -> None:
    src = engine.add("kubernetes cluster upgrade plan", tenant="t", topic="work")
    same = engine.add("zebra quilt", tenant="t", topic="work")
    other = engine.add("yodel quartz", tenant="t")
    engine.relate(src.id, same.id, "implies", tenant="t")
    engine.relate(src.id, other.id, "implies", tenant="t")
    res = engine.recall("kubernetes cluster upgrade", tenant="t", k=5, min_activation=0,
                        touch=False)
    acts = {h.memory.id: h.explanation.activation for h in res.memories}
    assert acts[same.id] == pytest.approx(acts[other.id])  # untopiced: no penalty
    res = engine.recall("kubernetes cluster upgrade", tenant="t", k=5, topic="home",
                        min_activation=0, touch=False)
    assert res.ids == [other.id] or src.id not in res.ids  # work memories filtered out


def test_explicit_entity_activates_linked_memories(engine: MemoryEngine) -> None:
    m = engine.add("The staging server runs out of memory every night", tenant="t",
                   entities=["host:orion"], importance=0.9)
    for i in range(5):
        engine.add(f"unrelated shopping list item {i}", tenant="t")
    res = engine.recall("what is wrong with orion?", tenant="t", k=3, touch=False)
    hit = next(h for h in res.memories if h.memory.id == m.id)
    assert hit.explanation.entity == "host:orion"
    only = engine.recall("server", tenant="t", k=5, entity="host:orion", min_activation=0)
    assert only.ids == [m.id]


def test_rule_based_entities_on_enriched_memories(engine: MemoryEngine) -> None:
    m = engine.add("Yesterday Priya Natarajan moved to Copenhagen for her new job", tenant="t",
                   importance=1.0)
    assert m.state == "immediate"
    got = engine.get(m.id, tenant="t")
    assert "name:priya natarajan" in got.entities and "name:copenhagen" in got.entities


def test_langchain_embeddings_are_accepted(tmp_path: Path, clock: ManualClock) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    emb = DeterministicFakeEmbedding(size=32)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, clock=clock) as eng:
        m = eng.add("hello world", tenant="t")
        res = eng.recall("hello world", tenant="t", k=1)
        assert res.ids == [m.id]
        assert eng.get(m.id, tenant="t").embedding_model.startswith("langchain:")


def test_llama_index_embeddings_are_accepted(tmp_path: Path, clock: ManualClock) -> None:
    from llama_index.core.embeddings import MockEmbedding

    emb = MockEmbedding(embed_dim=16)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, clock=clock) as eng:
        m = eng.add("hello world", tenant="t")
        assert eng.get(m.id, tenant="t").embedding_model.startswith("llama_index:")
        assert eng.recall("hello", tenant="t", k=1, min_activation=0).ids == [m.id]


def test_past_times_import_history(engine: MemoryEngine, clock: ManualClock) -> None:
    from datetime import timedelta

    past = clock.now() - timedelta(days=400)
    m = engine.add("we met in Porto", tenant="t", at=past)
    assert m.created_at == past and m.accessed_at == past


@pytest.mark.integration
@pytest.mark.server
def test_server_dies_mid_session_typed_error_and_nothing_half_written(
        tmp_path: Path, clock: ManualClock) -> None:
    port = _free_port()
    log = open(tmp_path / "chroma.log", "w")  # noqa: SIM115
    cmd = [_chroma_cli(), "run", "--path", str(tmp_path / "db"), "--host", "127.0.0.1",
           "--port", str(port)]
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        cfg = MnemoniaConfig.load(env={}, retry_attempts=3, retry_max_wait=0.2)
        eng = MemoryEngine.open(chroma_url=url, sql_url=f"sqlite:///{tmp_path}/side.db",
                                config=cfg, clock=clock, embedder=HashingEmbedder())
        kept = eng.add("kept before the outage", tenant="t")
        proc.kill()
        proc.wait()
        before = eng.stats("t")
        with pytest.raises(StoreUnavailableError):
            eng.add_many([{"text": "lost in the outage"}, {"text": "also lost"}], tenant="t")
        assert eng.stats("t") == before
        assert [m.id for m in eng.list(tenant="t")] == [kept.id]
        eng.close()
        # the server comes back: the store is whole and usable again
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        for _ in range(300):
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        with MemoryEngine.open(chroma_url=url, sql_url=f"sqlite:///{tmp_path}/side.db",
                               config=cfg, clock=clock, embedder=HashingEmbedder()) as eng2:
            assert eng2.recall("kept before the outage", tenant="t", k=1).ids == [kept.id]
            eng2.add("after the outage", tenant="t")
            assert eng2.stats("t")["memories"] == 2
    finally:
        proc.kill()
        proc.wait()
        log.close()
