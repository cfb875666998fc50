"""Served-context refusal, function by function (``pagefault.serve.settings``): what a client's settings
may name, how a run's ``Context`` is made from them and the identity, and what an app's run context may
change. The same rules over the wire, through a real ``langgraph dev``, are in
``tests/server/test_serve_safely.py``; these tests pin each rule on its own so that a regression in one
branch fails here, in a second."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from pagefault import Context
from pagefault.serve.settings import (
    ALLOWED_MODELS_ENV,
    AUTHENTICATED,
    CLIENT_FIELDS,
    INTERNAL_FIELDS,
    SERVER_FIELDS,
    Identity,
    ServerSettings,
    SettingsError,
    allowed_models,
    check_client_settings,
    client_values,
    identity_of,
)

ACCEPTED = ", ".join(CLIENT_FIELDS)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (ALLOWED_MODELS_ENV, "PAGEFAULT_MODEL", "PAGEFAULT_USER_ID", "PAGEFAULT_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def served(**base) -> ServerSettings:
    """A served graph's settings: ``base`` as the server's own, ``offline`` and ``openai:gpt-4o-mini`` allowed."""
    ctx = Context(**base)
    return ServerSettings(ctx, (ctx.model, "openai:gpt-4o-mini"), defaults=Context())


def authenticated(user: str) -> dict:
    return {"configurable": {"langgraph_auth_user_id": user, "langgraph_auth_permissions": [AUTHENTICATED]}}


# -- what a client's settings may name ------------------------------------------------------------------


def test_nothing_sent_is_nothing_set():
    assert check_client_settings(None) == {}
    assert check_client_settings({}) == {}


def test_client_fields_pass_in_their_own_order_and_nothing_else_comes_back():
    sent = {"top_k": 3, "user_id": "ana", "guard": "quarantine"}
    got = check_client_settings(sent)
    assert got == sent and list(got) == ["user_id", "top_k", "guard"]


@pytest.mark.parametrize("name", [*SERVER_FIELDS, *INTERNAL_FIELDS])
def test_every_server_owned_or_internal_field_is_refused_by_name(name):
    with pytest.raises(SettingsError) as e:
        check_client_settings({"user_id": "ana", name: "x"}, where="run context")
    message = str(e.value)
    assert message.startswith(f"run context names {name}, which only the server sets")
    assert message.endswith(f"a client may set: {ACCEPTED}") and "\n" not in message


def test_server_owned_fields_are_refused_in_configurable_too():
    with pytest.raises(SettingsError, match="names base_url, which only the server sets"):
        check_client_settings({"thread_id": "t", "base_url": "http://x"}, configurable=True)


def test_an_unknown_key_is_refused_with_the_accepted_ones():
    with pytest.raises(SettingsError) as e:
        check_client_settings({"usr_id": "ana"})
    assert str(e.value) == f"context has unknown key(s) 'usr_id'; accepted: {ACCEPTED}"


def test_langgraphs_own_keys_pass_only_in_configurable_and_are_not_settings():
    keys = {"thread_id": "t", "checkpoint_id": "c", "checkpoint_ns": "", "checkpoint_map": {}}
    assert check_client_settings({**keys, "user_id": "ana"}, configurable=True) == {"user_id": "ana"}
    with pytest.raises(SettingsError, match="unknown key"):
        check_client_settings({"thread_id": "t"})


def test_settings_that_are_not_an_object_are_refused():
    with pytest.raises(SettingsError, match="context must be an object of settings, got list"):
        check_client_settings(["user_id"])


# -- the models a client may choose ---------------------------------------------------------------------


def test_allowed_models_are_the_servers_own_then_the_listed_ones(monkeypatch):
    monkeypatch.setenv(ALLOWED_MODELS_ENV, " openai:gpt-4o-mini, ,offline,openai:gpt-4.1-mini ")
    assert allowed_models(Context(model="offline")) == ("offline", "openai:gpt-4o-mini", "openai:gpt-4.1-mini")
    monkeypatch.delenv(ALLOWED_MODELS_ENV)
    assert allowed_models(Context(model="offline")) == ("offline",)


def test_from_env_reads_the_servers_environment_and_requires_a_user(monkeypatch):
    monkeypatch.setenv(ALLOWED_MODELS_ENV, "openai:gpt-4o-mini")
    monkeypatch.setenv("PAGEFAULT_DATA_DIR", "/srv/memory")
    settings = ServerSettings.from_env()
    assert settings.base.data_dir == "/srv/memory" and settings.defaults.data_dir == "/srv/memory"
    assert settings.allowed_models == ("offline", "openai:gpt-4o-mini") and settings.require_user
    app = ServerSettings.of_app(Context(user_id="app-user"))
    assert not app.require_user and app.allowed_models == ("offline", "openai:gpt-4o-mini")


# -- the identity LangGraph auth established -----------------------------------------------------------------


def test_only_a_user_the_authenticate_handler_verified_counts():
    assert identity_of(authenticated("ann")) == Identity("ann")
    assert identity_of({"configurable": {"langgraph_auth_user_id": "ann", "langgraph_auth_permissions": []}}) \
        == Identity(None)
    assert identity_of({"configurable": {"langgraph_auth_user_id": "", "langgraph_auth_permissions": [AUTHENTICATED]}}) \
        == Identity(None)
    assert identity_of({"configurable": {"langgraph_auth_user_id": 7, "langgraph_auth_permissions": [AUTHENTICATED]}}) \
        == Identity(None)
    assert identity_of(None) == Identity(None) and identity_of({}) == Identity(None)


# -- a run's Context -----------------------------------------------------------------------------------------


def test_a_run_gets_the_servers_settings_with_the_clients_fields():
    server = served(data_dir="/srv/pf", context_window=4096, top_k=5)
    ctx = server.for_run({"user_id": "ana", "top_k": 2, "guard": "quarantine"}, Identity(None))
    assert (ctx.user_id, ctx.top_k, ctx.guard) == ("ana", 2, "quarantine")
    assert (ctx.data_dir, ctx.context_window) == ("/srv/pf", 4096)


def test_a_model_the_server_does_not_allow_is_refused():
    server = served()
    assert server.for_run({"user_id": "ana", "model": "openai:gpt-4o-mini"}, Identity(None)).model == "openai:gpt-4o-mini"
    with pytest.raises(SettingsError) as e:
        server.for_run({"user_id": "ana", "model": "openai:gpt-5-pro"}, Identity(None))
    assert str(e.value).startswith("model 'openai:gpt-5-pro' is not allowed on this server; choose one of: "
                                   "offline, openai:gpt-4o-mini")


def test_with_auth_the_token_is_the_user():
    server = served()
    assert server.for_run({}, Identity("ann")).user_id == "ann"
    assert server.for_run({"user_id": "ann"}, Identity("ann")).user_id == "ann"
    with pytest.raises(SettingsError, match="user_id 'ben' is not the authenticated user"):
        server.for_run({"user_id": "ben"}, Identity("ann"))


def test_without_auth_a_run_must_name_its_user_unless_it_is_partial():
    server = served(user_id="default")
    with pytest.raises(SettingsError, match="user_id is required"):
        server.for_run({}, Identity(None))
    with pytest.raises(SettingsError, match="user_id is required"):
        server.for_run({"user_id": ""}, Identity(None))
    assert server.for_run({"top_k": 3}, Identity(None), partial=True).user_id == "default"
    app = ServerSettings.of_app(Context(user_id="app-user"))
    assert app.for_run({}, Identity(None)).user_id == "app-user"


def test_a_bad_value_is_a_one_line_settings_error():
    with pytest.raises(SettingsError) as e:
        served().for_run({"user_id": "ana", "guard": "paranoid"}, Identity(None))
    assert "guard must be one of off, flag, quarantine" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SettingsError, match="top_k"):
        served().for_run({"user_id": "ana", "top_k": 0}, Identity(None))


# -- an app's run context (middleware, memory tools) -----------------------------------------------------------


@dataclass
class AppContext:
    """An app's own context schema, with a pagefault field and one of its own."""

    user_id: str = "nobody"
    tenant: str = "acme"


