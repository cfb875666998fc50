"""The events pagefault writes on a run's custom stream (``stream_mode="custom"``): ``page_fault``,
``memory_pressure``, ``compaction`` and ``memory_warning``. Studio and any SDK client see them live.

A ``compaction`` event (``emit_compaction``) says how many messages were evicted and truncated, the
main context's tokens before and after, the window, and who wrote the summary: ``"summary"`` is
``"model"`` (the summary model), ``"extractive fallback"`` (the summary call failed: ``"summary_error"``
then says how, as ``"<type>: <message>"``) or ``"unchanged"`` (nothing was evicted, only cut down)."""

from __future__ import annotations

from typing import Any

from langgraph.config import get_stream_writer


def emit(event: dict[str, Any]) -> None:
    """Write ``event`` on the run's custom stream; outside a run (a unit test), nowhere."""
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # no run, or a config from outside a LangGraph run
        return
    writer(event)


def emit_page_fault(tool: str, status: str, citations: list[Any]) -> None:
    """A memory tool call was carried out: its tool, status and citations (and how many are flagged)."""
    emit({"event": "page_fault", "tool": tool, "status": status, "citations": citations,
          "flagged": sum(bool(c.get("flagged")) for c in citations if isinstance(c, dict))})


def emit_compaction(*, evicted: int, truncated: int, tokens_before: int, tokens_after: int, window: int,
                    summary: str, summary_error: str = "") -> None:
    """A compaction was done (fields in the module docstring); ``summary_error`` only when the fallback wrote it."""
    event: dict[str, Any] = {"event": "compaction", "evicted": evicted, "truncated": truncated,
                             "tokens_before": tokens_before, "tokens_after": tokens_after, "window": window,
                             "summary": summary}
    if summary_error:
        event["summary_error"] = summary_error
    emit(event)
