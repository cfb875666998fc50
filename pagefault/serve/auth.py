"""LangGraph custom auth for a served pagefault: ``"auth": {"path": "pagefault.serve.auth:auth"}``.

The deployer chooses one of two modes with ``PAGEFAULT_AUTH``, read when the server starts:

- ``jwt``: every request carries ``Authorization: Bearer <token>``, a JWT that PyJWT verifies
  against ``PAGEFAULT_JWT_SECRET`` (HMAC, HS256 by default) or ``PAGEFAULT_JWT_PUBLIC_KEY`` (a PEM
  public key, RS256 by default); ``PAGEFAULT_JWT_ALGORITHMS``, ``PAGEFAULT_JWT_AUDIENCE`` and
  ``PAGEFAULT_JWT_ISSUER`` narrow it further. The token's ``sub`` is the user: memory is scoped to
  it, and every thread, run, cron, assistant and store item is tagged with it on create and
  filtered by it on every read, search, update and delete.
- ``none``: no authentication, for a private network only. Each run names its ``user_id``.

Unset, the mode is ``jwt`` when a key is configured and ``none`` otherwise (the server logs a
warning). In both modes a run's settings are checked before the run is created, so a client that
names a server-owned field (``base_url``, ``context_window``...) or an unknown key gets a 422 with
a one-line message, and nothing runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx
import jwt
from langgraph_sdk import Auth, get_client

from pagefault.engines.langgraph_private import CONTEXT_PROVIDED
from pagefault.graph.context import Context
from pagefault.serve.settings import (
    AUTHENTICATED,
    Identity,
    SettingsError,
    check_client_settings,
    served_settings,
)
from pagefault.stores.core import malformed_block, malformed_label
from pagefault.stores.procedures import malformed_procedure
from pagefault.stores.scope import Scope

log = logging.getLogger("pagefault.auth")

#: The metadata key that records who owns a thread, run, cron or assistant (jwt mode).
OWNER = "owner"
#: The metadata key that records the user and agent of a thread's first run (both modes).
THREAD_OWNER = "pagefault_owner"
#: LangGraph's ``configurable`` keys that its cron scheduler adds to a scheduled run's settings (which
#: cron, and as whom it runs); the server overwrites the ``langgraph_auth_*`` ones of any run it creates.
SCHEDULER_KEYS = frozenset({"cron_id", "langgraph_auth_user", "langgraph_auth_user_id", "langgraph_auth_permissions"})
#: The metadata key LangGraph sets on the assistant it makes for each graph when the server starts
#: (``"system"``): such an assistant is shared with every user, and LangGraph skips its own
#: ownership check when a run uses one. Only the server writes it.
CREATED_BY = "created_by"



def signing_algorithms(*, hmac: bool) -> tuple[str, ...]:
    """The JWT algorithms PyJWT can verify here with a secret (``hmac``: HS*) or with a public key (the
    others), never ``none``."""
    every = sorted(a for a in jwt.algorithms.get_default_algorithms() if a != "none")
    return tuple(a for a in every if a.startswith("HS") == hmac)


@dataclass(frozen=True)
class AuthConfig:
    """How requests are authenticated, read from the environment when the server starts."""

    mode: Literal["jwt", "none"]
    key: str = ""
    algorithms: tuple[str, ...] = ()
    audience: str | None = None
    issuer: str | None = None

    @classmethod
    def from_env(cls) -> "AuthConfig":
        secret = os.environ.get("PAGEFAULT_JWT_SECRET", "")
        public = os.environ.get("PAGEFAULT_JWT_PUBLIC_KEY", "")
        mode = os.environ.get("PAGEFAULT_AUTH", "").strip().lower() or ("jwt" if secret or public else "none")
        if mode not in ("jwt", "none"):
            raise ValueError(f"PAGEFAULT_AUTH={mode!r}: use jwt (bearer tokens) or none (a private network only)")
        if mode == "none":
            return cls("none")
        if bool(secret) == bool(public):
            raise ValueError("PAGEFAULT_AUTH=jwt needs exactly one of PAGEFAULT_JWT_SECRET (HMAC) or "
                             "PAGEFAULT_JWT_PUBLIC_KEY (a PEM public key)")
        default_alg = "HS256" if secret else "RS256"
        listed = os.environ.get("PAGEFAULT_JWT_ALGORITHMS", default_alg)
        algorithms = tuple(a.strip() for a in listed.split(",") if a.strip())
        known = signing_algorithms(hmac=bool(secret))
        unknown = [a for a in algorithms if a not in signing_algorithms(hmac=True) + signing_algorithms(hmac=False)]
        if not algorithms or unknown:
            problem = f"names {', '.join(unknown)}, not a signing algorithm" if unknown else "is empty"
            raise ValueError(f"PAGEFAULT_JWT_ALGORITHMS {problem}: with "
                             f"{'PAGEFAULT_JWT_SECRET' if secret else 'PAGEFAULT_JWT_PUBLIC_KEY'} use one or more of "
                             f"{', '.join(known)} (comma-separated)")
        if secret and any(not a.startswith("HS") for a in algorithms) or public and any(
                a.startswith("HS") for a in algorithms):
            raise ValueError(f"PAGEFAULT_JWT_ALGORITHMS={','.join(algorithms)} does not fit the key given "
                             "(HS* with a secret, RS*/ES*/PS*/EdDSA with a public key)")
        return cls("jwt", secret or public.replace("\\n", "\n"), algorithms,
                   os.environ.get("PAGEFAULT_JWT_AUDIENCE") or None, os.environ.get("PAGEFAULT_JWT_ISSUER") or None)

    def verify(self, token: str) -> str:
        """The token's user (its ``sub``); ``jwt.PyJWTError`` when the token does not verify."""
        claims = jwt.decode(token, self.key, algorithms=list(self.algorithms), audience=self.audience,
                            issuer=self.issuer, options={"require": ["exp", "sub"]})
        return str(claims["sub"])


