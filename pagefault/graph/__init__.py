"""The graph, one module per LangGraph concept: its settings (``context``: the ``Context`` dataclass,
and ``ContextSettings``, its fields as keywords), its state (``state``) and the builder with its
routers (``graph``: ``build_graph`` for library use, ``graph`` for ``langgraph dev``)."""

from pagefault.graph.context import Context, ContextSettings
from pagefault.graph.graph import ServedGraph, build_graph, graph, make_builder, served_graph
from pagefault.graph.state import InputState, PagefaultState

__all__ = ["Context", "ContextSettings", "InputState", "PagefaultState", "ServedGraph", "build_graph", "graph", "make_builder",
           "served_graph"]
