"""The graph's state: the main context's messages plus the bookkeeping paging needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Sequence

from langchain_core.messages import AnyMessage
from langgraph.graph import add_messages


@dataclass
class InputState:
    """What a caller sends: new messages."""

    messages: Annotated[Sequence[AnyMessage], add_messages] = field(default_factory=list)


@dataclass
class PagefaultState(InputState):
    """The main context (``messages``, ``summary``) and the counters that locate it in history.

    Turn numbers are positions in the thread's full history: ``messages[i]`` is turn
    ``evicted_count + i``. Evicted turns stay in recall and in earlier checkpoints.
    """

    summary: str = ""
    """Recursive summary of every evicted message."""
    evicted_count: int = 0
    """How many of the thread's oldest messages have been evicted from the window."""
    recall_indexed: int = 0
    """Turns below this number are already in the recall index."""
    pressure_warned: bool = False
    """The one-shot memory-pressure warning has fired since the last compaction."""
    compactions: int = 0
    """How many times this thread has been compacted."""
    tokens: dict[str, Any] = field(default_factory=dict)
    """Token accounting of the last model call, by segment, with the window size."""
