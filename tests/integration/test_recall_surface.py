"""The seeds' recall surface through the public API: the cross-topic penalty in spreading,
entity-only recall ranked by the lifecycle, and contradictions / supersessions rendered with
the other memory's id and a one-line summary."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import HashingEmbedder
from mnemonia.errors import InvalidInputError, InvalidTextError
from mnemonia.scoring import activation as act


@pytest.fixture
def config() -> MnemoniaConfig:
    """These tests make their supersessions and contradictions by hand and check how recall
    renders them: ingest's own detection (issue 34, tested in tests/core/test_updates.py)
    is off, so "The team meeting moved to Tuesday" does not supersede Monday's by itself."""
    return MnemoniaConfig.load(env={"MNEMONIA_DETECT_UPDATES": "false"}, maintenance="manual")


def test_spreading_reaches_another_topic_at_the_cross_topic_penalty(
        engine: MemoryEngine) -> None:
    a = engine.add("The staging cluster runs on Kubernetes", tenant="t", topic="infra")
    b = engine.add("Priya reviews the quarterly budget", tenant="t", topic="finance")
    engine.relate(a.id, b.id, "causes", strength=0.9, tenant="t")
    query = "which orchestrator runs the staging cluster?"
    free = engine.recall(query, tenant="t", k=5, min_activation=0, touch=False)
    scoped = engine.recall(query, tenant="t", k=5, min_activation=0, touch=False,
                           topic="infra")
    hit_free = {h.id: h for h in free.memories}[b.id]
    hit_scoped = {h.id: h for h in scoped.memories}[b.id]
    assert hit_scoped.explanation.path == (a.id, "causes")
    penalty = engine.config.cross_topic_penalty
    assert penalty == pytest.approx(act.DEFAULT_CROSS_TOPIC_PENALTY)
    # reached by spreading in both, at x0.4 when the query's topic is another one
    assert hit_free.explanation.path == (a.id, "causes")
    assert hit_scoped.explanation.activation == pytest.approx(
        hit_free.explanation.activation * penalty)
    # seeds stay topic-filtered: the other topic's memory is not a direct match
    alone = engine.add("Priya reviews the quarterly budget again", tenant="t",
                       topic="finance")
    assert alone.id not in engine.recall("quarterly budget review", tenant="t", k=5,
                                         min_activation=0, touch=False, topic="infra").ids


def test_entity_only_recall_is_ranked_by_the_lifecycle(engine: MemoryEngine,
                                                       clock: ManualClock) -> None:
    old = engine.add("Lena lent us her tent", tenant="t", entities=["person:lena"],
                     importance=0.3)
    clock.advance(timedelta(days=3))
    key = engine.add("Lena is allergic to peanuts", tenant="t", entities=["person:lena"],
                     importance=0.95)
    mid = engine.add("Lena moved to Porto", tenant="t", entities=["person:lena"],
                     importance=0.6)
    other = engine.add("Tom fixed the bike", tenant="t", entities=["person:tom"])
    res = engine.recall(entity="person:lena", tenant="t", k=5, touch=False)
    assert res.ids == [key.id, mid.id, old.id]
    assert other.id not in res.ids
    assert all(h.explanation.entity == "person:lena" for h in res.memories)
    scores = [h.score for h in res.memories]
    assert scores == sorted(scores, reverse=True)
    assert engine.recall("", entity="person:lena", tenant="t", k=5, touch=False).ids == res.ids
    assert engine.recall(entity="person:lena", tenant="t", k=1, touch=False).ids == [key.id]
    # touching counts as an access
    engine.recall(entity="person:lena", tenant="t", k=1)
    assert engine.get(key.id, tenant="t").access_count == 1
    with pytest.raises(InvalidTextError):
        engine.recall(None, tenant="t")
    with pytest.raises(InvalidTextError):
        engine.recall("  ", tenant="t")


