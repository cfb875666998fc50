"""Crash safety: a replica is SIGKILLed for real (in a subprocess) at three points of a turn; a new
replica resumes the thread. Afterwards the state is exactly what one uncut turn would have left:
the user's message once, no archival record twice, no core line twice, every tool call answered once,
and never a summary without its eviction or an eviction without its summary, in any checkpoint.

Runs against a fresh Postgres database and a Chroma server started for this module.
"""

from __future__ import annotations

import json
import signal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from support.engines import child, child_env, chroma_server, fresh_database

from pagefault import Context, open_embedded
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import CoreMemory, MemoryServices, Scope
from pagefault.stores.recall import recall_id

FILLERS = [f"Note {i}: " + " ".join(f"the quiet harbour number {i} had boats painted blue and green"
                                     for _ in range(12)) + "." for i in range(3)]
#: No memory-pressure save before the third turn (it would add messages to the second): the warning comes
#: with the compaction trigger.
WARNING = 0.9


def _window(root) -> int:
    """The smallest window (in steps of 25 tokens) in which two filler turns do not compact and the third
    does, found by running them on scratch embedded threads, so the prompt and tool schemas may grow
    without moving the crash point out of the third turn."""

    def compactions(window: int, turns: int) -> int:
        folder = str(root / f"calibrate-{window}-{turns}")
        with open_embedded(folder) as p:
            graph, config = p.graph(), {"configurable": {"thread_id": "calibrate"}}
            ctx = Context(user_id="calibrate", data_dir=folder, context_window=window, warning_fraction=WARNING)
            for text in FILLERS[:turns]:
                values = graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx)
            return values["compactions"]

    with open_embedded(str(root / "calibrate")) as p:  # where to start: the size of two turns, unwarned
        ctx = Context(user_id="calibrate", data_dir=str(root / "calibrate"), context_window=100_000)
        config = {"configurable": {"thread_id": "calibrate"}}
        for text in FILLERS[:2]:
            tokens = p.graph().invoke({"messages": [HumanMessage(text)]}, config, context=ctx)["tokens"]
    # ...and no smaller than a window whose compaction target is above the fixed part (smaller ones are refused).
    fixed = sum(tokens[k] for k in ("system", "core", "procedures", "tools"))
    window = max(int(tokens["total"] / ctx.compaction_trigger), int(fixed / ctx.compaction_target)) // 25 * 25 + 25
    while compactions(window, 2):
        window += 25
    assert compactions(window, 3) == 1, f"no window makes the third filler turn compact (tried {window})"
    return window


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    window = _window(root)
    with fresh_database("pf_crash") as url, chroma_server(root / "chroma") as chroma:
        env = child_env(PAGEFAULT_DATABASE_URL=url, PAGEFAULT_CHROMA_URL=chroma.url,
                        PAGEFAULT_DATA_DIR=str(root / "data"), PAGEFAULT_CONTEXT_WINDOW=str(window),
                        PAGEFAULT_WARNING_FRACTION=str(WARNING))
        with open_postgres(url) as persistence:
            yield {"url": url, "chroma": chroma.url, "env": env, "persistence": persistence,
                   "data_dir": str(root / "data"), "window": window}


def _ctx(engines, user: str) -> Context:
    return Context(user_id=user, chroma_url=engines["chroma"], database_url=engines["url"],
                   data_dir=engines["data_dir"], context_window=engines["window"], warning_fraction=WARNING)


def _services(engines) -> MemoryServices:
    return MemoryServices.open(engines["data_dir"], chroma_url=engines["chroma"], database_url=engines["url"])


def _crash(engines, point: str, user: str, thread: str, text: str) -> None:
    done = child("say", user, thread, text, "--kill-at", point, env=engines["env"])
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr[-3000:])
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"killed_at": point}


