"""Turns run in a process of their own, to be killed there with SIGKILL (``tests/integration/test_killed_turn.py``).

``start(...)`` runs turns in a child process through one entry point: ``chat`` (the CLI's REPL,
``pagefault.cli.main.run_chat``, fed line by line), ``invoke``, ``stream``, ``ainvoke``, ``astream`` (the
pagefault graph on the embedded files) or ``middleware`` / ``amiddleware`` (``create_agent`` with
``PagefaultMiddleware``, sync or async). The children fork from a server process that has already imported
pagefault and compiled the guard's rules (a few seconds of CPU each time otherwise); it has opened nothing, so
each child opens the data directory itself, as a new process does.

A child can stop at a point of its turn, tell the parent (``Child.events`` gets ``("point", name)``) and wait
there until it is killed:

- ``input``: right after the checkpointer saved a run's input checkpoint (before any node ran);
- ``write:N`` / ``before-write:N``: right after / before the N-th write to the checkpointer (a checkpoint, or
  a task's writes; writes are made from the checkpointer's threads, so the run may go on past a ``write:N``
  stop until the writes after it queue up behind it, while a ``before-write:N`` stop holds it there);
- ``archival:N`` / ``before-archival:N``: right after / before the N-th archival insert;
- ``before-core:N``: before the N-th core-memory append;
- ``before-checkpoint:N``: before the N-th step checkpoint (source ``loop``) of what the child runs is saved,
  once the writes of the step's tasks are (so a step's results are saved, its checkpoint is not);
- ``tool-result:N``: right after the checkpointer saved the N-th tool result (a task's writes with a
  ``ToolMessage``), before the step's checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import multiprocessing
import os
import signal
import threading
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]

WINDOW = 200_000
"""The children's context window: large, so no turn compacts and the thread's window is its whole history."""

_context: Any = None


def processes() -> Any:
    """The multiprocessing context children start from (a forkserver with pagefault loaded)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["support.killed_turn"])
        # The server process imports this module (Python 3.11's forkserver does not pass it the sys.path) and
        # warms up; the variables are set only while it starts.
        saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PAGEFAULT_TEST_FORKSERVER")}
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), saved["PYTHONPATH"]) if p)
        os.environ["PAGEFAULT_TEST_FORKSERVER"] = "1"
        try:
            forkserver.ensure_running()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return _context


def _warm() -> None:
    """What every child would otherwise redo: pagefault's imports and the guard's compiled rules."""
    import pagefault.cli.main  # noqa: F401
    from pagefault.safety.guard import rule_tables

    rule_tables()


class Child:
    """A running child: ``events`` it reported (``("answer", text)``, ``("point", name)``, ``("done", None)``,
    ``("error", text)``), ``send`` a chat line, ``kill`` it with SIGKILL."""

    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.events: list[tuple[str, Any]] = []

    def next_event(self, timeout: float = 120.0) -> tuple[str, Any]:
        if not self.conn.poll(timeout):
            raise TimeoutError(f"the child said nothing for {timeout:.0f}s; it said {self.events}")
        event = self.conn.recv()
        self.events.append(event)
        return event

    def until(self, *kinds: str, timeout: float = 120.0) -> tuple[str, Any]:
        """Read events until one of ``kinds`` (an ``error`` raises)."""
        while True:
            kind, value = self.next_event(timeout)
            if kind == "error":
                raise AssertionError(f"the child failed: {value}")
            if kind in kinds:
                return kind, value

    def send(self, line: str) -> None:
        self.conn.send(("line", line))

    def arm(self, point: str) -> None:
        """Make a ``chat`` child stop at ``point`` of what the next lines do (counted from now)."""
        self.conn.send(("arm", point))

    def kill(self) -> None:
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(30)
        assert self.process.exitcode == -signal.SIGKILL, self.process.exitcode

    def finish(self, timeout: float = 120.0) -> None:
        self.until("done", timeout=timeout)
        self.process.join(timeout)
        assert self.process.exitcode == 0, (self.process.exitcode, self.events)


def start(entry: str, data_dir: str, user: str, thread: str, texts: list[str] | None = None,
          point: str | None = None, durability: str | None = None) -> Child:
    """A child running ``texts`` as turns through ``entry`` (for ``chat``: the lines ``send`` gives it,
    until ``/quit``), stopping at ``point`` if it gets there. ``durability``: the runs' (None: the entry
    point's default; pagefault's graph on the embedded files checkpoints each step, ``create_agent`` saves
    in the background)."""
    ctx = processes()
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_run, args=(entry, data_dir, user, thread, texts or [], point, durability, child),
                          daemon=True)
    process.start()
    child.close()
    return Child(process, parent)


# -- in the child ----------------------------------------------------------------------------------


