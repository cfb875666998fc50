"""The graph: state, context and wiring."""

from pagefault.graph.context import Context, RunContext
from pagefault.graph.graph import build_graph, builder, graph, make_builder
from pagefault.graph.state import InputState, PagefaultState

__all__ = ["Context", "RunContext", "InputState", "PagefaultState", "build_graph", "builder", "graph", "make_builder"]