CONFIG = AuthConfig.from_env()
if CONFIG.mode == "none":
    log.warning("pagefault: PAGEFAULT_AUTH=none, this server does not authenticate its clients: whoever can reach "
                "it can name any user_id and read and write every thread, run and store item. Serve it on a private "
                "network only, or set PAGEFAULT_JWT_SECRET.")

auth = Auth()


def _unauthorized(detail: str) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


class TokenRejected(ValueError):
    """A request without a bearer token, or whose token does not verify; the message says which, in one line."""


def verified_user(authorization: str | None, config: AuthConfig | None = None) -> str:
    """The user of an ``authorization`` header (``Bearer <JWT>``): the verified token's ``sub``, checked
    as any user id is (non-empty, no control characters, at most 256 chars). ``TokenRejected`` when
    there is no bearer token or it does not verify. ``config``: how tokens are verified (default: the
    server's ``CONFIG``). The API's authenticate handler and the web inspector both call this."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenRejected("a bearer token is required (Authorization: Bearer <JWT>)")
    try:
        user = (config or CONFIG).verify(token.strip())
        Scope(user)
    except (jwt.PyJWTError, ValueError) as e:
        raise TokenRejected(f"invalid token: {e}") from None
    return user


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The request's user: the verified token's ``sub`` (jwt mode), or an anonymous user (none)."""
    if CONFIG.mode == "none":
        return {"identity": "anonymous", "is_authenticated": False, "permissions": []}
    try:
        user = verified_user(authorization)
    except TokenRejected as e:
        raise _unauthorized(str(e)) from None
    return {"identity": user, "is_authenticated": True, "permissions": [AUTHENTICATED]}


def _user(ctx: Auth.types.AuthContext) -> str | None:
    """The owner to tag and filter by: the token's user in jwt mode, nobody in none mode."""
    if CONFIG.mode == "none":
        return None
    if AUTHENTICATED not in (ctx.permissions or ()):
        # Under `langgraph dev`, LangGraph lets Studio in unauthenticated (a request that says it is
        # Studio's); with tokens on, only a verified user gets through.
        raise Auth.exceptions.HTTPException(status_code=403, detail="this server takes bearer tokens only")
    return ctx.user.identity


def _unprocessable(e: SettingsError) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=422, detail=str(e))


