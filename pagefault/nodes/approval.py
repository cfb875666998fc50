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

from typing import Any, Mapping, Sequence

from langgraph.types import interrupt

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
