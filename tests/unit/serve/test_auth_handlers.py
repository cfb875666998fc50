"""pagefault's LangGraph auth handlers (``pagefault.serve.auth``), called one by one as the server calls
them: what each returns (the owner filter), what it writes (the owner tag) and what it refuses, in
``jwt`` mode and in ``none`` mode. ``tests/server/test_serve_safely.py`` drives the same handlers
through a real ``langgraph dev``; these pin each branch on its own, in a second. Thread ownership
(``_claim_thread``), which asks the server itself, is tested there only."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from langgraph_sdk import Auth
from langgraph_sdk.auth.types import AuthContext, StudioUser

from pagefault.serve import auth
from pagefault.serve.auth import OWNER, THREAD_OWNER, AuthConfig
from pagefault.serve.settings import AUTHENTICATED, served_settings
from pagefault.stores import Scope

SECRET = "handlers-test-secret-" + "z" * 32
HTTPException = Auth.exceptions.HTTPException


@dataclass
class TokenUser:
    """The user the server makes of what ``authenticate`` returned for a verified token."""

    identity: str
    permissions: Sequence[str] = field(default_factory=lambda: [AUTHENTICATED])
    is_authenticated: bool = True

    @property
    def display_name(self) -> str:
        return self.identity

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


def as_ann(resource: str = "threads", action: str = "create") -> AuthContext:
    return AuthContext(permissions=[AUTHENTICATED], user=TokenUser("ann"), resource=resource, action=action)


def as_studio(resource: str = "threads", action: str = "read") -> AuthContext:
    """What ``langgraph dev`` lets in without a token when a request says it is Studio's."""
    return AuthContext(permissions=["authenticated"], user=StudioUser("langgraph-studio-user", is_authenticated=True),
                       resource=resource, action=action)


def token(sub: str, *, secret: str = SECRET, expires_in: float = 600, **claims: Any) -> str:
    return jwt.encode({"sub": sub, "exp": int(time.time() + expires_in), **claims}, secret, algorithm="HS256")


@pytest.fixture(autouse=True)
def _settings_from_a_clean_environment(monkeypatch):
    for name in ("PAGEFAULT_AUTH", "PAGEFAULT_JWT_SECRET", "PAGEFAULT_JWT_PUBLIC_KEY", "PAGEFAULT_JWT_ALGORITHMS",
                 "PAGEFAULT_JWT_AUDIENCE", "PAGEFAULT_JWT_ISSUER", "PAGEFAULT_MODEL", "PAGEFAULT_ALLOWED_MODELS"):
        monkeypatch.delenv(name, raising=False)
    served_settings.cache_clear()
    yield
    served_settings.cache_clear()


@pytest.fixture
def tokens(monkeypatch):
    """The server in ``jwt`` mode, with ``SECRET``."""
    monkeypatch.setattr(auth, "CONFIG", AuthConfig("jwt", SECRET, ("HS256",)))


@pytest.fixture
def no_auth(monkeypatch):
    monkeypatch.setattr(auth, "CONFIG", AuthConfig("none"))


async def refused(call: Any, status: int) -> str:
    """The detail of the HTTP error ``call`` (an awaitable) raises; fails unless its status is ``status``."""
    with pytest.raises(HTTPException) as e:
        await call
    assert e.value.status_code == status, (e.value.status_code, e.value.detail)
    return str(e.value.detail)


# -- authenticate ----------------------------------------------------------------------------------------


async def test_a_verified_token_is_its_sub_with_pagefaults_permission(tokens):
    user = await auth.authenticate(f"Bearer {token('ann')}")
    assert user == {"identity": "ann", "is_authenticated": True, "permissions": [AUTHENTICATED]}
    assert (await auth.authenticate(f"bearer   {token('ann')}  "))["identity"] == "ann"


