"""Redaction's edges (``pagefault.safety.redaction``) and two of the places it is applied: the compaction
summary and the text recall indexes. ``test_redaction.py`` and ``tests/integration/test_secrets.py``
cover the formats and the stores; these pin what they leave open: which environment variables count,
the length below which a value is left alone, what ``found`` reports, and that the summary and
recall redact (and the summary only when told to)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from pagefault import Context, OfflineChatModel
from pagefault.models.tokens import TokenCounter
from pagefault.safety.redaction import Redacted, environment_secrets, marker, redact
from pagefault.stores.recall import recall_text
from pagefault.window.compaction import summarize

VALUE = "plain-words-no-prefix-7392"  # shaped like no provider key


@pytest.mark.parametrize("name", ["ACME_API_KEY", "acme_token", "DB_SECRET", "ADMIN_PASSWORD", "SMTP_PASSWD",
                                  "GCP_CREDENTIALS"])
def test_secret_looking_names_are_the_processs_secrets(monkeypatch, name):
    monkeypatch.setenv(name, VALUE)
    assert (name, VALUE) in environment_secrets()
    out = redact(f"it used {VALUE} twice: {VALUE}")
    assert out.text == f"it used {marker(name.lower())} twice: {marker(name.lower())}"
    assert out.found == (name.lower(),)


def test_a_value_shorter_than_twelve_characters_is_left_alone(monkeypatch):
    monkeypatch.setenv("ACME_TOKEN", "abcdefghijk")  # 11
    monkeypatch.setenv("ACME_OTHER_TOKEN", "abcdefghijkl")  # 12
    secrets = dict(environment_secrets())
    assert "ACME_TOKEN" not in secrets and secrets["ACME_OTHER_TOKEN"] == "abcdefghijkl"
    assert redact("abcdefghijk is not a secret").text == "abcdefghijk is not a secret"


def test_what_is_not_text_comes_back_empty_and_nothing_is_found():
    assert redact("") == Redacted("")
    assert redact(None) == Redacted("")  # type: ignore[arg-type]
    assert redact(123) == Redacted("")  # type: ignore[arg-type]
    assert marker("jwt") == "[REDACTED jwt]"


def test_found_names_each_kind_once_in_the_order_found(monkeypatch):
    monkeypatch.setenv("ACME_TOKEN", VALUE)
    key = "sk-proj-" + "Q7c2Xr9LmP4tWz8Kd3Nf6Hj1"
    out = redact(f"{VALUE} then {key} and {key}, password: Tulip-House! and pwd=Rose-77")
    assert out.found == ("acme_token", "openai-key", "password")
    assert out.text == (f"{marker('acme_token')} then {marker('openai-key')} and {marker('openai-key')}, "
                        f"password: {marker('password')}! and pwd={marker('password')}")


def test_an_assignment_keeps_its_name_and_quotes_and_names_its_kind():
    assert redact('client_secret = "Zx81-plq0"').text == f'client_secret = "{marker("secret")}"'
    assert redact("my passphrase is horse-battery-9").found == ("password",)
    assert redact("auth_token: abc/def+ghi").text == f"auth_token: {marker('secret')}"


def test_a_value_a_key_pattern_already_replaced_is_not_marked_twice():
    key = "sk-proj-" + "Q7c2Xr9LmP4tWz8Kd3Nf6Hj1"
    out = redact(f"api_key={key}")
    assert out.text == f"api_key={marker('openai-key')}" and out.found == ("openai-key",)


def _summary(redact_secrets: bool) -> str:
    ctx = Context(user_id="ana", context_window=8192, redact_secrets=redact_secrets)
    evicted = [HumanMessage("My deploy password: Tulip-House! and my name is Ana."), AIMessage("Noted, Ana.")]
    return summarize(OfflineChatModel(), ctx, "", evicted, TokenCounter()).text


def test_the_compaction_summary_is_redacted_unless_redaction_is_off():
    redacted = _summary(True)
    assert "Ana" in redacted and "Tulip-House" not in redacted and marker("password") in redacted
    assert "Tulip-House" in _summary(False)


def test_recall_indexes_redacted_text_with_the_calls_a_message_made():
    key = "sk-proj-" + "Q7c2Xr9LmP4tWz8Kd3Nf6Hj1"
    assert recall_text(HumanMessage(f"my key is {key}")) == f"user: my key is {marker('openai-key')}"
    call = AIMessage("Saving.", tool_calls=[{"name": "archival_memory_insert", "args": {"text": f"key {key}"},
                                             "id": "c1", "type": "tool_call"}])
    text = recall_text(call)
    assert text.startswith("assistant: Saving. [called archival_memory_insert(") and key not in text
    # A search's result re-quotes memory: recall keeps its first line only.
    hits = ToolMessage("2 archival result(s)\n<memory_results>...</memory_results>", tool_call_id="c2",
                       name="archival_memory_search")
    assert recall_text(hits).endswith("2 archival result(s)")
    other = ToolMessage("line one\nline two", tool_call_id="c3", name="weather")
    assert "line two" in recall_text(other)