class AppModel(BaseModel):
    user_id: str = "nobody"
    top_k: int = 5


def test_an_app_context_carries_only_pagefault_client_fields():
    base = Context(user_id="app-user")
    assert client_values(None, base) == {}
    assert client_values(object(), base) == {}
    assert client_values({"user_id": "ana", "tenant": "acme"}, base) == {"user_id": "ana"}
    assert client_values(AppContext(user_id="ana"), base) == {"user_id": "ana"}
    assert client_values(AppModel(user_id="ana", top_k=2), base) == {"user_id": "ana", "top_k": 2}


def test_a_whole_context_leaves_out_the_fields_it_left_at_their_defaults():
    base = Context(user_id="app-user", data_dir="/app/pf")
    assert client_values(Context(user_id="ana"), base) == {"user_id": "ana"}
    assert client_values(Context(), base) == {}


@pytest.mark.parametrize("run_context", [
    {"data_dir": "/elsewhere"},
    {"base_url": "http://catcher"},
    {"respond": False},
    Context(user_id="ana", data_dir="/elsewhere"),
    Context(user_id="ana", context_window=100_000),
], ids=["mapping data_dir", "mapping base_url", "mapping respond", "context data_dir", "context window"])
def test_an_app_run_context_may_not_change_what_the_app_owns(run_context):
    base = Context(user_id="app-user", data_dir="/app/pf")
    with pytest.raises(SettingsError) as e:
        client_values(run_context, base)
    assert "which the app owns" in str(e.value) and str(e.value).endswith(f"a run may set: {ACCEPTED}")


