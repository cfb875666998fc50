"""The graph's node factories, one per node: ``reason`` (the model call), ``memory`` (page faults),
``dispatch`` (the user's own tools) and ``compact`` (summarize and evict)."""

from pagefault.nodes.compact import make_compact
from pagefault.nodes.dispatch import make_dispatch
from pagefault.nodes.memory import make_memory
from pagefault.nodes.reason import make_reason

__all__ = ["make_compact", "make_dispatch", "make_memory", "make_reason"]
