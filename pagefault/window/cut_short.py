"""A turn cut short is never lost: the next call on its thread finishes it, or folds its input in.

LangGraph checkpoints a run's input before any node runs (a checkpoint whose source is ``input``, the
input still in the ``__start__`` channel), then each step. A run whose process is killed leaves its
thread with steps still to run. A later call with new input does not run them: LangGraph's loop
(``PregelLoop._first``, when the input is neither None, a ``Command``, nor the same run again) marks
the tasks of the thread's last checkpoint as seen without running them, drops the writes they had
saved, and puts the new input in ``__start__`` where the old one was. A message checkpointed at
``input`` vanished that way, and a memory call the model had made never ran.

- ``ResumingGraph`` is the compiled pagefault graph, in process and served. A call with new input on a
  thread whose last run was cut short first finishes that run (what ``stream(None)`` does), then runs
  the new input. ``invoke``, ``ainvoke``, ``astream_events`` and a LangGraph server's runs all go
  through its ``stream`` / ``astream``, so this is the one place. A run is cut short when it stopped in
  a step whose checkpoint was not saved, none of whose tasks failed (a failed run was reported to its
  caller, who may ``resume`` it) or waits for a person's answer: a killed process, a Ctrl-C in
  ``pagefault chat``, a run a LangGraph server cancelled. Only a run of the same user and agent is
  finished: each run's checkpoints carry who started it (``SCOPE_KEY``), so nobody's input is replayed as
  someone else's.
- ``fold_cut_short`` is for ``create_agent`` apps (``PagefaultMiddleware``'s first step). The app
  compiles the agent, so its new input cannot wait; instead the agent's first step reads back the
  inputs of runs that were killed before they got past their input checkpoint, and puts them in the
  thread before the new input. A tool call whose tool never ran gets the result the tool had saved
  before the kill, else an error saying it did not run, so a model is never sent a call without its
  result.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator, Self, Sequence, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.messages.utils import convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from pagefault.engines.thread_lock import compiled_fields
from pagefault.graph.context import Context
from pagefault.graph.delta_memo import aread_latest, keeps_reads, last_saved, read_latest
from pagefault.graph.saved_state import saved_values
from pagefault.graph.state import PagefaultState
from pagefault.stores.scope import Scope
from pagefault.text.ids import check_run_ids
from pagefault.window.setup import AgentSetup

SCOPE_KEY = "pagefault_scope"
"""The checkpoint metadata key that says whose run wrote a checkpoint: ``stamp`` of its scope."""


def stamp(scope: Scope) -> str:
    """The ``SCOPE_KEY`` value of a run of ``scope`` (a string: checkpoint metadata keeps strings)."""
    return json.dumps([scope.user_id, scope.agent_id])


def cut_short(snapshot: StateSnapshot, by: str) -> bool:
    """Whether the thread's last run (``snapshot``, its latest state) stopped with a step it had not
    finished, none of whose tasks failed or waits on an interrupt, and was started by the run whose
    ``stamp`` is ``by``. A step counts until its checkpoint is saved: its tasks may all have saved their
    writes (``snapshot.next`` is then empty, its ``tasks`` are not)."""
    if not snapshot.tasks or (snapshot.metadata or {}).get(SCOPE_KEY) != by:
        return False
    return not any(t.error is not None or t.interrupts for t in snapshot.tasks)


def _finishing(config: RunnableConfig, snapshot: StateSnapshot) -> RunnableConfig:
    """The config that finishes the cut-short run: under its own run id (LangGraph takes a new input
    under the id of the thread's last run for a retry of that run, and would ignore it)."""
    metadata = {k: v for k, v in (config.get("metadata") or {}).items() if k != "run_id"}
    if (snapshot.metadata or {}).get("run_id"):
        metadata["run_id"] = (snapshot.metadata or {})["run_id"]
    return cast(RunnableConfig, {**{k: v for k, v in config.items() if k != "run_id"}, "metadata": metadata})


class ResumingGraph(CompiledStateGraph[PagefaultState, Context, Any, PagefaultState]):
    """The compiled pagefault graph: a run with new input first finishes its thread's cut-short run
    (see the module docstring). ``setup`` is how the graph was built (``AgentSetup``); it says who a run
    is for."""

    def __init__(self, *, setup: AgentSetup, _finished: OrderedDict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.setup = setup
        # thread -> the checkpoint a run of this graph ended at; shared by its copies (``with_config``)
        self._finished: OrderedDict[str, str] = OrderedDict() if _finished is None else _finished

    @classmethod
    def of(cls, compiled: CompiledStateGraph[PagefaultState, Context, Any, PagefaultState],
           setup: AgentSetup) -> Self:
        """``compiled`` (``StateGraph.compile``'s graph) as this class, built with ``setup``."""
        return cls(setup=setup, **compiled_fields(compiled))

    def _plan(self, input: Any, config: RunnableConfig | None, context: Any) -> tuple[RunnableConfig, str | None]:
        """The run's config, stamped with who runs it, and the stamp to look for a cut-short run by
        (None: nothing to look for: no new input, no saved thread, a nested or time-travel run, or a
        context the graph will refuse, which the run itself reports)."""
        check_run_ids(config, context)  # an id too long is refused before anything is written
        config = cast(RunnableConfig, dict(config or {}))
        try:
            ctx = self.setup.run_context(context, config)
        except (TypeError, ValueError):
            return config, None
        by = stamp(Scope(ctx.user_id, ctx.agent_id))
        config["metadata"] = {**(config.get("metadata") or {}), SCOPE_KEY: by}
        conf = config.get("configurable") or {}
        new_input = input is not None and not isinstance(input, Command)
        top_level = conf.get("thread_id") is not None and not conf.get("checkpoint_id") and not conf.get("checkpoint_ns")
        saved = isinstance(self.checkpointer, BaseCheckpointSaver)
        return config, by if new_input and top_level and saved else None

    def _latest(self, config: RunnableConfig) -> str | None:
        """The id of the thread's latest checkpoint (one read; the state itself is not rebuilt). A saver
        of ``graph.delta_memo`` reads the whole checkpoint and answers the run's own read of it with that."""
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        if keeps_reads(self.checkpointer):
            return _id(read_latest(self.checkpointer, _root(config)))
        return latest_checkpoint_id(self.checkpointer, _root(config))

    async def _alatest(self, config: RunnableConfig) -> str | None:
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        return _id(await aread_latest(self.checkpointer, _root(config)))

    def _saved_last(self, config: RunnableConfig) -> str | None:
        """The checkpoint the run just ended at, as its saver remembers it (None: read it instead)."""
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        return last_saved(self.checkpointer, _root(config))

    def _ended_here(self, config: RunnableConfig, latest: str | None) -> bool:
        """Whether the thread's latest checkpoint is the one a run of this graph ended at: its last run
        was not cut short, and its state need not be read to know it."""
        return latest is not None and self._finished.get(_thread_key(config)) == latest

    def _note_end(self, config: RunnableConfig, latest: str | None) -> None:
        """A run ended (returned, or stopped at an interrupt) at checkpoint ``latest``."""
        if latest is None:
            return
        key = _thread_key(config)
        self._finished[key] = latest
        self._finished.move_to_end(key)
        while len(self._finished) > _FINISHED_KEPT:
            self._finished.popitem(last=False)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """``Pregel.stream``, after finishing the thread's cut-short run (its parts come first)."""
        config, by = self._plan(input, config, kwargs.get("context"))
        if by is not None and not self._ended_here(config, self._latest(config)):
            snapshot = self.get_state(config)
            if cut_short(snapshot, by):
                yield from super().stream(None, _finishing(config, snapshot), **kwargs)
        yield from super().stream(input, config, **kwargs)
        if by is not None:
            self._note_end(config, self._saved_last(config) or self._latest(config))

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """``Pregel.astream``, after finishing the thread's cut-short run (its parts come first)."""
        config, by = self._plan(input, config, kwargs.get("context"))
        if by is not None and not self._ended_here(config, await self._alatest(config)):
            snapshot = await self.aget_state(config)
            if cut_short(snapshot, by):
                async for part in super().astream(None, _finishing(config, snapshot), **kwargs):
                    yield part
        async for part in super().astream(input, config, **kwargs):
            yield part
        if by is not None:
            self._note_end(config, self._saved_last(config) or await self._alatest(config))


def _id(tup: CheckpointTuple | None) -> str | None:
    return None if tup is None else str(tup.checkpoint["id"])


def latest_checkpoint_id(saver: BaseCheckpointSaver, config: RunnableConfig) -> str | None:
    """The id of the latest checkpoint of ``config``'s thread and namespace. On LangGraph's sync
    ``PostgresSaver`` that is one indexed row (``get_tuple`` also reads the checkpoint, its blobs and its
    pending writes: two to four times the time, at each turn's start and end); other savers answer
    ``get_tuple``."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    if not isinstance(saver, PostgresSaver) or saver.pipe is not None:  # (a pipeline: its own cursor)
        tup = saver.get_tuple(config)
        return None if tup is None else str(tup.checkpoint["id"])
    conf = config.get("configurable") or {}
    args = (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")))
    if isinstance(saver.conn, ConnectionPool):
        with saver.conn.connection() as conn:
            row = conn.execute(_LATEST_SQL, args).fetchone()
    else:
        with saver.lock:
            row = saver.conn.execute(_LATEST_SQL, args).fetchone()
    if row is None:
        return None
    return str(row["checkpoint_id"] if isinstance(row, dict) else row[0])


_LATEST_SQL = ("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s"
               " ORDER BY checkpoint_id DESC LIMIT 1")

#: Threads whose last run's end ``ResumingGraph`` remembers (the most recently run).
_FINISHED_KEPT = 10_000


def _root(config: RunnableConfig) -> RunnableConfig:
    return cast(RunnableConfig, {"configurable": {"thread_id": (config.get("configurable") or {})["thread_id"],
                                                  "checkpoint_ns": ""}})


def _thread_key(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {})["thread_id"])


#: Input checkpoints read per query while looking for inputs that cut-short runs lost.
_PAGE = 2

NOT_RUN = ("Error: this call did not run: the run was cut short (its process stopped) before the tool's result "
           "was saved. Call it again if it is still needed.")
"""The result a tool call gets when the run that made it was cut short before its tool ran."""


@dataclass
class Fold:
    """What an agent's first step puts right: ``messages``, the thread's whole window again (None: nothing
    to change), and ``received``, the checkpoint this step started from (the next fold looks no further
    back than it)."""

    messages: list[BaseMessage] | None
    received: str


def _start_messages(cp: CheckpointTuple) -> list[BaseMessage]:
    """The messages of the input a run was started with, from its ``input`` checkpoint."""
    start = cp.checkpoint["channel_values"].get("__start__")
    raw = start.get("messages") if isinstance(start, dict) else None
    if raw is None:
        return []
    return list(convert_to_messages(raw if isinstance(raw, list) else [raw]))


def _tool_results(cps: Sequence[CheckpointTuple]) -> dict[str, ToolMessage]:
    """The tool results the tasks of these checkpoints had saved (their pending writes), by call id."""
    out: dict[str, ToolMessage] = {}
    for cp in cps:
        for _task, channel, value in cp.pending_writes or ():
            if channel != "messages":
                continue
            for m in value if isinstance(value, list) else [value]:
                if isinstance(m, ToolMessage):
                    out[m.tool_call_id] = m
    return out


def _lost_inputs(saver: BaseCheckpointSaver, root: RunnableConfig, here: str, step: int,
                 received: str) -> list[CheckpointTuple]:
    """The input checkpoints of the runs that were cut short before they got past their input, newest
    first, back to ``received`` (without it: back to the first run whose input got in).

    A run's input checkpoint is one step after the thread's last checkpoint, so a run that never got
    past its input is followed by another run's input checkpoint exactly one step later. This step
    (``here``, at ``step``) is one step after its own run's input checkpoint, which may still be on its
    way to the saver (``durability="async"``): it is recognised by its step, never needed."""
    lost: list[CheckpointTuple] = []
    newer_step, cursor, first = step - 1, here, True
    while True:
        before = cast(RunnableConfig, {"configurable": {**root["configurable"], "checkpoint_id": cursor}})
        page = list(saver.list(root, before=before, filter={"source": "input"}, limit=_PAGE))
        for cp in page:
            cp_step = (cp.metadata or {}).get("step")
            own, first = first and cp_step == step - 1, False
            if own:
                continue
            if (received and cp.checkpoint["id"] <= received) or not isinstance(cp_step, int):
                return lost
            if cp_step + 1 == newer_step:
                lost.append(cp)
            elif not received:
                return lost
            newer_step = cp_step
        if len(page) < _PAGE:
            return lost
        cursor = page[-1].checkpoint["id"]


def fold_cut_short(messages: Sequence[AnyMessage], config: RunnableConfig, received: str) -> Fold:
    """Put right, at an agent's first step, what runs cut short on its thread left undone (see the module
    docstring): ``messages`` are the thread's window now (the new input last), ``config`` the step's
    (its checkpointer, thread and checkpoint), ``received`` the last fold's ``Fold.received`` ("" for
    none). Nothing is changed for a graph without a checkpointer, or nested in another graph."""
    conf = config.get("configurable") or {}
    saver, thread = conf.get(CONFIG_KEY_CHECKPOINTER), conf.get("thread_id")
    where = conf.get("checkpoint_map") or {}
    here, task_step = where.get(""), (config.get("metadata") or {}).get("langgraph_step")
    if not isinstance(saver, BaseCheckpointSaver) or thread is None or set(where) != {""} or not here \
            or not isinstance(task_step, int):
        return Fold(None, received)
    step = task_step - 1  # a task's step is one past the checkpoint it starts from
    root = cast(RunnableConfig, {"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    lost = _lost_inputs(saver, root, here, step, received)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    dangling = [tc for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls if tc["id"] not in answered]
    if not lost and not dangling:
        return Fold(None, here)
    # The thread as the run before this one left it: the new input starts at the first message it did not hold.
    before = cast(RunnableConfig, {"configurable": {**root["configurable"], "checkpoint_id": here}})
    latest = list(saver.list(root, before=before, limit=2))  # read to the end: an async saver's reader closes
    prev = next((cp for cp in latest
                 if not ((cp.metadata or {}).get("source") == "input" and (cp.metadata or {}).get("step") == step - 1)),
                None)
    held = {m.id for m in (saved_values(saver, prev).get("messages") or [])} if prev is not None else set()
    split = next((i for i, m in enumerate(messages) if m.id not in held), len(messages))
    parents = [saver.get_tuple(cp.parent_config) for cp in lost if cp.parent_config]
    results = _tool_results([cp for cp in [prev, *parents] if cp is not None])
    window: list[BaseMessage] = []
    for m in messages[:split]:
        window.append(m)
        if isinstance(m, AIMessage):
            window += [results.get(tc["id"] or "") or ToolMessage(NOT_RUN, tool_call_id=tc["id"] or "", name=tc["name"],
                                                                    status="error")
                       for tc in m.tool_calls if tc["id"] not in answered]
    for cp in reversed(lost):  # oldest first
        window += _start_messages(cp)
    window += messages[split:]
    return Fold(window, here)


def folded(fold: Fold) -> list[BaseMessage]:
    """The ``messages`` state update that replaces the window with ``fold.messages``."""
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *(fold.messages or [])]