def test_an_app_run_context_may_repeat_what_the_app_owns():
    base = Context(user_id="app-user", data_dir="/app/pf")
    assert client_values({"data_dir": "/app/pf", "user_id": "ana"}, base) == {"user_id": "ana"}
    assert client_values(Context(user_id="ana", data_dir="/app/pf"), base) == {"user_id": "ana"}


def test_an_app_run_takes_user_and_agent_from_configurable_and_nothing_else():
    app = ServerSettings.of_app(Context(user_id="app-user", data_dir="/app/pf"))
    config = {"configurable": {"user_id": "ana", "agent_id": "helper", "data_dir": "/elsewhere", "top_k": 1}}
    ctx = app.for_app_run(None, config)
    assert (ctx.user_id, ctx.agent_id, ctx.data_dir, ctx.top_k) == ("ana", "helper", "/app/pf", 5)
    # The run's context wins over configurable; empty and non-string values are not a user.
    assert app.for_app_run({"user_id": "bea"}, config).user_id == "bea"
    assert app.for_app_run(None, {"configurable": {"user_id": "", "agent_id": 3}}).user_id == "app-user"
    assert app.for_app_run(None, {"configurable": {"user_id": "", "agent_id": 3}}).agent_id == "default"
    assert app.for_app_run(None, None).user_id == "app-user"


def test_an_app_run_under_auth_is_the_tokens_user():
    app = ServerSettings.of_app(Context(user_id="app-user"))
    assert app.for_app_run(None, authenticated("ann")).user_id == "ann"
    with pytest.raises(SettingsError, match="not the authenticated user"):
        app.for_app_run({"user_id": "ben"}, authenticated("ann"))


def test_a_mapping_is_taken_as_written_even_at_the_defaults():
    base = Context(user_id="app-user", data_dir="/app/pf", top_k=3)
    assert client_values({"top_k": 5}, base) == {"top_k": 5}  # the built-in default, but said: it counts
    with pytest.raises(SettingsError, match="data_dir"):
        client_values({"data_dir": Context().data_dir}, base)  # the default, but not the app's own


def test_a_models_fields_left_at_their_defaults_are_not_the_runs():
    base = Context(user_id="app-user", top_k=3)
    assert client_values(AppModel(user_id="ana"), base) == {"user_id": "ana"}  # top_k=5 is only its default
    assert ServerSettings.of_app(base).for_app_run(AppModel(user_id="ana"), None).top_k == 3


def test_settings_the_environment_refused_refuse_every_run():
    refusing = ServerSettings.refusing("PAGEFAULT_CONTEXT_WINDOW=0 is out of range")
    with pytest.raises(SettingsError) as e:
        refusing.for_run({"user_id": "ana"}, Identity(None))
    assert str(e.value) == ("this server's settings are invalid, so it runs nothing: "
                            "PAGEFAULT_CONTEXT_WINDOW=0 is out of range")


def test_an_unknown_setting_given_straight_to_for_run_is_a_settings_error():
    with pytest.raises(SettingsError, match="usr_id"):
        served().for_run({"user_id": "ana", "usr_id": "x"}, Identity(None))
