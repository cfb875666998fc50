"""Runs on one thread take turns, across every replica that shares the database.

Two runs on the same thread at once would both start from the same checkpoint and fork the
thread: one run's turn would vanish from its history. ``SerializedGraph`` wraps a compiled graph so
that each run first takes a Postgres advisory lock named after its thread id. The second run waits
(up to ``wait`` seconds, then ``ThreadBusy``, with nothing saved) and starts from the state the first
one left, so both turns land, one after the other. Runs on different threads never wait.

Every step is checkpointed before the next one starts (``durability="sync"``, unless the caller
says otherwise), so a crash loses at most the step in flight, and ``resume`` runs it again. An
unreachable database surfaces as ``ServiceUnavailable`` naming PostgreSQL.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from pagefault.engines.connections import ServiceUnavailable, is_postgres_down, postgres_unavailable
from pagefault.engines.locks import AdvisoryLocks, LockTimeout, locks_for

#: Seconds a run waits for another run on the same thread to finish.
THREAD_WAIT = 120.0


class ThreadBusy(LockTimeout):
    """Another run kept the thread for longer than this run would wait; nothing of this run was saved."""


def _thread(config: RunnableConfig | None) -> str | None:
    tid = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if tid is None else str(tid)


class SerializedGraph:
    """A compiled pagefault graph whose runs on one thread take turns (see the module docstring).

    Everything other than running (``get_state``, ``get_state_history``, ``update_state``, ...) is
    the wrapped graph's own; ``graph`` is the wrapped graph.
    """

    # Any compiled graph (this layer knows none of pagefault's): every type argument is left open.
    def __init__(self, graph: CompiledStateGraph[Any, Any, Any, Any], database_url: str, *,
                 wait: float = THREAD_WAIT) -> None:
        self.graph = graph
        self.database_url = database_url
        self.wait = wait
        self.locks: AdvisoryLocks = locks_for(database_url)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"durability": "sync", **kwargs}

    def _acquire(self, tid: str | None) -> None:
        if tid is None:
            return
        try:
            self.locks.acquire("thread", tid, timeout=self.wait)
        except LockTimeout as e:
            raise ThreadBusy(f"thread {tid!r} is busy: another run kept it for over {self.wait:.0f}s; "
                             "nothing of this run was saved, send it again") from e

    def _release(self, tid: str | None) -> None:
        if tid is not None:
            self.locks.release("thread", tid)

    def _translated(self, e: BaseException) -> BaseException:
        if not isinstance(e, ServiceUnavailable) and is_postgres_down(e):
            return postgres_unavailable(self.database_url, e)
        return e

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """An unreachable database inside the run surfaces as ``ServiceUnavailable`` naming PostgreSQL."""
        try:
            yield
        except Exception as e:
            err = self._translated(e)
            if err is e:
                raise
            raise err from e

    @contextmanager
    def _turn(self, config: RunnableConfig | None) -> Iterator[None]:
        """Hold the thread for one run (sync callers)."""
        tid = _thread(config)
        self._acquire(tid)
        try:
            with self._errors():
                yield
        finally:
            self._release(tid)

    @asynccontextmanager
    async def _aturn(self, config: RunnableConfig | None) -> AsyncIterator[None]:
        """Hold the thread for one run (async callers; the lock is taken off the event loop)."""
        tid = _thread(config)
        await asyncio.to_thread(self._acquire, tid)
        try:
            with self._errors():
                yield
        finally:
            await asyncio.to_thread(self._release, tid)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        with self._turn(config):
            return self.graph.invoke(input, config, **self._options(kwargs))

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        with self._turn(config):
            yield from self.graph.stream(input, config, **self._options(kwargs))

    def resume(self, config: RunnableConfig, **kwargs: Any) -> Any:
        """Finish the turn that a crash or an outage cut short on this thread: the steps it still had to
        run are run from the last checkpoint. Returns the final state, or None when nothing was pending
        (or the thread waits for a person's answer to an interrupt, which ``Command(resume=...)`` gives)."""
        with self._turn(config):
            snap = self.graph.get_state(config)
            if not snap.next or any(t.interrupts for t in snap.tasks):
                return None
            return self.graph.invoke(None, config, **self._options(kwargs))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        async with self._aturn(config):
            return await self.graph.ainvoke(input, config, **self._options(kwargs))

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        async with self._aturn(config):
            async for part in self.graph.astream(input, config, **self._options(kwargs)):
                yield part
