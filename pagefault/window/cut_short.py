"""A turn cut short is never lost: the next call on its thread finishes it, or folds its input in.

LangGraph checkpoints a run's input before any node runs (a checkpoint whose source is ``input``, the
input still in the ``__start__`` channel), then each step. A run whose process is killed leaves its
thread with steps still to run. A later call with new input does not run them: LangGraph (when the
input is neither None, a ``Command``, nor the same run again) marks the tasks of the thread's last
checkpoint as seen without running them, drops the writes they had saved, and puts the new input in
``__start__`` where the old one was; ``None`` as input runs them (both pinned, with the private code
they come from, in ``engines.langgraph_private``). A message checkpointed at ``input`` vanished that
way, and a memory call the model had made never ran.

- ``ResumingGraph`` is the compiled pagefault graph, in process and served. A call with new input on a
  thread whose last run was cut short first saves its input (held: a ``HELD`` write against the thread's
  latest checkpoint, before anything runs or any model is called), then finishes that run (what
  ``stream(None)`` does), then runs the new input. A call killed while it finishes leaves its input
  held; the next call of the same user and agent finds it (the ``HELD`` writes back to the thread's
  latest input checkpoint, behind a finishing run's checkpoints, ``HOLDING_KEY``) and runs it with its
  own input, in one turn, the held lines first. ``invoke``, ``ainvoke``, ``astream_events`` and a
  LangGraph server's runs all go through its ``stream`` / ``astream``, so this is the one place. A run
  is cut short when it stopped in a step whose checkpoint was not saved, none of whose tasks failed (a
  failed run was reported to its caller, who may ``resume`` it) or waits for a person's answer: a killed
  process, a Ctrl-C in ``pagefault chat``, a run a LangGraph server cancelled. Only a run of the same user and agent is
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

import asyncio
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator, Self, Sequence, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.messages.utils import convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from pagefault.engines.langgraph_private import compiled_fields, step_checkpoint_map, step_checkpointer
from pagefault.engines.thread_lock import AdmittingGraph
from pagefault.graph.context import Context
from pagefault.graph.delta_memo import last_saved
from pagefault.graph.saved_state import saved_values
from pagefault.graph.state import PagefaultState
from pagefault.stores.scope import Scope
from pagefault.text.ids import check_run_ids
from pagefault.window.setup import AgentSetup
from pagefault.window.thread_owner import arefuse_foreign_run, refuse_foreign_run

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
    under the id of the thread's last run for a retry of that run, and would ignore it), its checkpoints
    marked as holding inputs (``HOLDING_KEY``)."""
    metadata = {k: v for k, v in (config.get("metadata") or {}).items() if k != "run_id"}
    if (snapshot.metadata or {}).get("run_id"):
        metadata["run_id"] = (snapshot.metadata or {})["run_id"]
    metadata[HOLDING_KEY] = "1"
    return cast(RunnableConfig, {**{k: v for k, v in config.items() if k != "run_id"}, "metadata": metadata})


HELD = "pagefault:held"
"""The channel of a held input's write: the new input of a call that first finishes a cut-short run,
saved (``put_writes``) against the thread's latest checkpoint before anything runs. No channel of the
graph has this name, and the write's task id (``HELD`` and a sequence number) is no task's, so LangGraph
never applies it; ``ResumingGraph`` runs it after the finishing, or the next call does after a kill."""

HOLDING_KEY = "pagefault_holding"
"""The checkpoint metadata key of a finishing run's checkpoints: inputs may be held behind them."""


def _holdable(input: Any) -> list[Any] | None:
    """The messages of a new input that can be held (a mapping with ``messages``), else None."""
    if not isinstance(input, dict) or "messages" not in input:
        return None
    messages = input["messages"]
    return list(messages) if isinstance(messages, (list, tuple)) else [messages]


def _held_in(checkpoints: Sequence[CheckpointTuple]) -> list[Any]:
    """The messages of the inputs held on ``checkpoints`` (the thread's, newest first, back to its latest
    input checkpoint), oldest first."""
    held = sorted(((str(cp.checkpoint["id"]), task, value) for cp in checkpoints
                   for task, channel, value in cp.pending_writes or () if channel == HELD), key=lambda w: w[:2])
    return [m for _cp, _task, value in held for m in value]


def _back_to_input(checkpoints: Iterator[CheckpointTuple]) -> list[CheckpointTuple]:
    """The thread's checkpoints, newest first, up to and with its latest input checkpoint."""
    out: list[CheckpointTuple] = []
    for cp in checkpoints:
        out.append(cp)
        if (cp.metadata or {}).get("source") == "input":
            break
    return out


def _holds(snapshot: StateSnapshot, by: str) -> bool:
    """Whether inputs of the run stamped ``by`` may be held behind the thread's latest checkpoint."""
    metadata = snapshot.metadata or {}
    return metadata.get(SCOPE_KEY) == by and (bool(metadata.get(HOLDING_KEY)) or cut_short(snapshot, by))


