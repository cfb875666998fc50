"""The ``memory`` node: MemGPT's page-fault handler.

It carries out the memory tool calls of the last AI message against the tiers and returns one
ToolMessage per call. A bad call (unknown tool, malformed or invalid arguments, an edit that
cannot apply) becomes an error ToolMessage the model can act on; the run and the stores go on.

Before any call runs, core edits that come from untrusted content are found; with
``untrusted_core_edits="approve"`` the node asks a person about them first (``tools.approval``),
so nothing is written twice when the run resumes and the node starts over.
"""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.tools.approval import Request, Reviewed
from pagefault.tools.handlers import ToolError
from pagefault.window.events import emit_page_fault
from pagefault.window.setup import AgentSetup
from pagefault.window.thread_owner import claim_thread


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
    def memory(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = setup.context(runtime)
        run = setup.open_run(ctx, runtime.store, config)
        claim = claim_thread(state.owner, run.scope, run.thread_id)  # a resume is a run too
        ai = last_ai(state)
        if ai is None:
            return {}
        done = answered_ids(state)
        todo = [Request(tc["id"] or "", tc["name"], tc["args"]) for tc in ai.tool_calls
                if tc["name"] not in setup.user_tool_names and tc["id"] not in done]
        reviewed = Reviewed(run.memory_call(state.messages, state.evicted_count, state.evicted_user_messages), todo)
        out = []
        for request in todo:
            try:
                result = reviewed.run(request)
                msg = ToolMessage(result.content, tool_call_id=request.tool_call_id, name=request.tool,
                                  artifact=result.artifact)
            except ToolError as e:
                msg = ToolMessage(f"Error: {e}", tool_call_id=request.tool_call_id, name=request.tool, status="error")
            emit_page_fault(request.tool, msg.status, (msg.artifact or {}).get("citations", []))
            out.append(msg)
        for bad in ai.invalid_tool_calls:  # the provider's JSON did not parse
            out.append(ToolMessage(f"Error: malformed call to {bad.get('name')}: {bad.get('error') or 'bad arguments'}",
                                   tool_call_id=bad.get("id") or "invalid", name=bad.get("name") or "", status="error"))
        return {"messages": out, **claim}

    return memory
