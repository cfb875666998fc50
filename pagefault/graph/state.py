"""The graph's state: the main context's messages plus the bookkeeping paging needs.

The channels that change at nearly every step and hold the most (``messages``, ``summary``, ``tokens``,
``system_prompt``) are LangGraph ``DeltaChannel``s: a checkpoint stores what a step wrote to them, not
their whole value, and a full value every so many writes (``DeltaSpec.snapshot_every``); reading a
checkpoint replays the writes since the last full value through the reducer (``graph.saved_state`` does so for the readers
that take checkpoints straight from a saver). Their reducers are therefore deterministic and give the
same value however the writes are batched: a message written without an id gets one derived from where
it lands (``message_id``), never a random one, and the system prompt is written as a line patch
against the previous one (``prompt_patch``) when that is smaller.
"""

from __future__ import annotations

import difflib
import json
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Sequence, cast

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, convert_to_messages
from langchain_core.messages.utils import message_chunk_to_message
from langgraph.channels.delta import DeltaChannel
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


_IDS = uuid.UUID("6f1d2c3a-9b7e-4c55-8d0a-2f4e1b6c7a90")  # namespace of the ids ``message_id`` derives


def message_id(last: str, count: int, position: int, message: BaseMessage) -> str:
    """The id of a message written without one: derived from the id of the last message already there
    (``last``), how many there are (``count``), the message's position in its write, its type and its
    content. The same write on the same state gets the same id, as replaying a delta channel's writes
    requires (``add_messages`` would draw a random one each time)."""
    content = json.dumps(message.content, sort_keys=True, ensure_ascii=False, default=str)
    return str(uuid.uuid5(_IDS, f"{last}|{count}|{position}|{message.type}|{content}"))


def _listed(messages: Any) -> list[Any]:
    return list(messages) if isinstance(messages, (list, tuple)) else [messages]


def _messages(value: Any) -> list[Any]:
    return [message_chunk_to_message(m) for m in convert_to_messages(_listed(value))]


def _with_ids(last: str, count: int, new: list[Any]) -> list[Any]:
    return [m if m.id else m.model_copy(update={"id": message_id(last, count, i, m)}) for i, m in enumerate(new)]


def add_storable_messages(left: Any, right: Any) -> Any:
    """``add_messages``, with text UTF-8 cannot encode (lone surrogates, e.g. from a JSON ``\\ud800``
    escape) replaced by U+FFFD (every message must be storable by the checkpointer and the indexes),
    and an id for each new message without one from ``message_id``."""
    before = _messages(left)
    new = _with_ids(before[-1].id if before else "", len(before), _messages(right))
    # add_messages returns the merged list of message objects; its declared type is its (wider) input type.
    merged = cast("list[BaseMessage]", add_messages(before, new))
    return [_repair(m) for m in merged]


def fold_messages(state: Any, writes: Sequence[Any]) -> Any:
    """The ``messages`` reducer: each write merged in turn, as ``add_storable_messages`` merges one.

    A replay folds many writes (up to a snapshot's worth), so the writes between two that remove
    messages are merged in one ``add_messages`` call: without removals, merging by id one write at a
    time or all at once gives the same list. Only the ids of id-less messages need the state before
    their write, and for that its last id and its length are enough, which are followed here."""
    merged = _messages(state)
    known = {m.id for m in merged}
    last, count = (merged[-1].id if merged else ""), len(merged)
    pending: list[Any] = []
    for w in writes:
        new = _messages(w)
        if any(isinstance(m, RemoveMessage) for m in new):
            merged = add_storable_messages(add_messages(merged, pending) if pending else merged, new)
            pending, known = [], {m.id for m in merged}
            last, count = (merged[-1].id if merged else ""), len(merged)
            continue
        new = _with_ids(last, count, new)
        for m in new:
            if m.id not in known:
                known.add(m.id)
                last, count = m.id, count + 1
        pending += new
    if pending:
        merged = cast("list[BaseMessage]", add_messages(merged, pending))
    return [_repair(m) for m in merged]


def last_value(state: Any, writes: Sequence[Any]) -> Any:
    """The reducer of a channel that holds what was last written to it."""
    return writes[-1] if writes else state


#: What the ``reason`` node writes to ``summary`` at each model call: the summary as it is. A delta
#: channel's read walks back to its last full value, and only writes bring the next one: written at
#: compactions alone, the summary's last full value can be the thread's first checkpoint.
KEEP = None


def last_kept(state: Any, writes: Sequence[Any]) -> Any:
    """``last_value``, where a ``KEEP`` write leaves the value as it is."""
    for w in reversed(writes):
        if w is not KEEP:
            return w
    return state


