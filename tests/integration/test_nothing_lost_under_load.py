"""Nothing lost under load (issue 43): every message sent to one data directory is accounted for.

Beside ``HOGS`` processes that spin on the CPU, one embedded data directory takes, at once from
Python threads: an ``import_history`` of a generated multi-session log, chat turns on the pagefault
graph, chat turns through a ``create_agent`` app with ``PagefaultMiddleware``, and core memory edits
on the same user. The windows are small (``WINDOW`` tokens), so compaction evicts to recall as it goes.
Every thread is fresh and starts with several messages at once: a thread's first run is where LangGraph
may save the writes against a checkpoint before the checkpoint itself, the order the remembering savers
once lost a batch in (tests/integration/test_checkpoint_order.py fixes that one interleaving; this
checks the class of fault, whatever the interleaving the load makes). With that fault put back (``DeltaMemo.wrote``
dropping a write against a thread it has no head for), it failed 6 runs of 6 on the 2-core development machine
(load average 13 to 24), each in under a minute: an import batch "landed" fewer messages than it was given, or a
graph thread's window had lost its first run. Load decides the interleavings, so a run can also miss it.

The work is bounded by counts, not by time, and nothing is timed. Afterwards every message sent must be,
exactly once, in its thread's window or among its evicted messages (counted in ``evicted_count``),
and in the recall index once the writers are flushed, at the thread position the window says; the thread's
checkpoints must hold every one of its messages, and every core edit must be in the block once.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any, Callable

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from support.cpu_load import busy_cpus

from pagefault import Context, MemoryServices, OfflineChatModel, PagefaultMiddleware, open_embedded
from pagefault.maintenance.history_import import import_history, parse_dialog, to_message
from pagefault.maintenance.transfer import thread_history
from pagefault.stores import CoreMemory, Scope

HOGS = 2
WINDOW = 2048
USER = "ana"
#: The imported logs, one import worker each: the messages of each session (a fresh thread), imported in batches
#: of ``IMPORT_BATCH`` (the long session is there to be compacted).
LOGS = [[20] + [5] * 6, [5] * 8]
IMPORT_BATCH = 4
#: Workers on the graph and on the middleware app, the fresh threads each runs one after the other, and how many
#: messages each run of a thread sends: the first several at once. More workers each starting fewer threads make
#: more thread starts overlap.
GRAPH_WORKERS, GRAPH_THREADS = 4, 2
MIDDLEWARE_WORKERS, MIDDLEWARE_THREADS = 2, 2
RUNS = [3, 1]
#: Lines appended to core memory (every other one then rewritten) while the chats run.
CORE_EDITS = 8
WORDS = ("game league rank gold skin champion tournament breakfast eggs seafood urchin restaurant plane flight "
         "trip friends weekend movie music guitar recipe garden dog cat school work project").split()


def _line(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 90))).capitalize() + "."


def _log(rng: random.Random, sizes: list[int]) -> dict[str, Any]:
    """A multi-session chat log in ``import_history``'s shape (the shape of ../shared/tools/import_under_load.py's)."""
    return {"sessions": [
        {"id": f"session_{n}", "timestamp": f"2023-05-{n:02d}T10:00:00",
         "messages": [{"speaker": rng.choice(["Sam", "Alex"]), "text": _line(rng), "id": f"D{n}:{i + 1}"}
                      for i in range(size)]}
        for n, size in enumerate(sizes, 1)]}


class Sent:
    """The message ids sent to each thread, in order, and whatever a worker raised."""

    def __init__(self) -> None:
        self.ids: dict[str, list[str]] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def add(self, thread: str, messages: list[BaseMessage]) -> None:
        with self._lock:
            self.ids.setdefault(thread, []).extend(str(m.id) for m in messages)

    def worker(self, name: str, work: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                work()
            except BaseException as e:  # a failed worker is a failure of the test, with what it raised
                with self._lock:
                    self.errors.append(f"{name}: {type(e).__name__}: {e}")
        return threading.Thread(target=run, name=name)


def _turns(sent: Sent, rng: random.Random, prefix: str, threads: int,
           invoke: Callable[[str, list[BaseMessage]], Any]) -> Callable[[], None]:
    """``threads`` fresh threads, each given ``RUNS`` messages at a time (several in its first run)."""
    plan = [(f"{prefix}-{t}", r, [HumanMessage(_line(rng), id=f"{prefix}-{t}-{r}-{k}") for k in range(size)])
            for t in range(threads) for r, size in enumerate(RUNS)]

    def work() -> None:
        for thread, _, batch in plan:
            sent.add(thread, batch)
            invoke(thread, batch)
    return work


def _core_edits(memory: Any, lines: list[str]) -> Callable[[], None]:
    """``CORE_EDITS`` lines appended to the user's ``human`` block, every other one then rewritten."""
    def work() -> None:
        core = CoreMemory(memory.store, Scope(USER))
        for i in range(CORE_EDITS):
            line = f"note {i}"
            core.append("human", line)
            if i % 2:
                core.replace("human", line, f"{line} (checked)")
                line = f"{line} (checked)"
            lines.append(line)
    return work


