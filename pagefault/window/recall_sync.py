"""Keep the recall index level with the checkpointed window before a node works on it."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig

from pagefault.graph.state import PagefaultState
from pagefault.stores.recall import RecallIndex, conversation_turns
from pagefault.stores.scope import Scope
from pagefault.window.run import checkpoint_id, thread_id, users_before


def sync_recall(state: PagefaultState, config: RunnableConfig, recall: RecallIndex, scope: Scope,
                *, evicting_below: int = 0) -> int:
    """Index window messages not yet indexed; returns the new ``recall_indexed`` (a message index).

    The messages go to the recall writer (indexed behind the turn) and the result counts only messages
    it has confirmed. Messages below ``evicting_below`` are about to leave the window, so they are
    indexed before this returns (by the writer, or here if it could not). Each message is in the
    checkpoint this step started from, so that checkpoint's id is cited, and each carries its
    conversational turn (numbered on from the state's ``evicted_user_messages``). Re-running after a
    crash writes the same ids again (idempotent).
    """
    end = state.evicted_count + len(state.messages)
    start = max(state.recall_indexed, state.evicted_count)
    if start >= end:
        return max(state.recall_indexed, end)
    thread = thread_id(config)
    entries = [(state.evicted_count + i, m) for i, m in enumerate(state.messages) if state.evicted_count + i >= start]
    users = users_before(recall, scope, thread, state.evicted_count, state.evicted_user_messages)
    turns = {state.evicted_count + i: t for i, t in enumerate(conversation_turns(state.messages, users))}
    recall.writer.submit(scope, thread, entries, checkpoint_id(config), turns)
    if start < evicting_below:
        recall.writer.flush(in_window=(scope, thread, evicting_below))  # the messages that stay can wait
        done = recall.writer.confirmed_through(scope, thread, start, entries)
        if done < evicting_below:  # the writer failed (a store down): index here, where failure stops the turn
            recall.add(scope, thread, [e for e in entries if e[0] >= done], checkpoint_id(config), turns=turns)
            return end
    return recall.writer.confirmed_through(scope, thread, start, entries)
