"""The pagefault graph: reason, page-fault handling, tool dispatch and compaction.

```
START -> [over budget?] -> compact -> reason
               \\-------------------> reason --(memory calls)--> memory --+
                                         |  \\--(other calls)--> dispatch -+-> [over budget?] -> compact | reason
                                         +--(final answer)--> END
```

``graph`` is compiled without a checkpointer or store, as ``langgraph dev`` and the LangGraph
server require; they supply their own. Its runs cannot choose where the memory lives (``served``).
Library users call ``build_graph(checkpointer=..., store=...)``.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from pagefault.graph.context import Context, RunContext
from pagefault.graph.state import InputState, PagefaultState
from pagefault.nodes.compact import make_compact
from pagefault.nodes.dispatch import make_dispatch
from pagefault.nodes.memory import answered_ids, make_memory
from pagefault.nodes.reason import make_reason, measure
from pagefault.nodes.wiring import Wiring, context_of


def make_builder(*, tools: Sequence[BaseTool] = (), model: BaseChatModel | None = None,
                 served: bool = False) -> StateGraph:
    """The uncompiled graph, wired to an explicit model (else the context's) and the user's tools.

    ``served``: for a graph a server runs for its clients (``langgraph dev``, a LangGraph server). Its
    runs take a ``RunContext``, so a client cannot say where the memory lives: that comes from the
    server's environment (``PAGEFAULT_DATA_DIR``, ``PAGEFAULT_CHROMA_URL``, ``PAGEFAULT_DATABASE_URL``).
    """
    wiring = Wiring(model=model, tools=list(tools))

    def over_budget(state: PagefaultState, runtime: Runtime[Context]) -> Literal["compact", "reason"]:
        ctx = context_of(runtime)
        total = measure(state, runtime, wiring).total
        return "compact" if total > ctx.compaction_trigger * ctx.context_window else "reason"

    def after_reason(state: PagefaultState) -> Literal["memory", "dispatch", "__end__"]:
        last = state.messages[-1] if state.messages else None
        if not isinstance(last, AIMessage) or not (last.tool_calls or last.invalid_tool_calls):
            return END
        if last.invalid_tool_calls or any(tc["name"] not in wiring.user_tool_names for tc in last.tool_calls):
            return "memory"
        return "dispatch"

    def after_memory(state: PagefaultState, runtime: Runtime[Context]) -> Literal["dispatch", "compact", "reason"]:
        last_ai = next(m for m in reversed(state.messages) if isinstance(m, AIMessage))
        done = answered_ids(state)
        if any(tc["name"] in wiring.user_tool_names and tc["id"] not in done for tc in last_ai.tool_calls):
            return "dispatch"
        return over_budget(state, runtime)

    builder = StateGraph(PagefaultState, input_schema=InputState, context_schema=RunContext if served else Context)
    builder.add_node("reason", make_reason(wiring))
    builder.add_node("memory", make_memory(wiring))
    builder.add_node("dispatch", make_dispatch(wiring))
    builder.add_node("compact", make_compact(wiring))
    builder.add_conditional_edges(START, over_budget)
    builder.add_conditional_edges("reason", after_reason)
    builder.add_conditional_edges("memory", after_memory)
    builder.add_conditional_edges("dispatch", over_budget)
    builder.add_edge("compact", "reason")
    return builder


def build_graph(
    *,
    checkpointer: Any = None,
    store: Any = None,
    tools: Sequence[BaseTool] = (),
    model: BaseChatModel | None = None,
    name: str = "pagefault",
    served: bool = False,
) -> CompiledStateGraph:
    """Compile the pagefault graph for library use.

    ``checkpointer`` holds conversation recall (the source of truth for every past turn) and
    ``store`` holds core memory; see ``pagefault.embedded`` for the SQLite defaults. ``served``: see
    ``make_builder``.
    """
    return make_builder(tools=tools, model=model, served=served).compile(checkpointer=checkpointer, store=store,
                                                                           name=name)


#: What ``langgraph dev`` and the LangGraph server run: clients set a ``RunContext``, the server's
#: environment says where the memory lives.
builder = make_builder(served=True)
graph = builder.compile(name="pagefault")