def _resume(engines, user: str, thread: str) -> None:
    done = child("resume", user, thread, env=engines["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["answers"][0], "resume found nothing to finish"


def _state(engines, thread: str):
    return engines["persistence"].graph().get_state({"configurable": {"thread_id": thread}})


def _assert_whole_turns(values) -> None:
    """Every tool call answered exactly once, and the last message a final answer."""
    calls = [tc["id"] for m in values["messages"] if isinstance(m, AIMessage) for tc in m.tool_calls]
    results = [m.tool_call_id for m in values["messages"] if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results), (calls, results)
    last = values["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls, last


def _humans(values) -> list[str]:
    return [m.content for m in values["messages"] if isinstance(m, HumanMessage)]


def test_killed_after_an_archival_write_before_the_checkpoint(engines):
    user, thread, text = "crash-arc", "t-arc", "My cat is called Tom and he sleeps on the piano."
    scope, svc = Scope(user), _services(engines)
    _crash(engines, "archival-written", user, thread, text)

    # Dead after the record was written, before the memory step was checkpointed.
    snap = _state(engines, thread)
    assert _humans(snap.values) == [text], "the user's message must survive the crash"
    assert snap.next == ("memory",), snap.next
    assert svc.archival.count(scope) == 1

    _resume(engines, user, thread)
    values = _state(engines, thread).values
    assert _humans(values) == [text]
    assert svc.archival.count(scope) == 1, "the re-run step must not store the record twice"
    (insert,) = [m for m in values["messages"] if isinstance(m, ToolMessage)]
    assert insert.status == "success" and "arc-" in insert.content
    _assert_whole_turns(values)
    hits = svc.archival.search(scope, "what is my cat called", 5)
    assert [r.text for r, _ in hits] == [text]


def test_killed_in_the_middle_of_a_multi_tool_step(engines):
    user, thread, text = "crash-multi", "t-multi", "My name is Ana and I live in Lisbon."
    scope, svc = Scope(user), _services(engines)
    _crash(engines, "multi-tool", user, thread, text)

    # Dead after two of the three calls (archival insert, "Name: Ana"); "Lives in" never ran.
    core = CoreMemory(engines["persistence"].store, scope)
    assert core.get("human").value == "Name: Ana"
    snap = _state(engines, thread)
    assert _humans(snap.values) == [text] and snap.next == ("memory",)

    _resume(engines, user, thread)
    values = _state(engines, thread).values
    assert core.get("human").value == "Name: Ana\nLives in: Lisbon", "no core line may be applied twice"
    assert [e["op"] for e in core.get("human").log] == ["append", "append"]
    assert svc.archival.count(scope) == 1
    assert _humans(values) == [text]
    tools = [m for m in values["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in tools] == ["archival_memory_insert", "core_memory_append", "core_memory_append"]
    assert all(m.status == "success" for m in tools)
    _assert_whole_turns(values)


def test_killed_in_the_middle_of_compaction(engines):
    user, thread = "crash-compact", "t-compact"
    ctx, persistence = _ctx(engines, user), engines["persistence"]
    graph, config = persistence.graph(), {"configurable": {"thread_id": thread}}
    fillers = FILLERS
    for text in fillers[:2]:
        graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx)
    assert _state(engines, thread).values["compactions"] == 0

    _crash(engines, "compaction", user, thread, fillers[2])
    snap = _state(engines, thread)
    assert _humans(snap.values) == fillers, "the user's message must survive the crash"
    assert snap.values["summary"] == "" and snap.values["evicted_count"] == 0, "neither summary nor eviction yet"
    assert snap.next == ("compact",), snap.next

    _resume(engines, user, thread)
    values = _state(engines, thread).values
    assert values["compactions"] == 1 and values["evicted_count"] == 8 and values["summary"]
    assert "Note 0" in values["summary"] and "Note 1" in values["summary"]
    assert _humans(values) == [fillers[2]], "the current turn stays in the window"
    _assert_whole_turns(values)

    # No checkpoint ever held a summary without its eviction or an eviction without its summary.
    history = list(graph.get_state_history(config))
    assert history
    for snap in history:
        v = snap.values
        assert bool(v.get("summary")) == (v.get("evicted_count", 0) > 0), (v.get("summary"), v.get("evicted_count"))
    # Every indexed turn is in recall exactly once (ids are per turn), the evicted ones included; recall is
    # synced when a turn starts, so the last turn's tool round trip and final answer wait for the next turn.
    total = values["recall_indexed"]
    last_user = max(i for i, m in enumerate(values["messages"]) if isinstance(m, HumanMessage))
    assert total == values["evicted_count"] + last_user + 1
    svc, scope = _services(engines), Scope(user)
    ids = [recall_id(scope, thread, t) for t in range(total)]
    assert len(svc.recall.index.get(ids)) == total
    assert svc.recall.count(scope) == total
    found = svc.recall.search(scope, "harbour number 0 boats", 3, thread_id=thread)
    assert found and found[0].turn == 0
