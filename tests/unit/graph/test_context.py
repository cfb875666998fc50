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


@pytest.mark.parametrize("name", ["context_window", "core_block_limit", "top_k", "consolidate_every"])
def test_each_integer_setting_is_bounded_both_ways(name, monkeypatch):
    """Every integer setting has a floor and a ceiling (``NUMERIC_BOUNDS``), from a run or from the
    environment; the message says the range and, for the environment's value, the variable."""
    from pagefault.graph.context import BUILTIN_DEFAULTS, NUMERIC_BOUNDS

    low, high, _ = NUMERIC_BOUNDS[name]
    assert low <= BUILTIN_DEFAULTS[name] <= high
    assert getattr(Context(**{name: low}), name) == low and getattr(Context(**{name: high}), name) == high
    for bad in (low - 1, high + 1, 10 ** 30):
        with pytest.raises(ValueError, match=f"^{name} must be from {low:,} to {high:,} .*, got {bad}$"):
            Context(**{name: bad})
    monkeypatch.setenv(f"PAGEFAULT_{name.upper()}", str(10 ** 30))
    with pytest.raises(ValueError, match=rf"got {10 ** 30} \(PAGEFAULT_{name.upper()}\)$"):
        Context()


def test_the_context_window_ceiling_is_ten_million_tokens():
    assert Context(context_window=10_000_000).context_window == 10_000_000
    with pytest.raises(ValueError, match="context_window must be from 256 to 10,000,000 tokens"):
        Context(context_window=10_000_001)


@pytest.mark.parametrize("variable, value", [
    ("PAGEFAULT_WARNING_FRACTION", "nan"), ("PAGEFAULT_WARNING_FRACTION", "0"),
    ("PAGEFAULT_COMPACTION_TRIGGER", "inf"), ("PAGEFAULT_COMPACTION_TRIGGER", "1.5"),
    ("PAGEFAULT_COMPACTION_TARGET", "-0.5"), ("PAGEFAULT_COMPACTION_TARGET", "nan"),
])
def test_fractions_out_of_bounds_name_their_variable(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable):
        Context()


def test_builtin_context_ignores_the_environment(monkeypatch):
    """What a served graph shows when the server's environment is refused (``ServerSettings.refusing``)."""
    from pagefault.graph.context import builtin_context

    monkeypatch.setenv("PAGEFAULT_TOP_K", "0")
    monkeypatch.setenv("PAGEFAULT_CONTEXT_WINDOW", "4096")
    built = builtin_context()
    assert (built.top_k, built.context_window) == (5, 8192)
