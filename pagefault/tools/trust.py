"""Trust of memory writes: where the text of one came from, and whether the context is tainted.

The memory node knows what the model has read since the user's last message: the message itself,
tool outputs, memory search hits (with their guard flags). From that it can say where a piece of
text the model asks to store came from (``attribute``). It also knows everything still in the
context window, and whether a core-memory edit may have been steered by untrusted content
(``untrusted``): the edit's own text is instruction-shaped, or the context holds flagged memory, or a
tool output or a tool's error that the guard flags, read in this turn or an earlier one. Taint
follows the text, not the turn: it lasts while the text is in the window, and a tool's text is
scanned in full (``safety.pieces``), as the model reads it. Core memory is pinned in every prompt,
so such edits are refused, sent to a human, or allowed, as ``Context`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from pagefault.safety.guard import scan
from pagefault.safety.pieces import scan_in_full
from pagefault.text.messages import message_text

#: Memory tools whose results are search hits (carrying their own provenance and flags).
SEARCH_TOOLS = frozenset({"archival_memory_search", "conversation_search"})
#: Memory tools that edit core memory.
CORE_TOOLS = frozenset({"core_memory_append", "core_memory_replace"})


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class Origins:
    """What the current turn has read so far, for attributing the memory writes it makes, and why the
    context is tainted (``taint``), for vetting them."""

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
    return list(messages[_turn_start(messages):])


def _turn_start(messages: Sequence[BaseMessage]) -> int:
    return max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)


def origins_of(messages: Sequence[BaseMessage], memory_tools: frozenset[str]) -> Origins:
    """What the current turn read, and the taint of the whole context, ``messages`` (see ``context_taint``)."""
    turn = turn_messages(messages)
    user = next((message_text(m) for m in turn if isinstance(m, HumanMessage)), "")
    outputs: list[str] = []
    hits: list[dict[str, Any]] = []
    for m in turn:
        if not isinstance(m, ToolMessage) or m.status == "error":
            continue
        if m.name in SEARCH_TOOLS:
            hits += _hits(m)
        elif m.name not in memory_tools:
            outputs.append(message_text(m))
    return Origins(user, tuple(outputs), tuple(hits), context_taint(messages, memory_tools))


def context_taint(messages: Sequence[BaseMessage], memory_tools: frozenset[str]) -> tuple[str, ...]:
    """Why the context, ``messages``, is tainted (empty: it is not): flagged memory hits, and tool outputs
    and tool errors the guard flags (scanned to their end), in the current turn or any earlier one still
    there. A memory tool's own answer and error are pagefault's text (and the model's arguments), not
    read from anywhere; a user's message is judged by the edit's own text, not held against it."""
    start = _turn_start(messages)
    taint: list[str] = []
    for i, m in enumerate(messages):
        if not isinstance(m, ToolMessage):
            continue
        read = "this turn read" if i >= start else "the context holds, from an earlier turn,"
        if m.name in SEARCH_TOOLS and m.status != "error":
            for h in _hits(m):
                if h.get("flags"):
                    where = h.get("id") or (f"thread {h.get('thread_id')} turn {h.get('turn')} "
                                            f"(message {h.get('message_index')})")
                    taint.append(f"{read} flagged memory ({where}: {', '.join(h['flags'])})")
        elif m.name not in memory_tools:
            rules = scan_in_full(message_text(m)).rules
            if rules:
                what = "error text" if m.status == "error" else "output"
                taint.append(f"{read} flagged {what} of tool {m.name} ({', '.join(rules)})")
    return tuple(dict.fromkeys(taint))


def _hits(m: ToolMessage) -> list[dict[str, Any]]:
    """The search hits a memory search's answer carries (its artifact's ``hits``)."""
    art = m.artifact if isinstance(m.artifact, dict) else {}
    found = art.get("hits")
    return [h for h in found if isinstance(h, dict)] if isinstance(found, list) else []
