"""A turn cut short under a real ``langgraph dev`` is not lost (issue 21), driven through ``langgraph_sdk``.

The server runs pagefault's served graph with a hold (``support.held_served_graph``): a run can be stopped
as its first node starts, after its input checkpoint: the window in which a new input used to replace it.

- **The server is killed** (SIGKILL to its process group) while a run is held there, once the server has
  written its state to disk. ``langgraph dev`` keeps threads, runs and checkpoints in memory and writes them
  to ``.langgraph_api`` every few seconds; on restart it puts back a run it finds still running, with the
  same run id, and LangGraph then finishes it from its checkpoint (the graph's own resume does the same for
  any new call). So the next turn, queued behind it, finds the killed turn whole. What the server had not
  written yet when it was killed (up to its last write, 10 seconds by default) is gone before any graph runs:
  threads, runs and checkpoints alike; no graph can finish a run whose checkpoints do not exist. (And in
  langgraph-runtime-inmem 0.36, once a client reads a thread's state, the checkpoints stop being written at
  all until a clean shutdown: the checkpointer that read makes files of its own, which replace the server's
  in what it writes. A kill after that loses every checkpoint since; the test reads no state before it.)
- **A run is cancelled** (``runs.cancel``) while held there. The server does not run it again; the next run on
  the thread, with a new input and a new run id, finishes it first (``window.cut_short.ResumingGraph``).
  Without that, LangGraph would drop the cancelled input for the new one.

Afterwards each message is in its thread once, answered, in recall, and its statement in archival once.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from support.devserver import REPO, dev_server

from pagefault import MemoryServices, Scope
from pagefault.stores.recall import recall_id

GRAPH = "pagefault"
USER = "ana"
TIMEOUT = 120.0


def _config(workdir: Path) -> Path:
    """The repository's ``langgraph.json``, serving the held graph instead."""
    config = json.loads((REPO / "langgraph.json").read_text())
    config["graphs"] = {GRAPH: f"{REPO / 'tests' / 'support' / 'held_served_graph.py'}:graph"}
    path = workdir / "held.langgraph.json"
    path.write_text(json.dumps(config))
    return path


def _turn(client, thread: str, text: str) -> None:
    client.runs.wait(thread, GRAPH, input={"messages": [{"role": "user", "content": text}]}, context={"user_id": USER})


def _held_run(client, thread: str, text: str, hold: Path) -> dict:
    """A run started with ``hold`` set, once it is held at its input."""
    hold.touch()
    run = client.runs.create(thread, GRAPH, input={"messages": [{"role": "user", "content": text}]},
                             context={"user_id": USER})
    held = Path(f"{hold}.held")
    deadline = time.monotonic() + TIMEOUT
    while not held.exists():
        assert time.monotonic() < deadline, "the run never reached its hold"
        time.sleep(0.05)
    return run


