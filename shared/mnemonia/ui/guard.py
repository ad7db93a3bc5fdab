"""The inspector's gate: the access token, the Host check against DNS rebinding, CSRF tokens
for actions, and the security headers every response carries."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["LOOPBACK_HOSTS", "TOKEN_COOKIE", "Guard", "csrf_ok", "is_loopback", "new_secret",
           "safe_next"]

TOKEN_COOKIE = "mnemonia_ui_token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""Host names a loopback-bound inspector answers to (a page on another name that resolves to
127.0.0.1, a DNS-rebinding attack, is refused)."""
HEADERS = {
    # no script runs on these pages at all: escaped user text stays inert even if an
    # escape were ever missed
    "content-security-policy": ("default-src 'self'; script-src 'none'; object-src 'none'; "
                                "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}

ErrorPage = Callable[[Scope, int, str], Response]


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address to bind to) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def csrf_ok(expected: str, given: Any) -> bool:
    return isinstance(given, str) and bool(given) and hmac.compare_digest(
        expected.encode(), given.encode())


def safe_next(value: Any, default: str) -> str:
    """A local path to go back to after an action (``default`` for anything else)."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//") \
            and "\\" not in value and all(c.isprintable() for c in value):
        return value
    return default


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class Guard:
    """ASGI middleware in front of the inspector.

    * ``hosts``: the Host names accepted (``None``: any); a loopback inspector accepts only
      :data:`LOOPBACK_HOSTS`, so a rebinding page cannot read it.
    * ``token``: when set, every request must carry it: ``Authorization: Bearer <token>``, the
      cookie set by a first visit with ``?token=<token>`` (then redirected without it), or that
      query parameter. A missing or wrong token gets 401.
    * every response gets :data:`HEADERS`.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: Iterable[str] | None,
                 error_page: ErrorPage) -> None:
        self.app = app
        self.token = token
        self.hosts = None if hosts is None else {h.lower() for h in hosts}
        self.error_page = error_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in HEADERS.items():
                    headers.setdefault(key, value)
            await send(message)

        refused = self._refusal(scope)
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _host_ok(self, scope: Scope) -> bool:
        if self.hosts is None:
            return True
        host = (_header(scope, b"host") or "").lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name in self.hosts

    def _refusal(self, scope: Scope) -> Response | None:
        if not self._host_ok(scope):
            return self.error_page(scope, 403, "This inspector answers on 127.0.0.1 or "
                                   "localhost only (Host header refused).")
        if self.token is None:
            return None
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = self._given(scope, query)
        if given is None:
            return self.error_page(scope, 401, "This inspector needs its access token: open "
                                   "the address printed by `mnemonia ui` (with ?token=...), "
                                   "or send 'Authorization: Bearer <token>'.")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return self.error_page(scope, 401, "Wrong access token.")
        if query.get("token") and scope["method"] == "GET":
            # keep the token in a cookie, out of the address bar and the history
            rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
            target = scope["path"] + (f"?{rest}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict",
                                path="/")
            return redirect
        return None

    @staticmethod
    def _given(scope: Scope, query: dict[str, str]) -> str | None:
        auth = _header(scope, b"authorization")
        if auth and auth.lower().startswith("bearer "):
            return auth[7:].strip()
        if query.get("token"):
            return query["token"]
        cookie = _header(scope, b"cookie")
        if cookie:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(cookie)
            except CookieError:  # a malformed cookie header: as if there were none
                return None
            if TOKEN_COOKIE in jar:
                return jar[TOKEN_COOKIE].value
        return None

