"""Seeing the memory work: custom stream events from the graph, and ``pagefault inspect``."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import HumanMessage

from pagefault import Context, open_embedded
from pagefault.cli.main import demo_filler, main
from pagefault.stores import MemoryServices, Scope


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """A conversation that pages out, fills the window and compacts, streamed with stream_mode="custom"."""
    data_dir = str(tmp_path_factory.mktemp("stream") / "pf")
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2500)
    events: list[tuple[int, object]] = []
    config = {"configurable": {"thread_id": "t1"}}
    with open_embedded(data_dir) as p:
        g = p.graph()
        texts = ["My name is Ana and I live in Lisbon.", *[demo_filler(i) for i in range(5)], "Where do I live?"]
        for turn, text in enumerate(texts):
            for chunk in g.stream({"messages": [HumanMessage(text)]}, config, context=ctx, stream_mode="custom"):
                events.append((turn, chunk))
        state = g.get_state(config).values
    return data_dir, ctx, events, state


def test_custom_stream_shows_page_faults_pressure_and_compaction(streamed):
    _, ctx, events, state = streamed
    assert all(isinstance(e, dict) and "event" in e for _, e in events), "custom mode carries only our events"
    kinds = [e["event"] for _, e in events]
    assert {"page_fault", "memory_pressure", "compaction"} <= set(kinds), kinds

    first = [e for t, e in events if t == 0]  # the statement pages out
    assert [e["tool"] for e in first if e["event"] == "page_fault"].count("core_memory_append") == 2
    saved = next(e for e in first if e.get("tool") == "archival_memory_insert")
    assert saved["status"] == "success" and saved["citations"][0]["id"].startswith("arc-")

    pressure = kinds.index("memory_pressure")
    assert pressure < kinds.index("compaction"), "the warning comes before the first eviction"
    warn = events[pressure][1]
    assert warn["window"] == 2500 and warn["tokens"] >= ctx.warning_fraction * 2500
    comp = next(e for _, e in events if e["event"] == "compaction")
    assert comp["evicted"] > 0 and comp["tokens_before"] > ctx.compaction_trigger * 2500 > comp["tokens_after"]
    assert state["compactions"] == kinds.count("compaction")

    last = [e for t, e in events if t == 6 and e["event"] == "page_fault"]  # the question pages in
    assert {e["tool"] for e in last} == {"archival_memory_search", "conversation_search"}
    assert any(c["source"] == "archival" for e in last for c in e["citations"])


def test_inspect_prints_the_context_window(streamed, capsys):
    data_dir, ctx, _, state = streamed
    assert main(["inspect", "--user", "ana", "--thread", "t1", "--data-dir", data_dir]) == 0
    out = capsys.readouterr().out
    tokens = state["tokens"]
    assert f"main context (last model call): {tokens['total']}/{tokens['window']} tokens" in out
    for seg in ("system", "core", "summary", "messages", "tools"):
        line = re.search(rf"^  {seg}\s+\[([#.]+)\]\s+(\d+)$", out, re.M)
        assert line, f"no bar for {seg}:\n{out}"
        bar, n = line.groups()
        assert int(n) == tokens[seg] and len(bar) == 40 and bar.count("#") == round(40 * tokens[seg] / tokens["window"])
    total = re.search(r"^  total\s+\[([#.!|]+)\]", out, re.M).group(1)
    assert total[int(40 * 0.75)] == "!" and total[int(40 * 0.9)] == "|", total
    assert "warning at 1875 tokens (75%)" in out and "compaction at 2250 (90%)" in out
    assert re.search(r"^  human\s+\[#*\.*\] \d+/2000 chars$", out, re.M), out
    assert re.search(r"^  persona\s+\[#*\.*\] \d+/2000 chars$", out, re.M), out
    messages = state["evicted_count"] + len(state["messages"])
    assert (f"thread: {messages} message(s) in 7 turn(s); {len(state['messages'])} message(s) in the window, "
            f"{state['evicted_count']} evicted in {state['compactions']} compaction(s)") in out
    svc = MemoryServices.open(data_dir)
    # Every count agrees with what a search of the thread finds: its hits' turns and message indexes,
    # and how many of its messages there are to find.
    hits = svc.recall.search(Scope("ana"), "Lisbon garden train book club cooking bicycle live", 50, thread_id="t1")
    assert hits and max(h.turn for h in hits) == 6 and max(h.message_index for h in hits) < messages
    indexed = len(svc.recall.index.collection.get(where={"thread_id": "t1"}, include=[])["ids"])
    assert 0 < indexed < messages, "the last answer is indexed when the next turn starts"
    assert (f"recall: {svc.recall.count(Scope('ana'))} entries for this user; {indexed} of this thread's "
            f"{messages} message(s) indexed") in out
    assert "turns below" not in out
    assert f"archival: {svc.archival.count(Scope('ana'))} record(s)" in out


def test_inspect_unknown_thread_is_a_clear_error(streamed, capsys):
    data_dir = streamed[0]
    assert main(["inspect", "--user", "ana", "--thread", "nope", "--data-dir", data_dir]) == 2
    assert "no thread 'nope'" in capsys.readouterr().err