def _written_since(api: Path, moment: float, times: int = 2) -> None:
    """Wait until the dev server has written its runs and checkpoints to ``api`` ``times`` times since ``moment``
    (each file's modification time passes ``moment``, then passes it again)."""
    def files() -> list[Path]:
        return [api / ".langgraph_ops.pckl", *api.glob(".langgraph_checkpoint*.pckl")]

    deadline = time.monotonic() + 60
    for _ in range(times):
        while not all(f.exists() and f.stat().st_mtime > moment for f in files()):
            assert time.monotonic() < deadline, f"the server did not write {[f.name for f in files()]}"
            time.sleep(0.1)
        moment = max(f.stat().st_mtime for f in files())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server killed with a run held at its input, its restart, and a run cancelled there; then no server."""
    workdir = tmp_path_factory.mktemp("killed-served")
    config, hold = str(_config(workdir)), workdir / "hold"
    threads: dict[str, str] = {}
    values: dict[str, dict] = {}
    with dev_server(workdir, config=config, PAGEFAULT_TEST_HOLD=str(hold)) as server:
        client = get_sync_client(url=server.url, api_key=None, timeout=TIMEOUT)
        # No thread state is read through the API before the kill: this runtime's state reads make a
        # checkpointer of their own whose (stale) files replace the server's in what it writes to disk.
        threads["killed"] = client.threads.create()["thread_id"]
        _turn(client, threads["killed"], "My favourite food is soup.")
        _held_run(client, threads["killed"], "My dog is called Rex.", hold)
        _written_since(workdir / ".langgraph_api", time.time())
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
    Path(f"{hold}.held").unlink()
    with dev_server(workdir, config=config, PAGEFAULT_TEST_HOLD=str(hold)) as server:
        client = get_sync_client(url=server.url, api_key=None, timeout=TIMEOUT)
        _turn(client, threads["killed"], "What is my dog called?")  # queued behind the retried run
        values["killed"] = client.threads.get_state(threads["killed"])["values"]
        values["killed runs"] = [r["status"] for r in client.runs.list(threads["killed"])]
        # Cancelled at its input; the next run finishes it.
        threads["cancelled"] = client.threads.create()["thread_id"]
        _turn(client, threads["cancelled"], "My favourite colour is green.")
        run = _held_run(client, threads["cancelled"], "My cat is called Tom.", hold)
        client.runs.cancel(threads["cancelled"], run["run_id"], wait=True)
        Path(f"{hold}.release").touch()  # the held worker gives up (its run is already cancelled)
        _turn(client, threads["cancelled"], "What is my cat called?")
        values["cancelled"] = client.threads.get_state(threads["cancelled"])["values"]
        values["cancelled runs"] = [r["status"] for r in client.runs.list(threads["cancelled"])]
    return threads, values, str(workdir / "pagefault-data")


def _assert_whole(messages: list[dict], humans: list[str]) -> None:
    """The thread's user messages are ``humans``, each once and each answered; every tool call answered once."""
    assert [m["content"] for m in messages if m["type"] == "human"] == humans
    calls = [tc["id"] for m in messages if m["type"] == "ai" for tc in m.get("tool_calls") or []]
    assert sorted(calls) == sorted(m["tool_call_id"] for m in messages if m["type"] == "tool")
    for text in humans:
        i = next(i for i, m in enumerate(messages) if m["type"] == "human" and m["content"] == text)
        turn = messages[i + 1:]
        turn = turn[: next((j for j, m in enumerate(turn) if m["type"] == "human"), len(turn))]
        assert any(m["type"] == "ai" and not m.get("tool_calls") and m["content"] for m in turn), (text, turn)


def _assert_stored(data_dir: str, thread: str, messages: list[dict], statement: str) -> None:
    svc = MemoryServices.open(data_dir)
    scope = Scope(USER)
    for i, m in enumerate(messages):
        if m["type"] == "human":
            hits = svc.recall.index.get([recall_id(scope, thread, i)])
            assert hits and m["content"] in hits[0].text, (m["content"], hits)
    archived = svc.archival.index.collection.get(where={"scope": scope.key}, include=["documents"])["documents"]
    assert archived.count(statement) == 1, archived


def test_a_run_killed_with_the_server_is_finished_on_restart(served):
    threads, values, data_dir = served
    messages = values["killed"]["messages"]
    _assert_whole(messages, ["My favourite food is soup.", "My dog is called Rex.", "What is my dog called?"])
    assert values["killed runs"] == ["success"] * 3, values["killed runs"]  # the killed run itself, retried
    assert "My dog is called Rex." in messages[-1]["content"], messages[-1]
    _assert_stored(data_dir, threads["killed"], messages, "My dog is called Rex.")


def test_a_cancelled_run_is_finished_by_the_next_run(served):
    threads, values, data_dir = served
    messages = values["cancelled"]["messages"]
    _assert_whole(messages, ["My favourite colour is green.", "My cat is called Tom.", "What is my cat called?"])
    assert sorted(values["cancelled runs"]) == ["interrupted", "success", "success"], values["cancelled runs"]
    assert "My cat is called Tom." in messages[-1]["content"], messages[-1]
    _assert_stored(data_dir, threads["cancelled"], messages, "My cat is called Tom.")
