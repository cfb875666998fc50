"""The delta channels' history at each thread's latest checkpoint, kept by the process that wrote it.

A ``DeltaChannel`` (``graph.state.DELTA_CHANNELS``) is stored as its writes, with its whole value only
every so often, so a run that starts from a checkpoint asks the saver for the channel's history
(``get_delta_channel_history``: the nearest stored value up the parent chain, and every write since).
On ``PostgresSaver`` that is two queries and tens of rows at the start of every turn (10 to 12 ms
here on a long thread, against 1 to 2 on ``SqliteSaver``). The savers of this module answer it from
memory for the checkpoints this process saved, and read it from the database otherwise.

What they remember is what a read would give, built the way the saver's own read builds it: the
history of a checkpoint is its parent's stored value (or its parent's history) followed by the
writes saved against the parent, in ``writes_sort_key`` order, duplicates dropped as the saver's
``INSERT ... ON CONFLICT DO NOTHING`` drops them. Nothing about a reducer is assumed; LangGraph
replays the answer as it would replay a read.

It is conservative. A thread is remembered from the first checkpoint this process loaded or saved
whose history is known (the loop's own ``get_tuple`` and read at the start of a run seed it), and
forgotten at anything it cannot follow: a checkpoint saved under a parent that is not the one
remembered (a fork, time travel, another saver), writes against another checkpoint, a loaded
checkpoint whose delta writes differ from those remembered (another process wrote them), a newer
checkpoint than the one remembered (another replica ran the thread), and any delete or prune.
Only the root namespace is kept, and only the ``THREADS_KEPT`` threads run most recently.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    writes_sort_key,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from pagefault.graph.state import DELTA_CHANNELS

#: Threads whose latest checkpoint's delta history a saver keeps (the most recently run). Each holds the
#: channels' last stored values and the writes since, about 175 KB of Python objects on a 4,096-token
#: window (measured on a 120-turn thread), so at most about 45 MB.
THREADS_KEPT = 256


@dataclass
class _Head:
    """A thread's latest checkpoint as this process knows it."""

    id: str
    stored: dict[str, Any]
    """Tracked channels whose value the checkpoint stores (a snapshot, or data from before delta)."""
    versioned: frozenset[str]
    """Channels the checkpoint has a version of (one without was never written)."""
    history: dict[str, DeltaChannelHistory]
    """What a read of this checkpoint gives for each tracked channel it neither stores nor lacks."""
    writes: dict[tuple[str, int], tuple[tuple[str, str, int], str, str, Any]] = field(default_factory=dict)
    """Tracked channels' writes saved against it: (task id, idx) -> (sort key, task id, channel, value)."""

    def missing(self, channels: Iterable[str]) -> list[str]:
        """The tracked channels a run from this checkpoint rebuilds whose history is not known yet."""
        return [ch for ch in channels if ch in self.versioned and ch not in self.stored and ch not in self.history]

    def sorted_writes(self) -> list[tuple[str, str, Any]]:
        """Its writes as a read gives them: (task id, channel, value), in ``writes_sort_key`` order."""
        return [(task, ch, value) for _key, task, ch, value in sorted(self.writes.values(), key=lambda w: w[0])]


