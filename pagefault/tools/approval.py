"""Human approval of core-memory edits that come from untrusted content, via LangGraph ``interrupt()``.

Core memory is pinned in every prompt, so an edit steered by poisoned memory or tool output would
poison every later session. With ``Context.untrusted_core_edits == "approve"`` the memory node
pauses the run before carrying out any of its calls and asks a person. The run resumes with
``Command(resume=...)`` (library) or ``command={"resume": ...}`` (SDK, ``langgraph dev``).

The request (the interrupt's value)::

    {"type": "core_memory_approval", "question": "...",
     "edits": [{"tool_call_id": "...", "tool": "core_memory_append", "args": {...}, "reasons": ["..."]}]}

Accepted answers: ``True`` / ``"approve"`` (all edits), ``False`` / ``"reject"`` (none), or a
mapping ``{tool_call_id: bool}``. Anything else counts as a rejection: the safe reading.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from langgraph.types import interrupt

from pagefault.tools.handlers import MemoryCall, ToolError, ToolResult, run_memory_tool, untrusted_core_edit

APPROVAL_TYPE = "core_memory_approval"
_YES = {"approve", "approved", "yes", "y", "allow", "ok", "accept"}


def approval_request(edits: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "type": APPROVAL_TYPE,
        "question": "These core-memory edits come from untrusted content (instruction-shaped text, or a turn that "
                    "read flagged memory or tool output). Core memory is in every prompt. Apply them?",
        "edits": [dict(e) for e in edits],
    }


def decisions(answer: object, ids: Sequence[str]) -> dict[str, bool]:
    """Each tool call id -> approved?, read from a person's answer (unknown answers reject)."""
    if isinstance(answer, bool):
        return {i: answer for i in ids}
    if isinstance(answer, str):
        return {i: answer.strip().lower() in _YES for i in ids}
    if isinstance(answer, Mapping):
        if "approve" in answer and isinstance(answer["approve"], bool):
            return {i: answer["approve"] for i in ids}
        return {i: answer.get(i) is True or (isinstance(answer.get(i), str) and answer[i].strip().lower() in _YES)
                for i in ids}
    return {i: False for i in ids}


def ask(edits: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Pause the run for a person's decision on ``edits``; returns tool call id -> approved."""
    answer = interrupt(approval_request(edits))
    return decisions(answer, [str(e["tool_call_id"]) for e in edits])


@dataclass(frozen=True)
class Request:
    """One memory tool call waiting to run: its id, tool and raw arguments."""

    tool_call_id: str
    tool: str
    args: Any


class Reviewed:
    """The calls of one step after review: core edits from untrusted content are found, and with
    ``untrusted_core_edits="approve"`` a person is asked about all of them at once, before any call
    runs (so nothing is written twice when the run resumes and the step starts over). The graph's
    memory node and the plain LangChain tools both go through here."""

    def __init__(self, call: MemoryCall, requests: Sequence[Request], *, can_ask: bool = True) -> None:
        """``can_ask=False``: no run to pause (a tool called outside a graph), so nobody is asked and an
        untrusted core edit is refused as the handler refuses any unapproved one."""
        self.call = call
        self.reasons = {r.tool_call_id: why for r in requests if (why := untrusted_core_edit(call, r.tool, r.args))}
        self.approved: dict[str, bool] = {}
        if self.reasons and call.untrusted_core_edits == "approve" and can_ask:
            self.approved = ask([{"tool_call_id": r.tool_call_id, "tool": r.tool, "args": r.args,
                                  "reasons": self.reasons[r.tool_call_id]}
                                 for r in requests if r.tool_call_id in self.reasons])

    def run(self, request: Request) -> ToolResult:
        """Carry out one reviewed call; ``ToolError`` for a bad call or one a person declined."""
        if request.tool_call_id in self.approved and not self.approved[request.tool_call_id]:
            raise ToolError("a person declined this core memory edit (it came from untrusted content: "
                            + "; ".join(self.reasons[request.tool_call_id]) + "); do not retry it")
        call = replace(self.call, approved=self.approved.get(request.tool_call_id, False))
        return run_memory_tool(call, request.tool, request.args)
