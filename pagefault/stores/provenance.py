"""Where a memory came from, and whether the poisoning guard flagged it.

Every write to memory (an archival record, a core-memory edit) carries a ``Provenance``; recalled
turns carry the same facts from their message's role. The source kind says whose words these
are: the user's own statement, text the agent wrote, an imported document, a tool's output, or
the system. ``flags`` lists the guard rules the text tripped (empty: nothing instruction-shaped).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

#: The kinds of source a memory can come from.
SOURCE_KINDS = ("user", "agent", "document", "tool", "system")
MAX_TURN = 2**53  # turns are message positions; JSON and the indexes hold integers this big exactly
MAX_EPOCH = 1e12
_ROLE_SOURCE = {"human": "user", "ai": "agent", "tool": "tool", "system": "system"}


def role_source(role: str) -> str:
    """The source kind of a chat message by its LangChain type (``human`` -> ``user``, ...)."""
    return _ROLE_SOURCE.get(role, "agent")


@dataclass
class Provenance:
    """Where a memory came from: thread, turn, source message, time, kind of source, guard flags."""

    thread_id: str = ""
    turn: int = -1
    message_id: str = ""
    source: str = "agent"
    created_at: float = field(default_factory=time.time)
    flags: tuple[str, ...] = ()
    offset: int = -1
    """Character offset of a document passage in its source file (-1: not a document passage)."""

    def __post_init__(self) -> None:
        if self.source not in SOURCE_KINDS:
            raise ValueError(f"source must be one of {', '.join(SOURCE_KINDS)}; got {self.source!r}")
        if not isinstance(self.thread_id, str) or not isinstance(self.message_id, str):
            raise ValueError("thread_id and message_id must be strings")
        if isinstance(self.turn, bool) or not isinstance(self.turn, int) or not -1 <= self.turn <= MAX_TURN:
            raise ValueError(f"turn must be an integer from -1 (none) to {MAX_TURN}, got {self.turn!r}")
        if (isinstance(self.created_at, bool) or not isinstance(self.created_at, (int, float))
                or not -MAX_EPOCH <= self.created_at <= MAX_EPOCH):
            raise ValueError(f"created_at must be epoch seconds, got {self.created_at!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < -1:
            raise ValueError(f"offset must be an integer >= -1, got {self.offset!r}")
        self.flags = tuple(self.flags)

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def trust(self) -> str:
        """``flagged`` when the guard found instruction-shaped text, else ``trusted``."""
        return "flagged" if self.flags else "trusted"

    def metadata(self) -> dict[str, Any]:
        """Flat fields for an index's metadata (Chroma takes str, int, float and bool)."""
        meta = {"turn": self.turn, "message_id": self.message_id, "source": self.source,
                "flags": "|".join(self.flags), "flagged": self.flagged}
        if self.offset >= 0:
            meta["offset"] = self.offset
        return meta

    @classmethod
    def from_metadata(cls, m: Mapping[str, Any]) -> "Provenance":
        source = m.get("source", "agent")
        return cls(
            thread_id=str(m.get("thread_id", "")), turn=int(m.get("turn", -1)), message_id=str(m.get("message_id", "")),
            source=source if source in SOURCE_KINDS else "agent", created_at=float(m.get("created_at", 0.0)),
            flags=tuple(f for f in str(m.get("flags", "")).split("|") if f), offset=_offset(m.get("offset")),
        )

    def log_entry(self, op: str) -> dict[str, Any]:
        """One line of a core block's edit log."""
        return {"op": op, "source": self.source, "thread_id": self.thread_id, "turn": self.turn,
                "message_id": self.message_id, "at": self.created_at, "flags": list(self.flags)}


def _offset(value: object) -> int:
    """A stored document offset, or -1 for anything that is not one (imported metadata may hold junk)."""
    return value if type(value) is int and value >= 0 else -1
