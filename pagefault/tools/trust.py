"""Trust within one turn: where the text of a memory write came from, and whether it is tainted.

The memory node knows what the model has read since the user's last message: the message itself,
tool outputs, memory search hits (with their guard flags). From that it can say where a piece of
text the model asks to store came from (``attribute``), and whether a core-memory edit may have
been steered by untrusted content (``untrusted``): the edit's own text is instruction-shaped, or
the turn read flagged memory or flagged tool output before making it. Core memory is pinned in
every prompt, so such edits are refused, sent to a human, or allowed, as ``Context`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from pagefault.safety.guard import scan
from pagefault.text.messages import message_text

#: Memory tools whose results are search hits (carrying their own provenance and flags).
SEARCH_TOOLS = frozenset({"archival_memory_search", "conversation_search"})
#: Memory tools that edit core memory.
CORE_TOOLS = frozenset({"core_memory_append", "core_memory_replace"})
#: Characters of a tool output scanned for taint (what a model reads of it).
SCAN_CHARS = 20_000


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class Origins:
    """What the current turn has read so far, for attributing and vetting the memory writes it makes."""

    user_text: str = ""
    tool_outputs: tuple[str, ...] = ()
    hits: tuple[dict[str, Any], ...] = ()
    taint: tuple[str, ...] = field(default=())

    def attribute(self, text: str) -> str:
        """The source kind of ``text``: the user's words, a tool's or a hit's (its origin), else the agent's."""
        t = _norm(text)
        if len(t) < 3:
            return "agent"
        if t in _norm(self.user_text):
            return "user"
        if any(t in _norm(out) for out in self.tool_outputs):
            return "tool"
        for h in self.hits:
            if t in _norm(str(h.get("text", ""))):
                return str(h.get("origin") or "agent")
        return "agent"

    def untrusted(self, text: str) -> list[str]:
        """Why an edit with this text may not be trusted (empty: nothing against it)."""
        return [f"the text is instruction-shaped ({r})" for r in scan(text).rules] + list(self.taint)


def turn_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The current turn: the last human message and everything after it."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
    return list(messages[start:])


def origins_of(messages: Sequence[BaseMessage], memory_tools: frozenset[str]) -> Origins:
    """What the current turn read, and the taint it picked up (flagged hits, flagged tool output)."""
    turn = turn_messages(messages)
    user = next((message_text(m) for m in turn if isinstance(m, HumanMessage)), "")
    outputs: list[str] = []
    hits: list[dict[str, Any]] = []
    taint: list[str] = []
    for m in turn:
        if not isinstance(m, ToolMessage) or m.status == "error":
            continue
        if m.name in SEARCH_TOOLS:
            art = m.artifact if isinstance(m.artifact, dict) else {}
            for h in art.get("hits", []) if isinstance(art.get("hits"), list) else []:
                if not isinstance(h, dict):
                    continue
                hits.append(h)
                if h.get("flags"):
                    where = h.get("id") or (f"thread {h.get('thread_id')} turn {h.get('turn')} "
                                            f"(message {h.get('message_index')})")
                    taint.append(f"this turn read flagged memory ({where}: {', '.join(h['flags'])})")
        elif m.name not in memory_tools:
            text = message_text(m)
            outputs.append(text)
            rules = scan(text[:SCAN_CHARS]).rules
            if rules:
                taint.append(f"this turn read flagged output of tool {m.name} ({', '.join(rules)})")
    return Origins(user, tuple(outputs), tuple(hits), tuple(dict.fromkeys(taint)))