def _check_settings(user: str | None, context: object, config: object, *, where: str) -> Context | None:
    """A client's run settings (a context, or the ``configurable`` of a config), refused with a 422;
    a run's resolved settings."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    try:
        client = check_client_settings(context, where=f"{where} context")
        client.update(check_client_settings(configurable, where=f"{where} config.configurable", configurable=True))
        if client or where == "run":  # an assistant's or cron's settings are completed by the run's
            return served_settings().for_run(client, Identity(user), partial=where != "run")
    except SettingsError as e:
        raise _unprocessable(e) from None
    return None


#: Set while pagefault itself records a thread's owner through the server (an in-process call that
#: runs these handlers again, as the same request's user).
_recording_owner: ContextVar[bool] = ContextVar("pagefault_recording_owner", default=False)


def _refuse_server_keys(metadata: object, user: str | None) -> None:
    if not isinstance(metadata, Mapping) or _recording_owner.get():
        return
    if metadata.get(OWNER, user) != user or THREAD_OWNER in metadata or CREATED_BY in metadata:
        raise Auth.exceptions.HTTPException(status_code=403, detail=f"metadata {OWNER!r}, {THREAD_OWNER!r} and "
                                                                    f"{CREATED_BY!r} are set by the server")


async def _claim_thread(thread_id: object, ctx: Context) -> None:
    """Record the user and agent of a thread's first run in its metadata, and refuse anyone else's run
    before it is created (in the graph, input is checkpointed before any node could refuse it)."""
    if thread_id is None:
        return
    client = get_client()  # the server itself, in process
    try:
        thread = await client.threads.get(str(thread_id))
    except httpx.HTTPStatusError as e:
        if e.response.status_code == 404:  # a run that creates its thread (if_not_exists="create")
            return
        raise
    owner = {"user_id": ctx.user_id, "agent_id": ctx.agent_id}
    recorded = (thread.get("metadata") or {}).get(THREAD_OWNER)
    if recorded is None:
        token = _recording_owner.set(True)
        try:
            await client.threads.update(str(thread_id), metadata={THREAD_OWNER: owner})
        finally:
            _recording_owner.reset(token)
    elif recorded != owner:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"thread {thread_id} belongs to another user or agent; start a new thread")


_Created = Auth.types.ThreadsCreate | Auth.types.RunsCreate | Auth.types.AssistantsCreate | Auth.types.CronsCreate


def _tag(created: _Created, user: str | None) -> Auth.types.FilterType | None:
    """Tag a new resource with its owner and return the filter that keeps it theirs."""
    # Every payload is a plain dict at runtime, and each one (a cron's too, which the SDK's type leaves
    # out) may carry metadata.
    value = cast(dict[str, Any], created)
    metadata = value.setdefault("metadata", {}) if isinstance(value.get("metadata"), dict) or \
        value.get("metadata") is None else None
    if metadata is None:
        raise Auth.exceptions.HTTPException(status_code=422, detail="metadata must be an object")
    _refuse_server_keys(metadata, user)
    if user is None:
        return None
    metadata[OWNER] = user
    return {OWNER: user}


def _mine(user: str | None) -> Auth.types.FilterType | None:
    return None if user is None else {OWNER: user}


# -- threads and their runs -------------------------------------------------------------------------


@auth.on.threads.create
async def on_thread_create(ctx: Auth.types.AuthContext, value: Auth.types.ThreadsCreate):
    return _tag(value, _user(ctx))


@auth.on.threads.update
async def on_thread_update(ctx: Auth.types.AuthContext, value: Auth.types.ThreadsUpdate):
    user = _user(ctx)
    _refuse_server_keys(value.get("metadata"), user)
    return _mine(user)


@auth.on.threads.create_run
async def on_run_create(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate):
    user = _user(ctx)
    kwargs = value.get("kwargs") or {}
    config = kwargs.get("config") or {}
    context_given = bool((config.get("configurable") or {}).get(CONTEXT_PROVIDED))
    # The server copies a run's context into its configurable (and its configurable into the context when
    # no context was given): check what the client sent, once.
    if context_given:
        settings = _check_settings(user, kwargs.get("context"), None, where="run")
    else:  # (a cron's scheduled run also carries the scheduler's keys, which are LangGraph's, not a client's)
        configurable = {k: v for k, v in (kwargs.get("context") or {}).items() if k not in SCHEDULER_KEYS}
        settings = _check_settings(user, None, {"configurable": configurable}, where="run")
    _tag(value, user)
    if settings is not None:
        await _claim_thread(value.get("thread_id"), settings)
    return _mine(user)


@auth.on.threads
async def on_threads(ctx: Auth.types.AuthContext, value: Any):
    """Read, search and delete of threads (and their runs, state and history): the owner's only."""
    return _mine(_user(ctx))


# -- assistants and crons -----------------------------------------------------------------------------


@auth.on.assistants.create
async def on_assistant_create(ctx: Auth.types.AuthContext, value: Auth.types.AssistantsCreate):
    user = _user(ctx)
    _check_settings(user, value.get("context"), value.get("config"), where="assistant")
    return _tag(value, user)


