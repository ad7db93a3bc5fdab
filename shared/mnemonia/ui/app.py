"""The inspector's Starlette app: HTML pages under ``/`` and ``/t/{tenant}/...``, the same data
as JSON under ``/api/...``, and the pin / unpin / forget / restore / unsupersede actions (POST,
with a CSRF token; none in read-only mode).

Pages (fixed paths, for scripts and bookmarks):

* ``/``: tenants with counts by state and kind, and the last maintenance reports.
* ``/t/{tenant}/recall?q=...``: a recall console (hits, their explanations, rendered text).
* ``/t/{tenant}/memories?q=&kind=&topic=&state=&deleted=&page=``: the memory list.
* ``/t/{tenant}/memories/{id}``: one memory: text, metadata, SM-2 schedule, forgetting curve,
  relation graph, event history, and what superseded it with the evidence.
* ``/t/{tenant}/due`` and ``/t/{tenant}/fading``: what is due for review; what eviction takes
  next, and what was forgotten last.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from mnemonia import inspection
from mnemonia.clock import from_ts
from mnemonia.errors import (
    InvalidInputError,
    MemoryNotFoundError,
    MnemoniaError,
    StoreUnavailableError,
)
from mnemonia.models import KINDS
from mnemonia.scoring.modes import MODES
from mnemonia.ui import plots, views
from mnemonia.ui.guard import LOOPBACK_HOSTS, Guard, csrf_ok, new_secret, safe_next

__all__ = ["ACTIONS", "create_app"]

log = logging.getLogger("mnemonia.ui")

ACTIONS = ("pin", "unpin", "forget", "restore", "unsupersede")
"""What the pages can do to a memory (POST ``/t/{tenant}/memories/{id}/{action}``)."""
LIST_LIMIT = 100
"""Rows on the due and fading pages."""


class Inspector:
    """The app's state: the engine, its mode and secrets, the templates."""

    def __init__(self, engine: Any, *, read_only: bool, token: str | None) -> None:
        self.engine = engine
        self.rt = engine.runtime
        self.read_only = read_only
        self.token = token
        self.csrf = new_secret()
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("mnemonia.ui", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
            lstrip_blocks=True)
        self.templates.globals.update(
            memory_url=views.memory_url, snippet=views.snippet, report_line=views.report_line,
            STATES=inspection.STATE_CHOICES, KINDS=KINDS, DELETED=inspection.DELETED_CHOICES,
            MODES=tuple(MODES))
        self.templates.filters["fmt_time"] = lambda d: "" if d is None else d.strftime(
            "%Y-%m-%d %H:%M")
        self.templates.filters["ts"] = lambda s: from_ts(float(s)).strftime("%Y-%m-%d %H:%M")
        self.templates.filters["tojson_pretty"] = lambda v: json.dumps(
            v, indent=2, ensure_ascii=False, sort_keys=True, default=str)
        self.templates.filters["tojson_compact"] = lambda v: json.dumps(
            v, ensure_ascii=False, sort_keys=True, default=str)

    def page(self, request: Request, name: str, status: int = 200, **context: Any
             ) -> HTMLResponse:
        base = {"read_only": self.read_only, "csrf": self.csrf, "here": _here(request),
                "tenant": None}
        html = self.templates.get_template(name).render({**base, **context})
        return HTMLResponse(html, status_code=status)

    def tenant(self, request: Request) -> str:
        name = request.path_params["tenant"]
        if name not in self.engine.tenants():
            raise HTTPException(404, f"There is no tenant {name!r} in this store.")
        return str(name)

    def now(self) -> Any:
        return self.rt.now()


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


# -- pages and their JSON ------------------------------------------------------------------------
def _index(app: Inspector, request: Request) -> Response:
    tenants = inspection.overview(app.rt)
    reports = inspection.last_reports(app.rt)
    if _api(request):
        return JSONResponse({"tenants": [{"tenant": t.tenant, "stats": t.stats}
                                         for t in tenants],
                             "maintenance": reports, "read_only": app.read_only})
    return app.page(request, "index.html", tenants=tenants, reports=reports)


def _recall_args(request: Request) -> dict[str, Any]:
    qp = request.query_params
    k = qp.get("k") or "5"
    if not k.isdigit():
        raise InvalidInputError(f"k={k!r}: must be a whole number >= 1")
    return {"q": qp.get("q", ""), "k": int(k), "mode": qp.get("mode") or None,
            "topic": qp.get("topic") or None, "entity": qp.get("entity") or None,
            "include_superseded": qp.get("superseded") in ("1", "on", "true")}


