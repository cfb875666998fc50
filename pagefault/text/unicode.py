"""What any text must be before it reaches a store: Unicode that UTF-8 can encode.

Python strings may hold lone surrogates (``"\\ud800"``, e.g. from a JSON ``\\ud800`` escape);
SQLite, Chroma and the checkpointer cannot store them and fail deep inside. Checking at the
boundary turns that into a clear error, or, for text that must be kept, a visible replacement.
"""

from __future__ import annotations


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(text: str, name: str) -> str:
    """``text`` if UTF-8 can encode it, else ValueError naming the field."""
    if not encodable(text):
        raise ValueError(f"{name} is not valid Unicode text (it contains a lone surrogate such as \\ud800)")
    return text


def repaired(text: str) -> str:
    """``text`` with any unencodable character replaced by U+FFFD, for text that is kept whatever it holds."""
    return text if encodable(text) else "".join(c if encodable(c) else "\ufffd" for c in text)
