"""The graph, one module per LangGraph concept: its settings (``context``, the ``Context`` dataclass),
its state (``state``) and the builder with its routers (``graph``: ``build_graph`` for library use,
``graph`` for ``langgraph dev``)."""

from pagefault.graph.context import Context
from pagefault.graph.graph import ServedGraph, build_graph, graph, make_builder, served_graph
from pagefault.graph.state import InputState, PagefaultState

__all__ = ["Context", "InputState", "PagefaultState", "ServedGraph", "build_graph", "graph", "make_builder", "served_graph"]
