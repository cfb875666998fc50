"""Secrets out of memory: API keys, private keys and passwords are replaced before they are stored.

A memory is re-read in every later session, copied into prompts sent to a model provider, and
kept for good; a key pasted into a chat must not live on there. ``redact`` replaces obvious
secrets (well-known key formats, PEM private keys, ``password: ...`` / ``api_key=...``
assignments, and the values of this process's own secret-looking environment variables) with
a marker that names the kind of secret, so the memory still says that a key was given.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(p)) for name, p in (
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE "
                    r"KEY(?: BLOCK)?-----|[\s\S]*)"),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"),
    ("aws-access-key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("stripe-key", r"\b[rsp]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("bearer-token", r"(?i)(?<=\bbearer )[A-Za-z0-9._~+/\-]{20,}=*"),
))
#: ``password: hunter2``, ``api_key = "..."``, ``my password is hunter2``: the value goes, the name stays.
_ASSIGNMENT = re.compile(
    r"(?i)\b((?:[a-z0-9]+[_-])*(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?key|auth[_-]?token|token|password|passwd|"
    r"pwd|passphrase|pass ?code|client[_-]?secret)\b[\"']?(?:\s*[:=]\s*|\s+(?:is|was|=)\s+))([\"']?)"
    # the value: 4+ characters with a digit or symbol in them (so "the token is valid" stays)
    r"((?=[^\s\"',;]*[\d!@#$%^&*()_+=\[\]{}|\\<>?/~-])[^\s\"',;]{3,}[^\s\"',;.!?)])\2")
_ENV_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
#: Environment values this short are too likely to occur in ordinary text to be replaced everywhere.
_MIN_ENV_SECRET = 12


@dataclass(frozen=True)
class Redacted:
    """Text with secrets replaced, and the kinds of secret that were found (empty: none)."""

    text: str
    found: tuple[str, ...] = ()


def marker(kind: str) -> str:
    return f"[REDACTED {kind}]"


def environment_secrets() -> list[tuple[str, str]]:
    """(name, value) of this process's environment variables that look like credentials."""
    return [(k, v) for k, v in os.environ.items() if _ENV_SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET]


def redact(text: str) -> Redacted:
    """Replace obvious secrets in ``text``; ``Redacted.found`` names what was replaced."""
    if not isinstance(text, str) or not text:
        return Redacted(text if isinstance(text, str) else "")
    found: list[str] = []
    for name, value in environment_secrets():
        if value in text:
            text = text.replace(value, marker(name.lower()))
            found.append(name.lower())
    for kind, pattern in _PATTERNS:
        text, n = pattern.subn(marker(kind), text)
        if n:
            found.append(kind)

    def assignment(m: re.Match[str]) -> str:
        if m.group(3).startswith("[REDACTED"):
            return m.group(0)
        found.append("password" if "pass" in m.group(1).lower() or "pwd" in m.group(1).lower() else "secret")
        return f"{m.group(1)}{m.group(2)}{marker(found[-1])}{m.group(2)}"

    text = _ASSIGNMENT.sub(assignment, text)
    return Redacted(text, tuple(dict.fromkeys(found)))