class _Pipe:
    """The child's end of its pipe; its threads (the run's, the checkpointer's) send one message at a time."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, message: tuple[str, Any]) -> None:
        with self.lock:
            self.conn.send(message)

    def recv(self) -> Any:
        return self.conn.recv()


class _Stops:
    """The points this process stops at (module docstring): ``arm`` one; the counts start from there."""

    def __init__(self, conn: _Pipe) -> None:
        self.conn = conn
        self.kind, self.n = "", 0
        self.counts: dict[str, int] = {}
        self.writing = threading.Condition()
        self.in_flight = 0  # task writes being saved
        self.frozen = False  # an ``input`` stop's input checkpoint is being saved: no task write goes after it
        self._install()

    def arm(self, point: str) -> None:
        self.point = point
        kind, _, nth = point.partition(":")
        self.kind, self.n = kind, int(nth or 1)
        self.frozen = False
        self.counts = dict.fromkeys(("write", "before-write", "before-checkpoint", "archival", "before-archival",
                                     "before-core", "tool-result"), 0)

    def reached(self, what: str) -> None:
        if not self.kind:
            return
        self.counts[what] += 1
        if what == self.kind and self.counts[what] == self.n:
            self.stop()

    def stop(self) -> None:
        self.conn.send(("point", self.point))
        threading.Event().wait()  # until the parent's SIGKILL

    def _install(self) -> None:
        from langchain_core.messages import ToolMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        from pagefault.stores.archival import ArchivalStore
        from pagefault.stores.core import CoreMemory
        from pagefault.window.cut_short import HELD

        put, put_writes = SqliteSaver.put, SqliteSaver.put_writes
        aput, aput_writes = AsyncSqliteSaver.aput, AsyncSqliteSaver.aput_writes
        insert, append = ArchivalStore.insert, CoreMemory.append

        def before_put(metadata: Any) -> bool:
            """Count the write; whether the step checkpoint counts too, once the task writes are saved."""
            self.reached("before-write")
            return metadata.get("source") == "loop" and self.kind == "before-checkpoint"

        def held_back(writes: Any) -> bool:
            """A task's writes after an ``input`` stop's save began: "input" means no node's writes are saved,
            so they wait for the parent's SIGKILL."""
            return self.frozen and any(c != HELD for c, _v in writes)

        def writes_start() -> None:
            self.reached("before-write")
            with self.writing:
                self.in_flight += 1

        def writes_end() -> None:
            with self.writing:
                self.in_flight -= 1
                self.writing.notify_all()

        def after_put(metadata: Any) -> None:
            if self.kind == "input" and metadata.get("source") == "input":
                self.stop()
            self.reached("write")

        def after_writes(writes: Any) -> None:
            values = [v for c, v in writes if c == "messages"]
            if any(isinstance(m, ToolMessage) for v in values for m in (v if isinstance(v, list) else [v])):
                self.reached("tool-result")
            self.reached("write")

        def freeze(metadata: Any) -> None:
            # LangGraph saves checkpoints in the background: the first task's writes could be saved beside
            # the input checkpoint before the parent's kill lands. Set before the save, so none is.
            if self.kind == "input" and metadata.get("source") == "input":
                self.frozen = True

        def sync_put(saver, config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def]
            freeze(metadata)
            if before_put(metadata):
                with self.writing:
                    self.writing.wait_for(lambda: self.in_flight == 0)
                self.reached("before-checkpoint")
            out = put(saver, config, checkpoint, metadata, new_versions)
            after_put(metadata)
            return out

        def sync_put_writes(saver, config, writes, *args, **kwargs):  # type: ignore[no-untyped-def]
            if held_back(writes):
                threading.Event().wait()
            writes_start()
            try:
                put_writes(saver, config, writes, *args, **kwargs)
            finally:
                writes_end()
            after_writes(writes)

        async def async_put(saver, config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def]
            freeze(metadata)
            if before_put(metadata):
                while self.in_flight:  # saved on this event loop: wait without blocking it
                    await asyncio.sleep(0.005)
                self.reached("before-checkpoint")
            out = await aput(saver, config, checkpoint, metadata, new_versions)
            after_put(metadata)
            return out

        async def async_put_writes(saver, config, writes, *args, **kwargs):  # type: ignore[no-untyped-def]
            if held_back(writes):  # on the event loop: wait without blocking it, so the input's save goes on
                await asyncio.Event().wait()
            writes_start()
            try:
                await aput_writes(saver, config, writes, *args, **kwargs)
            finally:
                writes_end()
            after_writes(writes)

        def archival_insert(store, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.reached("before-archival")
            record = insert(store, *args, **kwargs)
            self.reached("archival")
            return record

        def core_append(core, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.reached("before-core")
            return append(core, *args, **kwargs)

        SqliteSaver.put, SqliteSaver.put_writes = sync_put, sync_put_writes  # type: ignore[method-assign]
        AsyncSqliteSaver.aput, AsyncSqliteSaver.aput_writes = async_put, async_put_writes  # type: ignore[method-assign]
        ArchivalStore.insert, CoreMemory.append = archival_insert, core_append  # type: ignore[method-assign]


class _Lines:
    """The chat REPL's input: the lines the parent sends (an ``("arm", point)`` between them arms a stop)."""

    def __init__(self, conn: _Pipe, stops: _Stops) -> None:
        self.conn = conn
        self.stops = stops

    def readline(self) -> str:
        while True:
            kind, value = self.conn.recv()
            if kind == "arm":
                self.stops.arm(value)
                continue
            return value + "\n"


class _Screen:
    """The chat REPL's output: each ``agent> ...`` line goes to the parent as an answer."""

    def __init__(self, conn: _Pipe) -> None:
        self.conn = conn
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        while "\n" in self.text:
            line, self.text = self.text.split("\n", 1)
            if "agent> " in line:
                self.conn.send(("answer", line.split("agent> ", 1)[1]))
            elif line.startswith("error: "):
                self.conn.send(("error", line))
        return len(s)

    def flush(self) -> None:
        pass


def _run(entry: str, data_dir: str, user: str, thread: str, texts: list[str], point: str | None,
         durability: str | None, end: Connection) -> None:
    conn = _Pipe(end)
    os.environ["PAGEFAULT_CONTEXT_WINDOW"] = str(WINDOW)
    try:
        stops = _Stops(conn)
        if point:
            stops.arm(point)
        if entry == "chat":
            from pagefault.cli.main import run_chat

            args = argparse.Namespace(user=user, thread=thread, data_dir=data_dir, model=None, trace=False)
            run_chat(args, inp=_Lines(conn, stops), out=_Screen(conn))
        elif entry.startswith("a"):
            asyncio.run(_turns_async(entry, data_dir, user, thread, texts, durability, conn))
        else:
            _turns(entry, data_dir, user, thread, texts, durability, conn)
    except BaseException as e:  # the parent sees why
        conn.send(("error", f"{type(e).__name__}: {e}"))
        raise
    atexit._run_exitfuncs()  # what a process's normal exit runs (the memory writers write what they hold)
    conn.send(("done", None))


def _runner(middleware: bool, p: Any, user: str, data_dir: str) -> tuple[Any, Any]:
    """What a child runs its turns on, and the run context: a ``create_agent`` app with the middleware, or the
    directory's pagefault graph (``p``: the opened ``EmbeddedPersistence``, sync or async)."""
    from pagefault import Context, OfflineChatModel, PagefaultMiddleware

    if middleware:
        from langchain.agents import create_agent

        return create_agent(OfflineChatModel(), tools=[], checkpointer=p.checkpointer, store=p.store,
                            middleware=[PagefaultMiddleware(user_id=user, data_dir=data_dir, context_window=WINDOW)]), None
    return p.graph(), Context(user_id=user, data_dir=data_dir, context_window=WINDOW)


def _turns(entry: str, data_dir: str, user: str, thread: str, texts: list[str], durability: str | None,
           conn: _Pipe) -> None:
    from langchain_core.messages import HumanMessage

    from pagefault import open_embedded

    config = {"configurable": {"thread_id": thread}}
    options = {"durability": durability} if durability else {}
    with open_embedded(data_dir) as p:
        runner, context = _runner(entry == "middleware", p, user, data_dir)
        for text in texts:
            message = {"messages": [HumanMessage(text)]}
            if entry == "stream":
                for _ in runner.stream(message, config, context=context, stream_mode="updates", **options):
                    pass
                values = runner.get_state(config).values
            else:
                values = runner.invoke(message, config, context=context, **options)
            conn.send(("answer", values["messages"][-1].content))


async def _turns_async(entry: str, data_dir: str, user: str, thread: str, texts: list[str], durability: str | None,
                       conn: _Pipe) -> None:
    from pagefault import open_embedded_async

    config = {"configurable": {"thread_id": thread}}
    options = {"durability": durability} if durability else {}
    async with open_embedded_async(data_dir) as p:
        runner, context = _runner(entry == "amiddleware", p, user, data_dir)
        for text in texts:
            message = {"messages": [{"role": "user", "content": text}]}
            if entry == "astream":
                async for _ in runner.astream(message, config, context=context, stream_mode="updates", **options):
                    pass
                values = (await runner.aget_state(config)).values
            else:
                values = await runner.ainvoke(message, config, context=context, **options)
            conn.send(("answer", values["messages"][-1].content))


if os.environ.get("PAGEFAULT_TEST_FORKSERVER") == "1" and multiprocessing.current_process().name == "MainProcess":
    _warm()
