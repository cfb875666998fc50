"""Where a memory came from, and whether the poisoning guard flagged it.

Every write to memory (an archival record, a core-memory edit) carries a ``Provenance``; recalled
turns carry the same facts from their message's role. The source kind says whose words these
are: the user's own statement, text the agent wrote, an imported document, a tool's output, or
the system. ``flags`` lists the guard rules the text tripped (empty: nothing instruction-shaped).

Where in a thread a memory came from is said twice: ``turn`` is the *conversational* turn (a user
message and everything up to the next user message is one turn, counted from 0; messages before a
thread's first user message belong to turn 0), and ``message_index`` is the message's position in
the thread's full history (what recall ids, ``evicted_count`` and ``recall_indexed`` count). -1 means
none or unknown: a record written before pagefault counted turns knows only its message index.

Stored index metadata keeps its old keys: ``turn`` there is the message index (as it always was, so
records written before stay valid) and ``conversation_turn`` is the turn. Edit-log entries (core
blocks, procedures) say ``turn`` and ``message_index``; an entry without ``message_index`` is an old
one whose ``turn`` was the message index (``log_position`` reads both).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

#: The kinds of source a memory can come from.
SOURCE_KINDS = ("user", "agent", "document", "tool", "system")
MAX_TURN = 2**53  # turns and message positions: JSON and the indexes hold integers this big exactly
MAX_EPOCH = 1e12
_ROLE_SOURCE = {"human": "user", "ai": "agent", "tool": "tool", "system": "system"}


def role_source(role: str) -> str:
    """The source kind of a chat message by its LangChain type (``human`` -> ``user``, ...)."""
    return _ROLE_SOURCE.get(role, "agent")


@dataclass
class Provenance:
    """Where a memory came from: thread, turn, source message, time, kind of source, guard flags.

    ``thread_id`` and ``message_id`` name the source message ('' for none); ``source`` is one of
    ``SOURCE_KINDS`` (whose words these are); ``created_at``, when it was written (epoch seconds);
    ``flags``, the guard rules the text tripped (see the module docstring).
    """

    thread_id: str = ""
    turn: int = -1
    """The conversational turn of the source message, from 0 (-1: none, or not known)."""
    message_id: str = ""
    source: str = "agent"
    created_at: float = field(default_factory=time.time)
    flags: tuple[str, ...] = ()
    offset: int = -1
    """Character offset of a document passage in its source file (-1: not a document passage)."""
    message_index: int = -1
    """Position of the source message in the thread's full history (-1: none, or not known)."""

    def __post_init__(self) -> None:
        if self.source not in SOURCE_KINDS:
            raise ValueError(f"source must be one of {', '.join(SOURCE_KINDS)}; got {self.source!r}")
        if not isinstance(self.thread_id, str) or not isinstance(self.message_id, str):
            raise ValueError("thread_id and message_id must be strings")
        for name, n in (("turn", self.turn), ("message_index", self.message_index)):
            if isinstance(n, bool) or not isinstance(n, int) or not -1 <= n <= MAX_TURN:
                raise ValueError(f"{name} must be an integer from -1 (none) to {MAX_TURN}, got {n!r}")
        if (isinstance(self.created_at, bool) or not isinstance(self.created_at, (int, float))
                or not -MAX_EPOCH <= self.created_at <= MAX_EPOCH):
            raise ValueError(f"created_at must be epoch seconds, got {self.created_at!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < -1:
            raise ValueError(f"offset must be an integer >= -1, got {self.offset!r}")
        self.flags = tuple(self.flags)

    @property
    def flagged(self) -> bool:
        """Whether the guard found instruction-shaped text (any ``flags``)."""
        return bool(self.flags)

    @property
    def trust(self) -> str:
        """``flagged`` when the guard found instruction-shaped text, else ``trusted``."""
        return "flagged" if self.flags else "trusted"

    def metadata(self) -> dict[str, Any]:
        """Flat fields for an index's metadata (Chroma takes str, int, float and bool). ``turn`` is the
        message index there, as in records written before turns were counted; ``conversation_turn`` the turn."""
        meta = {"turn": self.message_index, "conversation_turn": self.turn, "message_id": self.message_id,
                "source": self.source, "flags": "|".join(self.flags), "flagged": self.flagged}
        if self.offset >= 0:
            meta["offset"] = self.offset
        return meta

    @classmethod
    def from_metadata(cls, m: Mapping[str, Any]) -> "Provenance":
        """The provenance an index's metadata ``m`` holds (``metadata`` wrote it; older records'
        keys are read as well, and a value out of range as unknown)."""
        source = m.get("source", "agent")
        return cls(
            thread_id=str(m.get("thread_id", "")), turn=_position(m.get("conversation_turn")),
            message_id=str(m.get("message_id", "")), source=source if source in SOURCE_KINDS else "agent",
            created_at=float(m.get("created_at", 0.0)), flags=tuple(f for f in str(m.get("flags", "")).split("|") if f),
            offset=_offset(m.get("offset")), message_index=_position(m.get("turn")),
        )

    def log_entry(self, op: str) -> dict[str, Any]:
        """One line of a core block's edit log."""
        return {"op": op, "source": self.source, "thread_id": self.thread_id, "turn": self.turn,
                "message_index": self.message_index, "message_id": self.message_id, "at": self.created_at,
                "flags": list(self.flags)}


def log_position(entry: Mapping[str, Any]) -> tuple[int, int]:
    """(turn, message index) of an edit-log entry; -1 for what it does not know. An entry written
    before turns were counted has no ``message_index``: its ``turn`` was the message index."""
    if "message_index" not in entry:
        return -1, _position(entry.get("turn"))
    return _position(entry.get("turn")), _position(entry.get("message_index"))


def shown_log_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An edit-log entry as it is shown (tool results, exports): an old one with its message index
    under ``message_index`` and ``turn`` -1 (not known), a new one as it is."""
    turn, message_index = log_position(entry)
    return {**entry, "turn": turn, "message_index": message_index}


def _position(value: object) -> int:
    """A stored turn or message index, or -1 for a missing one or junk (imported metadata may hold any)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if type(value) is int and -1 <= value <= MAX_TURN else -1


def _offset(value: object) -> int:
    """A stored document offset, or -1 for anything that is not one (imported metadata may hold junk)."""
    return value if type(value) is int and value >= 0 else -1
