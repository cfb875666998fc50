"""Two replicas (two OS processes) on one Postgres database and one Chroma server, at the same time.

- different threads of the same user: both turns land, each replica finds what the other saved;
- concurrent core-memory appends to one block: every append lands (no lost update);
- the same facts inserted by both at once: one archival record each, in Chroma and in the BM25 index;
- two runs on the same thread at once: serialized, both turns land one after the other on one linear
  history; a run that cannot wait long enough is refused with ``ThreadBusy`` and leaves no trace.

No clock is read: that the replicas acted together, and in which order, is proven with files (a
barrier each passes only once all are there, and marks a run leaves while it holds its thread).
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from support.engines import child_env, chroma_server, fresh_database, spawn

from pagefault.persistence.postgres import open_postgres
from pagefault.stores import CoreMemory, MemoryServices, Scope

REPLICA_TIMEOUT = 120


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicas")
    with fresh_database("pf_replicas") as url, chroma_server(root / "chroma") as chroma:
        env = child_env(PAGEFAULT_DATABASE_URL=url, PAGEFAULT_CHROMA_URL=chroma.url,
                        PAGEFAULT_DATA_DIR=str(root / "data"))
        with open_postgres(url) as persistence:
            yield {"url": url, "chroma": chroma.url, "env": env, "persistence": persistence,
                   "svc": MemoryServices.open(str(root / "data"), chroma_url=chroma.url, database_url=url)}


def _reports(*procs) -> list[dict]:
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=REPLICA_TIMEOUT)
        assert p.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _together(engines, *commands: list[str]) -> list[dict]:
    """Start one replica per command, all acting at the same moment (after start-up); their reports."""
    barrier = tempfile.mkdtemp(prefix="barrier-")
    reports = _reports(*[spawn(*cmd, "--barrier", f"{barrier}:{len(commands)}", env=engines["env"]) for cmd in commands])
    pids = sorted(r["pid"] for r in reports)
    assert all(r["met"] == pids for r in reports), f"replicas did not meet at the barrier: {reports}"
    return reports


def _history_is_linear(graph, config) -> None:
    """Every checkpoint of the thread has a distinct parent: no run started from a stale state (a fork)."""
    parents = [s.parent_config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)
               if s.parent_config]
    assert len(parents) == len(set(parents)), "two checkpoints share a parent: the thread forked"


def test_two_replicas_serve_two_threads_of_one_user(engines):
    user = "rep-threads"
    a, b = _together(engines,
                     ["say", user, "thread-a", "My name is Ana and I live in Lisbon.", "My bike is a red Gazelle.",
                      "@sync", "Where does my dog like to go?"],
                     ["say", user, "thread-b", "I work as a pilot.", "My dog Rex likes the beach at Cascais.",
                      "@sync", "What colour is my bike?"])
    assert all("saved" in x.lower() for x in a["answers"][:2] + b["answers"][:2]), (a, b)
    # Once both had said their piece, each replica found what the other saved.
    ask_a, ask_b = a["answers"][2], b["answers"][2]
    assert "Cascais" in ask_a and "from thread thread-b" in ask_a, ask_a
    assert "red Gazelle" in ask_b and "from thread thread-a" in ask_b, ask_b
    # The same user's core block got both replicas' lines, whatever their interleaving.
    human = CoreMemory(engines["persistence"].store, Scope(user)).get("human").value
    assert sorted(human.splitlines()) == ["Lives in: Lisbon", "Name: Ana", "Works: pilot"], human
    assert engines["svc"].archival.count(Scope(user)) == 4


@pytest.fixture(scope="module")
def writers(engines):
    """Two replicas append 25 lines each to one core block, then insert the same 20 facts, at once."""
    user = "rep-writers"
    return user, _together(engines, ["append", user, "human", "left", "25", "20"],
                           ["append", user, "human", "right", "25", "20"])


def test_concurrent_core_appends_all_land(engines, writers):
    user, n = writers[0], 25
    block = CoreMemory(engines["persistence"].store, Scope(user)).get("human")
    lines = block.value.splitlines()
    assert sorted(lines) == sorted([f"left-{i}" for i in range(n)] + [f"right-{i}" for i in range(n)]), lines
    # Each replica's own appends kept their order, and the edit log saw the last edits of both.
    assert [x for x in lines if x.startswith("left")] == [f"left-{i}" for i in range(n)]
    assert [x for x in lines if x.startswith("right")] == [f"right-{i}" for i in range(n)]


def test_the_same_facts_inserted_at_once_are_stored_once(engines, writers):
    (user, (a, b)), n = writers, 20
    # Each fact was inserted by both in the same round: neither began it before the other had reached it.
    pids = sorted([a["pid"], b["pid"]])
    assert a["rounds"] == b["rounds"] == [pids] * n, "the inserts did not run in lockstep"
    assert a["ids"] == b["ids"] and len(set(a["ids"])) == n
    svc, scope = engines["svc"], Scope(user)
    stored = svc.archival.index.collection.get(where={"scope": scope.key}, include=[])["ids"]
    assert sorted(stored) == sorted(a["ids"]), "Chroma holds each record once"
    assert svc.archival.count(scope) == n and svc.archival.index.lexical.ids(scope.key) == set(a["ids"])
    hits = svc.archival.search(scope, "which ship did the lighthouse keeper log as number 7", 3)
    assert hits[0][0].text.startswith("Shared fact number 7:")


def test_two_runs_on_one_thread_take_turns(engines):
    """Replica B asks for the thread while A's run is inside it: a run that would not wait is refused
    then (A holds the thread), and B's real run gets in only once A's turn is done."""
    user, thread = "rep-same", "same-thread"
    first, second = "My boat is called Aurora.", "My kite is called Zephyr."
    marks = tempfile.mkdtemp(prefix="turns-")
    a, b = _together(engines, ["say", user, thread, first, "--turn-marks", f"{marks}:a",
                               "--hold-until", os.path.join(marks, "probed-b")],
                     ["say", user, thread, second, "--turn-marks", f"{marks}:b",
                      "--after", os.path.join(marks, "inside-a"), "--probe", os.path.join(marks, "probed-b")])
    assert b["probe"] == "busy", "while A's run was inside the thread, B's run was not refused"
    assert a["on_entry"] == [[]], "A was the first inside"
    assert b["on_entry"] == [["done-a", "probed-b"]], "B got in while A's turn was not over"
    graph = engines["persistence"].graph()
    config = {"configurable": {"thread_id": thread}}
    values = graph.get_state(config).values
    assert [m.content for m in values["messages"] if isinstance(m, HumanMessage)] == [first, second]
    # Each user message is followed by its own complete turn (tool call, result, answer) before the next.
    kinds = [m.type for m in values["messages"]]
    assert kinds == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"], kinds
    answers = [m for m in values["messages"] if isinstance(m, AIMessage) and not m.tool_calls]
    assert all("saved" in m.content.lower() for m in answers)
    _history_is_linear(graph, config)
    assert engines["svc"].archival.count(Scope(user)) == 2


def test_a_run_that_cannot_wait_is_refused_and_leaves_no_trace(engines):
    """The holder keeps the thread, inside its run, until the other run (willing to wait 0.5 s) is over."""
    user, thread = "rep-busy", "busy-thread"
    slow, eager = "My tent is green and sleeps four.", "My canoe is yellow."
    marks = tempfile.mkdtemp(prefix="busy-")
    holder = spawn("say", user, thread, slow, "--turn-marks", f"{marks}:holder",
                   "--hold-until", os.path.join(marks, "refused-over"), env=engines["env"])
    refused = spawn("say", user, thread, eager, "--wait", "0.5", "--after", os.path.join(marks, "inside-holder"),
                    "--done", os.path.join(marks, "refused-over"), env=engines["env"])
    report, held = _reports(refused, holder)
    assert "is busy" in report["busy"] and report["answers"] == [], report
    assert held["on_entry"] == [[]] and held["answers"] and "saved" in held["answers"][0].lower(), held
    values = engines["persistence"].graph().get_state({"configurable": {"thread_id": thread}}).values
    assert [m.content for m in values["messages"] if isinstance(m, HumanMessage)] == [slow]
    assert [m.type for m in values["messages"]] == ["human", "ai", "tool", "ai"]
