"""The ``memory`` node: MemGPT's page-fault handler.

It carries out the memory tool calls of the last AI message against the tiers and returns one
ToolMessage per call. A bad call (unknown tool, malformed or invalid arguments, an edit that
cannot apply) becomes an error ToolMessage the model can act on; the run and the stores go on.

Before any call runs, core edits that come from untrusted content are found; with
``untrusted_core_edits="approve"`` the node asks a person about them first (``nodes.approval``),
so nothing is written twice when the run resumes and the node starts over.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.nodes import approval
from pagefault.nodes.thread_owner import claim_thread
from pagefault.nodes.wiring import Wiring, core_memory, scope_of, services, thread_id
from pagefault.tools import MEMORY_TOOLS, MemoryCall, ToolError, run_memory_tool, untrusted_core_edit
from pagefault.trust import origins_of


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


def make_memory(wiring: Wiring) -> Callable[..., dict[str, Any]]:
    def memory(state: PagefaultState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        ctx = wiring.context(runtime)
        claim = claim_thread(state.owner, scope_of(ctx), thread_id(config))  # a resume is a run too
        ai = last_ai(state)
        if ai is None:
            return {}
        svc = services(ctx)
        # Provenance points at the user turn that led to this call.
        user_idx = max((i for i, m in enumerate(state.messages) if isinstance(m, HumanMessage)), default=-1)
        call = MemoryCall(
            scope=scope_of(ctx), thread_id=thread_id(config),
            turn=state.evicted_count + user_idx if user_idx >= 0 else -1,
            message_id=(state.messages[user_idx].id or "") if user_idx >= 0 else "",
            core=core_memory(runtime, ctx), archival=svc.archival, recall=svc.recall, default_top_k=ctx.top_k,
            guard=ctx.guard, untrusted_core_edits=ctx.untrusted_core_edits, redact_secrets=ctx.redact_secrets,
            origins=origins_of(state.messages, frozenset(MEMORY_TOOLS)), window_start=state.evicted_count,
        )
        write = get_stream_writer()
        done = answered_ids(state)
        todo = [tc for tc in ai.tool_calls if tc["name"] not in wiring.user_tool_names and tc["id"] not in done]
        risky = {tc["id"]: r for tc in todo if (r := untrusted_core_edit(call, tc["name"], tc["args"]))}
        approved: dict[str, bool] = {}
        if risky and ctx.untrusted_core_edits == "approve":
            approved = approval.ask([{"tool_call_id": tc["id"], "tool": tc["name"], "args": tc["args"],
                                      "reasons": risky[tc["id"]]} for tc in todo if tc["id"] in risky])
        out = []
        for tc in todo:
            try:
                if tc["id"] in approved and not approved[tc["id"]]:
                    raise ToolError("a person declined this core memory edit (it came from untrusted content: "
                                    + "; ".join(risky[tc["id"]]) + "); do not retry it")
                result = run_memory_tool(replace(call, approved=approved.get(tc["id"], False)), tc["name"], tc["args"])
                msg = ToolMessage(result.content, tool_call_id=tc["id"], name=tc["name"], artifact=result.artifact)
            except ToolError as e:
                msg = ToolMessage(f"Error: {e}", tool_call_id=tc["id"], name=tc["name"], status="error")
            write({"event": "page_fault", "tool": tc["name"], "status": msg.status,
                   "citations": (msg.artifact or {}).get("citations", []),
                   "flagged": sum(bool(c.get("flagged")) for c in (msg.artifact or {}).get("citations", []))})
            out.append(msg)
        for bad in ai.invalid_tool_calls:  # the provider's JSON did not parse
            out.append(ToolMessage(f"Error: malformed call to {bad.get('name')}: {bad.get('error') or 'bad arguments'}",
                                   tool_call_id=bad.get("id") or "invalid", name=bad.get("name") or "", status="error"))
        return {"messages": out, **claim}

    return memory