def _recall(app: Inspector, request: Request) -> Response:
    tenant = app.tenant(request)
    args = _recall_args(request)
    result = None
    if args["q"].strip() or args["entity"]:
        # touch=False: looking at the memory must not change it (no access recorded)
        result = app.engine.recall(args["q"], tenant=tenant, k=args["k"], mode=args["mode"],
                                   topic=args["topic"], entity=args["entity"], touch=False,
                                   include_superseded=args["include_superseded"])
    if _api(request):
        if result is None:
            raise InvalidInputError("q: give a query (or an entity) to recall for")
        return JSONResponse({
            "query": result.query, "tenant": tenant, "mode": result.mode,
            "hits": [views.hit_json(h, i) for i, h in enumerate(result.memories, 1)],
            "episodes": [views.hit_json(h, i) for i, h in enumerate(result.episodes, 1)],
            "rendered": result.render()})
    return app.page(request, "recall.html", tenant=tenant, args=args, result=result)


def _memories(app: Inspector, request: Request) -> Response:
    tenant = app.tenant(request)
    qp = request.query_params
    query = inspection.list_query(q=qp.get("q", ""), kind=qp.get("kind"),
                                  topic=qp.get("topic"), state=qp.get("state"),
                                  deleted=qp.get("deleted"), page=qp.get("page"),
                                  limit=qp.get("limit"))
    page = inspection.memory_page(app.rt, tenant, query)
    now = app.now()
    rows = [(m, inspection.retention_now(app.rt, m, now)) for m in page.items]
    if _api(request):
        return JSONResponse({"tenant": tenant, "items": [views.memory_json(m, retention=r)
                                                         for m, r in rows],
                             "next_page": page.next_page, "query": query.params()})
    return app.page(request, "memories.html", tenant=tenant, query=query, rows=rows,
                    next_page=page.next_page)


def _memory(app: Inspector, request: Request) -> Response:
    tenant = app.tenant(request)
    detail = inspection.memory_detail(app.rt, tenant, request.path_params["memory_id"])
    if _api(request):
        return JSONResponse({
            "tenant": tenant, "memory": views.memory_json(detail.memory,
                                                          retention=detail.curve.retention_now),
            "priority": detail.priority, "due": detail.due,
            "review_priority": detail.review_priority, "uses": detail.uses,
            "fails": detail.fails, "members": detail.members,
            "supersession": views.supersession_json(detail.supersession),
            "relations": [views.relation_json(r) for r in detail.relations],
            "history": [views.event_json(e) for e in detail.history],
            "curve": views.curve_json(detail.curve)})
    return app.page(request, "memory.html", tenant=tenant, d=detail, m=detail.memory,
                    curve_svg=plots.forgetting_curve_svg(detail.curve),
                    graph=views.relation_graph(tenant, detail))


def _due(app: Inspector, request: Request) -> Response:
    tenant = app.tenant(request)
    due = inspection.due(app.rt, tenant, limit=LIST_LIMIT)
    schedule = inspection.review_schedule(app.rt, tenant)
    if _api(request):
        return JSONResponse({
            "tenant": tenant, "total": due.total, "batch": due.batch,
            "items": [{"memory": views.memory_json(i.memory),
                       "review_priority": i.review_priority, "overdue_days": i.overdue_days}
                      for i in due.items],
            "schedule": [{"day": d, "count": n} for d, n in schedule]})
    return app.page(request, "due.html", tenant=tenant, due=due,
                    schedule_svg=plots.review_schedule_svg(schedule))


def _fading(app: Inspector, request: Request) -> Response:
    tenant = app.tenant(request)
    fading = inspection.fading(app.rt, tenant, limit=LIST_LIMIT)
    if _api(request):
        return JSONResponse({
            "tenant": tenant, "active": fading.active, "next_run": fading.next_run,
            "policy": fading.policy,
            "items": [{"memory": views.memory_json(i.memory, retention=i.retention),
                       "priority": i.priority, "used": i.used, "uses": i.uses,
                       "content_words": i.content_words, "information": i.information,
                       "in_next_run": i.next_run, "before_next_because": i.reason}
                      for i in fading.items],
            "forgotten": [views.memory_json(m) for m in fading.forgotten]})
    return app.page(request, "fading.html", tenant=tenant, fading=fading)


def _session(app: Inspector, request: Request) -> Response:
    return JSONResponse({"csrf": None if app.read_only else app.csrf,
                         "read_only": app.read_only})


# -- actions -----------------------------------------------------------------------------------
def _act(app: Inspector, tenant: str, memory_id: str, action: str) -> Any:
    if action == "pin":
        return app.engine.pin(memory_id, tenant=tenant, pinned=True)
    if action == "unpin":
        return app.engine.pin(memory_id, tenant=tenant, pinned=False)
    if action == "forget":
        app.engine.forget(memory_id, tenant=tenant)
        return app.engine.get(memory_id, tenant=tenant)
    if action == "unsupersede":
        return app.engine.unsupersede(memory_id, tenant=tenant)
    return app.engine.restore(memory_id, tenant=tenant)