def _account(thread: str, sent: list[str], values: dict[str, Any], recall: dict[int, str], history: list[BaseMessage]
             ) -> list[str]:
    """What is wrong with ``thread``: each sent id once in its window or evicted, and in recall at its place."""
    problems: list[str] = []
    window = [str(m.id) for m in values.get("messages", []) or []]
    evicted = int(values.get("evicted_count", 0) or 0)
    held = [str(m.id) for m in history]
    if len(held) != evicted + len(window) or held[evicted:] != window:
        problems.append(f"{thread}: checkpoints hold {len(held)} messages, the state {evicted} evicted + {len(window)}")
    twice = [i for i, n in Counter(held).items() if n > 1]
    if twice:
        problems.append(f"{thread}: message ids held twice: {twice[:5]}")
    position = {mid: i for i, mid in enumerate(held)}
    by_id: dict[str, list[int]] = {}
    for turn, mid in recall.items():
        by_id.setdefault(mid, []).append(turn)
    for mid in sent:
        if mid not in position:
            problems.append(f"{thread}: {mid} is neither in the window nor evicted")
            continue
        at = position[mid]
        if at < evicted and mid in window:
            problems.append(f"{thread}: {mid} is evicted and still in the window")
        if by_id.get(mid) != [at]:
            problems.append(f"{thread}: {mid} (message {at}) is in recall at {sorted(by_id.get(mid, []))}")
    return problems


def test_every_message_sent_under_load_is_kept_once(tmp_path):
    data_dir = str(tmp_path / "pf")
    rng = random.Random(43)
    logs = [_log(rng, sizes) for sizes in LOGS]
    sent = Sent()
    core_lines: list[str] = []
    with open_embedded(data_dir) as memory:
        ctx = Context(user_id=USER, context_window=WINDOW, model="offline")
        graph = memory.graph()
        agent = memory.serialized(create_agent(
            OfflineChatModel(), tools=[], middleware=[PagefaultMiddleware(user_id=USER, context_window=WINDOW)],
            checkpointer=memory.checkpointer, store=memory.store))

        def on_graph(thread: str, batch: list[BaseMessage]) -> None:
            graph.invoke({"messages": batch}, {"configurable": {"thread_id": thread}}, context=ctx)

        def on_agent(thread: str, batch: list[BaseMessage]) -> None:
            agent.invoke({"messages": batch}, {"configurable": {"thread_id": thread}})

        def on_import(log: dict[str, Any], prefix: str) -> Callable[[], None]:
            def work() -> None:
                for session in parse_dialog(log).sessions:
                    thread = f"{prefix}{session.id}"
                    sent.add(thread, [to_message(thread, i, m, None) for i, m in enumerate(session.messages)])
                report = import_history(graph, log, ctx, thread_prefix=prefix, batch_size=IMPORT_BATCH, progress=False)
                assert report.imported == sum(len(s["messages"]) for s in log["sessions"]), report
            return work

        workers = [sent.worker(f"import-{n}", on_import(log, f"imp{n}-")) for n, log in enumerate(logs)]
        workers += [sent.worker(f"graph-{n}", _turns(sent, rng, f"graph{n}", GRAPH_THREADS, on_graph))
                    for n in range(GRAPH_WORKERS)]
        workers += [sent.worker(f"middleware-{n}", _turns(sent, rng, f"agent{n}", MIDDLEWARE_THREADS, on_agent))
                    for n in range(MIDDLEWARE_WORKERS)]
        workers.append(sent.worker("core", _core_edits(memory, core_lines)))
        with busy_cpus(HOGS):
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        assert not sent.errors, sent.errors

        services = MemoryServices.open(data_dir)
        services.recall.writer.flush()
        scope = Scope(USER)
        problems: list[str] = []
        evictions = 0
        for thread, ids in sorted(sent.ids.items()):
            app = agent if thread.startswith("agent") else graph
            values = app.get_state({"configurable": {"thread_id": thread}}).values
            evictions += int(values.get("evicted_count", 0) or 0)
            found = thread_history(memory.checkpointer, thread)
            assert found is not None, f"{thread}: no checkpoint"
            got = services.recall.index.collection.get(
                where={"$and": [{"scope": scope.key}, {"thread_id": thread}]}, include=["metadatas"])
            recall = {int(m["turn"]): str(m["message_id"]) for m in got["metadatas"] or []}
            problems += _account(thread, ids, values, recall, found[0])
        assert not problems, "\n".join(problems[:20])
        assert evictions > 0, "compaction never evicted: the window is too large to test eviction"
        assert sum(len(ids) for ids in sent.ids.values()) == sum(map(sum, LOGS)) + (
            GRAPH_WORKERS * GRAPH_THREADS + MIDDLEWARE_WORKERS * MIDDLEWARE_THREADS) * sum(RUNS)

        human = CoreMemory(memory.store, Scope(USER)).get("human").value.split("\n")
        assert len(core_lines) == CORE_EDITS
        for line in core_lines:
            assert human.count(line) == 1, (line, human)

