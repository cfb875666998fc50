"""README's code blocks, as a test reads them: in order, with the heading each sits under, and the
output each ``print(...)  # <what it prints>`` line says it gives ("..." stands for any text)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class Block:
    heading: str
    lang: str
    code: str

    def expected_prints(self) -> list[str]:
        """What the block's commented ``print`` lines say they print, in order."""
        return [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.+)$", self.code, re.M)]


def blocks(lang: str = "python") -> list[Block]:
    text = README.read_text()
    headings = [(m.start(), m.group(1)) for m in re.finditer(r"^##+ (.+)$", text, re.M)]
    out = []
    for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S):
        heading = [h for pos, h in headings if pos < m.start()][-1]
        out.append(Block(heading, lang, m.group(1)))
    return out


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` holds ``expected``'s text in order, each "..." standing for any text."""
    parts = [re.escape(p.strip()) for p in expected.split("...")]
    return re.search(r".*?".join(p for p in parts if p), printed, re.S) is not None
