"""One replica of a pagefault deployment, run as its own OS process by the production-path tests.

It serves from the engines its environment names (``PAGEFAULT_DATABASE_URL``, ``PAGEFAULT_CHROMA_URL``,
``PAGEFAULT_DATA_DIR``, ...) and prints one JSON line with what it did. Commands:

- ``say USER THREAD TEXT...``: one turn per TEXT on the thread (a TEXT ``@sync`` waits at the barrier
  again, for the other replicas to get there too);
- ``resume USER THREAD``: finish a turn a crash cut short (``SerializedGraph.resume``);
- ``append USER LABEL PREFIX N [F]``: N core-memory appends to one block, then archival inserts of the
  same F facts every replica is given.

``--barrier DIR:N`` waits, after start-up, until N replicas have reached the barrier in DIR, so they
act at the same moment; ``--delay S`` then waits S seconds more.
``--kill-at POINT`` makes the process SIGKILL itself, for real, at a point of the turn:

- ``archival-written``: right after an archival record is written, before the step's checkpoint;
- ``compaction``: inside compaction, once the summary is made, before the node's update is saved;
- ``multi-tool``: inside a step of several memory calls, after the second one ran.

``--slow S`` makes the model take S seconds per call (to hold a thread busy).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


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


def slow_model(seconds: float) -> None:
    from pagefault.models.offline import OfflineChatModel

    real = OfflineChatModel._generate

    def _generate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(seconds)
        return real(self, *args, **kwargs)

    OfflineChatModel._generate = _generate  # type: ignore[method-assign]


def barrier(spec: str | None, round_: int) -> None:
    if not spec:
        return
    folder, n = spec.rsplit(":", 1)
    open(os.path.join(folder, f"ready{round_}-{os.getpid()}"), "w").close()
    while len([f for f in os.listdir(folder) if f.startswith(f"ready{round_}-")]) < int(n):
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["say", "resume", "append"])
    parser.add_argument("args", nargs="*")
    parser.add_argument("--barrier", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--kill-at", default=None)
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--wait", type=float, default=None, help="seconds to wait for a busy thread")
    opts = parser.parse_args()

    from langchain_core.messages import HumanMessage

    from pagefault import Context
    from pagefault.engines.thread_lock import ThreadBusy
    from pagefault.persistence.postgres import open_postgres
    from pagefault.stores import CoreMemory, MemoryServices, Scope
    from pagefault.stores.provenance import Provenance

    if opts.kill_at:
        install_kill(opts.kill_at)
    if opts.slow:
        slow_model(opts.slow)
    persistence = open_postgres()
    svc = MemoryServices.open(os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"))  # warm: models, connections
    barrier(opts.barrier, 0)
    time.sleep(opts.delay)
    out: dict = {"pid": os.getpid(), "started": time.time()}
    a = opts.args
    if opts.command in ("say", "resume"):
        graph = persistence.graph(**({"wait": opts.wait} if opts.wait is not None else {}))
        ctx = Context(user_id=a[0])
        config = {"configurable": {"thread_id": a[1]}}
        answers = []
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
        out["appended"] = time.time()
        barrier(opts.barrier, 1)  # both have appended: insert together, however long the appends took
        out["inserting"] = time.time()
        out["ids"] = [svc.archival.insert(Scope(a[0]), f"Shared fact number {i}: the lighthouse keeper logged "
                                          f"ship {i}.").id for i in range(int(a[4]) if len(a) > 4 else 0)]
    out["finished"] = time.time()
    persistence.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
