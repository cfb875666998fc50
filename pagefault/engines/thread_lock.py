"""Runs on one thread take turns, across every process that shares the thread's checkpointer.

Two runs on the same thread at once would both start from the same checkpoint and fork the thread:
one run's turn would vanish from its history. A ``SerializedGraph`` is a compiled graph whose every
run (``invoke``, ``stream``, ``ainvoke``, ``astream``, and what LangGraph builds on them) first takes
the lock named after its thread id, from the checkpointer's ``NamedLocks`` (``locks_of``): Postgres
advisory locks for replicas on one database, file locks for the processes on one embedded data
directory, this process's own locks for any other checkpointer. The second run waits (up to ``wait``
seconds, then ``ThreadBusy``, with nothing saved) and starts from the state the first one left, so
both turns land, one after the other. Runs on different threads never wait.

Every step is checkpointed before the next one starts (``durability="sync"``, unless the caller
says otherwise), so a crash loses at most the step in flight, and ``resume`` runs it again. An
unreachable database surfaces as ``ServiceUnavailable`` naming PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, AsyncIterator, Iterator

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from pagefault.engines.langgraph_private import compiled_fields, step_checkpointer
from pagefault.engines.locks import LockTimeout, NamedLocks, ProcessLocks, locks_of
from pagefault.text.ids import check_run_ids

#: Seconds a run waits for another run on the same thread to finish.
THREAD_WAIT = 120.0

# The threads whose lock the current call already holds, each with the locks it took (the object itself,
# compared by identity: a context copied into a task that outlives the call keeps it alive, so no other
# locks can be mistaken for it): ``resume`` runs ``invoke`` inside its own turn.
_held: ContextVar[tuple[tuple[NamedLocks, str], ...]] = ContextVar("pagefault_threads_held", default=())
# The threads whose turn the current run is in (what ``warn_unserialized`` asks; nothing waits on it).
_in_turn: ContextVar[frozenset[str]] = ContextVar("pagefault_in_turn", default=frozenset())
_log = logging.getLogger("pagefault.thread_lock")
#: Checkpointers already warned about (``warn_unserialized``), held weakly: they go with their graphs.
_warned: "weakref.WeakSet[Any]" = weakref.WeakSet()


class ThreadBusy(LockTimeout):
    """Another run kept the thread for longer than this run would wait; nothing of this run was saved."""


def _thread(config: RunnableConfig | None) -> str | None:
    tid = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if tid is None else str(tid)


class AdmittingGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """A compiled graph that may refuse a run before anything of it is read or written (``admit``). This
    layer refuses nothing; a graph class above it says who may run (``window.cut_short.ResumingGraph``
    refuses a run on another user's thread), whose ``stream`` / ``astream`` call it first (inside the
    thread's turn when serialized); ``SerializedGraph.resume`` calls it before it reads the thread."""

    def admit(self, config: RunnableConfig, context: Any) -> None:
        """Raise if a run with ``config`` and ``context`` may not start; nothing here."""

    async def aadmit(self, config: RunnableConfig, context: Any) -> None:
        """``admit`` for async runs."""


class SerializedGraph(AdmittingGraph):
    """A compiled graph whose runs on one thread take turns (see the module docstring).

    ``locks`` are the ones its runs take (``locks_of`` its checkpointer), ``wait`` how many seconds a run
    waits for the thread. Everything else (``get_state``, ``update_state``, ...) is LangGraph's own.
    Make one with ``serialized``.
    """

    # Any compiled graph (this layer knows none of pagefault's): every type argument is left open.
    def __init__(self, *, locks: NamedLocks, wait: float = THREAD_WAIT, **graph: Any) -> None:
        super().__init__(**graph)
        self.locks = locks
        self.wait = wait

    def _durable(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**kwargs, "durability": kwargs.get("durability") or "sync"}

    def _holds(self, tid: str) -> bool:
        """Whether the current call is already inside this graph's locks' turn of thread ``tid``."""
        return any(locks is self.locks and held == tid for locks, held in _held.get())

    def _acquire(self, tid: str) -> None:
        try:
            self.locks.acquire("thread", tid, timeout=self.wait)
        except LockTimeout as e:
            raise ThreadBusy(f"thread {tid!r} is busy: another run kept it for over {self.wait:.0f}s; "
                             "nothing of this run was saved, send it again") from e

    def _release(self, tid: str) -> None:
        self.locks.release("thread", tid)

    async def _aacquire(self, tid: str) -> None:
        """``_acquire`` off the event loop; a run cancelled while it waits lets go of what it then gets."""
        taking = asyncio.ensure_future(asyncio.to_thread(self._acquire, tid))
        try:
            await asyncio.shield(taking)
        except asyncio.CancelledError:
            def let_go(done: asyncio.Future[None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self._release(tid)

            taking.add_done_callback(let_go)
            raise

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """An unreachable lock service inside the run (PostgreSQL) surfaces as ``ServiceUnavailable``."""
        try:
            yield
        except Exception as e:
            err = self.locks.outage(e)
            if err is None:
                raise
            raise err from e

    @contextmanager
    def _turn(self, config: RunnableConfig | None) -> Iterator[None]:
        """Hold the thread for one run (sync callers); a call already inside this thread's turn runs on."""
        tid = _thread(config)
        if tid is None or self._holds(tid):
            with self._errors():
                yield
            return
        self._acquire(tid)
        _in_turn.set(_in_turn.get() | {tid})
        try:
            with self._errors():
                yield
        finally:
            _in_turn.set(_in_turn.get() - {tid})
            self._release(tid)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """LangGraph's ``stream``, inside the thread's turn; ``invoke`` runs through it. A run whose thread,
        user or agent id is too long is refused first (``text.ids``)."""
        check_run_ids(config, kwargs.get("context"))
        with self._turn(config):
            yield from super().stream(input, config, **self._durable(kwargs))

    async def astream(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> AsyncIterator[Any]:
        """LangGraph's ``astream``, inside the thread's turn (taken off the event loop); ``ainvoke`` runs
        through it."""
        check_run_ids(config, kwargs.get("context"))
        tid = _thread(config)
        if tid is not None:
            await self._aacquire(tid)
            _in_turn.set(_in_turn.get() | {tid})
        try:
            with self._errors():
                async for part in super().astream(input, config, **self._durable(kwargs)):
                    yield part
        finally:
            if tid is not None:
                _in_turn.set(_in_turn.get() - {tid})
                await asyncio.to_thread(self._release, tid)

    def resume(self, config: RunnableConfig, **kwargs: Any) -> Any:
        """Finish the turn that a crash or an outage cut short on this thread: the steps it still had to
        run are run from the last checkpoint. Returns the final state, or None when nothing was pending
        (or the thread waits for a person's answer to an interrupt, which ``Command(resume=...)`` gives)."""
        with self._turn(config):
            self.admit(config, kwargs.get("context"))  # a refused caller reads nothing of the thread
            snap = self.get_state(config)
            if not (snap.next or snap.tasks) or any(t.interrupts for t in snap.tasks):
                return None
            tid = _thread(config)
            held = _held.set(_held.get() + (((self.locks, tid),) if tid is not None else ()))
            try:
                return self.invoke(None, config, **self._durable(kwargs))
            finally:
                _held.reset(held)


_classes: dict[type, type[SerializedGraph]] = {CompiledStateGraph: SerializedGraph, AdmittingGraph: SerializedGraph}


def _serialized_class(cls: type) -> type[SerializedGraph]:
    """``SerializedGraph`` over a subclass of ``CompiledStateGraph`` (its own ``stream`` runs inside the
    turn), made once per class."""
    if cls not in _classes:
        _classes[cls] = type(f"Serialized{cls.__name__}", (SerializedGraph, cls), {"__doc__": cls.__doc__})
    return _classes[cls]


def serialized(graph: CompiledStateGraph[Any, Any, Any, Any], *, wait: float = THREAD_WAIT,
               locks: NamedLocks | None = None) -> SerializedGraph:
    """``graph`` (any compiled LangGraph graph: pagefault's, a ``create_agent`` app) as a
    ``SerializedGraph``: its runs on one thread take ``locks`` (default: ``locks_of`` its checkpointer)
    and wait at most ``wait`` seconds for the thread. The graph's own class is kept: a subclass's
    ``stream`` runs inside the turn. A graph that is serialized already keeps its locks unless
    ``locks`` are given."""
    if isinstance(graph, SerializedGraph):
        return graph.copy({"locks": locks or graph.locks, "wait": wait})
    return _serialized_class(type(graph))(locks=locks or locks_of(graph.checkpointer), wait=wait,
                                          **compiled_fields(graph))


def warn_unserialized(config: RunnableConfig) -> None:
    """Log once per checkpointer when a run on a thread whose checkpointer other processes share (the
    embedded files, Postgres) is not inside a ``SerializedGraph`` turn: a ``create_agent`` app compiles its
    own graph, and two such runs on one thread at once fork it. ``config`` is the run's."""
    tid, saver = (config.get("configurable") or {}).get("thread_id"), step_checkpointer(config)
    if tid is None or saver is None or saver in _warned or str(tid) in _in_turn.get():
        return
    if isinstance(locks_of(saver), ProcessLocks):
        return
    _warned.add(saver)
    _log.warning("pagefault: runs of this agent on one thread are not serialized across processes, so two at "
                 "once would fork the thread and lose a turn; wrap the compiled agent once: "
                 "agent = memory.serialized(create_agent(...)) (pagefault.engines.thread_lock.serialized)")
