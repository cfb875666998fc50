"""``pagefault inspect``: what one thread's main context holds, as a terminal chart.

Tokens by segment against the window (with the warning and compaction lines), each core block's
fill, and how much sits outside the window: evicted messages, recall entries and archival records.
Messages are counted as messages and turns as conversational turns (a user message and what follows
it), the numbers a search's hits carry as ``message_index`` and ``turn``; what recall holds of the
thread is counted in the index itself, so it agrees with what a search can find.
The segments are the accounting of the thread's last model call (which includes the app's own
tools and prompt); a thread that never reached the model is measured as it stands.

(Named ``overview`` rather than ``inspect`` so it can never shadow the standard library module.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import HumanMessage

from pagefault.graph.context import Context
from pagefault.graph.saved_state import latest_saved
from pagefault.graph.state import PagefaultState
from pagefault.stores.core import CoreBlock
from pagefault.window.main_context import SEGMENTS
from pagefault.window.run import users_before
from pagefault.window.setup import AgentSetup

BAR_WIDTH = 40


class Persisted(Protocol):
    """Where an overview reads a thread and its user's core memory: a LangGraph ``checkpointer`` and
    ``store`` (``open_embedded``'s, ``open_postgres``'s or a LangGraph server's own), and ``data_dir``,
    named in the error for a thread that is not there."""

    @property
    def checkpointer(self) -> Any: ...

    @property
    def store(self) -> Any: ...

    @property
    def data_dir(self) -> str: ...


@dataclass
class Overview:
    """One thread's main context and the memory around it."""

    ctx: Context
    thread_id: str
    tokens: dict[str, int]
    measured: str
    """'last model call' or 'now' (the thread never reached the model)."""
    blocks: list[CoreBlock]
    messages: int
    """Messages in the thread's full history (message indexes run from 0 to ``messages - 1``)."""
    turns: int
    """Conversational turns in the thread (turns run from 0 to ``turns - 1``)."""
    in_window: int
    """Messages in the window."""
    compactions: int
    summary_chars: int
    recall_indexed: int
    """The checkpoint's ``recall_indexed``: messages below this index were confirmed indexed at its last sync."""
    recall_entries: int
    """Recall entries of the user, every thread."""
    recall_thread_entries: int
    """Messages of this thread in recall now (a search of the thread can find each of them)."""
    archival_records: int

    @property
    def window(self) -> int:
        return int(self.tokens.get("window") or self.ctx.context_window)

    @property
    def warning_at(self) -> int:
        return int(self.ctx.warning_fraction * self.window)

    @property
    def compaction_at(self) -> int:
        return int(self.ctx.compaction_trigger * self.window)


def thread_overview(persistence: Persisted, ctx: Context, thread_id: str) -> Overview:
    """Read a thread's latest checkpoint and the user's stores; ValueError if there is no such thread."""
    latest = latest_saved(persistence.checkpointer, thread_id)
    if latest is None:
        raise ValueError(f"no thread {thread_id!r} in {persistence.data_dir}")
    values: dict[str, Any] = latest[1]
    state = PagefaultState(**{k: v for k, v in values.items() if k in PagefaultState.__dataclass_fields__})
    setup = AgentSetup()  # the graph's: no tools of the user's, the context's model
    run = setup.open_run(ctx, persistence.store, {"configurable": {"thread_id": thread_id}})
    scope, svc = run.scope, run.services
    blocks = run.core.blocks()
    users = users_before(svc.recall, scope, thread_id, state.evicted_count, state.evicted_user_messages)
    users += sum(isinstance(m, HumanMessage) for m in state.messages)
    messages = state.evicted_count + len(state.messages)
    archival = svc.archival.count(scope)
    tokens, measured = dict(state.tokens or {}), "last model call"
    if not tokens:
        tokens = run.main_context(state, setup.tool_schemas).tokens
        measured = "now"
    return Overview(
        ctx=ctx, thread_id=thread_id, tokens=tokens, measured=measured, blocks=blocks,
        messages=messages, turns=max(users, 1) if messages else 0, in_window=len(state.messages),
        compactions=state.compactions, summary_chars=len(state.summary), recall_indexed=state.recall_indexed,
        recall_entries=svc.recall.count(scope), recall_thread_entries=svc.recall.thread_count(scope, thread_id),
        archival_records=archival,
    )


def _bar(value: int, scale: int, width: int = BAR_WIDTH) -> str:
    filled = min(width, round(width * value / scale)) if scale > 0 else 0
    return "#" * filled + "." * (width - filled)


def _marked_bar(ov: Overview, width: int = BAR_WIDTH) -> str:
    """The total against the window, with '!' at the warning line and '|' at the compaction line."""
    cells = list(_bar(ov.tokens.get("total", 0), ov.window, width))
    for at, mark in ((ov.warning_at, "!"), (ov.compaction_at, "|")):
        i = min(width - 1, int(width * at / ov.window))
        cells[i] = mark
    return "".join(cells)


def render_overview(ov: Overview) -> str:
    """The overview as plain ASCII lines (safe on any terminal encoding)."""
    total, window = ov.tokens.get("total", 0), ov.window
    lines = [
        f"user {ov.ctx.user_id} | agent {ov.ctx.agent_id} | thread {ov.thread_id}",
        "",
        f"main context ({ov.measured}): {total}/{window} tokens ({100 * total // max(window, 1)}%)",
    ]
    for seg in SEGMENTS:
        n = int(ov.tokens.get(seg, 0))
        lines.append(f"  {seg:<9}[{_bar(n, window)}] {n:>6}")
    lines.append(f"  {'total':<9}[{_marked_bar(ov)}] {total:>6}")
    lines.append(f"  {'':<9} ! warning at {ov.warning_at} tokens ({ov.ctx.warning_fraction:.0%}), "
                 f"| compaction at {ov.compaction_at} ({ov.ctx.compaction_trigger:.0%})")
    lines += ["", "core memory:"]
    for b in ov.blocks:
        lines.append(f"  {b.label:<9}[{_bar(len(b.value), b.limit, 20)}] {len(b.value)}/{b.limit} chars")
    lines += [
        "",
        f"thread: {ov.messages} message(s) in {ov.turns} turn(s); {ov.in_window} message(s) in the window, "
        f"{ov.messages - ov.in_window} evicted in {ov.compactions} compaction(s); summary {ov.summary_chars} chars",
        f"recall: {ov.recall_entries} entries for this user; {ov.recall_thread_entries} of this thread's "
        f"{ov.messages} message(s) indexed",
        f"archival: {ov.archival_records} record(s)",
    ]
    return "\n".join(lines)