def prompt_patch(old: str, new: str) -> str | dict[str, Any]:
    """What the ``reason`` node writes to ``system_prompt``: ``new`` itself, or, when it is much smaller,
    the lines that changed since ``old`` (the channel's value), which ``patched_prompt`` applies."""
    if not old:
        return new
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    ops: list[int | str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            ops.append(i2 - i1)
            continue
        if i2 > i1:
            ops.append(i1 - i2)  # skip these old lines
        if j2 > j1:
            ops.append("".join(b[j1:j2]))
    patch = {"patch": ops, "base": zlib.crc32(old.encode("utf-8", "surrogatepass"))}
    size = sum(len(o) if isinstance(o, str) else 4 for o in ops)
    return patch if 2 * size < len(new) and _apply(old, patch) == new else new


def _apply(old: str, patch: dict[str, Any]) -> str:
    lines, at, out = old.splitlines(keepends=True), 0, []
    for op in patch["patch"]:
        if isinstance(op, str):
            out.append(op)
        elif op >= 0:
            out += lines[at:at + op]
            at += op
        else:
            at -= op
    return "".join(out)


def patched_prompt(state: Any, writes: Sequence[Any]) -> Any:
    """The ``system_prompt`` reducer: a text replaces the prompt, a ``prompt_patch`` is applied to it."""
    for w in writes:
        if not isinstance(w, dict):
            state = w
        elif w.get("base") == zlib.crc32(str(state).encode("utf-8", "surrogatepass")):
            state = _apply(str(state), w)
        else:  # only the reason node writes patches, against the value it read: a patch never meets another base
            state = "[system prompt unknown: a patch was written against another prompt]"
    return state


@dataclass(frozen=True)
class DeltaSpec:
    """One delta channel: its reducer, its empty value, and how many writes to it go between two full values.

    A read walks back to the oldest of the channels' last full values, so each is stored about every ten
    turns: a turn writes ``messages`` about four times, and ``tokens``, ``system_prompt`` and ``summary``
    about twice (once per model call; ``summary`` as ``KEEP`` between compactions)."""

    reducer: Callable[[Any, Sequence[Any]], Any]
    empty: Callable[[], Any]
    snapshot_every: int

    def channel(self) -> DeltaChannel[Any]:
        """The ``DeltaChannel`` a state field is annotated with."""
        return DeltaChannel(self.reducer, snapshot_frequency=self.snapshot_every)


#: The delta channels of ``PagefaultState``.
DELTA_CHANNELS: dict[str, DeltaSpec] = {
    "messages": DeltaSpec(fold_messages, list, 40),
    "summary": DeltaSpec(last_kept, str, 20),
    "tokens": DeltaSpec(last_value, dict, 20),
    "system_prompt": DeltaSpec(patched_prompt, str, 20),
}


@dataclass
class InputState:
    """What a caller sends: new messages."""

    messages: Annotated[Sequence[AnyMessage], DELTA_CHANNELS["messages"].channel()] = \
        field(default_factory=list)


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

    summary: Annotated[str, DELTA_CHANNELS["summary"].channel()] = ""
    """Recursive summary of every evicted message. Written by compactions; each model call writes ``KEEP``
    (None), which leaves it as it is (so a node's update, as streamed, may say ``"summary": None``)."""
    evicted_count: int = 0
    """How many of the thread's oldest messages have been evicted from the window."""
    recall_indexed: int = 0
    """Messages below this message index are already in the recall index."""
    pressure_warned: bool = False
    """The one-shot memory-pressure warning has fired since the last compaction."""
    compactions: int = 0
    """How many times this thread has been compacted."""
    tokens: Annotated[dict[str, Any], DELTA_CHANNELS["tokens"].channel()] = \
        field(default_factory=dict)
    """Token accounting of the last model call, by segment, with the window size."""
    owner: dict[str, str] = field(default_factory=dict)
    """The user and agent of the thread's first run; nobody else may run on it (``nodes.thread_owner``)."""
    system_prompt: Annotated[str, DELTA_CHANNELS["system_prompt"].channel()] = ""
    """The system prompt of the last model call as it was sent: with the messages before that call, each
    checkpoint holds the main context exactly as the model saw it (``pagefault replay``)."""
    compacted_at: str = ""
    """The id of the last message when a compaction last ran: ``reason`` sends the run to compaction only
    when the window is past its trigger and a message has come since, so a window that compaction cannot
    bring under its trigger (one huge turn) is compacted once per model call, not again and again."""
    evicted_user_messages: int = -1
    """How many of the evicted messages are user messages: the turns that began before the window, so
    ``messages[i]`` is in turn ``evicted_user_messages`` + (user messages in ``messages[: i + 1]``) - 1.
    -1: not counted (a thread compacted before pagefault counted them; recall counts them then, see
    ``window.run.users_before``). With nothing evicted it is 0, whatever it says."""
