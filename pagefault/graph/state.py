"""The graph's state: the main context's messages plus the bookkeeping paging needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Sequence, cast

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.graph import add_messages

from pagefault.text.unicode import encodable, repaired


def _repair(message: BaseMessage) -> BaseMessage:
    content = message.content
    if isinstance(content, str):
        return message if encodable(content) else message.model_copy(update={"content": repaired(content)})
    if not isinstance(content, list):
        return message
    strings = [p for p in content if isinstance(p, str)] + [v for p in content if isinstance(p, dict)
                                                             for v in p.values() if isinstance(v, str)]
    if not all(encodable(t) for t in strings):
        fixed = [repaired(p) if isinstance(p, str) else
                 {k: repaired(v) if isinstance(v, str) else v for k, v in p.items()} if isinstance(p, dict) else p
                 for p in content]
        return message.model_copy(update={"content": fixed})
    return message


def add_storable_messages(left: Any, right: Any) -> Any:
    """``add_messages``, with text UTF-8 cannot encode (lone surrogates, e.g. from a JSON ``\\ud800``
    escape) replaced by U+FFFD: every message must be storable by the checkpointer and the indexes."""
    # add_messages returns the merged list of message objects; its declared type is its (wider) input type.
    merged = cast("list[BaseMessage]", add_messages(left, right))
    return [_repair(m) for m in merged]


@dataclass
class InputState:
    """What a caller sends: new messages."""

    messages: Annotated[Sequence[AnyMessage], add_storable_messages] = field(default_factory=list)


@dataclass
class PagefaultState(InputState):
    """The main context (``messages``, ``summary``) and the counters that locate it in history.

    Two numbers place a message in its thread. Its *message index* is its position in the thread's
    full history: ``messages[i]`` is message ``evicted_count + i``; recall ids, ``evicted_count`` and
    ``recall_indexed`` count messages. Its *turn* is the conversational turn, from 0: a user message
    and every message up to the next one (``stores.recall.conversation_turns``), which
    ``evicted_user_messages`` lets a node number past the evicted messages. Evicted messages stay in
    recall and in earlier checkpoints.
    """

    summary: str = ""
    """Recursive summary of every evicted message."""
    evicted_count: int = 0
    """How many of the thread's oldest messages have been evicted from the window."""
    recall_indexed: int = 0
    """Messages below this message index are already in the recall index."""
    pressure_warned: bool = False
    """The one-shot memory-pressure warning has fired since the last compaction."""
    compactions: int = 0
    """How many times this thread has been compacted."""
    tokens: dict[str, Any] = field(default_factory=dict)
    """Token accounting of the last model call, by segment, with the window size."""
    owner: dict[str, str] = field(default_factory=dict)
    """The user and agent of the thread's first run; nobody else may run on it (``nodes.thread_owner``)."""
    system_prompt: str = ""
    """The system prompt of the last model call as it was sent: with the messages before that call, each
    checkpoint holds the main context exactly as the model saw it (``pagefault replay``)."""
    evicted_user_messages: int = -1
    """How many of the evicted messages are user messages: the turns that began before the window, so
    ``messages[i]`` is in turn ``evicted_user_messages`` + (user messages in ``messages[: i + 1]``) - 1.
    -1: not counted (a thread compacted before pagefault counted them; recall counts them then, see
    ``window.run.users_before``). With nothing evicted it is 0, whatever it says."""
