"""Async all the way: under ``ainvoke`` nothing pagefault does blocks the event loop.

``blockbuster`` (the detector ``langgraph dev`` runs without ``--allow-blocking``) raises on any
blocking call made on the loop's thread: file and socket I/O, ``time.sleep``, SQLite. The agent
runs a compacting conversation (a summary's model call awaited), memory tools (their coroutines),
and the graph's own async path, all inside it.
"""

from __future__ import annotations

import time

import pytest
from blockbuster import BlockingError, blockbuster_ctx
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage

from pagefault import Context, OfflineChatModel, PagefaultMiddleware, memory_tools, open_embedded_async
from pagefault.cli.main import demo_filler


async def test_the_detector_catches_a_blocking_call():
    with blockbuster_ctx(), pytest.raises(BlockingError):
        time.sleep(0.01)


async def test_a_compacting_create_agent_run_never_blocks_the_loop(tmp_path):
    data_dir = str(tmp_path / "pf")
    async with open_embedded_async(data_dir) as p:
        ctx = Context(user_id="ana", data_dir=data_dir, context_window=2048)
        agent = create_agent(OfflineChatModel(), [], middleware=[PagefaultMiddleware(ctx)],
                             checkpointer=p.checkpointer, store=p.store)
        config = {"configurable": {"thread_id": "async"}}
        await agent.ainvoke({"messages": [HumanMessage("warm up")]}, config)  # first opens of files and models
        with blockbuster_ctx():
            await agent.ainvoke({"messages": [HumanMessage("My name is Ana and I live in Lisbon.")]}, config)
            for i in range(6):
                out = await agent.ainvoke({"messages": [HumanMessage(demo_filler(i))]}, config)
            out = await agent.ainvoke({"messages": [HumanMessage("Where do I live?")]}, config)
        assert out["compactions"] >= 1, "the conversation never compacted"
        assert "Lisbon" in out["messages"][-1].content
        searched = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "archival_memory_search"]
        assert searched and searched[-1].status == "success"


async def test_memory_tools_have_coroutines_that_do_not_block(tmp_path):
    data_dir = str(tmp_path / "pf")
    async with open_embedded_async(data_dir) as p:
        tools = {t.name: t for t in memory_tools(Context(user_id="bo", data_dir=data_dir), store=p.store)}
        assert all(t.coroutine is not None for t in tools.values())
        await tools["archival_memory_insert"].ainvoke({"text": "warm up"})
        with blockbuster_ctx():
            saved = await tools["archival_memory_insert"].ainvoke({"text": "Bo keeps bees in Porto."})
            found = await tools["archival_memory_search"].ainvoke({"query": "bees"})
        assert "arc-" in saved and "Porto" in found


async def test_the_graphs_async_path_never_blocks_the_loop(tmp_path):
    data_dir = str(tmp_path / "pf")
    async with open_embedded_async(data_dir) as p:
        graph = p.graph()
        ctx = Context(user_id="cy", data_dir=data_dir)
        config = {"configurable": {"thread_id": "g"}}
        await graph.ainvoke({"messages": [HumanMessage("warm up")]}, config, context=ctx)
        with blockbuster_ctx():
            await graph.ainvoke({"messages": [HumanMessage("My sister Lucia plays the cello.")]}, config, context=ctx)
            out = await graph.ainvoke({"messages": [HumanMessage("What does Lucia play?")]}, config, context=ctx)
        assert "cello" in out["messages"][-1].content
