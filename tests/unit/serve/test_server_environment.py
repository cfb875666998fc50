"""A server whose environment ``Context`` refuses: ``import pagefault`` still works (the CLI, a
library that never serves), and the served graph refuses every run with the one-line reason."""

from __future__ import annotations

import pytest

from pagefault.serve.settings import Identity, ServerSettings, SettingsError, served_settings


def test_a_refused_environment_refuses_every_served_run(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_CONTEXT_WINDOW", str(10 ** 30))
    with pytest.raises(ValueError, match="PAGEFAULT_CONTEXT_WINDOW"):
        ServerSettings.from_env()
    settings = served_settings.__wrapped__()  # what the server reads when it imports the graph, uncached
    assert "context_window must be from 256 to 10,000,000 tokens" in settings.problem
    assert "PAGEFAULT_CONTEXT_WINDOW" in settings.problem and "\n" not in settings.problem
    with pytest.raises(SettingsError, match="this server's settings are invalid, so it runs nothing: context_window"):
        settings.for_run({"user_id": "ana"}, Identity("ana"))
    assert settings.base.context_window == 8192  # the built-in defaults stand in for Studio's form
    assert settings.context_schema()().top_k == 5


def test_a_sound_environment_has_no_problem(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_CONTEXT_WINDOW", "4096")
    settings = served_settings.__wrapped__()
    assert settings.problem == "" and settings.base.context_window == 4096
    assert settings.for_run({"user_id": "ana"}, Identity(None)).context_window == 4096