def test_contradictions_and_supersessions_are_rendered_with_id_and_summary(
        engine: MemoryEngine) -> None:
    meet = engine.add("The team meeting is on Monday at 10", tenant="t")
    clash = engine.add("The team meeting moved to Tuesday at 11", tenant="t")
    engine.relate(clash.id, meet.id, "contradicts", tenant="t")
    res = engine.recall("when is the team meeting?", tenant="t", k=2, min_activation=0,
                        touch=False)
    text = res.render()
    assert f"CONTRADICTS [{meet.id}]: The team meeting is on Monday at 10" in text
    assert f"CONTRADICTS [{clash.id}]: The team meeting moved to Tuesday at 11" in text
    hit = {h.id: h for h in res.memories}[clash.id]
    assert [(x.kind, x.id) for x in hit.explanation.links] == [("contradicts", meet.id)]
    assert f"CONTRADICTS [{meet.id}]" in str(hit.explanation)
    assert hit.explanation.to_dict()["links"] == [
        {"kind": "contradicts", "id": meet.id, "summary": "The team meeting is on Monday at 10"}]

    old = engine.add("Ana's dentist appointment is on May 3", tenant="t")
    new = engine.add("Ana's dentist appointment moved to May 10", tenant="t")
    engine.supersede(old.id, new.id, tenant="t")
    res = engine.recall("when is Ana's dentist appointment?", tenant="t", k=3,
                        min_activation=0, touch=False)
    assert old.id not in res.ids
    assert f"supersedes [{old.id}]: Ana's dentist appointment is on May 3" in res.render()
    both = engine.recall("when is Ana's dentist appointment?", tenant="t", k=3,
                         min_activation=0, touch=False, include_superseded=True)
    assert old.id in both.ids
    assert f"SUPERSEDED BY [{new.id}]: Ana's dentist appointment moved to May 10" \
        in both.render()


def test_links_a_hit_reports_follow_later_writes(engine: MemoryEngine) -> None:
    """Recall keeps what it read of a memory's contradictions; a later relation, a new
    memory's contradiction and a hard forget are each seen by the next recall."""
    meet = engine.add("The team meeting is on Monday at 10", tenant="t")
    ask = {"tenant": "t", "k": 3, "min_activation": 0, "touch": False}

    def links_of(mid: str) -> list[tuple[str, str]]:
        hits = {h.id: h for h in engine.recall("when is the team meeting?", **ask).memories}
        return [(x.kind, x.id) for x in hits[mid].explanation.links]

    assert links_of(meet.id) == []  # read (and kept) with no contradiction
    clash = engine.add("The team meeting moved to Tuesday at 11", tenant="t")
    assert links_of(meet.id) == []
    engine.relate(clash.id, meet.id, "contradicts", tenant="t")
    assert links_of(meet.id) == [("contradicts", clash.id)]
    later = engine.add("No, the team meeting is on Wednesday", tenant="t")
    engine.relate(meet.id, later.id, "contradicts", tenant="t")
    assert sorted(links_of(meet.id)) == sorted([("contradicts", clash.id),
                                                ("contradicts", later.id)])
    engine.forget(clash.id, tenant="t", hard=True)
    assert links_of(meet.id) == [("contradicts", later.id)]


def test_a_long_linked_memory_is_summarised_on_one_line(engine: MemoryEngine) -> None:
    long_text = ("The offsite is planned for the second week of June in the mountains, with "
                 "hiking on the first day and workshops after that\nsecond line")
    a = engine.add(long_text, tenant="t")
    b = engine.add("The offsite is cancelled this year", tenant="t")
    engine.relate(b.id, a.id, "contradicts", tenant="t")
    res = engine.recall("is the offsite cancelled?", tenant="t", k=1, touch=False)
    (link,) = res.memories[0].explanation.links
    assert link.summary.endswith("…") and len(link.summary) <= 80 and "\n" not in link.summary
    assert long_text.startswith(link.summary[:-1].rstrip())


def test_get_with_touch_counts_as_an_access_and_history_shows_recalls(
        engine: MemoryEngine, clock: ManualClock) -> None:
    m = engine.add("The spare key is under the blue flower pot", tenant="t")
    assert engine.get(m.id, tenant="t").access_count == 0  # a plain get is no access
    clock.advance(timedelta(hours=1))
    got = engine.get(m.id, tenant="t", touch=True)
    assert got.access_count == 1 and got.stability == pytest.approx(1.5)
    assert got.accessed_at == clock.now()
    engine.recall("where is the spare key?", tenant="t", k=1, user_id="ana")
    events = engine.history(m.id, tenant="t")
    assert [e.event for e in events] == ["created", "recalled", "recalled"]
    assert events[-1].after == {"rank": 1, "k": 1, "score": events[-1].after["score"],
                                "user_id": "ana"}
    with pytest.raises(InvalidInputError, match="touch='yes'"):
        engine.get(m.id, tenant="t", touch="yes")  # type: ignore[arg-type]