@pytest.mark.parametrize("header", [
    None, "", "Bearer ", f"Basic {token('ann')}", f"Token {token('ann')}", "Bearer not-a-jwt",
    f"Bearer {token('ann', secret='another-secret-' + 'y' * 32)}", f"Bearer {token('ann', expires_in=-60)}",
    "Bearer " + token("ann\x07"), "Bearer " + token(""),
], ids=["no header", "empty", "no token", "basic", "token scheme", "garbage", "another secret", "expired",
        "control character", "empty sub"])
async def test_anything_else_is_a_401_asking_for_a_bearer_token(tokens, header):
    with pytest.raises(HTTPException) as e:
        await auth.authenticate(header)
    assert e.value.status_code == 401 and e.value.headers == {"WWW-Authenticate": "Bearer"}
    assert "bearer token is required" in str(e.value.detail) or str(e.value.detail).startswith("invalid token")


async def test_without_auth_every_request_is_anonymous(no_auth):
    assert await auth.authenticate(None) == {"identity": "anonymous", "is_authenticated": False, "permissions": []}
    assert (await auth.authenticate(f"Bearer {token('ann')}"))["permissions"] == []


# -- the token configuration ---------------------------------------------------------------------------------


def test_a_public_key_is_never_used_with_an_hmac_algorithm(monkeypatch):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    monkeypatch.setenv("PAGEFAULT_JWT_PUBLIC_KEY", public)
    for algorithms in ("HS256", "RS256,HS512"):
        monkeypatch.setenv("PAGEFAULT_JWT_ALGORITHMS", algorithms)
        with pytest.raises(ValueError, match="does not fit the key given"):
            AuthConfig.from_env()
    monkeypatch.setenv("PAGEFAULT_JWT_ALGORITHMS", " RS256 , ,PS256")
    assert AuthConfig.from_env().algorithms == ("RS256", "PS256")


def test_a_public_key_given_on_one_line_is_read_as_pem(monkeypatch):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    monkeypatch.setenv("PAGEFAULT_JWT_PUBLIC_KEY", public.replace("\n", "\\n"))
    config = AuthConfig.from_env()
    assert (config.mode, config.audience, config.issuer) == ("jwt", None, None)
    assert config.verify(jwt.encode({"sub": "ann", "exp": int(time.time()) + 60}, private, algorithm="RS256")) == "ann"


