"""A user's threads and what their checkpoint history says: where each window stands, and every
compaction (what it evicted, the summary it wrote).

The threads of a user are those recall holds for its scope (``maintenance.transfer.scope_threads``);
one whose state records another owner is never theirs (``window.thread_owner``). Compactions are read
as ``maintenance.replay`` reads model calls: from the checkpoints, oldest first. Each ``compact``
step wrote one, holding the window after it, the new summary and the new ``evicted_count``; the
checkpoint it started from holds the messages it evicted. Nothing is reconstructed from today's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import BaseMessage

from pagefault.graph.saved_state import latest_saved
from pagefault.maintenance.transfer import scope_threads
from pagefault.stores.recall import HistoryTurns
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.window.thread_owner import ThreadOwnedError, claim_thread


@dataclass
class ThreadInfo:
    """Where one thread stands: its latest checkpoint's window (``in_window`` messages from message
    ``evicted``), how many ``messages`` it has had, its ``compactions`` and when it last changed
    (``updated_at``, ISO 8601, '' if the checkpoint does not say)."""

    thread_id: str
    updated_at: str
    messages: int
    evicted: int
    in_window: int
    compactions: int
    values: dict[str, Any] = field(repr=False, default_factory=dict)


def latest_values(checkpointer: Any, thread_id: str) -> tuple[dict[str, Any], str] | None:
    """The channel values of a thread's latest checkpoint and its time; None if there is no such thread."""
    latest = latest_saved(checkpointer, thread_id)
    if latest is None:
        return None
    return latest[1], str(latest[0].checkpoint.get("ts", "") or "")


def _info(thread_id: str, values: dict[str, Any], ts: str) -> ThreadInfo:
    evicted = int(values.get("evicted_count", 0) or 0)
    window = len(values.get("messages") or [])
    return ThreadInfo(thread_id, ts, evicted + window, evicted, window, int(values.get("compactions", 0) or 0), values)


def _owned(values: dict[str, Any], scope: Scope, thread_id: str) -> bool:
    try:
        claim_thread(values.get("owner") or None, scope, thread_id)
    except ThreadOwnedError:
        return False
    return True


def user_threads(checkpointer: Any, services: MemoryServices, scope: Scope) -> list[ThreadInfo]:
    """The threads of ``scope`` (recall's, as an export finds them) that the checkpointer holds,
    most recently changed first."""
    found = []
    for tid in scope_threads(services, scope):
        latest = latest_values(checkpointer, tid)
        if latest is not None and _owned(latest[0], scope, tid):
            found.append(_info(tid, *latest))
    return sorted(found, key=lambda t: (t.updated_at, t.thread_id), reverse=True)


def owned_thread(threads: list[ThreadInfo], thread_id: str) -> ThreadInfo | None:
    """The thread ``thread_id`` if it is one of ``threads`` (the user's), else None."""
    return next((t for t in threads if t.thread_id == thread_id), None)


@dataclass
class EvictedMessage:
    """One message a compaction evicted: its place in the thread and the message as it was."""

    message_index: int
    turn: int
    message: BaseMessage


@dataclass
class CompactionRecord:
    """One compaction of a thread: the ``number``-th (from 1), the checkpoint it wrote and when; the
    messages it ``evicted``, those it cut down in place (``truncated``), the ``summary`` it wrote over
    the ``previous_summary``, and the tokens of the model calls around it (``tokens_before``: the last
    one before, ``tokens_after``: the next one; None where there was none)."""

    number: int
    checkpoint_id: str
    created_at: str
    evicted: list[EvictedMessage]
    truncated: int
    summary: str
    previous_summary: str
    tokens_before: int | None = None
    tokens_after: int | None = None

    @property
    def first_message(self) -> int:
        """Message index of the first message evicted (-1 if it evicted none)."""
        return self.evicted[0].message_index if self.evicted else -1


def _total(values: dict[str, Any]) -> int | None:
    tokens = values.get("tokens") or {}
    return int(tokens["total"]) if "total" in tokens else None


def compactions(graph: Any, thread_id: str) -> list[CompactionRecord]:
    """Every compaction of a thread, oldest first, read from its checkpoint history (``graph``: a
    pagefault graph on the checkpointer that holds it)."""
    history = list(reversed(list(graph.get_state_history({"configurable": {"thread_id": thread_id}}))))
    numbering = HistoryTurns()
    turns = [numbering.turns(h.values or {}) for h in history]
    found: list[CompactionRecord] = []
    for k, (before, after) in enumerate(zip(history, history[1:])):
        was, now = before.values or {}, after.values or {}
        if "compact" not in (before.next or ()) or int(now.get("compactions", 0) or 0) <= int(was.get("compactions", 0) or 0):
            continue
        start = int(was.get("evicted_count", 0) or 0)
        n = int(now.get("evicted_count", 0) or 0) - start
        sent = list(was.get("messages") or [])
        numbered = turns[k] or []
        evicted = [EvictedMessage(start + i, numbered[i] if i < len(numbered) else -1, m) for i, m in enumerate(sent[:n])]
        kept = {m.id: m for m in sent[n:]}
        truncated = sum(1 for m in now.get("messages") or [] if m.id in kept and kept[m.id].content != m.content)
        later = next((_total(h.values or {}) for h in history[k + 2:]
                      if (h.values or {}).get("tokens") and (h.values or {}).get("tokens") != now.get("tokens")), None)
        found.append(CompactionRecord(
            len(found) + 1, str(after.config["configurable"].get("checkpoint_id", "")), str(after.created_at or ""),
            evicted, truncated, str(now.get("summary", "")), str(was.get("summary", "")), _total(was), later))
    return found


def shown_time(iso: str) -> str:
    """An ISO 8601 time as the pages show it: ``2026-05-03 14:02 UTC`` ('' stays '')."""
    if not iso:
        return ""
    try:
        return datetime.fromisoformat(iso).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return iso
