"""Where a turn's wall time goes, on every thread: a sampler for ``production_path.py --sample``.

cProfile sees only the thread that enables it, so the work a turn waits for on other threads (LangGraph's
checkpoint writes, the prompt reads, the write-behind threads competing for the GIL) stays out of its
picture. This samples ``sys._current_frames()`` every half millisecond while a turn runs and charges
each sample's elapsed time, per kind of turn:

- on the turn's own thread and on the other busy threads (idle pool workers waiting for work are left
  out), to every pagefault function on the stack (inclusive time, once per stack);
- on the turn's own thread, to the pagefault or LangGraph function that made each Postgres call
  (psycopg on the stack's leaf), so the round trips a turn waits on can be told apart.

Reading other threads' frames needs the GIL, so a C call that holds it delays the next sample; each
sample is weighted by the time since the last one, which keeps the totals close to the wall time.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from types import FrameType
from typing import TextIO

#: Seconds between two samples.
INTERVAL = 0.0005
#: Leaf functions of a thread that is waiting, not working (in the standard library's threading, queue,
#: selectors and concurrent.futures modules).
_IDLE_FUNCTIONS = {"wait", "_wait_for_tstate_lock", "get", "select", "_worker", "poll", "accept", "sleep", "acquire"}
_IDLE_MODULES = ("threading.py", "queue.py", "selectors.py", "concurrent/futures/thread.py")


def _stack(frame: FrameType | None) -> list[tuple[str, str, int]]:
    out = []
    while frame is not None:
        out.append((frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno))
        frame = frame.f_back
    return out


def _where(filename: str) -> str:
    for mark in ("/pagefault/", "site-packages/"):
        if mark in filename:
            return filename.split(mark)[-1]
    return os.path.basename(filename)


class WallSampler:
    """Samples every thread of this process while ``label`` is set (a kind of turn); ``report`` prints
    milliseconds per turn of that kind."""

    def __init__(self) -> None:
        self.label: str | None = None
        self.turns: collections.Counter[str] = collections.Counter()
        self.wall: collections.Counter[str] = collections.Counter()
        self._inclusive: dict[tuple[str, str], collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self._postgres: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self._stop = threading.Event()
        self._turn_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._run, name="wall-sampler", daemon=True)

    def __enter__(self) -> "WallSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def turn(self, label: str, started: float, ended: float) -> None:
        """Count one finished turn of kind ``label`` that took ``ended - started`` seconds."""
        self.turns[label] += 1
        self.wall[label] += ended - started

    def _run(self) -> None:
        me, last = threading.get_ident(), time.perf_counter()
        while not self._stop.wait(INTERVAL):
            now = time.perf_counter()
            dt, last, label = now - last, now, self.label
            if label is None:
                continue
            for tid, frame in sys._current_frames().items():
                if tid == me:
                    continue
                stack = _stack(frame)
                own = tid == self._turn_thread
                leaf_file, leaf_fn, _ = stack[0]
                if not own and leaf_fn in _IDLE_FUNCTIONS and leaf_file.endswith(_IDLE_MODULES):
                    continue
                role = "turn" if own else "other"
                counted = self._inclusive[(label, role)]
                counted["<sampled>"] += dt
                for name in {f"{_where(f)}:{fn}" for f, fn, _ in stack if "/pagefault/" in f}:
                    counted[name] += dt
                if own and "psycopg" in leaf_file:
                    caller = next((f"{_where(f)}:{fn}:{line}" for f, fn, line in stack
                                   if ("/pagefault/" in f or "/langgraph/" in f) and "psycopg" not in f), "?")
                    self._postgres[label][caller] += dt

    def report(self, out: TextIO, top: int = 20) -> None:
        for label in sorted(self.turns):
            n = self.turns[label]
            print(f"\n{label}: {n} turns, {1000 * self.wall[label] / n:.1f} ms per turn (wall)", file=out)
            for role, title in (("turn", "the turn's own thread"), ("other", "other busy threads")):
                counted = self._inclusive[(label, role)]
                print(f"  {title}: {1000 * counted['<sampled>'] / n:.1f} ms per turn sampled; by pagefault function "
                      "(inclusive):", file=out)
                for name, s in [kv for kv in counted.most_common(top + 1) if kv[0] != "<sampled>"][:top]:
                    print(f"    {1000 * s / n:7.1f}  {name}", file=out)
            print("  Postgres calls on the turn's own thread, by caller:", file=out)
            for name, s in self._postgres[label].most_common(top // 2):
                print(f"    {1000 * s / n:7.1f}  {name}", file=out)