class ResumingGraph(AdmittingGraph, CompiledStateGraph[PagefaultState, Context, Any, PagefaultState]):
    """The compiled pagefault graph: a run with new input first finishes its thread's cut-short run
    (see the module docstring). ``setup`` is how the graph was built (``AgentSetup``); it says who a run
    is for. A run on a thread another user or agent owns is refused before anything of it is saved
    (``admit``: ``window.thread_owner.refuse_foreign_run``)."""

    def __init__(self, *, setup: AgentSetup, _finished: OrderedDict[str, str] | None = None,
                 _ended_by: OrderedDict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.setup = setup
        # thread -> the checkpoint a run of this graph ended at; shared by its copies (``with_config``)
        self._finished: OrderedDict[str, str] = OrderedDict() if _finished is None else _finished
        # thread -> the stamp of the run that ended at its ``_finished`` checkpoint (its owner); shared too
        self._ended_by: OrderedDict[str, str] = OrderedDict() if _ended_by is None else _ended_by

    @classmethod
    def of(cls, compiled: CompiledStateGraph[PagefaultState, Context, Any, PagefaultState],
           setup: AgentSetup) -> Self:
        """``compiled`` (``StateGraph.compile``'s graph) as this class, built with ``setup``."""
        return cls(setup=setup, **compiled_fields(compiled))

    def _scope(self, config: RunnableConfig | None, context: Any) -> Scope | None:
        """Who a run is for (None: a context the run itself refuses)."""
        try:
            ctx = self.setup.run_context(context, config or {})
        except (TypeError, ValueError):
            return None
        return Scope(ctx.user_id, ctx.agent_id)

    def _owned_by(self, config: RunnableConfig, latest: str | None, by: str | None) -> bool:
        """Whether the thread is known to be the run's (stamped ``by``) without reading it: its latest
        checkpoint is where a run of this graph by the same user and agent ended (that run claimed it)."""
        return by is not None and self._ended_here(config, latest) and self._ended_by.get(_thread_key(config)) == by

    def _note_owner(self, config: RunnableConfig, by: str) -> None:
        """A run stamped ``by`` ended on the thread (``_note_end``): the thread is its user and agent's."""
        key = _thread_key(config)
        self._ended_by[key] = by
        self._ended_by.move_to_end(key)
        while len(self._ended_by) > _FINISHED_KEPT:
            self._ended_by.popitem(last=False)

    def admit(self, config: RunnableConfig, context: Any) -> None:
        """``ThreadOwnedError`` for a run with ``config`` and ``context`` on a thread another user or agent owns,
        before anything of it is saved."""
        refuse_foreign_run(self.checkpointer, config, self._scope(config, context))

    async def aadmit(self, config: RunnableConfig, context: Any) -> None:
        """``admit`` for async runs (``config`` and ``context`` the same), with the saver's async read."""
        await arefuse_foreign_run(self.checkpointer, config, self._scope(config, context))

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
        """The id of the thread's latest checkpoint (one read; the state itself is not rebuilt)."""
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        return latest_checkpoint_id(self.checkpointer, _root(config))

    async def _alatest(self, config: RunnableConfig) -> str | None:
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        return _id(await self.checkpointer.aget_tuple(_root(config)))

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

    def _held(self, snapshot: StateSnapshot) -> list[Any]:
        """The messages of the inputs held behind the thread's latest checkpoint (``snapshot``), oldest first."""
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        return _held_in(_back_to_input(self.checkpointer.list(_root(snapshot.config))))

    async def _aheld(self, snapshot: StateSnapshot) -> list[Any]:
        assert isinstance(self.checkpointer, BaseCheckpointSaver)
        found: list[CheckpointTuple] = []
        async for cp in self.checkpointer.alist(_root(snapshot.config)):
            found.append(cp)
            if (cp.metadata or {}).get("source") == "input":
                break
        return _held_in(found)

    def _hold(self, snapshot: StateSnapshot, input: Any, seq: int) -> None:
        """Save ``input`` against the thread's latest checkpoint (``snapshot``) as the ``seq``-th held input."""
        messages = _holdable(input)
        if messages is not None:
            assert isinstance(self.checkpointer, BaseCheckpointSaver)
            self.checkpointer.put_writes(snapshot.config, [(HELD, messages)], f"{HELD}:{seq:06d}")

    async def _ahold(self, snapshot: StateSnapshot, input: Any, seq: int) -> None:
        messages = _holdable(input)
        if messages is not None:
            assert isinstance(self.checkpointer, BaseCheckpointSaver)
            await self.checkpointer.aput_writes(snapshot.config, [(HELD, messages)], f"{HELD}:{seq:06d}")

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """``Pregel.stream``, after finishing the thread's cut-short run (its parts come first); a run on
        another user's thread is refused first (``admit``)."""
        config, by = self._plan(input, config, kwargs.get("context"))
        latest = self._latest(config) if by is not None else None
        if not self._owned_by(config, latest, by):  # else a run of this user and agent ended where the thread is
            self.admit(config, kwargs.get("context"))
        if by is not None:  # a window too small is refused before the input is saved
            self.setup.check_window(kwargs.get("context"), config, self.store)
        if by is not None and not self._ended_here(config, latest):
            snapshot = self.get_state(config)
            held = self._held(snapshot) if _holds(snapshot, by) else []
            if cut_short(snapshot, by):
                self._hold(snapshot, input, len(held))  # the new input is saved before anything runs
                yield from super().stream(None, _finishing(config, snapshot), **kwargs)
            input = _with_held(held, input)
        yield from super().stream(input, config, **kwargs)
        if by is not None:
            self._note_end(config, self._saved_last(config) or self._latest(config))
            self._note_owner(config, by)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """``Pregel.astream``, after finishing the thread's cut-short run (its parts come first); a run on
        another user's thread is refused first (``aadmit``)."""
        config, by = self._plan(input, config, kwargs.get("context"))
        latest = await self._alatest(config) if by is not None else None
        if not self._owned_by(config, latest, by):
            await self.aadmit(config, kwargs.get("context"))
        if by is not None:
            await asyncio.to_thread(self.setup.check_window, kwargs.get("context"), config, self.store)
        if by is not None and not self._ended_here(config, latest):
            snapshot = await self.aget_state(config)
            held = await self._aheld(snapshot) if _holds(snapshot, by) else []
            if cut_short(snapshot, by):
                await self._ahold(snapshot, input, len(held))  # the new input is saved before anything runs
                async for part in super().astream(None, _finishing(config, snapshot), **kwargs):
                    yield part
            input = _with_held(held, input)
        async for part in super().astream(input, config, **kwargs):
            yield part
        if by is not None:
            self._note_end(config, self._saved_last(config) or await self._alatest(config))
            self._note_owner(config, by)


def _with_held(held: list[Any], input: Any) -> Any:
    """``input`` with the held messages before its own (they were sent first)."""
    if not held or not isinstance(input, dict):
        return input
    return {**input, "messages": [*held, *(_holdable(input) or [])]}


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


@dataclass(frozen=True)
class FirstStep:
    """Where an agent's first step stands: its thread's ``saver``, the thread's ``root`` config, the
    checkpoint the step starts from (``here``) and that checkpoint's ``step``."""

    saver: BaseCheckpointSaver
    root: RunnableConfig
    here: str
    step: int

    @classmethod
    def of(cls, config: RunnableConfig) -> "FirstStep | None":
        """The first step of ``config`` (a step's config); None for a graph without a checkpointer, or
        nested in another graph."""
        saver, thread = step_checkpointer(config), (config.get("configurable") or {}).get("thread_id")
        where = step_checkpoint_map(config)
        here, task_step = where.get(""), (config.get("metadata") or {}).get("langgraph_step")
        if not isinstance(saver, BaseCheckpointSaver) or thread is None or set(where) != {""} or not here \
                or not isinstance(task_step, int):
            return None
        root = cast(RunnableConfig, {"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        return cls(saver, root, str(here), task_step - 1)  # a task's step is one past its checkpoint's

    def before_input(self) -> CheckpointTuple | None:
        """The thread as the run before this one left it: the checkpoint before this run's input checkpoint
        (which is one step before ``here`` and may still be on its way to the saver, ``durability="async"``:
        it is recognised by its step and skipped)."""
        before = cast(RunnableConfig, {"configurable": {**self.root["configurable"], "checkpoint_id": self.here}})
        latest = list(self.saver.list(self.root, before=before, limit=2))  # read to the end: an async reader closes
        return next((cp for cp in latest if not ((cp.metadata or {}).get("source") == "input"
                                                 and (cp.metadata or {}).get("step") == self.step - 1)), None)

    def held_before(self, prev: CheckpointTuple | None) -> set[str | None]:
        """The ids of the messages the thread held at ``prev`` (``before_input``)."""
        return {m.id for m in (saved_values(self.saver, prev).get("messages") or [])} if prev is not None else set()


def fold_cut_short(messages: Sequence[AnyMessage], config: RunnableConfig, received: str) -> Fold:
    """Put right, at an agent's first step, what runs cut short on its thread left undone (see the module
    docstring): ``messages`` are the thread's window now (the new input last), ``config`` the step's
    (its checkpointer, thread and checkpoint), ``received`` the last fold's ``Fold.received`` ("" for
    none). Nothing is changed for a graph without a checkpointer, or nested in another graph."""
    first = FirstStep.of(config)
    if first is None:
        return Fold(None, received)
    saver, here = first.saver, first.here
    lost = _lost_inputs(saver, first.root, here, first.step, received)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    dangling = [tc for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls if tc["id"] not in answered]
    if not lost and not dangling:
        return Fold(None, here)
    # The thread as the run before this one left it: the new input starts at the first message it did not hold.
    prev = first.before_input()
    held = first.held_before(prev)
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
