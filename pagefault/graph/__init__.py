"""The graph: state, context and wiring."""

from pagefault.graph.context import Context
from pagefault.graph.graph import ServedGraph, build_graph, graph, make_builder, served_graph
from pagefault.graph.state import InputState, PagefaultState

__all__ = ["Context", "InputState", "PagefaultState", "ServedGraph", "build_graph", "graph", "make_builder", "served_graph"]
