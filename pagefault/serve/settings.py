"""What a client may set on a served graph, and what only the server decides.

A served graph (``langgraph dev``, a LangGraph server, a served ``create_agent`` app) is an
internet-facing server: every field of a run's ``context`` or ``configurable`` comes from a client.
So the settings are split in two:

- ``CLIENT_FIELDS``: who the run is for and a few per-run preferences (the agent, a model from the
  list the server allows, the persona, search size, the guard's strictness for the user's own memory);
- ``SERVER_FIELDS``: keys, URLs, engines, models' endpoints and every budget setting. They come
  from the server's environment (``PAGEFAULT_<FIELD>``) or the code that built the graph, never
  from a client.

A client's settings that name a server-owned field, or a key pagefault does not know, are refused
with a message that names the field and lists the accepted ones (``SettingsError``): nothing is
dropped silently. The user comes from LangGraph auth when the server has it (``identity_of``);
without auth a served run must name its ``user_id``.

One function, ``ServerSettings.for_run``, turns a client's settings and the identity into the run's
``Context``; the served graph, the auth handlers, the middleware and the memory tools all call it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from pydantic import BaseModel

from pagefault.graph.context import Context, builtin_context
from pagefault.safety.policy import CORE_EDIT_POLICIES, GUARD_MODES

CLIENT_FIELDS: tuple[str, ...] = ("user_id", "agent_id", "model", "persona", "top_k", "guard",
                                  "untrusted_core_edits")
"""What a client may set per run on a served graph (the ``Context`` fields of that name)."""
#: In-process switches no client sees (``respond=False`` records history without answering).
INTERNAL_FIELDS: tuple[str, ...] = ("respond",)
SERVER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Context)
                                       if f.name not in CLIENT_FIELDS and f.name not in INTERNAL_FIELDS)
"""The other ``Context`` fields (but the ``INTERNAL_FIELDS``): the server's (keys and URLs, engines,
the token budget, redaction, background work), read from its environment; a client that sets one
is refused."""
#: LangGraph's own ``configurable`` keys, which a client may send beside pagefault's.
LANGGRAPH_KEYS: frozenset[str] = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"})
#: The permission pagefault's authenticate handler gives a verified token (``pagefault.serve.auth``).
AUTHENTICATED = "pagefault:authenticated"
#: The environment variable listing the models a client may choose (comma-separated ids).
ALLOWED_MODELS_ENV = "PAGEFAULT_ALLOWED_MODELS"


class SettingsError(ValueError):
    """A client's settings that the server refuses; the message is one line a client can act on."""


@dataclass(frozen=True)
class Identity:
    """Who a run is for, as LangGraph auth established it: ``user_id`` is None when nobody was
    authenticated (no auth on the server, or a request it let through unauthenticated)."""

    user_id: str | None = None


def identity_of(config: Mapping[str, Any] | None) -> Identity:
    """The authenticated user of a run, from what the LangGraph server put in the ``configurable`` of
    its ``config`` (a RunnableConfig, or None outside a run).

    Only a user that pagefault's authenticate handler verified counts (it carries the
    ``AUTHENTICATED`` permission); a Studio or anonymous user does not.
    """
    conf = (config or {}).get("configurable") or {}
    permissions = conf.get("langgraph_auth_permissions") or ()
    user = conf.get("langgraph_auth_user_id")
    if AUTHENTICATED in permissions and isinstance(user, str) and user:
        return Identity(user)
    return Identity(None)


def _accepted() -> str:
    return ", ".join(CLIENT_FIELDS)


