"""End-to-end behaviour of the memory graph on the offline model, real SQLite and Chroma."""

from __future__ import annotations

import subprocess
import sys

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from pagefault import Context, open_embedded
from pagefault.cli.main import DEMO_FACTS, demo_filler, run_demo
from pagefault.graph.saved_state import SavedHistory
from pagefault.stores import CoreMemory, MemoryServices, Scope


def test_evicted_turn_is_found_by_conversation_search_with_its_turn(embedded, data_dir, say):
    """(b) text from an evicted turn is found by conversation_search, and the hit cites its turn."""
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2500)
    say(g, ctx, "t1", "The blue notebook is hidden behind the piano in the attic.")
    i = 0
    while g.get_state({"configurable": {"thread_id": "t1"}}).values.get("evicted_count", 0) < 2:
        say(g, ctx, "t1", demo_filler(i))
        i += 1
        assert i < 30, "compaction never evicted anything"
    values = g.get_state({"configurable": {"thread_id": "t1"}}).values
    in_window = [m.content for m in values["messages"] if isinstance(m, HumanMessage)]
    assert not any("piano" in c for c in in_window), "the first turn should have been evicted"
    assert values["summary"], "eviction must leave a summary"

    out = say(g, ctx, "t1", "Where is the blue notebook hidden?")
    results = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "conversation_search"]
    assert results, "the offline model pages in with conversation_search before answering"
    hits = results[-1].artifact["hits"]
    top = [h for h in hits if "piano" in h["text"]]
    assert top, f"evicted turn not found: {hits}"
    assert top[0]["thread_id"] == "t1" and top[0]["turn"] == 0 and top[0]["checkpoint_id"]
    assert "turn=0" in results[-1].content
    # The cited checkpoint really holds that turn's message.
    snap = g.get_state({"configurable": {"thread_id": "t1", "checkpoint_id": top[0]["checkpoint_id"]}})
    assert any("piano" in str(m.content) for m in snap.values["messages"])


def test_core_memory_persists_across_threads_and_process_restart(data_dir):
    """(c) core memory written in one thread is in a new thread, and in a new process."""
    ctx = Context(user_id="ana", data_dir=data_dir)
    p = open_embedded(data_dir)
    g = p.graph()
    g.invoke({"messages": [HumanMessage("My name is Ana and I live in Lisbon.")]},
             {"configurable": {"thread_id": "first"}}, context=ctx)
    out = g.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "second"}}, context=ctx)
    assert "Name: Ana" in CoreMemory(p.store, Scope("ana")).get("human").value
    assert out["tokens"]["core"] > 0
    p.close()
    script = (
        "import json; from pagefault import open_embedded; from pagefault.stores import CoreMemory, Scope;"
        f"p = open_embedded({data_dir!r}); print(json.dumps(CoreMemory(p.store, Scope('ana')).get('human').value));"
        f"print(json.dumps(CoreMemory(p.store, Scope('bob')).get('human').value or '<empty>'))"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert "Name: Ana" in lines[0] and "Lives in: Lisbon" in lines[0]
    assert lines[-1] == '"<empty>"', "another user must not see Ana's core memory"


def test_retried_archival_insert_does_not_duplicate(embedded, data_dir):
    """(d) a retried archival_memory_insert (same tool call replayed) leaves one record."""
    from pagefault.stores.archival import Provenance
    from pagefault.tools.handlers import ArchivalInsert, MemoryCall, archival_memory_insert

    svc = MemoryServices.open(data_dir)
    call = MemoryCall(Scope("ana"), "t1", 3, "m1", CoreMemory(embedded.store, Scope("ana")), svc.archival, svc.recall)
    first = archival_memory_insert(call, ArchivalInsert(text="Lucia is a marine biologist."))
    again = archival_memory_insert(call, ArchivalInsert(text="Lucia is a marine biologist."))
    assert first.artifact["id"] == again.artifact["id"]
    assert first.artifact["created"] is True and again.artifact["created"] is False
    assert svc.archival.count(Scope("ana")) == 1
    got = svc.archival.index.collection.get(where={"scope": Scope("ana").key})
    assert len(got["ids"]) == 1
    # A replayed graph step (same user turn sent again) does not duplicate either.
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir)
    for thread in ("a", "b"):
        g.invoke({"messages": [HumanMessage("Lucia is a marine biologist.")]}, {"configurable": {"thread_id": thread}},
                 context=ctx)
    assert svc.archival.count(Scope("ana")) == 1
    rec = svc.archival.get(Scope("ana"), first.artifact["id"])
    assert isinstance(rec.provenance, Provenance)  # provenance of the first write is kept
    assert rec.provenance.thread_id == "t1" and rec.provenance.turn == 3