async def _action(app: Inspector, request: Request) -> Response:
    action = request.path_params["action"]
    if action not in ACTIONS:
        raise HTTPException(404, f"No action {action!r} (actions: {', '.join(ACTIONS)}).")
    if app.read_only:
        raise HTTPException(403, "This inspector is read-only (--read-only): no action.")
    api = _api(request)
    form = None if api else await request.form()
    given = request.headers.get("x-csrf-token") if form is None else form.get("csrf")
    if not csrf_ok(app.csrf, given):
        raise HTTPException(403, "Missing or wrong CSRF token: reload the page and try again.")
    origin = request.headers.get("origin")
    if origin and origin != "null" and origin.split("://", 1)[-1] != request.headers.get("host"):
        raise HTTPException(403, "Cross-origin request refused.")
    tenant = await run_in_threadpool(app.tenant, request)
    memory_id = request.path_params["memory_id"]
    mem = await run_in_threadpool(_act, app, tenant, memory_id, action)
    if api:
        return JSONResponse({"action": action, "memory": views.memory_json(mem)})
    target = safe_next(None if form is None else form.get("next"),
                       views.memory_url(tenant, memory_id))
    return RedirectResponse(target, status_code=303)


# -- errors ------------------------------------------------------------------------------------
_TITLES = {400: "Bad request", 401: "Token needed", 403: "Forbidden", 404: "Not found",
           405: "Method not allowed", 500: "Internal error", 503: "Store unavailable"}


def _error_response(app: Inspector, scope: Scope, status: int, message: str) -> Response:
    if scope.get("path", "").startswith("/api/"):
        return JSONResponse({"error": message, "status": status}, status_code=status)
    html = app.templates.get_template("error.html").render(
        status=status, title=_TITLES.get(status, "Error"), message=message,
        read_only=app.read_only, csrf="", here="/", tenant=None)
    return HTMLResponse(html, status_code=status)


def _handlers(app: Inspector) -> dict[Any, Callable[..., Any]]:
    def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", None) or _TITLES.get(status, "Error")
        return _error_response(app, request.scope, status, str(detail))

    def not_found(request: Request, exc: Exception) -> Response:
        return _error_response(app, request.scope, 404, str(exc.args[0] if exc.args else exc))

    def bad_input(request: Request, exc: Exception) -> Response:
        return _error_response(app, request.scope, 400, str(exc))

    def store_error(request: Request, exc: Exception) -> Response:
        status = 503 if isinstance(exc, StoreUnavailableError) else 500
        return _error_response(app, request.scope, status, str(exc))

    def crash(request: Request, exc: Exception) -> Response:
        log.exception("inspector error on %s", request.url.path, exc_info=exc)
        return _error_response(app, request.scope, 500, "Something went wrong inside the "
                               "inspector; the server log has the details.")

    return {HTTPException: http_error, MemoryNotFoundError: not_found,
            InvalidInputError: bad_input, MnemoniaError: store_error, Exception: crash}


def create_app(engine: Any, *, read_only: bool = False, token: str | None = None,
               hosts: Iterable[str] | None = LOOPBACK_HOSTS) -> Starlette:
    """The inspector over an open ``MemoryEngine``.

    Args:
        engine: The store to show (its actions go through ``engine.pin`` / ``forget`` /
            ``restore`` / ``unsupersede``; nothing else writes).
        read_only: No actions at all (the pages show none; a POST gets 403).
        token: When set, every request must carry it (see :class:`~mnemonia.ui.guard.Guard`).
        hosts: Host names accepted (default: loopback names only); ``None`` accepts any
            (only sensible with a token).
    """
    app = Inspector(engine, read_only=read_only, token=token)

    def page(fn: Callable[[Inspector, Request], Response]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            return fn(app, request)
        return endpoint

    async def action(request: Request) -> Response:
        return await _action(app, request)

    routes: list[BaseRoute] = []
    for prefix in ("", "/api"):
        routes += [
            Route(f"{prefix}/t/{{tenant}}/recall", page(_recall)),
            Route(f"{prefix}/t/{{tenant}}/memories", page(_memories)),
            Route(f"{prefix}/t/{{tenant}}/memories/{{memory_id}}", page(_memory)),
            Route(f"{prefix}/t/{{tenant}}/memories/{{memory_id}}/{{action}}", action,
                  methods=["POST"]),
            Route(f"{prefix}/t/{{tenant}}/due", page(_due)),
            Route(f"{prefix}/t/{{tenant}}/fading", page(_fading)),
        ]
    routes += [Route("/", page(_index)), Route("/api/tenants", page(_index)),
               Route("/api/session", page(_session)),
               Mount("/static", StaticFiles(packages=[("mnemonia.ui", "static")]),
                     name="static")]
    starlette = Starlette(routes=routes, exception_handlers=_handlers(app))
    starlette.add_middleware(Guard, token=token, hosts=hosts,
                             error_page=lambda scope, status, message: _error_response(
                                 app, scope, status, message))
    starlette.state.inspector = app
    return starlette