def test_a_config_file_is_found_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    store = tmp_path / "s"
    store.mkdir()
    (store / "mnemonia.json").write_text(json.dumps({"default_k": 5, "maintenance": "manual"}))
    monkeypatch.delenv("MNEMONIA_CONFIG", raising=False)
    with MemoryEngine.open(store, embedder=HashingEmbedder()) as engine:
        assert engine.config.default_k == 5 and engine.scheduler is None
    named = tmp_path / "elsewhere.json"
    named.write_text(json.dumps({"default_k": 7}))
    monkeypatch.setenv("MNEMONIA_CONFIG", str(named))
    with MemoryEngine.open(store, embedder=HashingEmbedder(), maintenance="manual") as engine:
        assert engine.config.default_k == 7
    given = MnemoniaConfig.load(env={}, default_k=2, maintenance="manual")
    with MemoryEngine.open(store, embedder=HashingEmbedder(), config=given) as engine:
        assert engine.config.default_k == 2  # an explicit config wins


@pytest.mark.integration
def test_cli_recall_prints_the_sections_a_table_or_json(tmp_path: Path,
                                                        real_embedder: object) -> None:
    from mnemonia.cli import app
    from typer.testing import CliRunner

    store = tmp_path / "s"
    with MemoryEngine.open(store, embedder=real_embedder, maintenance="manual") as engine:
        engine.add("Lena is allergic to peanuts", tenant="fam", entities=["person:lena"],
                   importance=0.9)
        engine.add("Lena moved to Porto in May", tenant="fam", entities=["person:lena"])
        engine.add("The car needs new tyres", tenant="fam")
    run = CliRunner().invoke
    base = ["--path", str(store), "--tenant", "fam"]
    out = run(app, ["recall", "what is Lena allergic to?", *base, "-k", "1"])
    assert out.exit_code == 0, out.output
    assert "RELEVANT MEMORY\n- Lena is allergic to peanuts" in out.output
    table = run(app, ["recall", "what is Lena allergic to?", *base, "--table"])
    assert table.exit_code == 0 and "cos" in table.output and "score" in table.output
    data = run(app, ["recall", "what is Lena allergic to?", *base, "--json", "--mode",
                     "general", "--episode-k", "0"])
    parsed = json.loads(data.output)
    assert parsed["mode"] == "general" and parsed["episodes"] == []
    assert parsed["memories"][0]["text"] == "Lena is allergic to peanuts"
    ent_only = run(app, ["recall", *base, "--entity", "person:lena", "--json"])
    assert {m["text"] for m in json.loads(ent_only.output)["memories"]} == {
        "Lena is allergic to peanuts", "Lena moved to Porto in May"}
    topic = run(app, ["recall", "tyres", *base, "--topic", "cars", "--json"])
    assert topic.exit_code == 0


def test_a_hub_spreads_along_its_strongest_relations_whichever_ends_are_seeds(
        engine: MemoryEngine) -> None:
    # A hub related to 20 memories, strongest first. Its six strongest neighbours match the
    # query a little themselves, so they spread in the same hop (fillers that match it more
    # keep the other neighbours out of the spreading frontier). The hub spreads along its
    # EDGES_PER_SOURCE strongest relations, each counted once however many of the memories
    # that spread hold it.
    from mnemonia.recall import EDGES_PER_SOURCE
    hub = engine.add("The staging cluster runs on Kubernetes", tenant="t")
    for i in range(14):
        engine.add(f"Staging cluster runbook page {i}", tenant="t")
    near = []
    for i in range(20):
        text = f"Staging note {i}: the florist delivers tulips on day {i}" if i < 6 \
            else f"Memo {i}: the florist delivers tulips on day {i}"
        near.append(engine.add(text, tenant="t"))
        engine.relate(hub.id, near[-1].id, "related_to", strength=1.0 - 0.02 * i,
                      tenant="t")
    res = engine.recall("which orchestrator runs the staging cluster?", tenant="t", k=60,
                        min_activation=0, touch=False)
    paths = {h.id: h.explanation.path for h in res.memories}
    assert paths[hub.id] is None
    assert [i for i, m in enumerate(near) if paths.get(m.id) == (hub.id, "related_to")] \
        == list(range(EDGES_PER_SOURCE))
