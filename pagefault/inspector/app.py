"""The inspector's routes: a Starlette app, everything under ``/inspector``.

```
GET  /inspector/                                  who (no auth) / your own pages / sign in
GET  /inspector/{user}/context?thread=            the context window: last request, history plot
GET  /inspector/{user}/core                       core blocks, schemas, edit logs
POST /inspector/{user}/core/{label}[/append]      edit a block (CoreMemory's rules; logged with who)
GET  /inspector/{user}/archival?q=&tag=&trust=&from=&to=&superseded=&page=
GET  /inspector/{user}/archival/{id}              one record: provenance, trust, validity, chain
GET  /inspector/{user}/archival/{id}/delete       asks; POST deletes it from every index
GET  /inspector/{user}/recall?q=&thread=          search across threads, evicted or in the window
GET  /inspector/{user}/compactions?thread=        what each compaction evicted, the summary it wrote
GET  /inspector/{user}/replay?thread=&turn=&step= one model call exactly as the model saw it
```

Every user page takes ``?agent=`` (default ``default``). A request is first let in or refused
(``access``), then checked (a bad parameter is a 400 saying which and why, a user with no memory
here, a thread or record not theirs, or a page past the last a 404), then read in a worker thread:
the stores are synchronous, as the graph's own nodes use them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from pagefault.engines.connections import ServiceUnavailable
from pagefault.graph.context import Context
from pagefault.inspector import archival_view, pages
from pagefault.inspector.access import (
    COOKIE_PATH,
    CSRF_COOKIE,
    TOKEN_COOKIE,
    Refused,
    Viewer,
    check_form,
    viewer_of,
)
from pagefault.inspector.history import ThreadInfo, compactions, owned_thread, user_threads
from pagefault.inspector.layout import ROOT, Frame, user_path
from pagefault.inspector.plot import Column
from pagefault.inspector.recall_view import recall_search
from pagefault.inspector.segments import KeepEncodedSlashes, path_params
from pagefault.inspector.source import MemorySource
from pagefault.maintenance.inspect import thread_overview
from pagefault.maintenance.replay import ReplayError, model_calls, replay
from pagefault.serve.auth import AuthConfig, TokenRejected, verified_user
from pagefault.serve.settings import Identity, SettingsError
from pagefault.stores.archival import check_tags
from pagefault.stores.core import CoreMemory, CoreMemoryError
from pagefault.stores.procedures import ProceduralMemory
from pagefault.stores.provenance import Provenance
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.text.unicode import check_unicode
from pagefault.tools.handlers import MAX_QUERY_CHARS, ToolError, parse_time
from pagefault.window.run import core_memory

#: The largest page number a request may name (more digits are a 400, not a lookup).
MAX_NUMBER = 999_999_999
#: The largest form body the pages post (a core block's text is at most 100,000 characters).
MAX_FORM_BYTES = 512 * 1024
_TRUE = frozenset({"1", "on", "true", "yes"})


class BadRequest(ValueError):
    """A parameter the inspector cannot use; the message names it and says why (HTTP 400)."""


class NotFound(LookupError):
    """No such user, thread, record or page here (HTTP 404)."""


def _number(params: Mapping[str, str], name: str, default: int | None, minimum: int = 0) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise BadRequest(f"{name} is required (a whole number from {minimum})")
        return default
    if not raw.isascii() or not raw.isdigit() or int(raw) < minimum or int(raw) > MAX_NUMBER:
        raise BadRequest(f"{name} must be a whole number from {minimum} to {MAX_NUMBER:,}, got {raw[:40]!r}")
    return int(raw)


def _text(params: Mapping[str, str], name: str) -> str:
    value = params.get(name, "").strip()
    if len(value) > MAX_QUERY_CHARS:
        raise BadRequest(f"{name} is longer than {MAX_QUERY_CHARS} characters")
    try:
        check_unicode(value, name)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return value


@dataclass
class Ask:
    """One request for a user's page, let in and checked: its ``params``, the ``viewer``, whose memory
    (``scope``), the ``source`` it is read from and the run settings ``ctx`` the user gets there."""

    params: Mapping[str, str]
    viewer: Viewer
    scope: Scope
    source: MemorySource
    ctx: Context
    flash: str = ""
    _threads: list[ThreadInfo] | None = field(default=None, repr=False)

    @property
    def services(self) -> MemoryServices:
        """The user's archival and recall stores."""
        return self.source.services(self.ctx)

    def frame(self, section: str, *, flash: str = "", error: str = "") -> Frame:
        """The page frame for ``section``."""
        where = self.source.where if self.viewer.mode == "none" else ""
        return Frame(self.viewer, self.scope, section, where, flash or self.flash, error)

    def threads(self) -> list[ThreadInfo]:
        """The user's threads, newest first (read once per request)."""
        if self._threads is None:
            self._threads = user_threads(self.source.checkpointer, self.services, self.scope)
        return self._threads

    def thread(self, *, required: bool = False) -> ThreadInfo | None:
        """The thread the request names (``?thread=``; 404 if it is not the user's), else the newest."""
        threads = self.threads()
        named = self.params.get("thread", "")
        if named:
            found = owned_thread(threads, named)
            if found is None:
                raise NotFound(f"user {self.scope.user_id!r} has no thread {named[:80]!r} here")
            return found
        if required:
            raise BadRequest("thread is required")
        return threads[0] if threads else None

    def known(self) -> None:
        """404 unless the user has some memory here: a core block or rule, an archival record or a thread."""
        if self.source.store.search(self.scope.namespace(), limit=1):
            return
        svc = self.services
        if svc.archival.count(self.scope) or svc.recall.count(self.scope):
            return
        raise NotFound(f"no memory of user {self.scope.user_id!r} (agent {self.scope.agent_id!r}) here")