def test_single_message_bigger_than_the_window_is_handled_without_a_loop(embedded, data_dir, say):
    """(f) a message larger than the whole window: truncated in the window, full text in recall."""
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2000)
    say(g, ctx, "t1", "Hello")
    giant = "The secret marker is zebra-42. " + " ".join(f"filler word number {i}." for i in range(3000))
    out = say(g, ctx, "t1", giant)
    assert out["compactions"] >= 1
    window_user = [m for m in out["messages"] if isinstance(m, HumanMessage)]
    big = next(m for m in window_user if "zebra-42" in m.content)
    assert "truncated by pagefault" in big.content and len(big.content) < len(giant) / 3
    assert out["tokens"]["total"] <= ctx.context_window, out["tokens"]
    hits = MemoryServices.open(data_dir).recall.search(Scope("ana"), "filler word number 2999", 3, thread_id="t1")
    assert any("number 2999" in h.text for h in hits), "the full text must stay in recall"
    # The conversation goes on normally afterwards.
    again = say(g, ctx, "t1", "What is the secret marker?")
    assert isinstance(again["messages"][-1], AIMessage)


def test_seed_scenario_demo(tmp_path):
    """(g) the seed's trace: three facts paged out, forced eviction, page-in answer with citations."""
    out = run_demo(str(tmp_path / "demo"), out=open(tmp_path / "demo.log", "w"))
    state = out["state"]
    assert state["compactions"] >= 1 and state["evicted_count"] > 0
    # The facts left the window...
    said_in_window = " ".join(str(m.content) for m in state["messages"] if isinstance(m, HumanMessage))
    assert all(fact not in said_in_window for fact in DEMO_FACTS)
    # ...and came back through archival, with a citation of where they were said.
    assert "marine biologist" in out["answer"] and "[archival arc-" in out["answer"] and "turn" in out["answer"]
    assert "3rd of March 2027" in out["answer2"] and "[archival arc-" in out["answer2"]
    final = state["messages"][-1]
    assert final.response_metadata["citations"][0]["source"] == "archival"
    log = (tmp_path / "demo.log").read_text()
    assert "page-out" in log and "page-in" in log and "compaction" in log and "NOT an LLM" in log


def test_demo_command_runs_offline(tmp_path):
    """The README's run command: `pagefault demo` exits 0 and prints the paging trace."""
    exe = [sys.executable, "-m", "pagefault.cli.main", "demo", "--data-dir", str(tmp_path / "d")]
    res = subprocess.run(exe, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "page-in" in res.stdout and "[archival arc-" in res.stdout


def test_recall_index_rebuilds_from_the_checkpointer(embedded, data_dir, say):
    """The recall index is derived data: dropping it and rebuilding from checkpoints finds the same turns."""
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2500)
    say(g, ctx, "t1", "The spare key is under the red flowerpot.")
    for i in range(6):
        say(g, ctx, "t1", demo_filler(i))
    svc = MemoryServices.open(data_dir)
    scope = Scope("ana")
    before = {(h.turn, h.text) for h in svc.recall.search(scope, "spare key flowerpot", 3, thread_id="t1")}
    # Wipe the derived index (both the vectors and the BM25 shadow), then rebuild it.
    for index in (svc.recall.index, svc.recall.units):
        ids = list(index.lexical.ids(scope.key))
        index.collection.delete(ids=ids)
        index.lexical.delete(ids)
    assert svc.recall.search(scope, "spare key flowerpot", 3) == []
    n = svc.recall.rebuild(SavedHistory(embedded.checkpointer), scope, "t1")
    values = g.get_state({"configurable": {"thread_id": "t1"}}).values
    # every message of the thread, evicted or in the window, indexed once
    assert n == values["evicted_count"] + len(values["messages"]), (n, values["evicted_count"], len(values["messages"]))
    after = {(h.turn, h.text) for h in svc.recall.search(scope, "spare key flowerpot", 3, thread_id="t1")}
    assert before == after and any("flowerpot" in t for _, t in after)
