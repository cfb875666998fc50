"""One turn, one path: the graph's edges read state only, and a memory turn builds one run per step.

The store and the checkpointer are watched (``sys.setprofile`` on every thread: any call into a method of
either object) while a turn runs that takes every edge there is; a call made while an edge function is on
the stack is a read or write by a router. The trace of one memory turn (``support.turn_trace``) counts the
package files it enters, its ``MemoryRun`` builds and its ``build_main_context`` calls."""

from __future__ import annotations

import itertools
import sys
import threading
from types import CodeType, FrameType
from typing import Any, Literal

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from support.turn_trace import trace_memory_turn

from pagefault import Context, open_embedded
from pagefault.graph.graph import make_builder
from pagefault.graph.state import PagefaultState


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers from a script (the LLM is the only part faked)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"Sunny in {city}."


def _edge_functions(builder: StateGraph[Any, Any, Any, Any]) -> set[CodeType]:
    """The code of every conditional edge of ``builder`` (its routers)."""
    codes = set()
    for branches in builder.branches.values():
        for spec in branches.values():
            func = getattr(spec.path, "func", None) or getattr(spec.path, "afunc", None)
            codes.add(func.__code__)
    return codes


class Watch:
    """Calls into ``watched`` objects' methods, and those made while an edge function was on the stack."""

    def __init__(self, watched: list[object], edges: set[CodeType]) -> None:
        self.watched, self.edges = watched, edges
        self.calls = 0
        self.from_edges: list[str] = []

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not any(frame.f_locals.get("self") is w for w in self.watched):
            return
        self.calls += 1
        back: FrameType | None = frame.f_back
        while back is not None:
            if back.f_code in self.edges:
                self.from_edges.append(f"{back.f_code.co_name} -> {frame.f_code.co_qualname}")
                return
            back = back.f_back

    def __enter__(self) -> "Watch":
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


def test_no_edge_reads_or_writes_the_store_or_the_checkpointer(tmp_path):
    builder = make_builder(tools=[weather])
    edges = _edge_functions(builder)
    assert edges, "the graph has routers to watch"
    model = ScriptedModel(messages=itertools.chain([
        AIMessage("", tool_calls=[{"name": "archival_memory_insert", "id": "m1", "args": {"text": "Ana lives in Lisbon."}},
                                  {"name": "weather", "id": "w1", "args": {"city": "Lisbon"}}]),
        AIMessage("", tool_calls=[{"name": "conversation_search", "id": "s1", "args": {"query": "Lisbon"}}]),
        AIMessage("Sunny, and you live there."),
    ], (AIMessage(f"Noted {i}.") for i in itertools.count())))
    ctx = Context(user_id="ana", data_dir=str(tmp_path / "pf"), context_window=2400)
    config = {"configurable": {"thread_id": "t"}}
    with open_embedded(str(tmp_path / "pf")) as p:
        graph = make_builder(tools=[weather], model=model).compile(checkpointer=p.checkpointer, store=p.store)
        edges |= _edge_functions(make_builder(tools=[weather], model=model))
        with Watch([p.store, p.checkpointer], edges) as watch:
            graph.invoke({"messages": [{"role": "user", "content": "I live in Lisbon. Weather?"}]}, config, context=ctx)
            for i in range(8):  # long enough to compact
                graph.invoke({"messages": [{"role": "user", "content": f"Note {i}: " + "word " * 120}]}, config,
                             context=ctx)
        state = graph.get_state(config).values
    assert state["compactions"] >= 1, "the turns took the compaction path too"
    assert watch.calls > 0, "the nodes' reads and writes were seen"
    assert watch.from_edges == [], watch.from_edges


def test_the_watch_sees_an_edge_that_reads_the_store(tmp_path):
    """The check above can fail: a router that reads the store is caught."""

    def reads(state: PagefaultState, runtime: Any) -> Literal["__end__"]:
        runtime.store.search(("anything",))
        return "__end__"

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(PagefaultState)
    builder.add_node("noop", lambda state: {})
    builder.add_edge(START, "noop")
    builder.add_conditional_edges("noop", reads)
    with open_embedded(str(tmp_path / "pf")) as p:
        graph = builder.compile(checkpointer=p.checkpointer, store=p.store)
        with Watch([p.store, p.checkpointer], _edge_functions(builder)) as watch:
            graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "x"}})
    assert any(s.startswith("reads -> ") for s in watch.from_edges), watch.from_edges


def test_a_memory_turn_builds_one_run_per_step_and_one_main_context_per_model_call(tmp_path):
    trace = trace_memory_turn(str(tmp_path / "pf"))
    assert trace.steps == ["reason", "memory", "reason"], trace.steps
    assert trace.runs == {"(before)": 1, "reason": 2, "memory": 1}, (
        "one MemoryRun per step, and one where the run is admitted (its window checked before its input is saved)")
    assert sum(trace.main_contexts.values()) == trace.model_calls == 2, trace.main_contexts
    # 49 on the count before this work, 44 on this harness's; 41 now: a ceiling, so it only goes down.
    assert len(trace.files) <= 41, sorted(trace.files)
