"""The inspector's safety: user text renders inert, no state changes by GET, a token when
asked for, CSRF on every action, read-only mode, clear error pages (401/403/404, never a
traceback), and one tenant's pages never show another tenant's memory."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from mnemonia import inspection
from mnemonia.cli import app as cli_app
from mnemonia.ui import create_app
from starlette.testclient import TestClient
from typer.testing import CliRunner

from tests.ui.store import SECRET, XSS_IMG, XSS_META, XSS_SCRIPT, Store

RAW = (XSS_SCRIPT, XSS_IMG, "<script>alert(2)</script>", "onerror=alert(1)>")


def _pages(store: Store) -> list[str]:
    return ["/", "/t/alice/memories", "/t/alice/memories?deleted=all",
            f"/t/alice/memories?q={quote(XSS_SCRIPT)}",
            f"/t/alice/memories/{store.ids['xss']}", f"/t/alice/memories/{store.ids['xss_img']}",
            f"/t/alice/memories/{store.ids['batched']}",  # its graph shows the xss neighbour
            f"/t/alice/memories/{store.ids['old_plan']}",  # superseded: an undo button
            f"/t/alice/recall?q={quote('alert script img picture')}&k=10",
            f"/t/alice/recall?q={quote(XSS_SCRIPT)}&topic={quote(XSS_IMG)}",
            "/t/alice/due", "/t/alice/fading"]


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no action form on the page"
    return found.group(1)


def test_user_text_is_escaped_everywhere(client: TestClient, store: Store) -> None:
    for url in _pages(store):
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        for raw in RAW:
            assert raw not in r.text, (url, raw)
    page = client.get(f"/t/alice/memories/{store.ids['xss']}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the metadata, shown as text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert XSS_META not in page


def test_error_pages_escape_what_the_url_carried(client: TestClient) -> None:
    r = client.get(f"/t/{quote(XSS_IMG, safe='')}/memories")  # the message names the tenant
    assert r.status_code == 404 and XSS_IMG not in r.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in r.text
    r = client.get(f"/t/alice/memories/{quote(XSS_IMG, safe='')}")
    assert r.status_code == 404 and XSS_IMG not in r.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in r.text


def test_every_response_forbids_scripts(client: TestClient, store: Store) -> None:
    for url in ["/", f"/t/alice/memories/{store.ids['xss']}", "/t/nobody/due", "/api/tenants"]:
        headers = client.get(url).headers
        assert "script-src 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"


def test_no_state_change_by_get(client: TestClient, store: Store) -> None:
    mid = store.ids["batched"]
    before = store.engine.get(mid, tenant="alice")
    for action in ("pin", "forget", "restore", "unpin", "unsupersede"):
        r = client.get(f"/t/alice/memories/{mid}/{action}")
        assert r.status_code in (404, 405)
        assert "Traceback" not in r.text
    for url in _pages(store):
        client.get(url)
    after = store.engine.get(mid, tenant="alice")
    assert after == before  # recall console included: no access recorded


def test_form_actions_need_the_pages_csrf_token(client: TestClient, store: Store) -> None:
    mid = store.ids["batched"]
    page = client.get(f"/t/alice/memories/{mid}").text
    token = _csrf(page)
    for bad in ({}, {"csrf": ""}, {"csrf": token[:-1] + ("x" if token[-1] != "x" else "y")}):
        r = client.post(f"/t/alice/memories/{mid}/pin", data=bad)
        assert r.status_code == 403 and "CSRF" in r.text and "Traceback" not in r.text
    assert not store.engine.get(mid, tenant="alice").pinned
    r = client.post(f"/t/alice/memories/{mid}/pin", data={"csrf": token, "next": "/t/alice/due"},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/t/alice/due"
    assert store.engine.get(mid, tenant="alice").pinned
    r = client.post(f"/t/alice/memories/{mid}/forget",
                    data={"csrf": token, "next": "https://evil.example/"}, follow_redirects=False)
    assert r.headers["location"] == f"/t/alice/memories/{mid}"  # no open redirect
    assert store.engine.get(mid, tenant="alice").deleted


def test_cross_origin_posts_are_refused(client: TestClient, store: Store) -> None:
    mid = store.ids["batched"]
    token = _csrf(client.get(f"/t/alice/memories/{mid}").text)
    r = client.post(f"/t/alice/memories/{mid}/forget", data={"csrf": token},
                    headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    assert not store.engine.get(mid, tenant="alice").deleted


def test_read_only_mode_has_no_action(ro_client: TestClient, store: Store) -> None:
    mid = store.ids["batched"]
    for url in _pages(store):
        html = ro_client.get(url).text
        assert 'method="post"' not in html and "read-only" in html
    assert ro_client.get("/api/session").json() == {"csrf": None, "read_only": True}
    for path, kwargs in ((f"/t/alice/memories/{mid}/forget", {"data": {"csrf": "x"}}),
                         (f"/api/t/alice/memories/{mid}/forget",
                          {"headers": {"X-CSRF-Token": "x"}})):
        r = ro_client.post(path, **kwargs)
        assert r.status_code == 403 and "read-only" in r.text
    assert not store.engine.get(mid, tenant="alice").deleted


def test_unknown_tenant_and_id_are_404_pages(client: TestClient, store: Store) -> None:
    for url in ["/t/nobody/memories", "/t/nobody/recall?q=x", "/t/nobody/due",
                "/t/nobody/fading", "/t/alice/memories/no-such-id", "/no/such/page"]:
        r = client.get(url)
        assert r.status_code == 404, url
        assert "text/html" in r.headers["content-type"] and "404" in r.text
        assert "Traceback" not in r.text
    r = client.get("/api/t/nobody/memories")
    assert r.status_code == 404 and "nobody" in r.json()["error"]
    assert client.get("/api/t/alice/memories/no-such-id").status_code == 404


def test_one_tenant_never_shows_another_tenants_memory(client: TestClient,
                                                       store: Store) -> None:
    bob_id = store.engine.list(tenant="bob")[0].id
    for url in (f"/t/alice/memories/{bob_id}", f"/api/t/alice/memories/{bob_id}"):
        r = client.get(url)
        assert r.status_code == 404 and SECRET not in r.text
    token = client.get("/api/session").json()["csrf"]
    r = client.post(f"/api/t/alice/memories/{bob_id}/forget", headers={"X-CSRF-Token": token})
    assert r.status_code == 404
    assert not store.engine.get(bob_id, tenant="bob").deleted
    for url in ["/t/alice/memories?q=locker&deleted=all", "/t/alice/recall?q=locker+code&k=20",
                "/t/alice/due", "/t/alice/fading", "/t/alice/memories?deleted=all&limit=500"]:
        assert SECRET not in client.get(url).text
        assert bob_id not in client.get(url).text


def test_a_crash_is_a_500_page_without_traceback(store: Store,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(rt: object) -> None:
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(inspection, "overview", boom)
    with TestClient(create_app(store.engine), base_url="http://127.0.0.1",
                    raise_server_exceptions=False) as c:
        for url in ("/", "/api/tenants"):
            r = c.get(url)
            assert r.status_code == 500
            assert "Traceback" not in r.text and "secret internals" not in r.text


def test_a_foreign_host_name_is_refused(client: TestClient) -> None:
    r = client.get("/", headers={"Host": "rebind.evil.example:8765"})
    assert r.status_code == 403 and "Host" in r.text
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200


def test_with_a_token_every_request_needs_it(store: Store) -> None:
    token = "s3cret-token-0123456789"
    app = create_app(store.engine, token=token, hosts=None)
    with TestClient(app, base_url="http://192.0.2.10:8765") as c:
        for url in ("/", "/t/alice/memories", "/api/tenants", "/static/style.css"):
            r = c.get(url)
            assert r.status_code == 401, url
            assert "token" in r.text and "Traceback" not in r.text
        assert c.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/api/tenants",
                     headers={"Authorization": f"Bearer {token}"}).status_code == 200
        r = c.get(f"/t/alice/memories?token={token}&kind=fact", follow_redirects=False)
        assert r.status_code == 303 and token not in r.headers["location"]
        assert r.headers["location"] == "/t/alice/memories?kind=fact"
        assert "httponly" in r.headers["set-cookie"].lower()
        assert c.get("/t/alice/memories").status_code == 200  # the cookie carries it now


def test_cli_refuses_a_public_address_without_a_token() -> None:
    result = CliRunner().invoke(cli_app, ["ui", "--host", "0.0.0.0", "--path", "unused"])
    assert result.exit_code == 2
    assert "--token" in result.output and "0.0.0.0" in result.output
