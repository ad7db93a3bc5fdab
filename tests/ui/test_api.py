"""The JSON behind each inspector page (``/api/...``), on a store with every kind of state,
through the real Starlette app (TestClient), real Chroma and real SQLite."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import pytest
from mnemonia import lifecycle
from starlette.testclient import TestClient

from tests.ui.store import SECRET, XSS_SCRIPT, Store


def _all_pages(client: TestClient, url: str, **params: str) -> list[dict]:
    items: list[dict] = []
    nxt = None
    for _ in range(100):
        r = client.get(url, params={**params, "limit": 3, **({"page": nxt} if nxt else {})})
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["items"]) <= 3
        items += body["items"]
        nxt = body["next_page"]
        if nxt is None:
            return items
    raise AssertionError("paging did not end")


def test_tenants_with_counts_by_state_and_kind_and_the_last_maintenance(
        client: TestClient, store: Store) -> None:
    body = client.get("/api/tenants").json()
    by_name = {t["tenant"]: t["stats"] for t in body["tenants"]}
    assert set(by_name) == {"alice", "bob"}
    alice = store.engine.stats("alice")
    assert by_name["alice"] == alice
    assert alice["deleted"] == 1 and alice["superseded"] == 1 and alice["consolidated"] >= 2
    assert all(alice["by_state"][s] >= 1 for s in ("skipped", "batched", "immediate"))
    jobs = {(e["job"], e["tenant"]) for e in body["maintenance"]}
    assert {("reevaluate", None), ("enrich", "alice"), ("evict", "alice"),
            ("consolidate", "alice"), ("review", "alice"), ("review", "bob")} <= jobs
    consolidation = next(e for e in body["maintenance"]
                         if e["job"] == "consolidate" and e["tenant"] == "alice")
    assert consolidation["report"]["concepts_created"] >= 0 and consolidation["at"] > 0
    assert body["read_only"] is False


def test_recall_console_explains_each_hit_and_records_no_access(
        client: TestClient, store: Store) -> None:
    before = store.engine.get(store.ids["batched"], tenant="alice")
    # the question the green-tea memory was used for: its use cue lifts it to the top
    r = client.get("/api/t/alice/recall",
                   params={"q": "what does Alice drink in the afternoon?", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hits"][0]["memory"]["id"] == store.ids["batched"]
    for hit in body["hits"]:
        assert {"cosine", "keyword", "path", "retention", "utility", "score", "activation"} \
            <= set(hit["explanation"])
    assert [h["rank"] for h in body["hits"]] == list(range(1, len(body["hits"]) + 1))
    assert "RELEVANT MEMORY" in body["rendered"] and "green tea" in body["rendered"]
    after = store.engine.get(store.ids["batched"], tenant="alice")
    assert after.access_count == before.access_count  # looking changed nothing
    assert after.accessed_at == before.accessed_at


def test_recall_path_through_relations_is_shown(client: TestClient, store: Store) -> None:
    body = client.get("/api/t/alice/recall",
                      params={"q": "production database PostgreSQL", "k": 10,
                              "mode": "general"}).json()
    paths = {h["memory"]["id"]: h["explanation"]["path"] for h in body["hits"]}
    assert paths.get(store.ids["immediate"]) is None  # a direct hit
    reached = [p for p in paths.values() if p]
    assert reached and all(len(p) == 2 for p in reached)


def test_recall_bad_mode_is_a_clear_400(client: TestClient) -> None:
    r = client.get("/api/t/alice/recall", params={"q": "tea", "mode": "nonsense"})
    assert r.status_code == 400 and "nonsense" in r.json()["error"]


def test_memory_list_filters_each_kind_of_state(client: TestClient, store: Store) -> None:
    def ids(**params: str) -> set[str]:
        r = client.get("/api/t/alice/memories", params=params)
        assert r.status_code == 200, r.text
        return {m["id"] for m in r.json()["items"]}

    assert ids(state="pinned") == {store.ids["pinned"]}
    assert ids(state="superseded") == {store.ids["old_plan"]}
    assert {store.ids["dup1"], store.ids["dup2"]} <= ids(state="consolidated")
    assert store.ids["skipped"] in ids(state="skipped")
    assert store.ids["immediate"] in ids(state="immediate")
    assert ids(deleted="yes") == {store.ids["forgotten"]}
    assert store.ids["forgotten"] not in ids()
    assert store.ids["forgotten"] in ids(deleted="all")
    assert ids(topic="travel") == {store.ids["old_plan"], store.ids["new_plan"]}
    facts = ids(kind="fact")
    assert store.ids["immediate"] in facts and store.ids["xss"] not in facts
    assert ids(kind="fact", topic="food") == {store.ids["batched"]}
    for m in client.get("/api/t/alice/memories", params={"state": "batched"}).json()["items"]:
        assert m["state"] == "batched" and not m["deleted"]


def test_memory_list_search_every_word_case_and_accents_ignored(
        client: TestClient, store: Store) -> None:
    def ids(q: str, **more: str) -> set[str]:
        return {m["id"] for m in client.get("/api/t/alice/memories",
                                            params={"q": q, **more}).json()["items"]}

    found = ids("DEPLOY friday")
    assert {store.ids["dup1"], store.ids["dup2"]} <= found
    assert all("deploy" in store.engine.get(i, tenant="alice").text.lower() for i in found)
    assert ids("offsite pórto") == {store.ids["new_plan"]}
    assert ids("keto") == set()
    assert ids("keto", deleted="yes") == {store.ids["forgotten"]}
    assert ids("locker") == set()  # bob's memory is not alice's


def test_memory_list_keyset_paging_walks_every_memory_once_newest_first(
        client: TestClient, store: Store) -> None:
    items = _all_pages(client, "/api/t/alice/memories", deleted="all")
    got = [m["id"] for m in items]
    every = [m.id for m in store.engine.list(tenant="alice", include_deleted=True)]
    assert len(got) == len(set(got)) and set(got) == set(every)
    assert got == list(reversed(every))  # insertion order, newest first
    searched = _all_pages(client, "/api/t/alice/memories", q="the")
    assert len(searched) == len({m["id"] for m in searched}) >= 4


def test_memory_list_bad_parameters_are_one_clear_400(client: TestClient) -> None:
    r = client.get("/api/t/alice/memories",
                   params={"kind": "poem", "state": "asleep", "deleted": "maybe", "limit": "0"})
    assert r.status_code == 400
    message = r.json()["error"]
    for bad in ("kind='poem'", "state='asleep'", "deleted='maybe'", "limit='0'"):
        assert bad in message
    r = client.get("/api/t/alice/memories", params={"page": "garbage"})
    assert r.status_code == 400 and "page=" in r.json()["error"]
    first = client.get("/api/t/alice/memories", params={"limit": 2}).json()["next_page"]
    r = client.get("/api/t/alice/memories", params={"q": "the", "page": first})
    assert r.status_code == 400 and "another listing" in r.json()["error"]


def test_memory_detail_has_schedule_curve_relations_and_history(
        client: TestClient, store: Store) -> None:
    mid = store.ids["batched"]
    body = client.get(f"/api/t/alice/memories/{mid}").json()
    mem = store.engine.get(mid, tenant="alice")
    assert body["memory"]["id"] == mid and body["memory"]["text"] == mem.text
    assert body["memory"]["sm2"]["interval_days"] == mem.sm2.interval_days
    history = store.engine.history(mid, tenant="alice")
    assert [e["event"] for e in body["history"]] == [e.event for e in history]
    recalls = [e for e in history if e.event == "recalled"]
    assert recalls and body["curve"]["accesses_total"] == len(recalls)
    assert body["curve"]["exact"] is True
    past = [r for _, r in body["curve"]["past"]]
    projected = [r for _, r in body["curve"]["projected"]]
    assert all(0.0 <= r <= 1.0 for r in past + projected)
    assert max(past) == 1.0  # each access resets retention to 1
    assert projected == sorted(projected, reverse=True)  # it only fades from now on
    assert abs(projected[0] - body["memory"]["retention"]) < 1e-12
    assert {(r["src"], r["dst"], r["type"]) for r in body["relations"]} >= {
        (store.ids["xss"], mid, "implies")}


def test_memory_detail_of_a_consolidated_and_a_superseded_memory(
        client: TestClient, store: Store) -> None:
    old = client.get(f"/api/t/alice/memories/{store.ids['old_plan']}").json()
    assert old["memory"]["superseded_by"] == store.ids["new_plan"]
    concept = store.ids["concept"]
    dup = client.get(f"/api/t/alice/memories/{store.ids['dup1']}").json()
    assert dup["memory"]["consolidated_into"] == concept
    members = client.get(f"/api/t/alice/memories/{concept}").json()["members"]
    assert store.ids["dup1"] in members


def test_a_supersession_shows_its_evidence_and_the_page_undoes_it(
        client: TestClient, store: Store) -> None:
    engine, t = store.engine, "alice"
    old = engine.add("Alice's car is a red Fiat", tenant=t).id
    new = engine.add("Alice sold the Fiat and drives a blue Volvo now", tenant=t).id
    evidence = {"automatic": True, "frame": "alice | car is <thing>", "cue": "now",
                "old_value": XSS_SCRIPT, "new_value": "a blue Volvo", "confidence": 0.81}
    lifecycle.supersede(engine.runtime, t, old, new, evidence=evidence)
    body = client.get(f"/api/t/alice/memories/{old}").json()
    assert body["supersession"]["superseded_by"] == new
    assert body["supersession"]["evidence"] == evidence
    assert client.get(f"/api/t/alice/memories/{new}").json()["supersession"] is None
    page = client.get(f"/t/alice/memories/{old}").text
    assert 'id="supersession-evidence"' in page and "with this evidence" in page
    assert "<th>cue</th><td>now</td>" in page and "<th>confidence</th><td>0.81</td>" in page
    assert XSS_SCRIPT not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    by_hand = client.get(f"/t/alice/memories/{store.ids['old_plan']}").text
    assert "marked by hand" in by_hand and "supersession-evidence" not in by_hand
    assert f'action="/t/alice/memories/{store.ids["old_plan"]}/unsupersede"' in by_hand
    assert "/unsupersede" not in client.get(f"/t/alice/memories/{new}").text

    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    r = client.post(f"/t/alice/memories/{old}/unsupersede", data={"csrf": csrf.group(1)},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/t/alice/memories/{old}"
    assert engine.get(old, tenant=t).superseded_by is None
    after = client.get(f"/t/alice/memories/{old}").text
    assert 'id="superseded"' not in after and "/unsupersede" not in after
    assert "unsuperseded" in after  # the history row
    r = client.post(f"/api/t/alice/memories/{old}/unsupersede",
                    headers={"X-CSRF-Token": csrf.group(1)})
    assert r.status_code == 400 and "is not superseded" in r.json()["error"]
    r = client.post(f"/api/t/alice/memories/{store.ids['old_plan']}/unsupersede",
                    headers={"X-CSRF-Token": csrf.group(1)})
    assert r.status_code == 200 and r.json()["action"] == "unsupersede"
    assert r.json()["memory"]["superseded_by"] is None


def test_due_lists_in_review_order(client: TestClient, store: Store) -> None:
    store.clock.advance(timedelta(days=30))
    body = client.get("/api/t/alice/due").json()
    prios = [i["review_priority"] for i in body["items"]]
    assert body["items"] and prios == sorted(prios, reverse=True)
    assert body["total"] >= len(body["items"])
    ids = {i["memory"]["id"] for i in body["items"]}
    assert store.ids["skipped"] not in ids and store.ids["forgotten"] not in ids
    assert store.ids["old_plan"] not in ids  # superseded memories are not reviewed
    assert body["schedule"][0]["day"] == "due" and body["schedule"][0]["count"] == body["total"]
    assert len(body["schedule"]) == 31


def test_fading_is_the_eviction_order_and_lists_the_forgotten(
        client: TestClient, store: Store) -> None:
    body = client.get("/api/t/alice/fading").json()
    ids = [i["memory"]["id"] for i in body["items"]]
    assert store.ids["pinned"] not in ids and store.ids["immediate"] not in ids
    assert store.ids["forgotten"] not in ids
    assert [m["id"] for m in body["forgotten"]] == [store.ids["forgotten"]]
    assert body["policy"] == "informative"
    # never used first, then skipped, then the least information (importance * words * ...)
    keys = [(i["used"], i["memory"]["state"] != "skipped", i["information"])
            for i in body["items"]]
    assert keys == sorted(keys)
    assert all(i["information"] == pytest.approx(
        i["memory"]["importance"] * i["content_words"] * (1 + 1 / (1 + (
            store.clock.now() - datetime.fromisoformat(i["memory"]["created_at"])
        ).total_seconds() / 86400))) for i in body["items"])
    # each says why it goes before the next; the last has no next (the list is not cut)
    assert all(i["before_next_because"] for i in body["items"][:-1])
    assert body["items"][-1]["before_next_because"] == ""
    assert sum(i["in_next_run"] for i in body["items"]) == body["next_run"] >= 1
    page = client.get("/t/alice/fading").text
    assert "goes before the next because" in page and "informative" in page
    assert html.escape(body["items"][0]["before_next_because"]) in page
    report = store.engine.evict(tenant="alice")  # eviction takes exactly what was shown
    assert list(report.ids) == ids[:body["next_run"]]


def test_actions_through_the_api_need_the_csrf_header(client: TestClient, store: Store) -> None:
    mid = store.ids["batched"]
    r = client.post(f"/api/t/alice/memories/{mid}/pin")
    assert r.status_code == 403 and "CSRF" in r.json()["error"]
    assert not store.engine.get(mid, tenant="alice").pinned
    csrf = client.get("/api/session").json()["csrf"]
    assert re.fullmatch(r"[\w-]{32,}", csrf)
    for action, check in (("pin", lambda m: m.pinned), ("forget", lambda m: m.deleted),
                          ("restore", lambda m: not m.deleted),
                          ("unpin", lambda m: not m.pinned)):
        r = client.post(f"/api/t/alice/memories/{mid}/{action}",
                        headers={"X-CSRF-Token": csrf})
        assert r.status_code == 200, r.text
        assert r.json()["action"] == action
        assert check(store.engine.get(mid, tenant="alice"))


def test_an_unknown_action_is_404(client: TestClient, store: Store) -> None:
    csrf = client.get("/api/session").json()["csrf"]
    r = client.post(f"/api/t/alice/memories/{store.ids['batched']}/explode",
                    headers={"X-CSRF-Token": csrf})
    assert r.status_code == 404 and "explode" in r.json()["error"]


def test_pages_render_for_every_memory(client: TestClient, store: Store) -> None:
    for mem in store.engine.list(tenant="alice", include_deleted=True):
        r = client.get(f"/t/alice/memories/{mem.id}")
        assert r.status_code == 200, (mem.id, r.text[:500])
        assert "<svg" in r.text  # the forgetting curve
    assert SECRET not in client.get("/t/alice/memories?deleted=all&limit=500").text