def test_the_mode_is_read_whatever_its_case(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_AUTH", " NONE ")
    monkeypatch.setenv("PAGEFAULT_JWT_SECRET", SECRET)
    assert AuthConfig.from_env() == AuthConfig("none")
    monkeypatch.setenv("PAGEFAULT_AUTH", "JWT")
    assert AuthConfig.from_env() == AuthConfig("jwt", SECRET, ("HS256",))


# -- who a handler acts for ------------------------------------------------------------------------------------


@pytest.mark.parametrize("handler, value", [
    (auth.on_thread_create, {}), (auth.on_thread_update, {}), (auth.on_threads, {}),
    (auth.on_run_create, {"kwargs": {"context": {}}}), (auth.on_assistant_create, {}), (auth.on_assistants, {}),
    (auth.on_cron_create, {}), (auth.on_crons, {}), (auth.on_store, {"namespace": ("pagefault", "ann")}),
], ids=lambda v: getattr(v, "__name__", "value"))
async def test_with_tokens_an_unauthenticated_studio_request_gets_nowhere(tokens, handler, value):
    detail = await refused(handler(as_studio(), value), 403)
    assert detail == "this server takes bearer tokens only"


async def test_without_auth_nothing_is_tagged_or_filtered(no_auth):
    created: dict[str, Any] = {"metadata": {"color": "blue"}}
    ctx = AuthContext(permissions=[], user=StudioUser("anonymous"), resource="threads", action="create")
    assert await auth.on_thread_create(ctx, created) is None
    assert created["metadata"] == {"color": "blue"}
    assert await auth.on_threads(ctx, {}) is None
    assert await auth.on_assistants(ctx, {}) is None
    assert await auth.on_crons(ctx, {}) is None
    value = {"namespace": ("pagefault", "ben", "default", "core"), "key": "human"}
    assert await auth.on_store(ctx, value) is None and value["namespace"] == ("pagefault", "ben", "default", "core")


# -- owner tags and filters -------------------------------------------------------------------------------------


async def test_a_new_thread_is_tagged_with_its_owner_and_filtered_by_it(tokens):
    created: dict[str, Any] = {"metadata": {"color": "blue"}}
    assert await auth.on_thread_create(as_ann(), created) == {OWNER: "ann"}
    assert created["metadata"] == {"color": "blue", OWNER: "ann"}
    bare: dict[str, Any] = {}
    assert await auth.on_thread_create(as_ann(), bare) == {OWNER: "ann"} and bare["metadata"] == {OWNER: "ann"}


async def test_the_owner_tags_are_the_servers_to_set(tokens):
    for metadata in ({OWNER: "ben"}, {THREAD_OWNER: {"user_id": "ann"}}):
        await refused(auth.on_thread_create(as_ann(), {"metadata": dict(metadata)}), 403)
        await refused(auth.on_thread_update(as_ann(), {"metadata": dict(metadata)}), 403)
        await refused(auth.on_assistant_update(as_ann(), {"metadata": dict(metadata)}), 403)
    await refused(auth.on_thread_create(as_ann(), {"metadata": "ann"}), 422)
    # Naming oneself is no change.
    assert await auth.on_thread_update(as_ann(), {"metadata": {OWNER: "ann", "x": 1}}) == {OWNER: "ann"}


async def test_reads_of_threads_crons_and_others_assistants_are_the_owners(tokens):
    assert await auth.on_threads(as_ann("threads", "read"), {}) == {OWNER: "ann"}
    assert await auth.on_threads(as_ann("threads", "delete"), {}) == {OWNER: "ann"}
    assert await auth.on_crons(as_ann("crons", "search"), {}) == {OWNER: "ann"}
    for action in ("read", "search"):
        assert await auth.on_assistants(as_ann("assistants", action), {}) == \
            {"$or": [{OWNER: "ann"}, {"created_by": "system"}]}
    assert await auth.on_assistants(as_ann("assistants", "delete"), {}) == {OWNER: "ann"}


# -- run, assistant and cron settings --------------------------------------------------------------------------------


async def test_a_run_is_tagged_and_its_settings_checked_before_it_is_created(tokens):
    run: dict[str, Any] = {"thread_id": None, "kwargs": {"context": {"top_k": 3},
                                                         "config": {"configurable": {"__context_provided__": True}}}}
    assert await auth.on_run_create(as_ann("threads", "create_run"), run) == {OWNER: "ann"}
    assert run["metadata"] == {OWNER: "ann"}
    hostile = {"thread_id": None, "kwargs": {"context": {"base_url": "http://catcher"},
                                             "config": {"configurable": {"__context_provided__": True}}}}
    assert "base_url" in await refused(auth.on_run_create(as_ann("threads", "create_run"), hostile), 422)
    other = {"thread_id": None, "kwargs": {"context": {"user_id": "ben"},
                                           "config": {"configurable": {"__context_provided__": True}}}}
    assert "not the authenticated user" in await refused(auth.on_run_create(as_ann("threads", "create_run"), other), 422)


async def test_a_runs_context_copied_into_configurable_is_checked_as_configurable(tokens):
    run = {"thread_id": None, "kwargs": {"context": {"thread_id": "t", "context_window": 10**6}, "config": {}}}
    assert "context_window" in await refused(auth.on_run_create(as_ann("threads", "create_run"), run), 422)
    fine = {"thread_id": None, "kwargs": {"context": {"thread_id": "t", "guard": "quarantine"}, "config": {}}}
    assert await auth.on_run_create(as_ann("threads", "create_run"), fine) == {OWNER: "ann"}


async def test_without_auth_a_run_must_name_its_user(no_auth):
    ctx = AuthContext(permissions=[], user=StudioUser("anonymous"), resource="threads", action="create_run")
    run = {"thread_id": None, "kwargs": {"context": {}, "config": {"configurable": {"__context_provided__": True}}}}
    assert "user_id is required" in await refused(auth.on_run_create(ctx, run), 422)
    named = {"thread_id": None, "kwargs": {"context": {"user_id": "ana"},
                                           "config": {"configurable": {"__context_provided__": True}}}}
    assert await auth.on_run_create(ctx, named) is None


async def test_assistants_settings_are_checked_and_may_leave_the_user_to_the_run(tokens):
    made: dict[str, Any] = {"context": {"guard": "quarantine"}, "config": {}}
    assert await auth.on_assistant_create(as_ann("assistants"), made) == {OWNER: "ann"}
    assert made["metadata"][OWNER] == "ann"
    for value in ({"context": {"base_url": "http://x"}}, {"config": {"configurable": {"context_window": 10**6}}},
                  {"context": {"user_id": "ben"}}, {"context": {"usr_id": "ann"}}):
        await refused(auth.on_assistant_create(as_ann("assistants"), value), 422)
        await refused(auth.on_assistant_update(as_ann("assistants", "update"), value), 422)
    assert await auth.on_assistant_update(as_ann("assistants", "update"), {"context": {"top_k": 2}}) == {OWNER: "ann"}


async def test_crons_settings_are_checked_on_create_and_update(tokens):
    made: dict[str, Any] = {"payload": {"context": {"top_k": 3}, "config": {"configurable": {"cron_id": "c1"}}}}
    assert await auth.on_cron_create(as_ann("crons"), made) == {OWNER: "ann"} and made["metadata"][OWNER] == "ann"
    await refused(auth.on_cron_create(as_ann("crons"), {"payload": {"context": {"base_url": "http://x"}}}), 422)
    await refused(auth.on_cron_create(as_ann("crons"), {"payload": {
        "config": {"configurable": {"cron_id": "c1", "data_dir": "/x"}}}}), 422)
    update = {"payload": {"context": {"base_url": "http://x"}}}
    await refused(auth.on_crons(as_ann("crons", "update"), update), 422)
    assert await auth.on_crons(as_ann("crons", "update"), {"payload": {"context": {"top_k": 2}}}) == {OWNER: "ann"}
    assert await auth.on_crons(as_ann("crons", "read"), update) == {OWNER: "ann"}, "only an update carries settings"


async def test_a_crons_checked_settings_carry_the_permission_its_scheduled_runs_need(tokens):
    """LangGraph's scheduler runs a cron as its creator with the permissions in the cron's configurable
    only, and refuses a context beside a configurable: the context moves there, with the permission."""
    made: dict[str, Any] = {"payload": {"context": {"top_k": 3}, "config": {"configurable": {"cron_id": "c1"}}}}
    await auth.on_cron_create(as_ann("crons"), made)
    assert made["payload"] == {"config": {"configurable": {"cron_id": "c1", "top_k": 3,
                                                           "langgraph_auth_permissions": [AUTHENTICATED]}}}
    update: dict[str, Any] = {"payload": {"context": {"top_k": 2}}}
    await auth.on_crons(as_ann("crons", "update"), update)
    assert update["payload"] == {"config": {"configurable": {"top_k": 2, "langgraph_auth_permissions": [AUTHENTICATED]}}}
    untouched: dict[str, Any] = {"payload": {"input": {"messages": []}}}
    await auth.on_crons(as_ann("crons", "update"), untouched)
    assert untouched["payload"] == {"input": {"messages": []}}
    # The scheduled run: its context is the cron's configurable, with the scheduler's own keys beside it.
    scheduled = {"thread_id": None, "kwargs": {"config": {}, "context": {
        "top_k": 3, "cron_id": "c1", "langgraph_auth_permissions": [AUTHENTICATED],
        "langgraph_auth_user": {"identity": "ann"}}}}
    assert await auth.on_run_create(as_ann("threads", "create_run"), scheduled) == {OWNER: "ann"}


async def test_without_auth_a_crons_settings_stay_where_the_client_put_them(no_auth):
    ctx = AuthContext(permissions=[], user=StudioUser("anonymous"), resource="crons", action="create")
    made: dict[str, Any] = {"payload": {"context": {"user_id": "ana"}, "config": {"configurable": {"cron_id": "c1"}}}}
    await auth.on_cron_create(ctx, made)
    assert made["payload"] == {"context": {"user_id": "ana"}, "config": {"configurable": {"cron_id": "c1"}}}


async def test_created_by_is_the_servers_to_set(tokens, monkeypatch):
    """LangGraph shares an assistant whose ``created_by`` is ``"system"`` with every user (and skips its
    ownership check on runs with it): a client's own ``created_by`` is refused, in both modes."""
    for value in ({"metadata": {"created_by": "system"}}, {"metadata": {"created_by": "ann"}}):
        assert "'created_by'" in await refused(auth.on_assistant_create(as_ann("assistants"), dict(value)), 403)
        await refused(auth.on_assistant_update(as_ann("assistants", "update"), dict(value)), 403)
        await refused(auth.on_thread_create(as_ann(), dict(value)), 403)
        await refused(auth.on_cron_create(as_ann("crons"), dict(value)), 403)
    monkeypatch.setattr(auth, "CONFIG", AuthConfig("none"))
    anonymous = AuthContext(permissions=[], user=StudioUser("anonymous"), resource="assistants", action="create")
    await refused(auth.on_assistant_create(anonymous, {"metadata": {"created_by": "system"}}), 403)


# -- the store ---------------------------------------------------------------------------------------------------------


async def test_a_token_reaches_only_its_users_store_namespaces(tokens):
    own = Scope("ann").namespace("core")
    assert await auth.on_store(as_ann("store", "get"), {"namespace": own, "key": "human"}) is None
    for namespace in (Scope("ben").namespace("core"), ("pagefault", "ben"), ("other-app", "ann"), ("ann",)):
        detail = await refused(auth.on_store(as_ann("store", "get"), {"namespace": namespace, "key": "k"}), 403)
        assert detail == "store items are reachable under ['pagefault', 'ann'] only"
    await refused(auth.on_store(as_ann("store", "put"), {"namespace": ("pagefault",), "key": "k", "value": {}}), 403)


@pytest.mark.parametrize("action", ["search", "list_namespaces"])
async def test_a_bare_or_empty_prefix_is_narrowed_to_the_users_own(tokens, action):
    for prefix in ((), ("pagefault",)):
        value: dict[str, Any] = {"namespace": prefix}
        assert await auth.on_store(as_ann("store", action), value) is None
        assert value["namespace"] == ("pagefault", "ann")
    value = {"namespace": ("pagefault", "ben")}
    await refused(auth.on_store(as_ann("store", action), value), 403)


@pytest.mark.parametrize("mode", ["tokens", "no_auth"])
async def test_a_core_block_written_through_the_api_must_have_pagefaults_shape(request, mode):
    request.getfixturevalue(mode)
    ctx = as_ann("store", "put") if mode == "tokens" else AuthContext(
        permissions=[], user=StudioUser("anonymous"), resource="store", action="put")
    core = Scope("ann").namespace("core")
    detail = await refused(auth.on_store(ctx, {"namespace": core, "key": "human", "value": {"value": "x"}}), 422)
    assert detail == "core block 'human': no limit"
    assert await auth.on_store(ctx, {"namespace": core, "key": "human", "value": {"value": "x", "limit": 10}}) is None
    # Not a core block, or a delete (no value): not checked.
    assert await auth.on_store(ctx, {"namespace": Scope("ann").namespace("notes"), "key": "k",
                                     "value": {"anything": 1}}) is None
    assert await auth.on_store(ctx, {"namespace": core, "key": "human", "value": None}) is None


async def test_a_context_the_client_gave_may_not_carry_langgraphs_own_keys(tokens):
    given = {"thread_id": None, "kwargs": {"context": {"thread_id": "t", "top_k": 3},
                                           "config": {"configurable": {"__context_provided__": True}}}}
    assert "unknown key(s) 'thread_id'" in await refused(auth.on_run_create(as_ann("threads", "create_run"), given), 422)
