"""Episodic replay: the main context exactly as the model saw it at a past turn.

Time travel through the checkpointer (``get_state_history``): every model call is a ``reason``
step, and the checkpoint that step wrote holds the system prompt it sent (``system_prompt``, with
core memory, procedures, summary and any memory-pressure note as they were then) and, before the
model's reply, the messages it sent. Nothing is reconstructed from today's memory.

Turns are message positions in the thread's full history, as citations give them (``messages[i]`` of
a checkpoint is turn ``evicted_count + i``). A turn may take several model calls (a memory tool
round trip, then the answer): ``step`` picks one, counting from 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from pagefault.text.messages import message_text


class ReplayError(LookupError):
    """No model call matches: unknown thread, a turn it never reached, or a step past the last."""


@dataclass
class ModelCall:
    """One model call of the past: what was sent, and where in the history it was."""

    thread_id: str
    turn: int  # the user turn the call answered
    step: int  # 0 for the first call of that turn
    steps: int  # how many calls that turn made
    checkpoint_id: str
    created_at: str
    system_prompt: str
    messages: list[BaseMessage]
    first_turn: int  # turn number of messages[0]
    tokens: dict[str, Any] = field(default_factory=dict)
    reply: BaseMessage | None = None

    def text(self) -> str:
        """A readable transcript: the system prompt, then each message with its turn and role."""
        head = (f"thread {self.thread_id}, turn {self.turn}, model call {self.step + 1} of {self.steps} "
                f"(checkpoint {self.checkpoint_id}, {self.created_at})")
        parts = [head]
        if self.tokens:
            parts.append("tokens: " + ", ".join(f"{k} {v}" for k, v in self.tokens.items()))
        parts += ["=== system ===", self.system_prompt]
        for i, m in enumerate(self.messages):
            parts.append(f"=== {m.type} (turn {self.first_turn + i}) ===")
            body = message_text(m)
            calls = getattr(m, "tool_calls", None)
            if calls:
                body += ("\n" if body else "") + "\n".join(f"[calls {c['name']}({json.dumps(c['args'], ensure_ascii=False)})]"
                                                           for c in calls)
            parts.append(body)
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "turn": self.turn, "step": self.step, "steps": self.steps,
                "checkpoint_id": self.checkpoint_id, "created_at": self.created_at,
                "system_prompt": self.system_prompt, "tokens": self.tokens, "first_turn": self.first_turn,
                "messages": [m.model_dump(mode="json") for m in self.messages]}


def _user_turn(values: dict[str, Any]) -> int | None:
    """Turn number of the latest human message in a checkpoint's state."""
    messages = values.get("messages") or []
    base = int(values.get("evicted_count", 0))
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return base + i
    return None


def model_calls(graph: Any, thread_id: str) -> list[ModelCall]:
    """Every recorded model call of a thread, oldest first: each checkpoint written by a ``reason`` step
    that added a reply, paired with the checkpoint that step started from (the messages it sent)."""
    config = {"configurable": {"thread_id": thread_id}}
    history = list(reversed(list(graph.get_state_history(config))))  # oldest first
    calls: list[ModelCall] = []
    for before, after in zip(history, history[1:]):
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
        turn = _user_turn({**(before.values or {}), "messages": sent})
        if turn is None:
            continue
        calls.append(ModelCall(thread_id, turn, 0, 1, str(after.config["configurable"].get("checkpoint_id", "")),
                               str(after.created_at or ""), prompt, sent,
                               int((before.values or {}).get("evicted_count", 0)), dict(values.get("tokens") or {}),
                               replies[0]))
    by_turn: dict[int, list[ModelCall]] = {}
    for c in calls:
        by_turn.setdefault(c.turn, []).append(c)
    for group in by_turn.values():
        for i, c in enumerate(group):
            c.step, c.steps = i, len(group)
    return calls


def replay(graph: Any, thread_id: str, turn: int, step: int = 0) -> ModelCall:
    """The model call ``step`` of user turn ``turn`` (a message position; a position that is not a user
    message means the user turn it belongs to)."""
    calls = model_calls(graph, thread_id)
    if not calls:
        raise ReplayError(f"thread {thread_id!r} has no recorded model calls")
    turns = sorted({c.turn for c in calls})
    at = max((t for t in turns if t <= turn), default=None)
    if at is None:
        raise ReplayError(f"thread {thread_id!r} has no model call at or before turn {turn}; "
                          f"user turns with model calls: {turns[:20]}")
    group = [c for c in calls if c.turn == at]
    if not 0 <= step < len(group):
        raise ReplayError(f"turn {at} of thread {thread_id!r} made {len(group)} model call(s); step must be "
                          f"0 to {len(group) - 1}")
    return group[step]
