"""Who may look: the inspector's access rules, the same tokens as the served API.

- **Tokens** (``PAGEFAULT_AUTH=jwt``): a request carries ``Authorization: Bearer <JWT>``, or the token
  a person pasted into the sign-in form, kept in an HttpOnly, SameSite=Strict cookie. Either is
  verified by ``pagefault.serve.auth.verified_user``, the function the API's authenticate handler
  calls, and the caller sees only their own memory: any other user's pages are refused (403)
  before anything is read.
- **No authentication** (``none``): the inspector answers only requests from this machine (a
  loopback client, and a loopback ``Host``, so a web page cannot reach it through a DNS name that
  points here), and every page says so.

A form (an edit, a delete) whose credentials ride along by themselves (the cookie, or no auth at
all) must carry the page's CSRF token, which a double-submit cookie holds, and must come from this
origin: another site cannot make a browser change memory here.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from typing import Mapping

from starlette.requests import Request

from pagefault.serve.auth import AuthConfig, TokenRejected, verified_user

TOKEN_COOKIE = "pagefault_token"
CSRF_COOKIE = "pagefault_csrf"
#: Where the inspector's cookies are sent: its own pages only.
COOKIE_PATH = "/inspector"
LOCAL_NAMES = frozenset({"localhost", "localhost."})


class Refused(Exception):
    """A request the inspector will not answer: ``status`` (401, 403) and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() in LOCAL_NAMES


def _host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:2024`` -> ``::1``)."""
    if host_header.startswith("["):
        return host_header[1:host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


@dataclass(frozen=True)
class Viewer:
    """Who is asking, and how: the server's auth ``mode``; ``identity``, the verified token's user
    (None without auth); ``ambient``, whether the credentials ride along by themselves (a cookie, or
    no auth at all), so forms must carry ``csrf``, the page's CSRF token (``new_csrf``: it must be set
    as a cookie with the response)."""

    mode: str
    identity: str | None
    ambient: bool
    csrf: str
    new_csrf: bool = False

    @property
    def who(self) -> str:
        """Who an edit is logged as: the token's user, or ``local`` (a person on this machine, no auth)."""
        return self.identity or "local"

    def check_user(self, user: str) -> None:
        """Refuse (403) the pages of ``user`` to anyone signed in as someone else."""
        if self.identity is not None and self.identity != user:
            raise Refused(403, "you can see only your own memory (the token's user)")


def viewer_of(request: Request, auth: AuthConfig, *, required: bool = True) -> Viewer:
    """The request's ``Viewer`` under ``auth``; ``Refused`` when it may not look at all. ``required``:
    with tokens on, a request without one is refused (False: the sign-in page, which has none yet)."""
    csrf = request.cookies.get(CSRF_COOKIE, "")
    new = not csrf
    csrf = csrf or secrets.token_urlsafe(24)
    if auth.mode == "none":
        client = request.client.host if request.client else ""
        if not _loopback(client) or not _loopback(_host_name(request.headers.get("host", ""))):
            raise Refused(403, "this inspector runs without authentication, so it answers only on this machine "
                               "(loopback); set PAGEFAULT_JWT_SECRET to serve it to others")
        return Viewer("none", None, True, csrf, new)
    header = request.headers.get("authorization")
    cookie = request.cookies.get(TOKEN_COOKIE, "")
    if not header and not cookie:
        if not required:
            return Viewer("jwt", None, True, csrf, new)
        raise Refused(401, "sign in with your token (the same bearer JWT the API takes)")
    try:
        user = verified_user(header or f"Bearer {cookie}", auth)
    except TokenRejected as e:
        raise Refused(401, str(e)) from None
    return Viewer("jwt", user, not header, csrf, new)


def check_form(request: Request, viewer: Viewer, form: Mapping[str, object]) -> None:
    """Refuse (403) a form sent from another origin, or one whose ambient credentials came without
    the page's CSRF token (``form``: the request's fields)."""
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin != own:
        raise Refused(403, f"a form from {origin} cannot change memory here")
    if viewer.ambient:
        sent = form.get("csrf")
        if viewer.new_csrf or not isinstance(sent, str) or not hmac.compare_digest(sent, viewer.csrf):
            raise Refused(403, "the form's CSRF token is missing or stale; reload the page and try again")
