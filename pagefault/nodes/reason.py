"""The ``reason`` node: render the main context and call the model with every tool bound."""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.nodes.main_context import MainContext, build_main_context
from pagefault.nodes.recall_sync import sync_recall
from pagefault.nodes.thread_owner import claim_thread
from pagefault.nodes.wiring import Wiring, core_memory, scope_of, services, thread_id
from pagefault.stores.procedures import ProceduralMemory
from pagefault.sleeptime import note_turn


def measure(state: PagefaultState, runtime: Runtime[Context], wiring: Wiring, *, warn: bool = False,
            ctx: Context | None = None) -> MainContext:
    """The main context as the model would see it now, with its token accounting."""
    ctx = ctx or wiring.context(runtime)
    blocks = core_memory(runtime, ctx).blocks()
    archival_count = services(ctx).archival.count(scope_of(ctx))
    procedures = ProceduralMemory(runtime.store, scope_of(ctx)).list()
    return build_main_context(state, ctx, wiring.counter(ctx), blocks, archival_count, wiring.tool_schemas, warn=warn,
                              procedures=procedures)


def make_reason(wiring: Wiring) -> Callable[..., dict[str, Any]]:
    def reason(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = wiring.context(runtime)
        claim = claim_thread(state.owner, scope_of(ctx), thread_id(config))  # before anything is read
        # Recall is synced once per turn, when the turn starts: the messages of a memory round trip
        # (tool calls and their results) are indexed with the next turn's, in one embedding run and
        # one write per index instead of one per step. Compaction syncs before it evicts anything.
        mid_turn = bool(state.messages) and isinstance(state.messages[-1], ToolMessage)
        if mid_turn and ctx.respond:
            indexed = state.recall_indexed
        else:
            indexed = sync_recall(state, config, services(ctx).recall, scope_of(ctx))
        if state.messages and isinstance(state.messages[-1], HumanMessage):  # a user turn begins
            note_turn(ctx, services(ctx).archival, core_memory(runtime, ctx), scope_of(ctx))  # sleep-time pass, off-turn
        if not ctx.respond:  # recording history: the input is paged and indexed, nobody answers
            return {"recall_indexed": indexed, **claim}
        main = measure(state, runtime, wiring, ctx=ctx)
        warn = not state.pressure_warned and main.total >= ctx.warning_fraction * ctx.context_window
        if warn:
            main = measure(state, runtime, wiring, warn=True, ctx=ctx)
            get_stream_writer()({"event": "memory_pressure", "tokens": main.total, "window": ctx.context_window})
        model = wiring.chat_model(ctx).bind_tools(wiring.all_tools)
        response = model.invoke([main.system_message(), *state.messages], config)
        if not isinstance(response, AIMessage):
            response = AIMessage(content=str(response.content))
        if not (response.tool_calls or response.invalid_tool_calls):  # the answer: this turn is over
            services(ctx).turn_over()
        update = {
            "messages": [response],
            "recall_indexed": indexed,
            "pressure_warned": state.pressure_warned or warn,
            "tokens": main.tokens,
            "system_prompt": main.system_prompt,
            **claim,
        }
        if not state.tokens:  # first turn of the thread: make every field visible in the state
            update.update(summary=state.summary, evicted_count=state.evicted_count, compactions=state.compactions)
        return update

    return reason