@auth.on.assistants.update
async def on_assistant_update(ctx: Auth.types.AuthContext, value: Auth.types.AssistantsUpdate):
    user = _user(ctx)
    _check_settings(user, value.get("context"), value.get("config"), where="assistant")
    _refuse_server_keys(value.get("metadata"), user)
    return _mine(user)


@auth.on.assistants
async def on_assistants(ctx: Auth.types.AuthContext, value: Any):
    """Read and search see the user's own assistants and the graph's own (the one LangGraph made when the
    server started: no client can write ``created_by``); delete only the user's own."""
    user = _user(ctx)
    if user is None:
        return None
    if ctx.action in ("read", "search"):
        return {"$or": [{OWNER: user}, {CREATED_BY: "system"}]}
    return {OWNER: user}


def _run_as_creator(payload: dict[str, Any]) -> None:
    """Make a cron's runs run as the user who made it, whose token was checked when it was made (jwt
    mode). LangGraph's scheduler runs a cron as the user that made it (``user_id``), with the
    permissions it finds in the cron's ``configurable`` and nowhere else, and refuses a scheduled run
    whose payload has a ``context`` beside a ``configurable``. So the cron's context (already checked)
    moves into its ``configurable``, beside the permission a verified token gets (``AUTHENTICATED``)."""
    if "context" not in payload and "config" not in payload:
        return  # an update that leaves the cron's settings alone
    given = payload.get("config")
    config: dict[str, Any] = given if isinstance(given, dict) else {}
    given = config.get("configurable")
    configurable: dict[str, Any] = given if isinstance(given, dict) else {}
    context = payload.pop("context", None) or {}
    payload["config"] = {**config, "configurable": {**configurable, **context,
                                                    "langgraph_auth_permissions": [AUTHENTICATED]}}


@auth.on.crons.create
async def on_cron_create(ctx: Auth.types.AuthContext, value: Auth.types.CronsCreate):
    user = _user(ctx)
    payload = value.get("payload") or {}
    _check_settings(user, payload.get("context"), {"configurable": {
        k: v for k, v in ((payload.get("config") or {}).get("configurable") or {}).items() if k != "cron_id"}},
        where="cron")
    if user is not None:
        _run_as_creator(payload)
    return _tag(value, user)


@auth.on.crons
async def on_crons(ctx: Auth.types.AuthContext, value: Any):
    user = _user(ctx)
    if ctx.action == "update":
        payload = value.get("payload") or {}
        _check_settings(user, payload.get("context"), payload.get("config"), where="cron")
        if user is not None and isinstance(value.get("payload"), dict):
            _run_as_creator(payload)
    return _mine(user)


# -- the store ------------------------------------------------------------------------------------------


@auth.on.store
async def on_store(ctx: Auth.types.AuthContext, value: Any):
    """Store items: with tokens, only under the user's own ``("pagefault", <user>, ...)`` namespaces (an
    empty or bare ``("pagefault",)`` prefix of a search or listing is narrowed to them). A core block
    written through the API must have the shape pagefault reads, a valid JSON schema if it has one, and a
    label the prompt can show as a tag (``stores.core.malformed_label``), and a procedure an id and a
    text (``stores.procedures.malformed_procedure``), in every mode."""
    user = _user(ctx)
    namespace = tuple(value.get("namespace") or ())
    if user is not None:
        own = Scope(user).namespace()[:2]
        if ctx.action in ("search", "list_namespaces") and namespace in ((), own[:1]):
            value["namespace"] = own
        elif namespace[:2] != own:
            raise Auth.exceptions.HTTPException(
                status_code=403, detail=f"store items are reachable under {list(own)} only")
    if ctx.action == "put" and namespace[:1] == ("pagefault",) and namespace[-1:] == ("core",) \
            and value.get("value") is not None:
        problem = malformed_label(value.get("key")) or malformed_block(value["value"])
        if problem:
            raise Auth.exceptions.HTTPException(status_code=422, detail=f"core block {value.get('key')!r}: {problem}")
    if ctx.action == "put" and namespace[:1] == ("pagefault",) and namespace[-1:] == ("procedures",) \
            and value.get("value") is not None:
        problem = malformed_procedure(value.get("key"), value["value"])
        if problem:
            raise Auth.exceptions.HTTPException(status_code=422, detail=f"procedure {value.get('key')!r}: {problem}")
    return None
