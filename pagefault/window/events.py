"""The events pagefault writes on a run's custom stream (``stream_mode="custom"``): ``page_fault``,
``memory_pressure``, ``compaction`` and ``memory_warning``. Studio and any SDK client see them live."""

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
