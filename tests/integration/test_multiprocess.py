"""Several OS processes on one embedded data directory at once: nothing is lost, nothing crashes.

- two processes run 50 turns each on the same user and thread, a ``pagefault chat`` REPL fed from its
  stdin (the CLI's ``main``, streaming) and a script calling ``graph.ainvoke``: every one of the 100 user
  turns is in the thread, once, in recall and in archival, and the thread's history never forked;
- the same with two ``create_agent`` apps with ``PagefaultMiddleware`` (``invoke`` and ``ainvoke``, 25
  turns each);
- two processes make 50 core-memory appends each to one block (through the memory tool and through
  ``CoreMemory``): all 100 lines are kept;
- two processes open 8 brand-new directories together, each at the same moment: neither ever crashes;
- a run that waits for the thread longer than its ``wait`` gets ``ThreadBusy`` and saves nothing, and a
  process killed while it holds a lock lets go of it;
- a ``create_agent`` app that is not wrapped (``memory.serialized``) logs that its runs are not serialized.

Each child is this file run as a script. The processes start together at a file barrier, and they prove
that they overlapped with files too: a process writes ``waiting-<kind>-<who>`` while it waits for a lock
(the thread's, or a core block's), and the first time it holds that lock it keeps it until the other one is
waiting. Each then counts the times it let go while the other was waiting: both counts must be positive,
and for runs on a thread at least half the turns (waiting is fair, so two processes alternate).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve()
TESTS = HERE.parent.parent
TURNS = 50
#: Turns per process of the middleware apps (the chat and script pair runs the 100 turns the issue asks).
AGENT_TURNS = 25
APPENDS = 50
FRESH_ROUNDS = 8
CHILD_TIMEOUT = 240
USER = "ana"


# -- the child processes --------------------------------------------------------------------------

def _barrier(sync_dir: str, who: str, tag: str, n: int = 2) -> None:
    """Wait until ``n`` processes have reached the barrier ``tag`` in ``sync_dir``."""
    Path(sync_dir, f"{tag}-{who}").touch()
    while len([f for f in os.listdir(sync_dir) if f.startswith(f"{tag}-")]) < n:
        time.sleep(0.002)


def _watch(locks: Any, sync_dir: str, who: str, kind: str, matches: Callable[[tuple[str, ...]], bool]) -> dict[str, int]:
    """Record, on the real locks of the data directory, when this process waits for a lock of ``kind`` and
    whether the other process was waiting each time this one let go of one; hold the first until it is."""
    real_acquire, real_release = locks.acquire, locks.release
    mine = Path(sync_dir, f"waiting-{kind}-{who}")
    seen = {"held": 0, "other_waiting": 0}

    def other_waiting() -> bool:
        return any(f.startswith(f"waiting-{kind}-") and f != mine.name for f in os.listdir(sync_dir))

    def acquire(*name: str, **kw: Any) -> None:
        if not matches(name):
            return real_acquire(*name, **kw)
        mine.touch()
        try:
            real_acquire(*name, **kw)
        finally:
            mine.unlink()

    def release(*name: str) -> None:
        if matches(name):
            if seen["held"] == 0:  # keep the first one until the other process waits for it
                deadline = time.monotonic() + 60
                while not other_waiting() and time.monotonic() < deadline:
                    time.sleep(0.002)
            seen["held"] += 1
            seen["other_waiting"] += other_waiting()
        real_release(*name)

    locks.acquire, locks.release = acquire, release
    return seen


def _thread_lock(name: tuple[str, ...]) -> bool:
    return name[0] == "thread"


def _core_lock(name: tuple[str, ...]) -> bool:
    return name[-1] == "human" and "core" in name


def _text(who: str, i: int) -> str:
    return f"Logbook {who}-{i:02d}: the keeper saw a kite over hill {who}{i}."


def _report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def child_turns(data_dir: str, sync_dir: str, who: str, thread: str) -> None:
    """``TURNS`` statements on ``thread`` through ``graph.ainvoke`` (``open_embedded_async``)."""
    from langchain_core.messages import HumanMessage

    from pagefault import Context, MemoryServices, open_embedded_async

    MemoryServices.open(data_dir).embeddings.embed_query("warm up")
    ctx, config = Context(user_id=USER, data_dir=data_dir), {"configurable": {"thread_id": thread}}

    async def run() -> dict[str, int]:
        async with open_embedded_async(data_dir) as p:
            seen = _watch(p.locks, sync_dir, who, "thread", _thread_lock)
            graph = p.graph()
            _barrier(sync_dir, who, "start")
            for i in range(TURNS):
                await graph.ainvoke({"messages": [HumanMessage(_text(who, i))]}, config, context=ctx)
            return seen

    _report(**asyncio.run(run()))


def child_chat(data_dir: str, sync_dir: str, who: str, thread: str) -> None:
    """``pagefault chat`` on ``thread`` (the CLI's own ``main``), reading its lines from stdin once the
    other process is ready too."""
    from pagefault.cli.main import main
    from pagefault.engines.file_locks import file_locks
    from pagefault.stores import MemoryServices

    MemoryServices.open(data_dir).embeddings.embed_query("warm up")
    seen = _watch(file_locks(data_dir), sync_dir, who, "thread", _thread_lock)
    _barrier(sync_dir, who, "start")
    code = main(["chat", "--user", USER, "--thread", thread, "--data-dir", data_dir])
    print(f"\nexit {code}", flush=True)
    _report(**seen)


def child_agent(data_dir: str, sync_dir: str, who: str, thread: str, mode: str) -> None:
    """``AGENT_TURNS`` statements on ``thread`` to a ``create_agent`` app with ``PagefaultMiddleware``,
    through ``invoke`` (``sync``) or ``ainvoke`` (``async``)."""
    from langchain.agents import create_agent

    from pagefault import MemoryServices, OfflineChatModel, PagefaultMiddleware, open_embedded, open_embedded_async
    from pagefault.persistence.embedded import EmbeddedPersistence

    MemoryServices.open(data_dir).embeddings.embed_query("warm up")
    config = {"configurable": {"thread_id": thread}}
    inputs = [{"messages": [{"role": "user", "content": _text(who, i)}]} for i in range(AGENT_TURNS)]

    def app(memory: EmbeddedPersistence) -> Any:
        return memory.serialized(create_agent(
            OfflineChatModel(), tools=[], middleware=[PagefaultMiddleware(user_id=USER, data_dir=data_dir)],
            checkpointer=memory.checkpointer, store=memory.store))

    if mode == "sync":
        with open_embedded(data_dir) as memory:
            seen = _watch(memory.locks, sync_dir, who, "thread", _thread_lock)
            agent = app(memory)
            _barrier(sync_dir, who, "start")
            for turn in inputs:
                agent.invoke(turn, config)
    else:
        async def run() -> dict[str, int]:
            async with open_embedded_async(data_dir) as memory:
                seen = _watch(memory.locks, sync_dir, who, "thread", _thread_lock)
                agent = app(memory)
                _barrier(sync_dir, who, "start")
                for turn in inputs:
                    await agent.ainvoke(turn, config)
                return seen

        seen = asyncio.run(run())
    _report(**seen)


def child_appends(data_dir: str, sync_dir: str, who: str) -> None:
    """``APPENDS`` lines appended to the ``human`` block: even ones through the ``core_memory_append``
    tool (its own embedded store), odd ones through ``CoreMemory`` on ``open_embedded``'s store."""
    from pagefault import Context, memory_tools, open_embedded
    from pagefault.stores import CoreMemory, Scope

    with open_embedded(data_dir) as p:
        seen = _watch(p.locks, sync_dir, who, "core", _core_lock)
        tool = next(t for t in memory_tools(Context(user_id=USER, data_dir=data_dir)) if t.name == "core_memory_append")
        core = CoreMemory(p.store, Scope(USER))
        answers = []
        _barrier(sync_dir, who, "start")
        for i in range(APPENDS):
            line = f"{who}-{i:02d}"
            if i % 2 == 0:
                answers.append(str(tool.invoke({"section": "human", "text": line})))
            else:
                core.append("human", line)
    _report(answers=answers, **seen)


def child_fresh(root: str, sync_dir: str, who: str) -> None:
    """Open ``FRESH_ROUNDS`` new directories under ``root``, each at the same moment as the other process,
    and run one turn and one core edit in each; report every error instead of stopping."""
    from langchain_core.messages import HumanMessage

    from pagefault import Context, MemoryServices, memory_tools, open_embedded, open_embedded_async
    from pagefault.models.embeddings import OfflineEmbeddings

    OfflineEmbeddings().embed_query("warm up")
    errors = []
    for r in range(FRESH_ROUNDS):
        data_dir = os.path.join(root, f"fresh-{r}")
        ctx, config = Context(user_id=USER, data_dir=data_dir), {"configurable": {"thread_id": f"t-{who}"}}
        _barrier(sync_dir, who, f"round{r}")
        try:
            if (r + (who == "b")) % 2 == 0:  # the two processes open each directory two different ways
                with open_embedded(data_dir) as p:
                    p.graph().invoke({"messages": [HumanMessage(_text(who, r))]}, config, context=ctx)
            else:
                tool = next(t for t in memory_tools(ctx) if t.name == "core_memory_append")
                tool.invoke({"section": "human", "text": f"{who}-{r}"})

                async def turn() -> None:
                    async with open_embedded_async(data_dir) as p:
                        await p.graph().ainvoke({"messages": [HumanMessage(_text(who, r))]}, config, context=ctx)

                asyncio.run(turn())
            MemoryServices.open(data_dir)
        except Exception as e:
            errors.append(f"round {r}: {type(e).__name__}: {e}")
    _report(errors=errors)


def child_busy(data_dir: str) -> None:
    """A turn on the thread ``busy``, which the test holds, with ``wait=0.5``: ``ThreadBusy``. Then take the
    lock of the thread ``dead`` and die holding it (SIGKILL)."""
    import signal

    from langchain_core.messages import HumanMessage

    from pagefault import Context, open_embedded
    from pagefault.engines.thread_lock import ThreadBusy

    with open_embedded(data_dir) as p:
        try:
            p.graph(wait=0.5).invoke({"messages": [HumanMessage("My name is Ana.")]},
                                     {"configurable": {"thread_id": "busy"}}, context=Context(user_id=USER, data_dir=data_dir))
            _report(busy=None)
        except ThreadBusy as e:
            _report(busy=str(e))
        p.locks.acquire("thread", "dead")
        os.kill(os.getpid(), signal.SIGKILL)


CHILDREN = {"turns": child_turns, "chat": child_chat, "agent": child_agent, "appends": child_appends,
            "fresh": child_fresh, "busy": child_busy}


# -- the tests ------------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    from support.engines import child_env

    return child_env(PYTHONPATH=str(TESTS))


def _spawn(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE), *args], env=_env(), stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _reports(procs: list[subprocess.Popen], inputs: list[str] | None = None) -> list[dict[str, Any]]:
    """Each child's last printed line (its report), once all exited cleanly; ``inputs`` go to their stdin
    all at once (a pipe holds them), before any is waited for."""
    for p, text in zip(procs, inputs or []):
        assert p.stdin is not None
        p.stdin.write(text)
        p.stdin.flush()  # communicate() closes it
    outs = [p.communicate(timeout=CHILD_TIMEOUT) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"exit {p.returncode}:\n{out[-2000:]}\n{err[-4000:]}"
        assert "error: " not in out, out[-4000:]  # the chat REPL prints a failed turn and carries on
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


def _overlapped(reports: list[dict[str, Any]], *, fair: bool = False) -> None:
    """Each process let go of the lock at least once while the other one was waiting for it; ``fair``: in
    at least half of its turns (a waiter queues ahead of the holder's next turn, so the two alternate)."""
    for r in reports:
        assert r["held"] > 0 and r["other_waiting"] > 0, reports
        assert not fair or 2 * r["other_waiting"] >= r["held"], reports


def _every_turn_landed(data_dir: str, thread: str, texts: list[str]) -> None:
    """Each of ``texts`` is one user message of ``thread`` (the export, evicted ones included), its message
    is in recall, and archival holds it; the thread's history never forked."""
    from pagefault import open_embedded
    from pagefault.maintenance.transfer import export_agent
    from pagefault.stores import MemoryServices, Scope
    from pagefault.stores.recall import recall_id

    scope = Scope(USER)
    with open_embedded(data_dir) as p:
        exported = export_agent(p, scope, progress=False)
        parents = [s.parent_config["configurable"]["checkpoint_id"]
                   for s in p.graph().get_state_history({"configurable": {"thread_id": thread}}) if s.parent_config]
    assert len(parents) == len(set(parents)), "two checkpoints share a parent: the thread forked"
    messages = next(t for t in exported["threads"] if t["thread_id"] == thread)["messages"]
    users = {m["data"]["content"]: n for n, m in enumerate(messages) if m["type"] == "human"}
    assert len(users) == sum(m["type"] == "human" for m in messages), "a user message is in the thread twice"
    recall = MemoryServices.open(data_dir).recall.index
    archived = {r["text"] for r in exported["archival"]}
    for text in texts:
        assert text in users, f"turn {text!r} is not in the thread"
        hits = recall.get([recall_id(scope, thread, users[text])])
        assert hits and text in hits[0].text, f"turn {text!r} (message {users[text]}) is not in recall"
        assert text in archived, f"turn {text!r} was not saved to archival"
    assert len(users) == len(texts), sorted(set(users) - set(texts))


def test_a_chat_and_a_script_on_one_thread_lose_no_turn(tmp_path):
    data_dir, sync_dir, thread = str(tmp_path / "pf"), str(tmp_path / "sync"), "shared"
    os.makedirs(sync_dir)
    chat = _spawn("chat", data_dir, sync_dir, "a", thread, stdin=subprocess.PIPE)
    script = _spawn("turns", data_dir, sync_dir, "b", thread)
    reports = _reports([chat, script], ["".join(f"{_text('a', i)}\n" for i in range(TURNS)) + "/quit\n"])
    _overlapped(reports, fair=True)
    _every_turn_landed(data_dir, thread, [_text(w, i) for w in "ab" for i in range(TURNS)])


def test_two_middleware_apps_on_one_thread_lose_no_turn(tmp_path):
    data_dir, sync_dir, thread = str(tmp_path / "pf"), str(tmp_path / "sync"), "agent"
    os.makedirs(sync_dir)
    reports = _reports([_spawn("agent", data_dir, sync_dir, "a", thread, "sync"),
                        _spawn("agent", data_dir, sync_dir, "b", thread, "async")])
    _overlapped(reports, fair=True)
    _every_turn_landed(data_dir, thread, [_text(w, i) for w in "ab" for i in range(AGENT_TURNS)])


def test_two_processes_append_to_one_core_block_and_every_line_is_kept(tmp_path):
    from pagefault import open_embedded
    from pagefault.stores import CoreMemory, Scope

    data_dir, sync_dir = str(tmp_path / "pf"), str(tmp_path / "sync")
    os.makedirs(sync_dir)
    reports = _reports([_spawn("appends", data_dir, sync_dir, w) for w in "ab"])
    _overlapped(reports)
    for r in reports:
        assert len(r["answers"]) == APPENDS // 2 and all("ppended" in a for a in r["answers"]), r["answers"]
    with open_embedded(data_dir) as p:
        kept = CoreMemory(p.store, Scope(USER)).get("human").value.splitlines()
    for w in "ab":
        for i in range(APPENDS):
            assert f"{w}-{i:02d}" in kept, f"line {w}-{i:02d} was lost"
    assert len(kept) == 2 * APPENDS, kept


def test_two_processes_opening_fresh_directories_together_never_crash(tmp_path):
    from pagefault import open_embedded
    from pagefault.stores import CoreMemory, Scope

    root, sync_dir = str(tmp_path / "dirs"), str(tmp_path / "sync")
    os.makedirs(sync_dir)
    os.makedirs(root)
    reports = _reports([_spawn("fresh", root, sync_dir, w) for w in "ab"])
    assert [r["errors"] for r in reports] == [[], []]
    for r in range(FRESH_ROUNDS):  # each directory holds what both processes did in it
        data_dir = os.path.join(root, f"fresh-{r}")
        with open_embedded(data_dir) as p:
            graph = p.graph()
            for w in "ab":
                values = graph.get_state({"configurable": {"thread_id": f"t-{w}"}}).values
                assert [m.content for m in values["messages"] if m.type == "human"] == [_text(w, r)], (r, w)
            human = CoreMemory(p.store, Scope(USER)).get("human").value.splitlines()
        edited = "b" if r % 2 == 0 else "a"  # the process that opened this one through the memory tool
        assert f"{edited}-{r}" in human, (r, human)


def test_a_run_that_waits_too_long_is_refused_and_a_dead_holder_lets_go(tmp_path):
    import signal

    from pagefault import open_embedded

    data_dir = str(tmp_path / "pf")
    with open_embedded(data_dir) as p:
        with p.locks.hold("thread", "busy"):  # this process is inside a turn on "busy"
            child = _spawn("busy", data_dir)
            out, err = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == -signal.SIGKILL, err[-3000:]
        busy = json.loads(out.strip().splitlines()[-1])["busy"]
        assert busy and "thread 'busy' is busy" in busy and "nothing of this run was saved" in busy, busy
        assert p.graph().get_state({"configurable": {"thread_id": "busy"}}).values == {}  # nothing was saved
        p.locks.acquire("thread", "dead", timeout=30)  # the killed holder's lock went with it
        p.locks.release("thread", "dead")


def test_an_unwrapped_middleware_app_on_the_embedded_files_says_so(tmp_path, caplog):
    from langchain.agents import create_agent

    from pagefault import OfflineChatModel, PagefaultMiddleware, open_embedded

    data_dir = str(tmp_path / "pf")
    with open_embedded(data_dir) as memory:
        def app() -> Any:
            return create_agent(OfflineChatModel(), tools=[], middleware=[PagefaultMiddleware(user_id=USER, data_dir=data_dir)],
                                checkpointer=memory.checkpointer, store=memory.store)

        turn = {"messages": [{"role": "user", "content": "My name is Ana."}]}
        with caplog.at_level("WARNING", logger="pagefault.thread_lock"):
            memory.serialized(app()).invoke(turn, {"configurable": {"thread_id": "wrapped"}})
            assert not caplog.records
            app().invoke(turn, {"configurable": {"thread_id": "bare"}})
        assert [r.getMessage() for r in caplog.records if "memory.serialized(create_agent(...))" in r.getMessage()]


if __name__ == "__main__":
    CHILDREN[sys.argv[1]](*sys.argv[2:])