Build = Callable[[Ask], "str | Response"]


class Inspector:
    """The routes of one inspector: its memory ``source`` (opened on the first request, once) and how
    requests are authenticated (``auth``)."""

    def __init__(self, open_source: Callable[[], Awaitable[MemorySource]], auth: AuthConfig) -> None:
        self._open_source = open_source
        self._source: MemorySource | None = None
        self._lock = asyncio.Lock()
        self.auth = auth

    async def source(self) -> MemorySource:
        """The memory source, opened on first use."""
        if self._source is None:
            async with self._lock:
                if self._source is None:
                    self._source = await self._open_source()
        return self._source

    # -- answering -----------------------------------------------------------------------------------

    def _respond(self, viewer: Viewer | None, body: str | Response, status: int = 200) -> Response:
        response = body if isinstance(body, Response) else HTMLResponse(body, status_code=status)
        if viewer is not None and viewer.new_csrf:
            response.set_cookie(CSRF_COOKIE, viewer.csrf, path=COOKIE_PATH, httponly=True, samesite="strict")
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                                                               "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
        return response

    def _error(self, viewer: Viewer | None, status: int, message: str, scope: Scope | None = None) -> Response:
        frame = Frame(viewer or Viewer(self.auth.mode, None, False, ""), scope)
        if status == 401 and self.auth.mode == "jwt":
            frame = Frame(frame.viewer, None, error=message)
            return self._respond(viewer, pages.login_page(frame), 401)
        return self._respond(viewer, pages.error_page(frame, status, message), status)

    async def _answer(self, request: Request, build: Build, *, form: bool = False, section: str = "") -> Response:
        viewer: Viewer | None = None
        scope: Scope | None = None
        try:
            viewer = viewer_of(request, self.auth)
            route = path_params(request)
            try:
                scope = Scope(route["user"], request.query_params.get("agent") or "default")
            except ValueError as e:
                raise BadRequest(str(e).splitlines()[0]) from None
            viewer.check_user(scope.user_id)
            params: dict[str, str] = dict(request.query_params)
            if form:
                fields = await form_fields(request)
                check_form(request, viewer, fields)
                params.update(fields)
            params.update(route)
            source = await self.source()
            try:
                ctx = source.context(scope, Identity(viewer.identity))
            except SettingsError as e:
                raise Refused(403, str(e)) from None
            ask = Ask(params, viewer, scope, source, ctx)
            return self._respond(viewer, await run_in_threadpool(_checked, ask, build))
        except Refused as e:
            return self._error(viewer, e.status, e.message, scope)
        except BadRequest as e:
            return self._error(viewer, 400, str(e), scope)
        except NotFound as e:
            return self._error(viewer, 404, str(e), scope)
        except ServiceUnavailable as e:
            return self._error(viewer, 503, str(e), scope)

    # -- the way in ------------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        """Without auth: choose a user; with tokens: your own pages, or the sign-in page."""
        try:
            viewer = viewer_of(request, self.auth, required=False)
        except Refused as e:
            return self._error(None, e.status, e.message)
        if viewer.identity is not None:
            return RedirectResponse(user_path(Scope(viewer.identity), "context"), status_code=303)
        if self.auth.mode == "jwt":
            return self._respond(viewer, pages.login_page(Frame(viewer)))
        source = await self.source()
        users = await run_in_threadpool(_users, source)
        return self._respond(viewer, pages.index_page(Frame(viewer, where=source.where), users))

    async def open_user(self, request: Request) -> Response:
        """The user picker's target: that user's context page (400 for an id no user can have)."""
        try:
            viewer = viewer_of(request, self.auth)
        except Refused as e:
            return self._error(None, e.status, e.message)
        try:
            scope = Scope(request.query_params.get("user", ""), request.query_params.get("agent") or "default")
            viewer.check_user(scope.user_id)
        except Refused as e:
            return self._error(viewer, e.status, e.message)
        except ValueError as e:
            return self._error(viewer, 400, str(e).splitlines()[0])
        return RedirectResponse(user_path(scope, "context"), status_code=303)

    async def login(self, request: Request) -> Response:
        """GET: the sign-in form. POST: verify the pasted token (the API's own check) and keep it in a cookie."""
        try:
            viewer = viewer_of(request, self.auth, required=False)
        except Refused as e:
            return self._error(None, e.status, e.message)
        if self.auth.mode == "none":
            return RedirectResponse(f"{ROOT}/", status_code=303)
        if request.method == "GET":
            return self._respond(viewer, pages.login_page(Frame(viewer)))
        try:
            fields = await form_fields(request)
            check_form(request, viewer, fields)
            token = fields.get("token", "").strip()
            user = verified_user(f"Bearer {token}", self.auth)
        except Refused as e:
            return self._error(viewer, e.status, e.message)
        except TokenRejected as e:
            return self._error(viewer, 401, str(e))
        response = RedirectResponse(user_path(Scope(user), "context"), status_code=303)
        response.set_cookie(TOKEN_COOKIE, token, path=COOKIE_PATH, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def logout(self, request: Request) -> Response:
        """Forget the token cookie."""
        try:
            viewer = viewer_of(request, self.auth)
            check_form(request, viewer, await form_fields(request))
        except Refused as e:
            return self._error(None, e.status, e.message)
        response = RedirectResponse(f"{ROOT}/login", status_code=303)
        response.delete_cookie(TOKEN_COOKIE, path=COOKIE_PATH)
        return response

    async def user_home(self, request: Request) -> Response:
        """A user's bare URL: their context page."""
        return await self._answer(request, lambda ask: RedirectResponse(user_path(ask.scope, "context"), status_code=303))

    # -- the sections -----------------------------------------------------------------------------------

    async def context(self, request: Request) -> Response:
        """The context window page."""
        return await self._answer(request, _context)

    async def core(self, request: Request) -> Response:
        """The core memory page."""
        return await self._answer(request, _core)

    async def core_set(self, request: Request) -> Response:
        """A block's whole text saved from the core memory page (``CoreMemory.set_block``)."""
        return await self._answer(request, _core_set, form=True)

    async def core_append(self, request: Request) -> Response:
        """A line appended to a block from the core memory page (``CoreMemory.append``)."""
        return await self._answer(request, _core_append, form=True)

    async def archival(self, request: Request) -> Response:
        """The archival listing: browse or search."""
        return await self._answer(request, _archival)

    async def record(self, request: Request) -> Response:
        """One archival record."""
        return await self._answer(request, _record)

    async def delete(self, request: Request) -> Response:
        """GET: the confirmation. POST: the record deleted from every index."""
        if request.method == "POST":
            return await self._answer(request, _delete, form=True)
        return await self._answer(request, _delete_confirm)

    async def recall(self, request: Request) -> Response:
        """The recall page."""
        return await self._answer(request, _recall)

    async def compactions(self, request: Request) -> Response:
        """The compactions page."""
        return await self._answer(request, _compactions)

    async def replay(self, request: Request) -> Response:
        """One model call, replayed."""
        return await self._answer(request, _replay)

    def routes(self, *, root_redirect: bool = False) -> list[Route]:
        """Every route; ``root_redirect`` also sends ``/`` to the inspector (its own server only)."""
        user = ROOT + "/{user}"
        routes = [
            Route(f"{ROOT}", lambda r: RedirectResponse(f"{ROOT}/", status_code=307), include_in_schema=False),
            Route(f"{ROOT}/", self.index, include_in_schema=False),
            Route(f"{ROOT}/open", self.open_user, include_in_schema=False),
            Route(f"{ROOT}/login", self.login, methods=["GET", "POST"], include_in_schema=False),
            Route(f"{ROOT}/logout", self.logout, methods=["POST"], include_in_schema=False),
            Route(user, self.user_home, include_in_schema=False),
            Route(f"{user}/context", self.context, include_in_schema=False),
            Route(f"{user}/core", self.core, include_in_schema=False),
            Route(f"{user}/core/{{label}}", self.core_set, methods=["POST"], include_in_schema=False),
            Route(f"{user}/core/{{label}}/append", self.core_append, methods=["POST"], include_in_schema=False),
            Route(f"{user}/archival", self.archival, include_in_schema=False),
            Route(f"{user}/archival/{{record}}", self.record, include_in_schema=False),
            Route(f"{user}/archival/{{record}}/delete", self.delete, methods=["GET", "POST"], include_in_schema=False),
            Route(f"{user}/recall", self.recall, include_in_schema=False),
            Route(f"{user}/compactions", self.compactions, include_in_schema=False),
            Route(f"{user}/replay", self.replay, include_in_schema=False),
        ]
        if root_redirect:
            routes.insert(0, Route("/", lambda r: RedirectResponse(f"{ROOT}/", status_code=307), include_in_schema=False))
        return routes


async def form_fields(request: Request) -> dict[str, str]:
    """A posted form's fields (the pages post ``application/x-www-form-urlencoded``, at most
    ``MAX_FORM_BYTES``); ``Refused`` for any other body."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise Refused(415, "forms are posted as application/x-www-form-urlencoded")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, f"a form may hold at most {MAX_FORM_BYTES // 1024} KiB")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError:
        raise Refused(400, "the form is not UTF-8") from None


def _checked(ask: Ask, build: Build) -> str | Response:
    """``build(ask)`` once the user is known here (in a worker thread)."""
    ask.known()
    return build(ask)


def _users(source: MemorySource) -> list[tuple[str, str]]:
    """(user, agent) pairs with core memory or rules in the store."""
    found = set()
    for ns in source.store.list_namespaces(prefix=("pagefault",), max_depth=3, limit=1000):
        if len(ns) == 3:
            found.add((ns[1].replace("%2E", ".").replace("%25", "%"), ns[2].replace("%2E", ".").replace("%25", "%")))
    return sorted(found)


# -- what each section reads ---------------------------------------------------------------------------


def _context(ask: Ask) -> str:
    thread = ask.thread()
    if thread is None:
        return pages.context_page(ask.frame("context"), [], None, None, [])
    overview = thread_overview(ask.source, ask.ctx, thread.thread_id)
    calls = model_calls(ask.source.graph, thread.thread_id)
    columns = [Column(c.tokens, str(c.turn), f"turn {c.turn}" + (f" (call {c.step + 1} of {c.steps})" if c.steps > 1 else ""),
                      pages.replay_path(ask.scope, c.thread_id, c.turn, c.step),
                      i > 0 and c.first_message_index > calls[i - 1].first_message_index)
               for i, c in enumerate(calls)]
    return pages.context_page(ask.frame("context"), ask.threads(), thread, overview, columns)


def _core(ask: Ask, errors: dict[str, str] | None = None) -> str:
    core = core_memory(ask.source.store, ask.ctx)
    saved = ask.params.get("saved", "")
    blocks = core.blocks()
    flash = f"Saved the {saved} block. Its edit log records the change." if saved in {b.label for b in blocks} else ""
    procedures = ProceduralMemory(ask.source.store, ask.scope).list()
    return pages.core_page(ask.frame("core", flash=flash if not errors else ""), blocks, procedures, errors or {})


def _core_edit(ask: Ask, edit: Callable[[CoreMemory, str, Provenance], object]) -> str | Response:
    """One edit of a block from the page, through ``CoreMemory`` (the tools' rules), logged as the viewer's."""
    core = core_memory(ask.source.store, ask.ctx)
    label = ask.params.get("label", "")
    if label not in {b.label for b in core.blocks()}:
        raise NotFound(f"user {ask.scope.user_id!r} has no core block {label[:40]!r}")
    provenance = Provenance(source="user", message_id=f"{pages.INSPECTOR_EDIT}{ask.viewer.who}")
    try:
        edit(core, label, provenance)
    except (CoreMemoryError, ValueError) as e:
        return HTMLResponse(_core(ask, {label: str(e)}), status_code=422)
    return RedirectResponse(user_path(ask.scope, "core", saved=label) + f"#block-{label}", status_code=303)


def _core_set(ask: Ask) -> str | Response:
    if "value" not in ask.params:
        raise BadRequest("value is required (the block's whole text)")
    value = ask.params["value"].replace("\r\n", "\n")  # a textarea sends CRLF line ends
    return _core_edit(ask, lambda core, label, prov: core.set_block(label, value, provenance=prov))


def _core_append(ask: Ask) -> str | Response:
    text = ask.params.get("text", "")
    return _core_edit(ask, lambda core, label, prov: core.append(label, text, provenance=prov))


def _filters(params: Mapping[str, str]) -> archival_view.ArchivalFilters:
    trust = params.get("trust") or "any"
    if trust not in archival_view.TRUST_CHOICES:
        raise BadRequest(f"trust must be one of {', '.join(archival_view.TRUST_CHOICES)}, got {trust[:40]!r}")
    try:
        tags = check_tags([t.strip() for t in _text(params, "tag").split(",") if t.strip()])
        start = parse_time(params.get("from") or None, "from")
        end = parse_time(params.get("to") or None, "to")
    except (ValueError, ToolError) as e:
        raise BadRequest(str(e)) from None
    if end is not None and len(params.get("to", "")) == 10:  # a bare date: the whole day
        end += 86_399
    if start is not None and end is not None and start > end:
        raise BadRequest("from is after to")
    return archival_view.ArchivalFilters(_text(params, "q"), tags, trust, start, end,
                                         params.get("superseded", "").lower() in _TRUE)


def _archival(ask: Ask) -> str:
    f = _filters(ask.params)
    page_no = _number(ask.params, "page", 1, minimum=1)
    archival = ask.services.archival
    deleted = ask.params.get("deleted", "")
    flash = (f"Deleted {deleted[:40]} from every index: the vectors, the BM25 index and its postings in memory."
             if deleted and archival.get(ask.scope, deleted) is None else "")
    try:
        listing = (archival_view.search if f.query else archival_view.browse)(archival, ask.scope, f, page_no)
    except archival_view.PageOutOfRange as e:
        raise NotFound(str(e)) from None
    except ValueError as e:  # what the search itself refuses (a query it cannot take)
        raise BadRequest(str(e)) from None
    return pages.archival_page(ask.frame("archival", flash=flash), f, listing, archival.count(ask.scope))


def _record_of(ask: Ask) -> archival_view.RecordDetail:
    rid = ask.params.get("record", "")
    detail = archival_view.record_detail(ask.services.archival, ask.scope, rid)
    if detail is None:
        raise NotFound(f"user {ask.scope.user_id!r} has no archival record {rid[:60]!r}")
    return detail


def _record(ask: Ask) -> str:
    return pages.record_page(ask.frame("archival"), _record_of(ask))


def _delete_confirm(ask: Ask) -> str:
    return pages.delete_page(ask.frame("archival"), _record_of(ask).row.record)


def _delete(ask: Ask) -> Response:
    rid = _record_of(ask).row.record.id
    archival_view.delete_record(ask.services.archival, ask.scope, rid)
    return RedirectResponse(user_path(ask.scope, "archival", deleted=rid), status_code=303)


def _recall(ask: Ask) -> str:
    query = _text(ask.params, "q")
    thread = ask.thread() if ask.params.get("thread") else None
    rows = []
    if query:
        try:
            rows = recall_search(ask.services.recall, ask.scope, query, ask.threads(),
                                 thread.thread_id if thread else None)
        except ValueError as e:
            raise BadRequest(str(e)) from None
    return pages.recall_page(ask.frame("recall"), ask.threads(), query, thread.thread_id if thread else None, rows)


def _compactions(ask: Ask) -> str:
    thread = ask.thread()
    records = compactions(ask.source.graph, thread.thread_id) if thread else []
    return pages.compactions_page(ask.frame("compactions"), ask.threads(), thread, records)


def _replay(ask: Ask) -> str:
    thread = ask.thread(required=True)
    assert thread is not None
    turn = _number(ask.params, "turn", None)
    step = _number(ask.params, "step", 0)
    try:
        call = replay(ask.source.graph, thread.thread_id, turn, step)
    except ReplayError as e:
        raise NotFound(str(e)) from None
    calls = model_calls(ask.source.graph, thread.thread_id)
    call = next(c for c in calls if c.checkpoint_id == call.checkpoint_id)
    window = int(call.tokens.get("window") or ask.ctx.context_window)
    return pages.replay_page(ask.frame("context"), call, calls, window, int(ask.ctx.warning_fraction * window),
                             int(ask.ctx.compaction_trigger * window))


def inspector_app(open_source: Callable[[], Awaitable[MemorySource]], auth: AuthConfig | None = None, *,
                  root_redirect: bool = False) -> Starlette:
    """The inspector as a Starlette app: ``open_source`` opens the memory it shows (on the first
    request), ``auth`` says how requests are authenticated (default: ``PAGEFAULT_AUTH`` and the keys, as
    the API reads them); ``root_redirect`` also answers ``/`` (its own server, not a LangGraph server's)."""
    inspector = Inspector(open_source, auth or AuthConfig.from_env())

    app = Starlette(routes=inspector.routes(root_redirect=root_redirect), middleware=[Middleware(KeepEncodedSlashes)])
    app.state.inspector = inspector
    return app


def source_opener(source: MemorySource) -> Callable[[], Awaitable[MemorySource]]:
    """An ``open_source`` for a source already open."""

    async def opened() -> MemorySource:
        return source

    return opened
