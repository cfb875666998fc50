"""The graph's state as a checkpointer saved it, for the readers that take checkpoints straight from a
saver (``get_tuple``, ``list``) instead of through the graph (``get_state``, ``get_state_history``).

A checkpoint's ``channel_values`` hold the delta channels of ``graph.state`` (``DELTA_CHANNELS``) only at
a snapshot; elsewhere their value is the last snapshot's with the writes since applied by the channel's
reducer, which is what ``saved_values`` (one checkpoint) and ``saved_history`` (a whole thread, in one
pass) give back. Data written before these channels were delta channels has the whole value in every
checkpoint and reads the same way.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator, Mapping, Sequence

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.types import Overwrite

from pagefault.graph.state import DELTA_CHANNELS

#: Each delta channel, to read its stored values back as LangGraph does (``from_checkpoint``).
_CHANNELS = {name: spec.channel() for name, spec in DELTA_CHANNELS.items()}


def _plain(channel: str, stored: Any) -> Any:
    """The value a delta channel's stored blob holds (a snapshot's, or a whole value stored before the
    channel was a delta channel), read by the channel itself; None for none."""
    return None if stored is None else _CHANNELS[channel].from_checkpoint(stored).get()


def _fold(channel: str, base: Any, writes: Sequence[Any]) -> Any:
    spec = DELTA_CHANNELS[channel]
    reducer, state = spec.reducer, spec.empty() if base is None else base
    pending: list[Any] = []
    for w in writes:
        if isinstance(w, Overwrite):  # a reset: what came before it no longer counts
            state, pending = (spec.empty() if w.value is None else w.value), []
        else:
            pending.append(w)
    return reducer(state, pending) if pending else state


def _stored(tup: CheckpointTuple) -> tuple[dict[str, Any], list[str]]:
    """A checkpoint's stored values (snapshots unwrapped), and the delta channels it must rebuild."""
    values = {k: _plain(k, v) if k in DELTA_CHANNELS else v for k, v in (tup.checkpoint.get("channel_values") or {}).items()}
    versions = tup.checkpoint.get("channel_versions") or {}
    return values, [ch for ch in DELTA_CHANNELS if ch not in values and ch in versions]


def saved_values(saver: BaseCheckpointSaver, tup: CheckpointTuple) -> dict[str, Any]:
    """The channel values of checkpoint ``tup`` of ``saver``, delta channels rebuilt."""
    values, missing = _stored(tup)
    if missing:
        history = saver.get_delta_channel_history(config=tup.config, channels=missing)
        for ch in missing:
            entry = history.get(ch) or {"writes": []}
            values[ch] = _fold(ch, _plain(ch, entry.get("seed")), [w[2] for w in entry["writes"]])
    return values


def latest_saved(saver: BaseCheckpointSaver, thread_id: str) -> tuple[CheckpointTuple, dict[str, Any]] | None:
    """A thread's latest checkpoint and its channel values; None if the saver has no such thread."""
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    return None if tup is None else (tup, saved_values(saver, tup))


def _with_values(tup: CheckpointTuple, values: dict[str, Any]) -> CheckpointTuple:
    checkpoint = dict(tup.checkpoint)
    checkpoint["channel_values"] = values
    return tup._replace(checkpoint=checkpoint)  # type: ignore[arg-type]


def saved_history(saver: BaseCheckpointSaver, config: Mapping[str, Any]) -> list[CheckpointTuple]:
    """Every checkpoint ``saver.list(config)`` gives, oldest first, each with its channel values whole.

    One pass: a checkpoint's delta channels are its parent's values with the writes stored at the parent
    applied (what the step between them wrote). A checkpoint whose parent is not listed, or has other
    children too (a fork: the parent's writes are not all on this path), is rebuilt on its own by the
    saver's ancestor walk (``saved_values``)."""
    tuples = sorted(saver.list(dict(config)), key=lambda t: t.checkpoint["id"])  # type: ignore[arg-type]
    by_id = {t.checkpoint["id"]: t for t in tuples}

    def parent_of(t: CheckpointTuple) -> str | None:
        return ((t.parent_config or {}).get("configurable") or {}).get("checkpoint_id")

    children = Counter(parent_of(t) for t in tuples)
    rebuilt: dict[str, dict[str, Any]] = {}
    out: list[CheckpointTuple] = []
    for t in tuples:
        values, missing = _stored(t)
        parent = parent_of(t)
        if missing and parent in rebuilt and children[parent] == 1:
            before, writes = rebuilt[parent], by_id[parent].pending_writes or []
            for ch in missing:
                values[ch] = _fold(ch, before.get(ch), [w[2] for w in writes if w[1] == ch])
        elif missing:
            values = saved_values(saver, t)
        rebuilt[t.checkpoint["id"]] = values
        out.append(_with_values(t, values))
    return out


class SavedHistory:
    """A saver whose ``list`` gives checkpoints with their channel values whole (``saved_history``),
    newest first as a saver's does: for code written against ``checkpointer.list`` (``RecallIndex.rebuild``)."""

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver = saver

    def list(self, config: Mapping[str, Any]) -> Iterator[CheckpointTuple]:
        """The checkpoints of ``config``'s thread, newest first, channel values whole."""
        return reversed(saved_history(self.saver, config))
