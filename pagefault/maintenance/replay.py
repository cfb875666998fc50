"""Episodic replay: the main context exactly as the model saw it at a past turn.

Time travel through the checkpointer (``get_state_history``): every model call is a ``reason``
step, and the checkpoint that step wrote holds the system prompt it sent (``system_prompt``, with
core memory, procedures, summary and any memory-pressure note as they were then) and, before the
model's reply, the messages it sent. Nothing is reconstructed from today's memory.

Calls are found by conversational turn, as citations give it (``turn``: a user message and what
follows it, counted from 0), or by message index (``message_index``: a message's position in the
thread's full history; ``messages[i]`` of a checkpoint is message ``evicted_count + i``), which means
the turn that message belongs to. A turn may take several model calls (a memory tool round trip,
then the answer): ``step`` picks one, counting from 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from pagefault.stores.recall import HistoryTurns
from pagefault.text.messages import message_text


class ReplayError(LookupError):
    """No model call matches: unknown thread, a turn it never reached, or a step past the last."""


@dataclass
class ModelCall:
    """One model call of the past: what was sent, and where in the history it was."""

    thread_id: str
    turn: int  # the conversational turn the call answered (-1: not known)
    step: int  # 0 for the first call of that turn
    steps: int  # how many calls that turn made
    checkpoint_id: str
    created_at: str
    system_prompt: str
    messages: list[BaseMessage]
    first_message_index: int  # message index of messages[0]
    tokens: dict[str, Any] = field(default_factory=dict)
    reply: BaseMessage | None = None
    message_index: int = -1  # message index of the user message the call answered
    turns: list[int] = field(default_factory=list)  # the conversational turn of each of messages

    def text(self) -> str:
        """A readable transcript: the system prompt, then each message with its turn, position and role."""
        head = (f"thread {self.thread_id}, {_at(self.turn, self.message_index)}, model call {self.step + 1} of "
                f"{self.steps} (checkpoint {self.checkpoint_id}, {self.created_at})")
        parts = [head]
        if self.tokens:
            parts.append("tokens: " + ", ".join(f"{k} {v}" for k, v in self.tokens.items()))
        parts += ["=== system ===", self.system_prompt]
        for i, m in enumerate(self.messages):
            parts.append(f"=== {m.type} ({_at(self.turns[i] if i < len(self.turns) else -1, self.first_message_index + i)}) ===")
            body = message_text(m)
            calls = getattr(m, "tool_calls", None)
            if calls:
                body += ("\n" if body else "") + "\n".join(f"[calls {c['name']}({json.dumps(c['args'], ensure_ascii=False)})]"
                                                           for c in calls)
            parts.append(body)
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "turn": self.turn, "message_index": self.message_index,
                "step": self.step, "steps": self.steps, "checkpoint_id": self.checkpoint_id,
                "created_at": self.created_at, "system_prompt": self.system_prompt, "tokens": self.tokens,
                "first_message_index": self.first_message_index, "turns": self.turns,
                "messages": [m.model_dump(mode="json") for m in self.messages]}


def _at(turn: int, message_index: int) -> str:
    return f"turn {turn if turn >= 0 else '?'}, message {message_index}"


def _last_user(messages: list[BaseMessage]) -> int | None:
    """Position of the latest human message in ``messages``."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return None


def model_calls(graph: Any, thread_id: str) -> list[ModelCall]:
    """Every recorded model call of a thread, oldest first: each checkpoint written by a ``reason`` step
    that added a reply, paired with the checkpoint that step started from (the messages it sent)."""
    config = {"configurable": {"thread_id": thread_id}}
    history = list(reversed(list(graph.get_state_history(config))))  # oldest first
    numbering = HistoryTurns()
    numbered = [numbering.turns(h.values or {}) for h in history]
    calls: list[ModelCall] = []
    for k, (before, after) in enumerate(zip(history, history[1:])):
        if "reason" not in (before.next or ()):
            continue
        sent = list((before.values or {}).get("messages") or [])
        values = after.values or {}
        now = list(values.get("messages") or [])
        prompt = values.get("system_prompt")
        known = {m.id for m in sent}
        replies = [m for m in now if m.id not in known]
        if not prompt or len(replies) != 1:  # respond=False (no model call), or a checkpoint from before replay
            continue
        user = _last_user(sent)
        if user is None:
            continue
        first = int((before.values or {}).get("evicted_count", 0))
        turns = numbered[k] or []
        calls.append(ModelCall(thread_id, turns[user] if turns else -1, 0, 1,
                               str(after.config["configurable"].get("checkpoint_id", "")), str(after.created_at or ""),
                               prompt, sent, first, dict(values.get("tokens") or {}), replies[0], first + user, turns))
    by_user_message: dict[int, list[ModelCall]] = {}  # one turn's calls: those answering one user message
    for c in calls:
        by_user_message.setdefault(c.message_index, []).append(c)
    for group in by_user_message.values():
        for i, c in enumerate(group):
            c.step, c.steps = i, len(group)
    return calls


def replay(graph: Any, thread_id: str, turn: int | None = None, step: int = 0, *,
           message_index: int | None = None) -> ModelCall:
    """The model call ``step`` of conversational turn ``turn`` (as citations give it), or of the turn
    the message at ``message_index`` belongs to (a citation's ``message_index``); give one of the two."""
    if (turn is None) == (message_index is None):
        raise ValueError("give a turn or a message_index (one of the two)")
    calls = model_calls(graph, thread_id)
    if not calls:
        raise ReplayError(f"thread {thread_id!r} has no recorded model calls")
    if message_index is not None:  # the user message it follows (or is): the latest one at or before it
        starts = sorted({c.message_index for c in calls})
        at = max((i for i in starts if i <= message_index), default=None)
        if at is None:
            raise ReplayError(f"thread {thread_id!r} has no model call at or before message {message_index}; "
                              f"user messages with model calls: {starts[:20]}")
        group = [c for c in calls if c.message_index == at]
    else:
        group = [c for c in calls if c.turn == turn]
        if not group:
            turns = sorted({c.turn for c in calls})
            raise ReplayError(f"thread {thread_id!r} has no model call in turn {turn}; turns with model calls: "
                              f"{turns[:20]}")
    if not 0 <= step < len(group):
        raise ReplayError(f"{_at(group[0].turn, group[0].message_index)} of thread {thread_id!r} made {len(group)} "
                          f"model call(s); step must be 0 to {len(group) - 1}")
    return group[step]
