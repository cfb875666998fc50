"""Bad input files for the import tests: one parameter says what stands at the path."""

from __future__ import annotations

from pathlib import Path

DIR = "DIR"
"""A directory where the file should be."""
MISSING = "MISSING"
"""Nothing at the path."""


def place(path: Path, content: str | bytes) -> Path:
    """Put ``content`` at ``path``: ``DIR`` makes a directory, ``MISSING`` leaves nothing, bytes are written
    as they are, text as UTF-8 (lone surrogates kept, for the files that must carry one). Returns ``path``."""
    if content == DIR:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content != MISSING:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    return path
