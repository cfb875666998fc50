"""Write one benchmark's marked section of benchmarks/RESULTS.md, leaving the others as they are."""

from __future__ import annotations

from pathlib import Path

HEADER = "# Benchmark results\n\nEach section says the command that produced it.\n"


def write_section(path: Path, name: str, body: str) -> None:
    """Replace (or append) the block between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else HEADER
    block = f"{start}\n{body}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)
