"""Redaction of the process's own secrets: a value of a secret-looking environment variable is
replaced wherever it appears, whatever its format (one no key pattern knows), and only such values."""

from __future__ import annotations

from pagefault.safety.redaction import environment_secrets, redact

# Shaped like no provider key: only the environment rule can catch it.
VALUE = "plain-words-no-prefix-7392"


def test_a_secret_env_value_of_no_known_format_is_redacted(monkeypatch):
    monkeypatch.setenv("ACME_SERVICE_TOKEN", VALUE)
    out = redact(f"the deploy script used {VALUE} yesterday")
    assert VALUE not in out.text and "[REDACTED" in out.text
    assert ("ACME_SERVICE_TOKEN", VALUE) in environment_secrets()


def test_the_same_value_under_an_ordinary_name_is_kept(monkeypatch):
    monkeypatch.delenv("ACME_SERVICE_TOKEN", raising=False)
    monkeypatch.setenv("ACME_GREETING", VALUE)
    assert VALUE in redact(f"the deploy script used {VALUE} yesterday").text
