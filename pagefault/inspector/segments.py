"""A ``/`` inside one segment of an inspector URL: a user id may hold one (a token's ``sub`` such as
``team/ana``), and ``layout.user_path`` sends it encoded (``/inspector/team%2Fana/context``).

The server decodes a request's path before routing, so the encoded ``/`` would split the segment and
the page would be a 404. ``KeepEncodedSlashes`` routes on the path as the client sent it instead:
each segment of the raw path is decoded, then its ``%`` and ``/`` are escaped again, so every segment
stays one; ``path_params`` undoes that escape for the route's parameters.
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from pagefault.inspector.layout import ROOT


def _escaped(segment: str) -> str:
    return segment.replace("%", "%25").replace("/", "%2F")


def routed_path(raw_path: bytes | None, path: str) -> str:
    """The path to route on: each segment of ``raw_path`` (the request's path as sent, without its
    query) decoded with its ``%`` and ``/`` escaped again; ``path`` (already decoded) escaped the same
    way when there is no raw path, or it does not decode to ``path``."""
    if raw_path:
        raw = raw_path.split(b"?", 1)[0].decode("latin-1")
        if unquote(raw) == path:
            return "/".join(_escaped(unquote(segment)) for segment in raw.split("/"))
    return "/".join(_escaped(segment) for segment in path.split("/"))


class KeepEncodedSlashes:
    """ASGI middleware: route HTTP requests for the inspector's pages (under ``ROOT``) on
    ``routed_path``, so ``%2F`` stays inside its segment. A LangGraph server runs the inspector app's
    middleware before its own routes too: every other path is left as it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope["path"]).startswith(ROOT + "/"):
            scope = {**scope, "path": routed_path(scope.get("raw_path"), scope["path"])}
        await self.app(scope, receive, send)


def path_params(request: Request) -> dict[str, str]:
    """The route's parameters of a request routed through ``KeepEncodedSlashes``, as the client meant them."""
    return {name: unquote(str(value)) for name, value in request.path_params.items()}
