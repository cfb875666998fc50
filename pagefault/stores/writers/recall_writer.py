"""Write-behind for the recall index: turns are indexed off the turn path.

Indexing a turn (embedding its messages, two Chroma writes, two BM25 writes) cost more than the
rest of a turn together. Nothing needs it at once: the messages are in the checkpoint and in the
window, where the model already sees them. So the turn hands them to one background thread per
process and goes on. What keeps this safe:

- Reads wait: every recall search or count in this process first waits for the queue to drain,
  so what was said is findable as soon as it could be searched.
- Eviction waits: compaction indexes synchronously what is not confirmed before it evicts.
- The checkpoint only advances ``recall_indexed`` over turns the writer has *confirmed*
  (same turn, same message id), so a crash with jobs queued re-indexes them from the checkpoint
  (recall ids are deterministic; re-indexing is idempotent).
- A failed job (a store down) is logged and left unconfirmed; the next sync retries it.

The worker lingers ``LINGER_SECONDS`` for more turns before it writes, unless someone is waiting
for it or the turn is over (``hurry``), so the steps of a turn share one embedding run and one
write per index.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from langchain_core.messages import BaseMessage

from pagefault.stores.scope import Scope
from pagefault.stores.writers import joined

log = logging.getLogger(__name__)

#: Threads whose submitted/confirmed turns are remembered (least recently used dropped first).
MAX_THREADS = 1024
#: Turns remembered per thread, beyond the lowest one still unconfirmed.
MAX_TURNS = 4096

#: How long the worker waits for more turns before writing what it has, unless a reader is waiting.
LINGER_SECONDS = 0.25
#: Seconds a normal exit waits for the worker to finish the job in hand and stop (``RecallWriter.close``).
EXIT_WAIT = 120.0

Entry = tuple[int, BaseMessage]
InWindow = tuple[Scope, str, int]
#: (scope, thread, entries, checkpoint id by message index, conversational turn by message index)
AddFn = Callable[[Scope, str, Sequence[Entry], dict[int, str], dict[int, int]], int]


def message_key(message: BaseMessage) -> str:
    """What tells two messages at the same turn apart (a forked thread reuses turn numbers)."""
    return message.id or f"{message.type}:{hash(str(message.content))}"


@dataclass
class _Job:
    scope: Scope
    thread_id: str
    entries: list[Entry]
    checkpoints: dict[int, str]
    turns: dict[int, int]  # conversational turn by message index (those known)
    prepared: bool = False  # its texts were embedded while the worker lingered


class RecallWriter:
    """One background thread that indexes submitted turns in order, merging what queued up."""

    def __init__(self, add: AddFn, *, background: Callable[[], object] | None = None,
                 prepare: Callable[[Sequence[Entry]], object] | None = None) -> None:
        #: The write each job ends in (``RecallIndex.add``); tests wrap it to hold or fail the writer.
        self.write = add
        self._prepare = prepare  # work ``add`` will need that holds no lock and no GIL (embedding)
        self._background = background  # entered in the worker thread (e.g. a low-priority embedding session)
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._current: list[_Job] = []  # the jobs the worker is writing now
        self._thread: threading.Thread | None = None
        self._submitted: OrderedDict[tuple[str, str], dict[int, str]] = OrderedDict()
        self._done: OrderedDict[tuple[str, str], dict[int, str]] = OrderedDict()
        self._waiting = 0  # callers in ``flush``
        self._hurried = False  # the turn is over (``hurry``): write what is queued now
        self._closed = False  # ``close``: the worker stops after the job in hand, and no new one starts
        self.linger = LINGER_SECONDS
        self.failures = 0
        self.busy_seconds = 0.0  # time spent indexing, for benchmarks: the work left the turn, not the machine

    # -- the turn's side ------------------------------------------------------------------
    def submit(self, scope: Scope, thread_id: str, entries: Sequence[Entry], checkpoint_id: str,
               turns: Mapping[int, int] | None = None) -> int:
        """Queue the entries not already queued or indexed; returns how many were queued. ``turns``: the
        conversational turn of each entry, by message index."""
        key = (scope.key, thread_id)
        with self._cond:
            sent = self._thread_map(self._submitted, key)
            new = [(t, m) for t, m in entries if sent.get(t) != message_key(m)]
            if not new:
                return 0
            for t, m in new:
                sent[t] = message_key(m)
            self._queue.append(_Job(scope, thread_id, new, {t: checkpoint_id for t, _ in new},
                                    {t: turns[t] for t, _ in new if turns and t in turns}))
            self._start()
            self._cond.notify_all()
        return len(new)

    def confirmed_through(self, scope: Scope, thread_id: str, start: int, entries: Sequence[Entry]) -> int:
        """The highest ``n`` such that every entry from ``start`` below ``n`` is indexed (checked by id)."""
        key = (scope.key, thread_id)
        n = start
        with self._cond:
            done = self._done.get(key, {})
            for t, m in sorted(entries, key=lambda e: e[0]):
                if t < n:
                    continue
                if t != n or done.get(t) != message_key(m):
                    break
                n = t + 1
            for table in (self._done, self._submitted):  # forget what the checkpoint now records
                seen = table.get(key)
                if seen and len(seen) > MAX_TURNS:
                    for t in [t for t in seen if t < n]:
                        del seen[t]
        return n

    def flush(self, timeout: float | None = None, *, in_window: InWindow | None = None) -> bool:
        """Wait until everything queued so far is indexed (or failed); False on timeout.

        ``in_window`` = (scope, thread, first turn): a reader whose own window holds that thread from
        that turn on does not wait for those turns (it sees them already); it waits for the rest."""
        def needed(job: _Job) -> bool:
            return in_window is None or (job.scope.key, job.thread_id) != (in_window[0].key, in_window[1]) or any(
                t < in_window[2] for t, _ in job.entries)

        def settled() -> bool:
            return not any(needed(j) for j in self._queue) and not any(needed(j) for j in self._current)

        with self._cond:
            if settled():
                return True
            if self._closed:  # exiting: what is left is indexed again from the checkpoint (``recall_indexed``)
                return False
            self._waiting += 1
            self._cond.notify_all()  # the worker stops lingering
            try:
                return self._cond.wait_for(settled, timeout)
            finally:
                self._waiting -= 1

    def busy(self) -> bool:
        """Whether any job is queued or being written."""
        with self._cond:
            return bool(self._queue or self._current)

    def hurry(self) -> bool:
        """Stop lingering and write what is queued, without waiting; False if nothing is queued. Called
        when a turn's answer is out: nothing more comes until the next turn, and a write that ran in the
        pause between turns is one the next turn's search or compaction does not wait for."""
        with self._cond:
            if not self._queue:
                return False
            self._hurried = True
            self._cond.notify_all()
        return True

    # -- the worker -----------------------------------------------------------------------
    def _thread_map(self, table: OrderedDict[tuple[str, str], dict[int, str]], key: tuple[str, str]) -> dict[int, str]:
        seen = table.setdefault(key, {})
        table.move_to_end(key)
        while len(table) > MAX_THREADS:
            table.popitem(last=False)
        return seen

    def close(self, timeout: float | None = EXIT_WAIT) -> bool:
        """Stop the worker: it finishes the job in hand and ends; wait up to ``timeout`` seconds for it.
        Jobs still queued stay unconfirmed (the checkpoint's ``recall_indexed`` has them indexed again).
        True once no worker runs. A daemon thread left inside onnxruntime or Chroma when the interpreter
        finalizes killed the process (SIGABRT, SIGSEGV), so a normal exit calls this after ``flush``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        return joined(thread, timeout)

    def _start(self) -> None:
        if self._closed:
            return
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="pagefault-recall-writer", daemon=True)
            self._thread.start()
            _writers.add(self)

    def _take(self) -> list[_Job]:
        """Every queued job, consecutive jobs of one thread merged into one (later turns win)."""
        merged: list[_Job] = []
        while self._queue:
            job = self._queue.popleft()
            last = merged[-1] if merged else None
            if last and (last.scope.key, last.thread_id) == (job.scope.key, job.thread_id):
                turns = {t: m for t, m in last.entries}
                turns.update(dict(job.entries))
                last.entries = sorted(turns.items(), key=lambda e: e[0])
                last.checkpoints.update(job.checkpoints)
                last.turns.update(job.turns)
            else:
                merged.append(job)
        return merged

    def _run(self) -> None:
        if self._background:
            self._background()
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._closed)
                if self._closed:
                    return
            self._linger()
            with self._cond:
                jobs = self._current = self._take()
                self._hurried = False  # a hurry is for what was queued; the next turn lingers again
            start = time.perf_counter()
            try:
                for job in jobs:
                    if self._closed:  # exiting: the rest is indexed again from the checkpoint
                        break
                    self._index(job)
            finally:
                with self._cond:
                    self.busy_seconds += time.perf_counter() - start
                    self._current = []
                    self._cond.notify_all()

    def _linger(self) -> None:
        """Wait a moment for the next turns unless someone waits: a Chroma write costs about as much
        for one turn as for several, and holds the GIL while it runs. Meanwhile embed what is queued
        (ONNX lets go of the GIL), so a reader that stops the wait finds only the writes left."""
        # The clock bounds only when the batch is written, never what is written or what a search sees
        # (every search waits for what is pending).
        deadline = time.monotonic() + self.linger
        unprepared = lambda: self._prepare is not None and any(not j.prepared for j in self._queue)  # noqa: E731
        while True:
            with self._cond:
                if self._waiting > 0 or self._hurried or self._closed:
                    self._hurried = False
                    return
                if not unprepared():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait_for(lambda: self._waiting > 0 or self._hurried or self._closed or unprepared(), left)
                    continue
                todo = [j for j in self._queue if not j.prepared]
                for j in todo:
                    j.prepared = True
            for j in todo:
                try:
                    if self._prepare is not None:  # it is: only then are jobs left unprepared
                        self._prepare(j.entries)
                except Exception as exc:  # only a head start: ``add`` does it again and reports
                    log.debug("recall pre-embedding failed: %s", exc)

    def _index(self, job: _Job) -> None:
        key = (job.scope.key, job.thread_id)
        try:
            self.write(job.scope, job.thread_id, job.entries, job.checkpoints, job.turns)
        except Exception as exc:  # a store down: leave the turns unconfirmed; the next sync retries them
            self.failures += 1
            log.warning("recall indexing of thread %r failed, will retry: %s", job.thread_id, exc)
            with self._cond:
                sent = self._submitted.get(key, {})
                for t, m in job.entries:
                    if sent.get(t) == message_key(m):
                        del sent[t]
            return
        with self._cond:
            done = self._thread_map(self._done, key)
            for t, m in job.entries:
                done[t] = message_key(m)


_writers: "weakref.WeakSet[RecallWriter]" = weakref.WeakSet()


@atexit.register
def _drain() -> None:
    """On a normal exit, finish what is queued (a crash is covered by ``recall_indexed``), then stop the
    workers before the interpreter finalizes (``RecallWriter.close``)."""
    for writer in list(_writers):
        writer.flush(timeout=30)
        if not writer.close():
            log.warning("the recall writer was still writing %.0f s after exit began", EXIT_WAIT)
