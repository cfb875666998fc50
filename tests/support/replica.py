"""One replica of a pagefault deployment, run as its own OS process by the production-path tests.

It serves from the engines its environment names (``PAGEFAULT_DATABASE_URL``, ``PAGEFAULT_CHROMA_URL``,
``PAGEFAULT_DATA_DIR``, ...) and prints one JSON line with what it did. Commands:

- ``say USER THREAD TEXT...``: one turn per TEXT on the thread (a TEXT ``@sync`` waits at the barrier
  again, for the other replicas to get there too);
- ``resume USER THREAD``: finish a turn a crash cut short (``SerializedGraph.resume``);
- ``append USER LABEL PREFIX N [F]``: N core-memory appends to one block, then archival inserts of the
  same F facts every replica is given.

``--barrier DIR:N`` waits, after start-up, until N replicas have reached the barrier in DIR, so they
act at the same moment (the report's ``met`` lists the pids each round found there). ``append``
inserts its facts in lockstep: fact i is inserted by every replica between the barrier of round
``fact-i`` and the next, so each insert races the others'.

Ordering across replicas is proven with files, never with clocks:

- ``--after FILE``: wait until FILE exists before the first turn;
- ``--turn-marks DIR:NAME``: the run, right after it took the thread's lock, lists DIR into the
  report's ``on_entry`` and creates ``DIR/inside-NAME``; right before it lets go of the lock, it
  renames that ``DIR/done-NAME``;
- ``--hold-until FILE``: with ``--turn-marks``, keep the thread, inside the run, until FILE exists;
- ``--probe FILE``: before the turns, try the first one with ``wait=0`` and report in ``probe``
  whether it was refused (``busy``) or ran (``ran``); then create FILE;
- ``--done FILE``: create FILE when the command is over.

Every wait for a file gives up after ``FILE_WAIT`` seconds, and the replica exits with an error.

``--kill-at POINT`` makes the process SIGKILL itself, for real, at a point of the turn:

- ``archival-written``: right after an archival record is written, before the step's checkpoint;
- ``compaction``: inside compaction, once the summary is made, before the node's update is saved;
- ``multi-tool``: inside a step of several memory calls, after the second one ran.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Callable


def die(point: str) -> None:
    print(json.dumps({"killed_at": point}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill(point: str) -> None:
    """Wrap the function after which ``point`` is reached, so the process dies right there."""
    if point == "archival-written":
        from pagefault.stores.archival import ArchivalStore

        real = ArchivalStore.insert

        def insert(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            record = real(self, *args, **kwargs)
            die(point)
            return record

        ArchivalStore.insert = insert  # type: ignore[method-assign]
    elif point == "compaction":
        import pagefault.window.compaction as compact

        real_summarize = compact.summarize

        def summarize(*args, **kwargs):  # type: ignore[no-untyped-def]
            real_summarize(*args, **kwargs)
            die(point)

        compact.summarize = summarize
    elif point == "multi-tool":
        import pagefault.tools.approval as memory  # the memory node runs its calls through tools.approval

        real_run, calls = memory.run_memory_tool, []

        def run_memory_tool(*args, **kwargs):  # type: ignore[no-untyped-def]
            result = real_run(*args, **kwargs)
            calls.append(args[1])
            if len(calls) == 2:
                die(point)
            return result

        memory.run_memory_tool = run_memory_tool
    else:
        raise SystemExit(f"unknown kill point {point!r}")


#: Seconds a replica waits for a file another process is to create.
FILE_WAIT = 120.0


def wait_for(test: Callable[[], bool], what: str) -> None:
    """Poll ``test()`` until it is true; exit with an error after ``FILE_WAIT`` seconds."""
    deadline = time.monotonic() + FILE_WAIT
    while not test():
        if time.monotonic() >= deadline:
            raise SystemExit(f"replica {os.getpid()}: gave up waiting for {what}")
        time.sleep(0.01)


def touch(path: str) -> None:
    open(path, "w").close()


def barrier(spec: str | None, round_: object) -> list[int]:
    """Wait until every replica reached round ``round_``; the pids found there."""
    if not spec:
        return []
    folder, n = spec.rsplit(":", 1)
    prefix = f"ready{round_}-"
    touch(os.path.join(folder, f"{prefix}{os.getpid()}"))

    def arrived() -> list[str]:
        return [f for f in os.listdir(folder) if f.startswith(prefix)]

    wait_for(lambda: len(arrived()) >= int(n), f"{n} replicas at barrier round {round_}")
    return sorted(int(f[len(prefix):]) for f in arrived())


def mark_turns(graph, spec: str, hold_until: str | None, out: dict) -> None:  # type: ignore[no-untyped-def]
    """Mark the span in which a run holds its thread (see ``--turn-marks``): the graph's ``locks`` are
    wrapped, so the marks are made right after the thread's lock is taken and right before it is let go."""
    folder, name = spec.rsplit(":", 1)
    inside, done = os.path.join(folder, f"inside-{name}"), os.path.join(folder, f"done-{name}")
    locks = graph.locks
    acquire, release = locks.acquire, locks.release

    def marked_acquire(*lock: str, **kwargs: float) -> None:
        acquire(*lock, **kwargs)
        if lock[0] == "thread":
            out.setdefault("on_entry", []).append(sorted(os.listdir(folder)))
            touch(inside)
            if hold_until:
                wait_for(lambda: os.path.exists(hold_until), hold_until)

    def marked_release(*lock: str) -> None:
        if lock[0] == "thread" and os.path.exists(inside):
            os.replace(inside, done)
        release(*lock)

    locks.acquire, locks.release = marked_acquire, marked_release


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["say", "resume", "append"])
    parser.add_argument("args", nargs="*")
    parser.add_argument("--barrier", default=None)
    parser.add_argument("--kill-at", default=None)
    parser.add_argument("--wait", type=float, default=None, help="seconds to wait for a busy thread")
    parser.add_argument("--after", default=None)
    parser.add_argument("--turn-marks", default=None)
    parser.add_argument("--hold-until", default=None)
    parser.add_argument("--probe", default=None)
    parser.add_argument("--done", default=None)
    opts = parser.parse_args()

    from langchain_core.messages import HumanMessage

    from pagefault import Context
    from pagefault.engines.thread_lock import ThreadBusy
    from pagefault.persistence.postgres import open_postgres
    from pagefault.stores import CoreMemory, MemoryServices, Scope
    from pagefault.stores.provenance import Provenance

    if opts.kill_at:
        install_kill(opts.kill_at)
    persistence = open_postgres()
    svc = MemoryServices.open(os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"))  # warm: models, connections
    met = barrier(opts.barrier, 0)
    out: dict = {"pid": os.getpid(), "met": met}
    a = opts.args
    if opts.command in ("say", "resume"):
        graph = persistence.graph(**({"wait": opts.wait} if opts.wait is not None else {}))
        if opts.turn_marks:
            mark_turns(graph, opts.turn_marks, opts.hold_until, out)
        ctx = Context(user_id=a[0])
        config = {"configurable": {"thread_id": a[1]}}
        answers = []
        if opts.after:
            wait_for(lambda: os.path.exists(opts.after), opts.after)
        if opts.probe:
            try:
                persistence.graph(wait=0).invoke({"messages": [HumanMessage(a[2])]}, config, context=ctx)
                out["probe"] = "ran"
            except ThreadBusy:
                out["probe"] = "busy"
            touch(opts.probe)
        try:
            if opts.command == "resume":
                state = graph.resume(config, context=ctx)
                answers.append(None if state is None else state["messages"][-1].content)
            for text in a[2:]:
                if text == "@sync":
                    barrier(opts.barrier, len(answers))
                    continue
                state = graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx)
                answers.append(state["messages"][-1].content)
        except ThreadBusy as e:
            out["busy"] = str(e)
        out["answers"] = answers
    elif opts.command == "append":
        core = CoreMemory(persistence.store, Scope(a[0]))
        for i in range(int(a[3])):
            core.append(a[1], f"{a[2]}-{i}", provenance=Provenance(thread_id=f"{a[2]}", turn=i, message_id=f"m{i}"))
        out["ids"], out["rounds"] = [], []
        for i in range(int(a[4]) if len(a) > 4 else 0):
            out["rounds"].append(barrier(opts.barrier, f"fact-{i}"))  # every replica is about to insert fact i
            out["ids"].append(svc.archival.insert(Scope(a[0]), f"Shared fact number {i}: the lighthouse keeper "
                                                  f"logged ship {i}.").id)
    if opts.done:
        touch(opts.done)
    persistence.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