def check_client_settings(values: object, *, where: str = "context", configurable: bool = False) -> dict[str, Any]:
    """The pagefault settings in a client's ``context`` (or ``configurable``), refused whole if
    any key is server-owned or unknown. ``values``: what the client sent (None for nothing);
    ``where`` names it in the ``SettingsError`` message; ``configurable`` also lets LangGraph's own
    keys through."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise SettingsError(f"{where} must be an object of settings, got {type(values).__name__}")
    server = [k for k in values if k in SERVER_FIELDS or k in INTERNAL_FIELDS]
    if server:
        raise SettingsError(
            f"{where} names {', '.join(map(str, server))}, which only the server sets (its environment, "
            f"PAGEFAULT_<FIELD>); a client may set: {_accepted()}")
    passing = LANGGRAPH_KEYS if configurable else frozenset()
    unknown = [k for k in values if k not in CLIENT_FIELDS and k not in passing]
    if unknown:
        raise SettingsError(f"{where} has unknown key(s) {', '.join(map(repr, unknown))}; accepted: {_accepted()}")
    return {k: values[k] for k in CLIENT_FIELDS if k in values}


def client_values(run_context: object, base: Context, defaults: Context | None = None) -> dict[str, Any]:
    """The pagefault settings an app's run context carries (a ``Context``, a mapping, a dataclass or a
    pydantic model of the app's own), for the middleware and the memory tools.

    Keys that are not pagefault's belong to the app and are left to it. A server-owned field whose
    value differs from the app's own setting (and, for a whole ``Context``, from its default) is
    refused: the run cannot change it, and ignoring it would drop it silently. ``defaults``: a
    ``Context()`` the caller made once (else one is made here).
    """
    if run_context is None:
        return {}
    if isinstance(run_context, Mapping):
        values, explicit = dict(run_context), True
    elif dataclasses.is_dataclass(run_context) and not isinstance(run_context, type):
        values, explicit = {f.name: getattr(run_context, f.name) for f in fields(run_context)}, False
    elif isinstance(run_context, BaseModel):
        values, explicit = run_context.model_dump(), False
    else:
        return {}
    defaults = None if explicit else (defaults or Context())
    changed = [k for k in (*SERVER_FIELDS, *INTERNAL_FIELDS) if k in values and values[k] != getattr(base, k)
               and (defaults is None or values[k] != getattr(defaults, k))]
    if changed:
        raise SettingsError(
            f"the run's context sets {', '.join(changed)}, which the app owns (PagefaultMiddleware(...) or "
            f"memory_tools(...) settings); a run may set: {_accepted()}")
    return {k: values[k] for k in CLIENT_FIELDS if k in values and (explicit or values[k] != getattr(defaults, k))}


def allowed_models(base: Context) -> tuple[str, ...]:
    """The models a client may choose: the server's own, then ``PAGEFAULT_ALLOWED_MODELS``."""
    listed = [m.strip() for m in os.environ.get(ALLOWED_MODELS_ENV, "").split(",") if m.strip()]
    return tuple(dict.fromkeys([base.model, *listed]))


@functools.cache
def served_settings() -> "ServerSettings":
    """The settings of the graph this process serves, read from its environment once, when the server
    first imports the graph (or its auth module): what Studio's form shows is what runs use.

    An environment whose settings ``Context`` refuses (``PAGEFAULT_CONTEXT_WINDOW=0``) does not stop
    the import, which every ``import pagefault`` does (the CLI, a library that never serves): the
    served graph refuses each run with that one-line message instead (``ServerSettings.problem``),
    before anything of the run is written, and ``pagefault doctor`` reports it."""
    try:
        return ServerSettings.from_env()
    except ValueError as e:
        return ServerSettings.refusing(str(e).splitlines()[0])


