"""Archival filters, scope isolation at the store level, user tools and the pressure warning."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from pagefault import Context
from pagefault.cli.main import demo_filler
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.archival import Provenance


def test_archival_filters_apply_before_the_limit(data_dir):
    svc = MemoryServices.open(data_dir)
    scope = Scope("ana")
    for i in range(40):
        svc.archival.insert(scope, f"Note {i} about the quarterly budget review and spending plans.")
    svc.archival.insert(scope, "A rare tagged note on the budget.", ["finance"])
    svc.archival.insert(scope, "Another tagged budget remark, quite different.", ["finance", "q3"])
    found = svc.archival.search(scope, "quarterly budget review", 2, tags=["finance"])
    assert sorted(r.text for r, _ in found) == ["A rare tagged note on the budget.",
                                                  "Another tagged budget remark, quite different."]
    assert [r.text for r, _ in svc.archival.search(scope, "budget", 5, tags=["finance", "q3"])] == [
        "Another tagged budget remark, quite different."]
    old = svc.archival.insert(scope, "An old budget memo from 2020.", provenance=Provenance(created_at=1_590_000_000))
    window = svc.archival.search(scope, "budget", 3, start=1_500_000_000, end=1_600_000_000)
    assert [r.id for r, _ in window] == [old.id]
    for record, _ in svc.archival.search(scope, "budget", 10):
        assert record.id.startswith("arc-") and record.citation()["source"] == "archival"


def test_search_never_crosses_users(data_dir):
    svc = MemoryServices.open(data_dir)
    svc.archival.insert(Scope("ana"), "Ana's locker code is 4417.")
    svc.archival.insert(Scope("bob"), "Bob's locker code is 9921.")
    svc.archival.insert(Scope("ana", agent_id="other-agent"), "Seen only by the other agent: 5555.")
    texts = [r.text for r, _ in svc.archival.search(Scope("bob"), "locker code", 10)]
    assert texts == ["Bob's locker code is 9921."]
    texts = [r.text for r, _ in svc.archival.search(Scope("ana"), "locker code", 10)]
    assert texts == ["Ana's locker code is 4417."]


#: More records of another user than a search's unfiltered look-ahead reads (``OVERFETCH`` x 100 candidates):
#: a search of a user with only a few records then asks Chroma with its scope ``where`` clause.
CROWD = 450


def _crowded(data_dir: str) -> MemoryServices:
    """An embedded store where Mallory has ``CROWD`` lighthouse notes and Ana three, one of them long past."""
    svc = MemoryServices.open(data_dir)
    svc.archival.insert_many(Scope("mallory"), [(f"Mallory's lighthouse note {i}: the keeper logged ship {i} at dawn.",
                                                 None) for i in range(CROWD)])
    for text in ("Ana's lighthouse keeper logged the ferry at noon.", "Ana saw the lighthouse from the ferry."):
        svc.archival.insert(Scope("ana"), text)
    svc.archival.insert(Scope("ana"), "Ana's old lighthouse visit, written down long ago.",
                        provenance=Provenance(created_at=1_590_000_000))
    return svc


def test_a_search_crowded_out_by_another_user_stays_in_its_scope(embedded, data_dir):
    """Through the memory tool, as the model calls it: the nearest hundreds of vectors are all Mallory's,
    so the search goes to Chroma with Ana's scope clause, and finds Ana's notes only."""
    from pagefault.stores import CoreMemory
    from pagefault.tools.handlers import MemoryCall, run_memory_tool

    svc = _crowded(data_dir)
    scope = Scope("ana")
    call = MemoryCall(scope, "t1", 0, "m0", CoreMemory(embedded.store, scope), svc.archival, svc.recall)
    hits = run_memory_tool(call, "archival_memory_search", {"query": "lighthouse keeper logged ship", "top_k": 10}
                           ).artifact["hits"]
    assert sorted(h["text"] for h in hits) == sorted([
        "Ana's lighthouse keeper logged the ferry at noon.", "Ana saw the lighthouse from the ferry.",
        "Ana's old lighthouse visit, written down long ago."]), [h["text"] for h in hits]


def test_a_point_in_time_search_stays_in_its_scope(data_dir):
    """Through the store API: an ``as_of`` search always asks Chroma with the scope clause (the look-ahead
    cannot tell validity at a past time), and finds only the caller's records true then."""
    svc = _crowded(data_dir)
    then = 1_600_000_000  # after Ana's old visit was written, before everything else
    found = svc.archival.search(Scope("ana"), "lighthouse keeper logged ship", 10, as_of=then)
    assert [r.text for r, _ in found] == ["Ana's old lighthouse visit, written down long ago."]
    later = svc.archival.search(Scope("ana"), "lighthouse keeper logged ship", 10, as_of=4_000_000_000)
    assert {r.text for r, _ in later} == {"Ana's lighthouse keeper logged the ferry at noon.",
                                          "Ana saw the lighthouse from the ferry.",
                                          "Ana's old lighthouse visit, written down long ago."}


def test_user_tools_are_dispatched_and_memory_calls_are_not(embedded, data_dir, say):
    @tool
    def weather(city: str) -> str:
        """Current weather for a city."""
        return f"Sunny in {city[:20]}"

    g = embedded.graph(tools=[weather])
    out = say(g, Context(user_id="ana", data_dir=data_dir), "t", "use weather for Lisbon please")
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == ["weather"] and results[0].content.startswith("Sunny in")
    assert "Sunny" in out["messages"][-1].content


def test_memory_pressure_warning_fires_once_before_compaction(embedded, data_dir):
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=4000, warning_fraction=0.5,
                  compaction_trigger=0.9)
    config = {"configurable": {"thread_id": "t"}}
    events = []
    for i in range(14):
        for mode, chunk in g.stream({"messages": [HumanMessage(demo_filler(i)[:400])]}, config, context=ctx,
                                    stream_mode=["custom"]):
            events.append(chunk["event"])
    first_compaction = events.index("compaction")
    assert events[:first_compaction].count("memory_pressure") == 1, events
    # The offline model saved the user's statements when warned.
    svc = MemoryServices.open(data_dir)
    assert any("Saved under memory pressure" in r.text for r, _ in svc.archival.search(Scope("ana"), "memory pressure", 10,
                                                                                       tags=["pressure"]))


def test_async_entry_points_share_the_embedded_files(data_dir):
    import asyncio

    from pagefault import open_embedded, open_embedded_async

    async def run():
        async with open_embedded_async(data_dir) as memory:
            g = memory.graph()
            ctx = Context(user_id="ana", data_dir=data_dir)
            config = {"configurable": {"thread_id": "t"}}
            await g.ainvoke({"messages": [HumanMessage("My name is Ana.")]}, config, context=ctx)
            events = [e async for e in g.astream({"messages": [HumanMessage("What is my name?")]}, config,
                                                 context=ctx, stream_mode="custom")]
            return events, (await g.aget_state(config)).values

    events, values = asyncio.run(run())
    assert {e["tool"] for e in events if e["event"] == "page_fault"} == {"archival_memory_search", "conversation_search"}
    assert "Ana" in values["messages"][-1].content
    with open_embedded(data_dir) as memory:  # the sync API reads what the async one wrote
        assert len(memory.graph().get_state({"configurable": {"thread_id": "t"}}).values["messages"]) == len(
            values["messages"])
