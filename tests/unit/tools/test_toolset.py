"""The six memory tools are LangChain tools, made once per graph, middleware or ``memory_tools()`` call by one
factory (``window.toolset.memory_tool_set``), and the same objects on every path: what the model is given
is what runs its calls. Each gets its run (store, context, state, the call's id) through ``ToolRuntime``."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import ToolRuntime

from pagefault import Context, PagefaultMiddleware, build_graph, memory_tools
from pagefault.stores import CoreMemory, Scope
from pagefault.tools.handlers import MEMORY_TOOLS
from pagefault.window.run import state_field


class BindingModel(GenericFakeChatModel):
    """A chat model that answers from a script (the LLM is the only part faked) and keeps every tool list
    it is bound with."""

    bound: list[list[Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> "BindingModel":
        self.bound.append(list(tools))
        return self


def _append_then_answer(text: str) -> list[AIMessage]:
    return [AIMessage("", tool_calls=[{"name": "core_memory_append", "id": f"c-{text}", "type": "tool_call",
                                       "args": {"section": "human", "text": text}}]),
            AIMessage("Saved.")]


def _spy(monkeypatch, tool: Any) -> list[ToolRuntime]:
    """Record each run of ``tool`` (this very object) and the runtime it got."""
    runs: list[ToolRuntime] = []
    real = tool.func

    def recorded(runtime: ToolRuntime = None, **kwargs: Any) -> Any:  # type: ignore[assignment]
        runs.append(runtime)
        return real(runtime, **kwargs)

    monkeypatch.setattr(tool, "func", recorded)
    return runs


def test_the_graph_binds_the_tools_its_memory_node_runs(embedded, data_dir, monkeypatch):
    model = BindingModel(messages=iter([*_append_then_answer("Name: Ana"), *_append_then_answer("Lives in: Lisbon")]),
                         bound=[])
    graph = build_graph(checkpointer=embedded.checkpointer, store=embedded.store, model=model)
    toolset = graph.setup.memory_toolset
    assert [t.name for t in toolset] == list(MEMORY_TOOLS)
    assert all(isinstance(t, StructuredTool) for t in toolset)
    append = next(t for t in toolset if t.name == "core_memory_append")
    runs = _spy(monkeypatch, append)

    ctx = Context(user_id="ana", data_dir=data_dir)
    for thread, text in (("t1", "I am Ana."), ("t1", "I live in Lisbon.")):
        out = graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)
        assert out["messages"][-1].content == "Saved."

    # Every model call of both turns was bound with the very objects the graph made, made once.
    assert len(model.bound) == 4
    for tools in model.bound:
        assert all(a is b for a, b in zip(tools, toolset, strict=False)) and len(tools) == len(toolset)
    # ...and the memory node ran the object the model was given (its own run, spied on above).
    assert [r.tool_call_id for r in runs] == ["c-Name: Ana", "c-Lives in: Lisbon"]
    first = runs[0]
    assert first.store is embedded.store and first.context == ctx
    # The graph's state, as the memory node's ToolNode reads it for a tool (its channels' values).
    assert [m.content for m in state_field(first.state, "messages", [])][-2:] == ["I am Ana.", ""]
    assert state_field(first.state, "evicted_count", None) == 0
    assert CoreMemory(embedded.store, Scope("ana")).get("human").value == "Name: Ana\nLives in: Lisbon"


def test_the_middlewares_tools_are_the_ones_its_agent_binds_and_runs(embedded, data_dir, monkeypatch):
    model = BindingModel(messages=iter(_append_then_answer("Name: Bo")), bound=[])
    middleware = PagefaultMiddleware(Context(user_id="bo", data_dir=data_dir))
    agent = create_agent(model, [], middleware=[middleware], checkpointer=embedded.checkpointer, store=embedded.store)
    ran = agent.nodes["tools"].bound.tools_by_name
    assert [ran[t.name] for t in middleware.tools] == middleware.tools
    assert all(ran[t.name] is t for t in middleware.tools)
    append = next(t for t in middleware.tools if t.name == "core_memory_append")
    runs = _spy(monkeypatch, append)

    out = agent.invoke({"messages": [HumanMessage("I am Bo.")]}, {"configurable": {"thread_id": "m1"}})
    assert any(isinstance(m, ToolMessage) and m.status == "success" for m in out["messages"])
    (bound,) = {tuple(map(id, tools)) for tools in model.bound}
    assert bound == tuple(map(id, middleware.tools))
    (run,) = runs
    assert run.tool_call_id == "c-Name: Bo" and run.store is embedded.store
    assert CoreMemory(embedded.store, Scope("bo")).get("human").value == "Name: Bo"


def test_memory_tools_and_the_graph_come_from_one_factory(data_dir):
    """``memory_tools()`` gives the tools themselves (made once per call): the same class, schemas and
    error handling as the graph's, each taking its runtime as ``ToolRuntime``."""
    tools = memory_tools(Context(user_id="ana", data_dir=data_dir))
    graph = build_graph().setup.memory_toolset
    assert [type(t) for t in tools] == [type(t) for t in graph]
    for mine, theirs in zip(tools, graph, strict=True):
        assert (mine.name, mine.description, mine.args_schema, mine.tool_call_schema) == (
            theirs.name, theirs.description, theirs.args_schema, theirs.tool_call_schema)
        assert mine.func.__code__ is theirs.func.__code__
    assert memory_tools(Context(user_id="ana", data_dir=data_dir))[0] is not tools[0]