@dataclass(frozen=True)
class ServerSettings:
    """The server's side of a served run: its own settings and the models a client may pick.

    ``base`` is read once, when the server starts (``from_env``), so a changed environment needs a
    restart and Studio's form shows the values the server really uses. ``allowed_models``: the
    models a client may pick (``base.model`` first). ``require_user``: a run with no authenticated
    user must name its ``user_id`` (the served graph); the middleware falls back to the app's own
    ``user_id`` instead. ``defaults``: ``Context()`` as the environment gives it, made once, to tell
    the fields a run's whole ``Context`` set from the ones it left at their defaults. ``problem``:
    why the environment's settings were refused, when they were (``served_settings``); '' when they
    were not. Settings with a problem refuse every run with it (``for_run``).
    """

    base: Context
    allowed_models: tuple[str, ...]
    require_user: bool = True
    defaults: Context = field(default_factory=Context)
    problem: str = ""

    @classmethod
    def from_env(cls) -> "ServerSettings":
        """The settings of a server from its environment: ``Context()`` (``PAGEFAULT_<FIELD>``) and the
        models its clients may pick (its own, then ``PAGEFAULT_ALLOWED_MODELS``)."""
        base = Context()
        return cls(base, allowed_models(base), defaults=base)

    @classmethod
    def refusing(cls, problem: str) -> "ServerSettings":
        """Settings that refuse every run with ``problem`` (the environment's settings that ``Context``
        refused); the built-in defaults stand in for them in what the graph shows (Studio's form)."""
        base = builtin_context()
        return cls(base, (base.model,), defaults=base, problem=problem)

    @classmethod
    def of_app(cls, base: Context) -> "ServerSettings":
        """An app's settings (the middleware's, the memory tools'), from its ``base`` ``Context``: the
        app's own user is the fallback."""
        return cls(base, allowed_models(base), require_user=False)

    def for_run(self, client: Mapping[str, Any], identity: Identity, *, partial: bool = False) -> Context:
        """The run's ``Context``: the server's settings with the ``client``'s (already checked) fields,
        scoped to the authenticated user where there is one (``identity``). ``partial``: settings that a run will
        complete (an assistant's), so a missing ``user_id`` is not refused yet."""
        if self.problem:
            raise SettingsError(f"this server's settings are invalid, so it runs nothing: {self.problem}")
        model = client.get("model", self.base.model)
        if model not in self.allowed_models:
            raise SettingsError(f"model {model!r} is not allowed on this server; choose one of: "
                                f"{', '.join(self.allowed_models)} (the server's {ALLOWED_MODELS_ENV})")
        user = client.get("user_id") or ""
        if identity.user_id is not None:
            if user and user != identity.user_id:
                raise SettingsError(f"user_id {user!r} is not the authenticated user; leave user_id out, "
                                    "memory is scoped to the token's user")
            user = identity.user_id
        elif not user:
            if self.require_user and not partial:
                raise SettingsError("user_id is required: this server has no authentication, so each run names the "
                                    "user whose memory it uses (context={\"user_id\": ...})")
            user = self.base.user_id
        try:
            return replace(self.base, **{**client, "user_id": user})
        except (TypeError, ValueError) as e:
            raise SettingsError(str(e).splitlines()[0]) from e

    def for_app_run(self, run_context: object, config: Mapping[str, Any] | None) -> Context:
        """The settings of one run of an app's middleware or memory tools: the app's own, with the
        pagefault fields the run's context (``run_context``) carries (``client_values``), else the
        ``user_id`` / ``agent_id`` of its ``configurable`` (in ``config``), and the user from
        LangGraph auth where there is one."""
        client = client_values(run_context, self.base, self.defaults)
        conf = (config or {}).get("configurable") or {}
        for key in ("user_id", "agent_id"):
            if key not in client and isinstance(conf.get(key), str) and conf[key]:
                client[key] = conf[key]
        return self.for_run(client, identity_of(config))

    def context_schema(self) -> type:
        """The context dataclass a served graph declares: the client fields only, each with the default
        this server really uses and its choices as ``Literal``, so Studio renders the form."""
        described = {f.name: f.metadata.get("description", "") for f in fields(Context)}
        described["user_id"] = ("The user whose memory this run reads and writes. With auth on, leave it empty: "
                                "the token says who you are. Without auth it is required.")
        described["model"] = f"One of the models this server allows ({ALLOWED_MODELS_ENV})."
        types: dict[str, Any] = {
            "user_id": str, "agent_id": str, "model": Literal[self.allowed_models], "persona": str, "top_k": int,
            "guard": Literal[GUARD_MODES], "untrusted_core_edits": Literal[CORE_EDIT_POLICIES],
        }
        defaults = {**{k: getattr(self.base, k) for k in CLIENT_FIELDS}, "user_id": ""}
        spec = [(name, types[name], field(default=defaults[name], metadata={"description": described[name]}))
                for name in CLIENT_FIELDS]
        schema = dataclasses.make_dataclass("ServedContext", spec, kw_only=True, frozen=True,
                                            namespace={"__module__": __name__})
        schema.__doc__ = ("What a client may set for one run of a served pagefault graph. Everything else "
                          "(model endpoints and keys, engines, the token budget) is the server's.")
        return schema
