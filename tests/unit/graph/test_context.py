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


def test_settings_keywords_build_the_context(monkeypatch, tmp_path):
    """``PagefaultMiddleware`` and ``memory_tools`` take a Context or its fields as keywords, not both;
    a keyword left None takes Context's default, as one left out does."""
    from pagefault import PagefaultMiddleware
    from pagefault.graph.context import context_of

    monkeypatch.setenv("PAGEFAULT_TOP_K", "7")
    built = context_of(None, {"user_id": "ana", "context_window": 4096, "top_k": None})
    assert (built.user_id, built.context_window, built.top_k) == ("ana", 4096, 7)
    given = Context(user_id="bo")
    assert context_of(given, {"model": None}) is given
    with pytest.raises(TypeError, match="not both"):
        context_of(given, {"user_id": "ana"})
    with pytest.raises(TypeError):
        context_of(None, {"user_idd": "ana"})  # an unknown field, as Context(user_idd=...)
    assert PagefaultMiddleware(user_id="ana", data_dir=str(tmp_path), agent_id=None).context == Context(
        user_id="ana", data_dir=str(tmp_path))
    with pytest.raises(TypeError, match="not both"):
        PagefaultMiddleware(given, user_id="ana")
