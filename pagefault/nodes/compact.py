"""The ``compact`` node: past the trigger, the window is summarized (by the summary model, ``AgentSetup.summary_model``)
and evicted (``window.compaction``)."""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.window.compaction import compact_window
from pagefault.window.setup import AgentSetup
from pagefault.window.thread_owner import claim_thread


def make_compact(setup: AgentSetup) -> Callable[..., dict[str, Any]]:
    def compact(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = setup.context(runtime)
        run = setup.open_run(ctx, runtime.store, config)
        claim = claim_thread(state.owner, run.scope, run.thread_id)
        done = compact_window(state, run, config, setup.summary_model(ctx),
                              lambda s: run.main_context(s, setup.tool_schemas))
        last = state.messages[-1].id if state.messages else None
        return {**done.update(), "compacted_at": last or "", **claim}

    return compact
