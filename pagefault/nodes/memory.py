"""The ``memory`` node: MemGPT's page-fault handler.

It runs the memory tool calls of the last AI message with a LangGraph ``ToolNode`` over the graph's memory
tools, the very objects the reason node binds to the model (``AgentSetup.memory_toolset``), and returns
one ToolMessage per call. Around the ToolNode is pagefault's page-fault handling:

- before any call runs, the core edits that come from untrusted content are found, and with
  ``untrusted_core_edits="approve"`` a person is asked about all of them at once (``tools.approval``), so
  nothing is written twice when the run resumes and the node starts over; the tools carry out their calls
  as that review decided (``window.toolset.with_step``), one after another, in the order the model made them;
- a call to a memory tool the model was not given, and a call whose JSON did not parse
  (``invalid_tool_calls``), become error ToolMessages here; invalid arguments and edits that cannot
  apply become error ToolMessages in the tools. The model can act on each; the run and the stores go on.
"""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langchain_core.runnables import RunnableConfig, patch_config
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.tools.approval import Request, Reviewed
from pagefault.tools.handlers import unknown_tool
from pagefault.window.events import emit_page_fault
from pagefault.window.setup import AgentSetup
from pagefault.window.thread_owner import claim_thread
from pagefault.window.toolset import with_step


def last_ai(state: PagefaultState) -> AIMessage | None:
    for m in reversed(state.messages):
        if isinstance(m, AIMessage):
            return m
    return None


def answered_ids(state: PagefaultState) -> set[str]:
    """Tool-call ids that already have a ToolMessage after the last AI message."""
    out: set[str] = set()
    for m in reversed(state.messages):
        if isinstance(m, AIMessage):
            break
        if isinstance(m, ToolMessage):
            out.add(m.tool_call_id)
    return out


def make_memory(setup: AgentSetup) -> Callable[..., dict[str, Any]]:
    tools = setup.memory_toolset
    # Errors the tools do not turn into ToolMessages themselves (a store down, a bug) fail the step.
    node = ToolNode(tools, name="memory_tools", handle_tool_errors=False)
    given = frozenset(t.name for t in tools)

    def memory(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        call = setup.memory_call(runtime.context, runtime.store, state, config)  # a resume is a run too: owner checked
        claim = claim_thread(state.owner, call.scope, call.thread_id)
        ai = last_ai(state)
        if ai is None:
            return {}
        done = answered_ids(state)
        todo = [tool_call(name=tc["name"], args=tc["args"], id=tc["id"] or "") for tc in ai.tool_calls
                if tc["name"] not in setup.user_tool_names and tc["id"] not in done]
        runs = [tc for tc in todo if tc["name"] in given]
        step = Reviewed(call, [Request(tc["id"] or "", tc["name"], tc["args"]) for tc in runs])  # may pause the run
        answers: dict[str, ToolMessage] = {}
        if runs:
            # One call at a time, in the model's order, as the review decided (its step in their config).
            ran = node.invoke(runs, with_step(patch_config(config, max_concurrency=1), step))
            answers = {m.tool_call_id: m for m in ran["messages"]}
        out = []
        for tc in todo:
            msg = answers.get(tc["id"] or "")
            if msg is None:  # a memory tool this graph's model was not given
                msg = ToolMessage(f"Error: {unknown_tool(tc['name'], given)}", tool_call_id=tc["id"] or "", name=tc["name"],
                                  status="error")
                emit_page_fault(tc["name"], "error", [])
            out.append(msg)
        for bad in ai.invalid_tool_calls:  # the provider's JSON did not parse
            out.append(ToolMessage(f"Error: malformed call to {bad.get('name')}: {bad.get('error') or 'bad arguments'}",
                                   tool_call_id=bad.get("id") or "invalid", name=bad.get("name") or "", status="error"))
        return {"messages": out, **claim}

    return memory
