"""Context: env fills what a run omits, never what it gives; bad settings are clear errors."""

from __future__ import annotations

import pytest

from pagefault import Context


def test_env_fills_omitted_fields_only(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_USER_ID", "eve")
    monkeypatch.setenv("PAGEFAULT_CONTEXT_WINDOW", "4096")
    assert Context().user_id == "eve" and Context().context_window == 4096
    # An explicit value wins even when it equals the built-in default.
    assert Context(user_id="default").user_id == "default"
    assert Context(context_window=8192).context_window == 8192


@pytest.mark.parametrize("kwargs, message", [
    ({"context_window": 10}, "context_window"),
    ({"compaction_target": 0.95}, "compaction_target"),
    ({"warning_fraction": 0.99}, "warning_fraction"),
    ({"top_k": 0}, "top_k"),
])
def test_bad_settings_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Context(**kwargs)


def test_bad_env_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_CONTEXT_WINDOW", "lots")
    with pytest.raises(ValueError, match="PAGEFAULT_CONTEXT_WINDOW"):
        Context()
