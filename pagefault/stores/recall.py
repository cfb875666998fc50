"""Conversation recall: every message of every thread, evicted ones included, searchable.

The checkpointer is the source of truth. This index is derived from it: messages are indexed as
they appear in saved checkpoints, each with its thread, turn and the checkpoint that holds it,
and ``rebuild`` recreates the whole index by walking a thread's checkpoint history.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from pagefault.stores.hybrid import HybridIndex, IndexedText
from pagefault.stores.scope import Scope
from pagefault.tokens import message_text

#: Longest text indexed per message (the embedding sees less; BM25 sees all of it).
MAX_INDEXED_CHARS = 200_000


def recall_id(scope: Scope, thread_id: str, turn: int) -> str:
    return "rec-" + hashlib.sha256(f"{scope.key}\x00{thread_id}\x00{turn}".encode()).hexdigest()[:24]


def speaker(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return message.name or "user"
    if isinstance(message, AIMessage):
        return message.name or "assistant"
    if isinstance(message, ToolMessage):
        return f"tool {message.name or ''}".strip()
    return message.type


#: Tool results that only re-quote memory; recall keeps their first line, not the quoted payload.
REQUOTING_TOOLS = frozenset({"archival_memory_search", "conversation_search"})


def recall_text(message: BaseMessage) -> str:
    """How a message reads in recall: speaker, text, and any tool calls it made."""
    text = message_text(message)
    if isinstance(message, ToolMessage) and message.name in REQUOTING_TOOLS:
        text = text.split("\n", 1)[0]
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = "; ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
        text = f"{text} [called {calls}]".strip()
    return f"{speaker(message)}: {text}"[:MAX_INDEXED_CHARS]


@dataclass
class RecallHit:
    thread_id: str
    turn: int
    role: str
    text: str
    message_id: str
    checkpoint_id: str
    score: float
    external_id: str = ""

    def citation(self) -> dict[str, Any]:
        c = {"source": "recall", "thread_id": self.thread_id, "turn": self.turn,
             "checkpoint_id": self.checkpoint_id, "message_id": self.message_id}
        if self.external_id:
            c["external_id"] = self.external_id
        return c


class RecallIndex:
    """Hybrid index of past turns, keyed by (scope, thread, turn)."""

    def __init__(self, index: HybridIndex) -> None:
        self.index = index

    def add(
        self,
        scope: Scope,
        thread_id: str,
        entries: Iterable[tuple[int, BaseMessage]],
        checkpoint_id: str,
        created_at: float | None = None,
    ) -> int:
        """Index (turn, message) pairs that live in ``checkpoint_id``; idempotent."""
        now = time.time() if created_at is None else created_at
        items = []
        for turn, msg in entries:
            meta = msg.additional_kwargs.get("pagefault", {}) if msg.additional_kwargs else {}
            if meta.get("truncated"):
                continue  # the full text was indexed before truncation
            items.append(IndexedText(
                id=recall_id(scope, thread_id, turn), text=recall_text(msg), scope=scope.key,
                thread_id=thread_id, created_at=float(meta.get("timestamp", now)),
                metadata={"kind": "recall", "turn": turn, "role": msg.type, "message_id": msg.id or "",
                          "checkpoint_id": checkpoint_id or "", "external_id": str(meta.get("external_id", ""))},
            ))
        self.index.upsert(items)
        return len(items)

    def search(
        self, scope: Scope, query: str, top_k: int = 5, *, thread_id: str | None = None,
        start: float | None = None, end: float | None = None,
    ) -> list[RecallHit]:
        hits = self.index.search(query, scope.key, top_k, thread_id=thread_id, start=start, end=end)
        out = []
        for h in hits:
            m = h.metadata
            out.append(RecallHit(m.get("thread_id", ""), int(m.get("turn", -1)), m.get("role", ""), h.text,
                                 m.get("message_id", ""), m.get("checkpoint_id", ""), h.score,
                                 m.get("external_id", "")))
        return out

    def count(self, scope: Scope) -> int:
        return self.index.count(scope.key)

    def rebuild(self, checkpointer: Any, scope: Scope, thread_id: str) -> int:
        """Re-derive this thread's recall entries from its checkpoint history (oldest first)."""
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        seen: set[int] = set()
        total = 0
        for tup in reversed(list(checkpointer.list(config))):
            values = tup.checkpoint.get("channel_values", {})
            messages: Sequence[BaseMessage] = values.get("messages", []) or []
            offset = int(values.get("evicted_count", 0) or 0)
            new = [(offset + i, m) for i, m in enumerate(messages) if offset + i not in seen]
            seen.update(t for t, _ in new)
            total += self.add(scope, thread_id, new, tup.checkpoint["id"])
        return total
