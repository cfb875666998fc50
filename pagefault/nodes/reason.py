"""The ``reason`` node: measure the main context, then call the model with every tool bound, or send the
run to ``compact`` first when the window is past its trigger. It routes with ``Command(goto=...)``: the
node that measures the window decides, so the graph's edges read state only."""

from __future__ import annotations

from typing import Callable, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Command

from pagefault.consolidation.sleeptime import note_turn
from pagefault.graph.context import Context
from pagefault.graph.state import KEEP, PagefaultState, prompt_patch
from pagefault.window.fixed_part import check_window
from pagefault.window.recall_sync import sync_recall
from pagefault.window.setup import AgentSetup
from pagefault.window.thread_owner import claim_thread

Next = Literal["compact", "memory", "dispatch", "__end__"]
#: Where ``reason`` may send a run next (the graph draws these edges).
DESTINATIONS: tuple[str, ...] = ("compact", "memory", "dispatch", END)


def after_model(last: BaseMessage | None, user_tools: set[str]) -> Next:
    """Where a run goes after the model's message ``last``: the memory node for memory calls (and calls
    that did not parse), the user's tools for theirs, else the end of the turn."""
    if not isinstance(last, AIMessage) or not (last.tool_calls or last.invalid_tool_calls):
        return "__end__"
    if last.invalid_tool_calls or any(tc["name"] not in user_tools for tc in last.tool_calls):
        return "memory"
    return "dispatch"


def make_reason(setup: AgentSetup) -> Callable[..., Command[Next]]:
    def reason(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> Command[Next]:
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
        main = run.prompt(state, setup.tool_schemas)
        turn_starts = bool(state.messages) and isinstance(state.messages[-1], HumanMessage)
        if turn_starts:  # before any model call (a graph with a checkpointer refused it before the run: its admit)
            check_window(main, ctx)
        last_id = state.messages[-1].id if state.messages else None
        if run.over_budget(main) and (last_id or "") != state.compacted_at:  # compaction first; then this node again
            return Command(update={"recall_indexed": indexed, **claim}, goto="compact")
        if turn_starts:  # a user turn begins
            note_turn(ctx, run.services.archival, run.core, run.scope)  # sleep-time pass, off-turn
        if not ctx.respond:  # recording history: the input is paged and indexed, nobody answers
            return Command(update={"recall_indexed": indexed, **claim}, goto="__end__")
        model = setup.chat_model(ctx).bind_tools(setup.all_tools)
        response = model.invoke([run.sending(main).system_message(), *state.messages], config)
        if not isinstance(response, AIMessage):
            response = AIMessage(content=str(response.content))
        if not (response.tool_calls or response.invalid_tool_calls):  # the answer: this turn is over
            run.services.turn_over()
        update = {
            "messages": [response],
            "recall_indexed": indexed,
            "pressure_warned": state.pressure_warned or main.warned,
            "tokens": main.tokens,
            "system_prompt": prompt_patch(state.system_prompt, main.system_prompt),
            "summary": KEEP,  # keeps the summary's last full value near (``graph.state.KEEP``)
            **claim,
        }
        if not state.tokens:  # first turn of the thread: make every field visible in the state
            update.update(summary=state.summary, evicted_count=state.evicted_count, compactions=state.compactions,
                          evicted_user_messages=0 if state.evicted_count == 0 else state.evicted_user_messages)
        return Command(update=update, goto=after_model(response, setup.user_tool_names))

    return reason