def _thread(config: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(thread id, checkpoint id) of a config in the root namespace; None for a nested namespace."""
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None or conf.get("checkpoint_ns", ""):
        return None
    cid = conf.get("checkpoint_id")
    return str(conf["thread_id"]), (str(cid) if cid else None)


class DeltaMemo:
    """The bookkeeping behind the savers of this module (see the module docstring); thread-safe."""

    def __init__(self, channels: Iterable[str] = tuple(DELTA_CHANNELS), threads: int = THREADS_KEPT) -> None:
        self.channels = frozenset(channels)
        self.threads = threads
        self._heads: OrderedDict[str, _Head] = OrderedDict()
        #: writes that reached the saver before their checkpoint did, by thread and checkpoint id
        self._early: OrderedDict[str, dict[str, dict[tuple[str, int], tuple[tuple[str, str, int], str, str, Any]]]] = \
            OrderedDict()
        #: threads some of whose writes were not kept (``_early_for``): followed again from their next read.
        #: It grows only while more than ``threads`` threads save at once, by one thread id each time.
        self._lost: set[str] = set()
        self._lock = threading.Lock()
        self.answered = 0
        """Reads answered from memory (for tests and benchmarks)."""
        self.missed = 0
        """Reads the saver answered from its database."""

    def _keep(self, thread: str, head: _Head) -> None:
        self._heads[thread] = head
        self._heads.move_to_end(thread)
        while len(self._heads) > self.threads:
            self._drop(next(iter(self._heads)))

    def _early_for(self, thread: str) -> dict[str, dict[tuple[str, int], tuple[tuple[str, str, int], str, str, Any]]]:
        """The writes of ``thread`` waiting for their checkpoint. At most ``threads`` threads wait: the one
        waiting longest is forgotten whole and marked lost (``_lost``), so no history is ever built without
        its writes, not even from its first checkpoint, which needs no parent."""
        if thread not in self._early:
            self._early[thread] = {}
            while len(self._early) > self.threads:
                oldest = next(iter(self._early))
                self._drop(oldest)
                self._lost.add(oldest)
        return self._early[thread]

    def _drop(self, thread: str) -> None:
        self._heads.pop(thread, None)
        self._early.pop(thread, None)

    def forget(self, thread: str | None = None) -> None:
        """Forget ``thread`` (None: every thread)."""
        with self._lock:
            if thread is None:
                self._heads.clear()
                self._early.clear()
                self._lost.clear()
            else:
                self._drop(thread)
                self._lost.discard(thread)

    def loaded(self, tup: CheckpointTuple | None) -> None:
        """A ``get_tuple`` answer: a newer checkpoint than the one remembered starts the thread again from
        it (its history still to be read); the remembered one is checked against the writes read with it."""
        if tup is None or (where := _thread(tup.config)) is None:
            return
        thread, cid = where[0], str(tup.checkpoint["id"])
        ours = [(task, ch) for task, ch, _v in tup.pending_writes or () if ch in self.channels]
        with self._lock:
            head = self._heads.get(thread)
            if head is not None and head.id == cid:
                if [(task, ch) for task, ch, _v in head.sorted_writes()] != ours:
                    self._drop(thread)  # another process wrote against it
                return
            if head is not None and cid < head.id:
                return  # an older checkpoint read (history, time travel): the latest is still the one kept
            self._drop(thread)
            if ours:
                return  # writes whose order among new ones cannot be known without their task paths
            self._lost.discard(thread)  # followed again from this read
            values = tup.checkpoint.get("channel_values") or {}
            self._keep(thread, _Head(cid, {ch: values[ch] for ch in self.channels if ch in values},
                                     frozenset(tup.checkpoint.get("channel_versions") or {}), {}))

    def head(self, config: RunnableConfig) -> str | None:
        """The id of the last checkpoint this process saved on ``config``'s thread and still follows (a
        finished run's end: no other process saves on a thread while a run holds it); None if none."""
        where = _thread(config)
        if where is None:
            return None
        with self._lock:
            head = self._heads.get(where[0])
            return None if head is None else head.id

    def answer(self, config: RunnableConfig, channels: Sequence[str]) -> dict[str, DeltaChannelHistory] | None:
        """The read of ``channels`` at ``config``'s checkpoint, if it is a remembered thread's latest and
        every channel's history is known; None: read it from the saver."""
        where = _thread(config)
        if where is None or where[1] is None:
            return None
        with self._lock:
            head = self._heads.get(where[0])
            if head is None or head.id != where[1] or not all(ch in head.history for ch in channels):
                return None
            self._heads.move_to_end(where[0])
            self.answered += 1
            return {ch: _copy(head.history[ch]) for ch in channels}

    def read(self, config: RunnableConfig, channels: Sequence[str], found: Mapping[str, DeltaChannelHistory]) -> None:
        """A read from the saver: the histories of a remembered latest checkpoint that were not known."""
        where = _thread(config)
        if where is None or where[1] is None:
            return
        with self._lock:
            self.missed += 1
            head = self._heads.get(where[0])
            if head is None or head.id != where[1]:
                return
            for ch in head.missing(ch for ch in channels if ch in self.channels):
                if ch in found:
                    head.history[ch] = _copy(found[ch])

    def wrote(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> None:
        """``put_writes`` saved ``writes`` against ``config``'s checkpoint."""
        where = _thread(config)
        if where is None:
            return
        tracked = [(WRITES_IDX_MAP.get(ch, i), ch, v) for i, (ch, v) in enumerate(writes) if ch in self.channels]
        if not tracked:
            return
        thread, cid = where
        if cid is None:
            return
        with self._lock:
            head = self._heads.get(thread)
            if head is not None and head.id == cid:
                into = head.writes
            elif head is None or cid > head.id:
                # The loop runs a step's tasks while their checkpoint is still being saved, on another
                # thread: a write can be saved before its checkpoint, a thread's first one included (no
                # head yet). It waits here for ``saved`` of that checkpoint, which takes it as its writes.
                into = self._early_for(thread).setdefault(cid, {})
            else:
                self._drop(thread)  # against an older checkpoint: not a run this process follows
                return
            for idx, ch, value in tracked:  # the saver keeps the first of a task's writes at one idx
                into.setdefault((task_id, idx), (writes_sort_key(task_path, task_id, idx), task_id, ch, value))

    def saved(self, config: RunnableConfig, checkpoint: Checkpoint) -> None:
        """``put`` saved ``checkpoint`` under the parent ``config`` names (LangGraph waits for the delta
        writes against the parent before it saves the child)."""
        where = _thread(config)
        if where is None:
            return
        thread, parent = where
        values = checkpoint.get("channel_values") or {}
        versioned = frozenset(checkpoint.get("channel_versions") or {})
        stored = {ch: values[ch] for ch in self.channels if ch in values}
        with self._lock:
            if thread in self._lost:
                self._drop(thread)
                return
            head = self._heads.get(thread)
            if parent is None:  # a thread's first checkpoint: nothing before it
                before: _Head | None = _Head("", {}, frozenset(), {})
            else:
                before = head if head is not None and head.id == parent else None
            needed = [ch for ch in self.channels if ch in versioned and ch not in stored]
            if before is None or before.missing(needed):
                self._drop(thread)
                return
            writes = before.sorted_writes()
            history: dict[str, DeltaChannelHistory] = {}
            for ch in needed:
                base: DeltaChannelHistory
                if ch in before.stored:
                    base = {"seed": before.stored[ch], "writes": []}
                else:
                    base = before.history.get(ch) or {"writes": []}
                entry = _copy(base)
                entry["writes"] = [*base["writes"], *(w for w in writes if w[1] == ch)]
                history[ch] = entry
            cid = str(checkpoint["id"])
            early = self._early.pop(thread, {})
            self._keep(thread, _Head(cid, stored, versioned, history, early.pop(cid, {})))
            later = {k: v for k, v in early.items() if k > cid}
            if later:
                self._early[thread] = later


def last_saved(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> str | None:
    """``DeltaMemo.head`` of ``saver``'s memo; None for a saver without one."""
    if isinstance(saver, (_Remembering, _RememberingAsync)):
        return saver.delta_memo.head(config)
    return None


def _copy(history: DeltaChannelHistory) -> DeltaChannelHistory:
    out: DeltaChannelHistory = {"writes": list(history["writes"])}
    if "seed" in history:
        out["seed"] = history["seed"]
    return out


class _Remembering(BaseCheckpointSaver[Any]):
    """A sync saver that keeps a ``DeltaMemo`` (mixed in before LangGraph's saver class)."""

    delta_memo: DeltaMemo

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delta_memo = DeltaMemo()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = super().get_tuple(config)
        self.delta_memo.loaded(tup)
        return tup

    def get_delta_channel_history(self, *, config: RunnableConfig,
                                  channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        known = self.delta_memo.answer(config, channels)
        if known is not None:
            return known
        found = super().get_delta_channel_history(config=config, channels=channels)
        self.delta_memo.read(config, channels, found)
        return found

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        self.delta_memo.wrote(config, writes, task_id, task_path)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        out = super().put(config, checkpoint, metadata, new_versions)
        self.delta_memo.saved(config, checkpoint)
        return out

    def delete_thread(self, thread_id: str) -> None:
        self.delta_memo.forget(str(thread_id))
        super().delete_thread(thread_id)



class _RememberingAsync(BaseCheckpointSaver[Any]):
    """An async saver that keeps a ``DeltaMemo`` (its sync methods are LangGraph's bridges to these)."""

    delta_memo: DeltaMemo

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delta_memo = DeltaMemo()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = await super().aget_tuple(config)
        self.delta_memo.loaded(tup)
        return tup

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        known = self.delta_memo.answer(config, channels)
        if known is not None:
            return known
        found = await super().aget_delta_channel_history(config=config, channels=channels)
        self.delta_memo.read(config, channels, found)
        return found

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await super().aput_writes(config, writes, task_id, task_path)
        self.delta_memo.wrote(config, writes, task_id, task_path)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        out = await super().aput(config, checkpoint, metadata, new_versions)
        self.delta_memo.saved(config, checkpoint)
        return out

    async def adelete_thread(self, thread_id: str) -> None:
        self.delta_memo.forget(str(thread_id))
        await super().adelete_thread(thread_id)



class _ForgetsPruned(_Remembering):
    """Forgets the threads a saver that prunes (LangGraph's Postgres savers) prunes. Only what the saver
    class implements is wrapped: a saver must not claim an operation it does not offer (LangGraph's
    conformance suite counts an overridden method as offered). ``delete_for_runs`` and ``copy_thread``
    are implemented by none of the savers pagefault builds (tests/integration/test_checkpoint_conformance.py
    fails if one starts to, so they get wrapped here too)."""

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for t in thread_ids:
            self.delta_memo.forget(str(t))
        super().prune(thread_ids, strategy=strategy)


class _ForgetsPrunedAsync(_RememberingAsync):
    """``_ForgetsPruned`` for an async saver (its sync ``prune`` is LangGraph's bridge to ``aprune``)."""

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for t in thread_ids:
            self.delta_memo.forget(str(t))
        await super().aprune(thread_ids, strategy=strategy)


class RememberingSqliteSaver(_Remembering, SqliteSaver):
    """LangGraph's ``SqliteSaver``, answering delta reads of the checkpoints it saved from memory."""


class RememberingPostgresSaver(_ForgetsPruned, PostgresSaver):
    """LangGraph's ``PostgresSaver``, answering delta reads of the checkpoints it saved from memory."""


class RememberingAsyncSqliteSaver(_RememberingAsync, AsyncSqliteSaver):
    """LangGraph's ``AsyncSqliteSaver``, answering delta reads of the checkpoints it saved from memory."""


class RememberingAsyncPostgresSaver(_ForgetsPrunedAsync, AsyncPostgresSaver):
    """LangGraph's ``AsyncPostgresSaver``, answering delta reads of the checkpoints it saved from memory."""


__all__ = ["THREADS_KEPT", "DeltaMemo", "last_saved", "RememberingAsyncPostgresSaver", "RememberingAsyncSqliteSaver",
           "RememberingPostgresSaver", "RememberingSqliteSaver"]
