"""Keep the recall index level with the checkpointed window before a node works on it."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig

from pagefault.graph.state import PagefaultState
from pagefault.stores.recall import RecallIndex
from pagefault.stores.scope import Scope
from pagefault.nodes.wiring import checkpoint_id, thread_id


def sync_recall(state: PagefaultState, config: RunnableConfig, recall: RecallIndex, scope: Scope) -> int:
    """Index window messages whose turn is not yet indexed; returns the new ``recall_indexed``.

    Each message is in the checkpoint this step started from, so that checkpoint's id is cited.
    Re-running after a crash writes the same ids again (idempotent).
    """
    end = state.evicted_count + len(state.messages)
    start = max(state.recall_indexed, state.evicted_count)
    if start >= end:
        return max(state.recall_indexed, end)
    entries = [(state.evicted_count + i, m) for i, m in enumerate(state.messages) if state.evicted_count + i >= start]
    recall.add(scope, thread_id(config), entries, checkpoint_id(config))
    return end
