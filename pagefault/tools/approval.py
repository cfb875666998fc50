"""Human approval of core-memory edits that come from untrusted content, in LangChain v1's
human-in-the-loop shape (the one ``HumanInTheLoopMiddleware`` uses, which Agent Inbox and Studio render).

Core memory is pinned in every prompt, so an edit steered by poisoned memory or tool output would
poison every later session. With ``Context.untrusted_core_edits == "approve"`` the memory node (and
a plain memory tool in a graph) pauses the run with LangGraph ``interrupt()`` before carrying out
any of the step's calls, and asks a person. The interrupt's value is a ``HITLRequest``::

    {"action_requests": [{"name": "core_memory_append", "args": {...}, "description": "..."}],
     "review_configs": [{"action_name": "core_memory_append", "allowed_decisions": ["approve", "edit", "reject"]}]}

The run resumes with ``Command(resume=...)`` (library) or ``command={"resume": ...}`` (SDK,
``langgraph dev``) and a ``HITLResponse``, one decision per action request, in order::

    {"decisions": [{"type": "approve"},
                   {"type": "edit", "edited_action": {"name": "core_memory_append", "args": {...}}},
                   {"type": "reject", "message": "not a fact about me"}]}

An edited call runs with the person's arguments (they are the person's words, so they count as
approved). An answer of any other shape is never taken as a rejection (or an approval): the run
pauses again with the same request and an ``error`` saying what was wrong and which shapes are
accepted (``ApprovalAnswerError``'s message), and nothing is written until a readable answer comes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from langgraph.types import interrupt

from pagefault.tools.handlers import MemoryCall, ToolError, ToolResult, run_memory_tool, untrusted_core_edit

#: What a person may decide about each edit.
ALLOWED_DECISIONS = ["approve", "edit", "reject"]
_SHAPES = ('{"decisions": [{"type": "approve"} | {"type": "edit", "edited_action": {"name": ..., "args": {...}}} '
           '| {"type": "reject", "message": "..."}, ...]}, one decision per action request, in order')


class ApprovalAnswerError(ValueError):
    """A resume value that is not a ``HITLResponse`` for the pending edits."""


@dataclass(frozen=True)
class Request:
    """One memory tool call waiting to run: its id, tool and raw arguments."""

    tool_call_id: str
    tool: str
    args: Any


@dataclass(frozen=True)
class Decision:
    """A person's decision on one edit: ``approve``, ``edit`` (with ``args``) or ``reject`` (``message``)."""

    type: str
    args: Any = None
    message: str = ""


def approval_request(requests: Sequence[Request], reasons: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The interrupt's value: a LangChain ``HITLRequest`` for ``requests``."""
    return {
        "action_requests": [{"name": r.tool, "args": r.args, "description": (
            "This core-memory edit comes from untrusted content (" + "; ".join(reasons[r.tool_call_id]) + "). "
            "Core memory is in every prompt. Approve, edit or reject it.")} for r in requests],
        "review_configs": [{"action_name": name, "allowed_decisions": list(ALLOWED_DECISIONS)}
                           for name in dict.fromkeys(r.tool for r in requests)],
    }


def read_decisions(answer: object, requests: Sequence[Request]) -> dict[str, Decision]:
    """Each pending call's decision, read from a person's ``HITLResponse``; ``ApprovalAnswerError``
    for anything else, naming the accepted shapes."""
    decisions = answer.get("decisions") if isinstance(answer, Mapping) else None
    if not isinstance(decisions, list):
        raise ApprovalAnswerError(f"resume with {_SHAPES}; got {answer!r:.200}")
    if len(decisions) != len(requests):
        raise ApprovalAnswerError(f"{len(requests)} edit(s) wait for a decision and the answer has {len(decisions)}; "
                                  f"resume with {_SHAPES}")
    out = {}
    for i, (d, r) in enumerate(zip(decisions, requests)):
        kind = d.get("type") if isinstance(d, Mapping) else None
        if kind == "approve":
            out[r.tool_call_id] = Decision("approve")
        elif kind == "reject":
            message = d.get("message", "")
            if not isinstance(message, str):
                raise ApprovalAnswerError(f"decision {i}: a rejection's message must be a string")
            out[r.tool_call_id] = Decision("reject", message=message)
        elif kind == "edit":
            edited = d.get("edited_action")
            if not isinstance(edited, Mapping) or not isinstance(edited.get("args"), Mapping):
                raise ApprovalAnswerError(f"decision {i}: an edit needs edited_action={{'name': ..., 'args': {{...}}}}")
            if edited.get("name", r.tool) != r.tool:
                raise ApprovalAnswerError(f"decision {i}: an edit keeps the tool ({r.tool!r}); "
                                          f"got {edited.get('name')!r}")
            out[r.tool_call_id] = Decision("edit", args=dict(edited["args"]))
        else:
            raise ApprovalAnswerError(f"decision {i}: type must be one of {', '.join(ALLOWED_DECISIONS)}; "
                                      f"resume with {_SHAPES}")
    return out


class Reviewed:
    """The calls of one step after review: core edits from untrusted content are found, and with
    ``untrusted_core_edits="approve"`` a person is asked about all of them at once, before any call
    runs (so nothing is written twice when the run resumes and the step starts over). Every memory tool
    carries out its call through here: the graph's memory node reviews all the memory calls of its AI
    message as one step and hands it to the tools (``window.toolset``); a tool anywhere else reviews
    its own call."""

    def __init__(self, call: MemoryCall, requests: Sequence[Request], *, can_ask: bool = True) -> None:
        """``can_ask=False``: no run to pause (a tool called outside a graph), so nobody is asked and an
        untrusted core edit is refused as the handler refuses any unapproved one."""
        self.call = call
        #: The tool-call ids of the calls this step reviewed.
        self.ids = frozenset(r.tool_call_id for r in requests)
        self.reasons = {r.tool_call_id: why for r in requests if (why := untrusted_core_edit(call, r.tool, r.args))}
        self.decisions: dict[str, Decision] = {}
        if self.reasons and call.untrusted_core_edits == "approve" and can_ask:
            pending = [r for r in requests if r.tool_call_id in self.reasons]
            request = approval_request(pending, self.reasons)
            answer = interrupt(request)
            while True:
                try:
                    self.decisions = read_decisions(answer, pending)
                    break
                except ApprovalAnswerError as e:
                    # Ask again, saying what was wrong: an unreadable answer is never a decision, and
                    # the run stays paused with nothing written (a failed step would keep the bad answer).
                    answer = interrupt({**request, "error": str(e)})

    def run(self, request: Request) -> ToolResult:
        """Carry out one reviewed call; ``ToolError`` for a bad call or one a person rejected."""
        decision = self.decisions.get(request.tool_call_id)
        if decision is None:
            return run_memory_tool(self.call, request.tool, request.args)
        if decision.type == "reject":
            raise ToolError("a person rejected this core memory edit" + (f": {decision.message}" if decision.message
                            else " (it came from untrusted content: " + "; ".join(self.reasons[request.tool_call_id])
                            + ")") + "; do not retry it")
        approved = replace(self.call, approved=True)
        if decision.type == "edit":
            result = run_memory_tool(approved, request.tool, decision.args)
            return ToolResult("A person edited this call before it ran. " + result.content, result.artifact)
        return run_memory_tool(approved, request.tool, request.args)
