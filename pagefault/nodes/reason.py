"""The ``reason`` node: render the main context and call the model with every tool bound."""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from pagefault.consolidation.sleeptime import note_turn
from pagefault.graph.context import Context
from pagefault.graph.state import KEEP, PagefaultState, prompt_patch
from pagefault.window.recall_sync import sync_recall
from pagefault.window.setup import AgentSetup
from pagefault.window.thread_owner import claim_thread


def make_reason(setup: AgentSetup) -> Callable[..., dict[str, Any]]:
    def reason(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = setup.context(runtime)
        run = setup.open_run(ctx, runtime.store, config)
        claim = claim_thread(state.owner, run.scope, run.thread_id)  # before anything is read
        # Recall is synced once per turn, when the turn starts: the messages of a memory round trip
        # (tool calls and their results) are indexed with the next turn's, in one embedding run and
        # one write per index instead of one per step. Compaction syncs before it evicts anything.
        mid_turn = bool(state.messages) and isinstance(state.messages[-1], ToolMessage)
        if mid_turn and ctx.respond:
            indexed = state.recall_indexed
        else:
            indexed = sync_recall(state, config, run.services.recall, run.scope)
        if state.messages and isinstance(state.messages[-1], HumanMessage):  # a user turn begins
            note_turn(ctx, run.services.archival, run.core, run.scope)  # sleep-time pass, off-turn
        if not ctx.respond:  # recording history: the input is paged and indexed, nobody answers
            return {"recall_indexed": indexed, **claim}
        main, warned = run.prompt(state, setup.tool_schemas)
        model = setup.chat_model(ctx).bind_tools(setup.all_tools)
        response = model.invoke([main.system_message(), *state.messages], config)
        if not isinstance(response, AIMessage):
            response = AIMessage(content=str(response.content))
        if not (response.tool_calls or response.invalid_tool_calls):  # the answer: this turn is over
            run.services.turn_over()
        update = {
            "messages": [response],
            "recall_indexed": indexed,
            "pressure_warned": state.pressure_warned or warned,
            "tokens": main.tokens,
            "system_prompt": prompt_patch(state.system_prompt, main.system_prompt),
            "summary": KEEP,  # keeps the summary's last full value near (``graph.state.KEEP``)
            **claim,
        }
        if not state.tokens:  # first turn of the thread: make every field visible in the state
            update.update(summary=state.summary, evicted_count=state.evicted_count, compactions=state.compactions,
                          evicted_user_messages=0 if state.evicted_count == 0 else state.evicted_user_messages)
        return update

    return reason
