"""The pagefault graph: reason, page-fault handling, tool dispatch and compaction.

```
START -> reason --(past the trigger)--> compact -> reason
            |  \\--(memory calls)--> memory --(the user's calls left)--> dispatch -> reason
            |                           \\------------------------------------> reason
            +--(the user's calls)--> dispatch -> reason
            +--(final answer)--> END
```

``graph`` is compiled without a checkpointer or store, as ``langgraph dev`` and the LangGraph
server require; they supply their own. Its clients set only what ``pagefault.serve`` allows.
Library users call ``build_graph(checkpointer=..., store=...)``.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from pydantic import BaseModel, create_model

from pagefault.engines.thread_lock import SerializedGraph, serialized
from pagefault.graph.context import Context
from pagefault.graph.state import InputState, PagefaultState
from pagefault.nodes.compact import make_compact
from pagefault.nodes.dispatch import make_dispatch
from pagefault.nodes.memory import answered_ids, make_memory
from pagefault.nodes.reason import DESTINATIONS, make_reason
from pagefault.serve.settings import ServerSettings, served_settings
from pagefault.text.prompts import Prompts
from pagefault.tools.handlers import MemoryToolChoice
from pagefault.window.cut_short import ResumingGraph
from pagefault.window.setup import AgentSetup

PagefaultBuilder = StateGraph[PagefaultState, Context, InputState, PagefaultState]
"""The pagefault graph's type: its state, context, input and output schemas."""
PagefaultGraph = ResumingGraph
"""The compiled graph: a ``CompiledStateGraph`` whose run with new input first finishes the run a crash cut
short on its thread (``window.cut_short``). Its input is Any: a run takes an ``InputState`` or, as every
caller does, a dict of its fields (``{"messages": [...]}``), and a LangGraph input type argument cannot say
"either"."""


def make_builder(*, tools: Sequence[BaseTool] = (), model: BaseChatModel | None = None,
                 served: ServerSettings | None = None, memory_tools: MemoryToolChoice = None,
                 prompts: Prompts | None = None) -> PagefaultBuilder:
    """The uncompiled graph, wired to an explicit model (else the context's) and the user's tools;
    ``memory_tools`` and ``prompts`` as ``build_graph`` takes them.

    ``served``: the server's settings, for a graph a server runs for its clients (``langgraph dev``, a
    LangGraph server). Its context schema then holds only what a client may set
    (``pagefault.serve.CLIENT_FIELDS``, with this server's defaults); everything else comes from
    ``served.base``, and the user from LangGraph auth when the server has it.
    """
    return _wired(AgentSetup(model=model, tools=list(tools), served=served, memory_tools=memory_tools,
                             prompts=Prompts() if prompts is None else prompts))


def _wired(setup: AgentSetup) -> PagefaultBuilder:
    """The graph's nodes and edges, for ``setup``. The edges read state only: ``reason`` measures the
    window and routes itself (``Command``), to ``compact`` first when it is past its trigger."""

    def after_memory(state: PagefaultState) -> Literal["dispatch", "reason"]:
        last_ai = next(m for m in reversed(state.messages) if isinstance(m, AIMessage))
        done = answered_ids(state)
        if any(tc["name"] in setup.user_tool_names and tc["id"] not in done for tc in last_ai.tool_calls):
            return "dispatch"
        return "reason"

    context_schema = setup.served.context_schema() if setup.served is not None else Context
    builder: PagefaultBuilder = StateGraph(PagefaultState, input_schema=InputState, context_schema=context_schema)
    builder.add_node("reason", make_reason(setup), destinations=DESTINATIONS)
    builder.add_node("memory", make_memory(setup))
    builder.add_node("dispatch", make_dispatch(setup))
    builder.add_node("compact", make_compact(setup))
    builder.add_edge(START, "reason")
    builder.add_conditional_edges("memory", after_memory)
    builder.add_edge("dispatch", "reason")
    builder.add_edge("compact", "reason")
    return builder


def build_graph(
    *,
    checkpointer: Any = None,
    store: Any = None,
    tools: Sequence[BaseTool] = (),
    model: BaseChatModel | None = None,
    name: str = "pagefault",
    served: ServerSettings | None = None,
    memory_tools: MemoryToolChoice = None,
    prompts: Prompts | None = None,
) -> PagefaultGraph:
    """Compile the pagefault graph for library use.

    ``checkpointer`` holds conversation recall (the source of truth for every past turn) and
    ``store`` holds core memory; see ``pagefault.persistence.embedded`` for the SQLite defaults.
    ``tools``: the app's own tools, beside the memory tools; ``model``: a chat model to use instead
    of the one the run's ``Context.model`` names; ``name``: the graph's name (in traces and
    streams). ``served``: see ``make_builder``. ``memory_tools``: which memory tools the model gets, a
    list of their names or a mapping of names to the descriptions it is sent (all six when None; see
    ``pagefault.tools.handlers.choose_memory_tools``; a ValueError names an unknown one).
    ``prompts``: pagefault's prompts (``Prompts``: the system prompt, the summarizer's).

    A run whose window is too small for the agent's fixed part (system prompt, core blocks,
    procedures, tool schemas: not below ``compaction_target`` x ``context_window``) is refused in its
    first step with ``WindowTooSmall``, which names the numbers; nothing is sent to the model, and the
    refused input is not added to the thread.

    With a checkpointer the graph is a ``SerializedGraph``: runs on one thread take turns, across every
    process that shares the checkpointer (the embedded files of one data directory, one Postgres
    database), and each step is checkpointed before the next.
    """
    setup = AgentSetup(model=model, tools=list(tools), served=served, memory_tools=memory_tools,
                       prompts=Prompts() if prompts is None else prompts)
    compiled = _wired(setup).compile(checkpointer=checkpointer, store=store, name=name)
    if isinstance(checkpointer, BaseCheckpointSaver):
        return SerializedPagefaultGraph.of(serialized(compiled), setup)
    return ResumingGraph.of(compiled, setup)


class SerializedPagefaultGraph(SerializedGraph, ResumingGraph):
    """The graph with a checkpointer: its runs take turns on their thread (``SerializedGraph``), and
    inside its turn a run first finishes the thread's cut-short run (``ResumingGraph``)."""


class ServedGraph(ResumingGraph):
    """The compiled graph a server runs. Its run settings are its context only, so its legacy
    ``config_schema`` (which LangGraph's server still shows as "config") does not repeat them."""

    def config_schema(self, *, include: Sequence[str] | None = None) -> type[BaseModel]:
        """An empty schema, whatever ``include`` asks for: a client's settings go in its context."""
        return create_model(self.get_name("Config"))


def served_graph(settings: ServerSettings, name: str = "pagefault") -> ServedGraph:
    """The graph as a server runs it for its clients, with no checkpointer or store (the server's):
    ``settings`` are the server's (see ``make_builder``'s ``served``), ``name`` the graph's name."""
    setup = AgentSetup(served=settings)
    return ServedGraph.of(_wired(setup).compile(name=name), setup)


graph = served_graph(served_settings())
"""What ``langgraph dev`` and the LangGraph server run: the server's settings are read from its
environment once, when it imports this module; clients set only ``pagefault.serve.CLIENT_FIELDS``."""
