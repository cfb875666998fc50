"""The embedding is the server's (``Context.embeddings``, issue 23): a client of a served graph never
picks the model that embeds the store's vectors, in its ``context``, its ``configurable`` or an app's
run context, and a run gets the server's own (``PAGEFAULT_EMBEDDINGS``) whatever the client sent."""

from __future__ import annotations

import dataclasses

import pytest

from pagefault import Context
from pagefault.serve.settings import (
    CLIENT_FIELDS,
    SERVER_FIELDS,
    Identity,
    ServerSettings,
    SettingsError,
    check_client_settings,
    client_values,
)

ACCEPTED = ", ".join(CLIENT_FIELDS)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PAGEFAULT_EMBEDDINGS", "PAGEFAULT_ALLOWED_MODELS", "PAGEFAULT_USER_ID"):
        monkeypatch.delenv(name, raising=False)


def test_embeddings_is_server_owned_not_a_client_field():
    assert "embeddings" in SERVER_FIELDS and "embeddings" not in CLIENT_FIELDS


@pytest.mark.parametrize("where,configurable", [("context", False), ("configurable", True)])
def test_a_client_setting_embeddings_is_refused_by_name(where, configurable):
    with pytest.raises(SettingsError) as e:
        check_client_settings({"user_id": "ana", "embeddings": "openai:text-embedding-3-small"}, where=where,
                              configurable=configurable)
    message = str(e.value)
    assert message.startswith(f"{where} names embeddings, which only the server sets")
    assert message.endswith(f"a client may set: {ACCEPTED}") and "\n" not in message


def test_an_app_run_context_may_not_change_the_apps_embedding():
    base = Context(user_id="app-user", embeddings="offline")
    for run_context in ({"embeddings": "openai:text-embedding-3-small"},
                        Context(user_id="ana", embeddings="ollama:nomic-embed-text")):
        with pytest.raises(SettingsError) as e:
            client_values(run_context, base)
        assert "embeddings" in str(e.value) and "which the app owns" in str(e.value)
    assert client_values({"embeddings": "offline", "user_id": "ana"}, base) == {"user_id": "ana"}


def test_a_run_gets_the_servers_embedding(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_EMBEDDINGS", "openai:text-embedding-3-small")
    settings = ServerSettings.from_env()
    run = settings.for_run(check_client_settings({"user_id": "ana", "top_k": 3}), Identity(None))
    assert run.embeddings == "openai:text-embedding-3-small" and run.user_id == "ana"
    shown = {f.name for f in dataclasses.fields(settings.context_schema())}
    assert "user_id" in shown and "embeddings" not in shown  # the form a served graph shows has no such field
