"""The main context: rendering the system prompt and measuring every segment in tokens.

The system prompt is, in order: the app's own prompt (if any), pagefault's instructions
(``Prompts.instructions`` for the memory tools the request carries), core memory, the learned
procedures, the running summary, the memory-pressure note when it is due, and last the lines that
change from request to request (memory statistics, then the date and time), so that a provider's
prompt cache holds everything before them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from langchain_core.messages import SystemMessage

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.models.tokens import TOKENS_PER_MESSAGE, TOKENS_PER_REPLY, TokenCounter
from pagefault.stores.core import CoreBlock, malformed_label
from pagefault.stores.procedures import Procedure, render_procedures
from pagefault.text.prompts import PRESSURE_MARKER, Prompts, now_line
from pagefault.tools.handlers import MEMORY_TOOLS

INSTRUCTIONS = Prompts().instructions(MEMORY_TOOLS)
"""pagefault's default instructions for a model that has all six memory tools."""
DEFAULT_PROMPTS = Prompts()
#: The memory tools that write memory: the pressure note asks the model to save only when it has one.
SAVING_TOOLS = frozenset({"archival_memory_insert", "core_memory_append", "core_memory_replace"})


@dataclass
class MainContext:
    """The rendered system prompt and the token cost of each segment of the request. ``warned``: the
    memory-pressure note is in the prompt; ``before_note``: the total without it (-1: the same as ``total``)."""

    system_prompt: str
    tokens: dict[str, int]
    warned: bool = False
    before_note: int = -1

    @property
    def total(self) -> int:
        return self.tokens["total"]

    @property
    def measured(self) -> int:
        """The total the budget is judged by: without the pressure note, which only says how full it is."""
        return self.before_note if self.before_note >= 0 else self.total

    def system_message(self) -> SystemMessage:
        return SystemMessage(content=self.system_prompt)


@lru_cache(maxsize=512)
def _count(counter: TokenCounter, text: str) -> int:
    """Tokens of a prompt section. The router and the reason node both measure every step, and the
    instructions, core blocks, summary and tool schemas rarely change between steps: count each text once."""
    return counter.count_text(text)


#: The parts of the main context, in prompt order, as token accounting and overviews name them.
SEGMENTS = ("system", "core", "procedures", "summary", "messages", "tools")


def render_core(blocks: list[CoreBlock]) -> str:
    """Core memory as the prompt shows it: each block as ``<label chars="used/limit">`` and its text. A
    block's text never closes a tag (``CoreBlock.shown``); a block whose label could not be a tag is left
    out (``CoreMemory.blocks`` never gives one)."""
    parts = ["<core_memory>"]
    for b in blocks:
        if malformed_label(b.label):
            continue
        parts.append(f'<{b.label} chars="{b.usage}">\n{b.shown}\n</{b.label}>')
    parts.append("</core_memory>")
    return "\n".join(parts)


def render_stats(evicted_count: int, archival_count: int) -> str:
    """The memory statistics line: messages of this thread evicted from its window, records in archival memory."""
    return f"Memory: {evicted_count} message(s) evicted, {archival_count} archival record(s)."


def tool_names(tool_schemas: list[dict[str, Any]]) -> list[str]:
    """The names of the tools in a request (OpenAI tool dicts, or provider-native ones with a ``name``)."""
    out = []
    for schema in tool_schemas:
        function = schema.get("function")
        name = (function if isinstance(function, dict) else schema).get("name")
        if isinstance(name, str):
            out.append(name)
    return out


def pressure_warning(used: int, window: int, can_save: bool = True) -> str:
    """The one-shot memory-pressure note (``used`` of ``window`` tokens); with ``can_save`` (the model has a
    tool that writes memory) it asks the model to save what matters now."""
    note = (f"{PRESSURE_MARKER}: the main context is at {100 * used // window}% of its {window}-token budget. "
            "The oldest messages will soon be summarized and evicted.")
    return note + (" Save anything important to archival or core memory now." if can_save else "")


@dataclass(frozen=True)
class FixedSections:
    """The parts of every request of a run that come before any message, rendered and measured: ``head``
    (the app's prompt and pagefault's instructions), ``core``, ``rules`` (procedures) and ``tail`` (the
    statistics and date lines), and ``tokens`` of the segments ``system``, ``core``, ``procedures`` and
    ``tools``."""

    head: str
    core: str
    rules: str
    tail: str
    tokens: dict[str, int]


def fixed_sections(
    ctx: Context,
    counter: TokenCounter,
    blocks: list[CoreBlock],
    archival_count: int,
    tool_schemas: list[dict[str, Any]],
    *,
    evicted_count: int = 0,
    procedures: list[Procedure] | None = None,
    app_prompt: str = "",
    prompts: Prompts = DEFAULT_PROMPTS,
    now: datetime | None = None,
) -> FixedSections:
    """The fixed part of a request (``FixedSections``), as ``build_main_context`` renders it: what a run's
    window must leave room beside (``window.fixed_part``), measured before the run starts."""
    names = tool_names(tool_schemas)
    head = "\n\n".join(p for p in (app_prompt if app_prompt.strip() else "", prompts.instructions(names)) if p)
    tail = render_stats(evicted_count, archival_count) + "\n" + now_line(now or datetime.now(timezone.utc))
    core = render_core(blocks)
    rules = render_procedures(procedures or [])
    tokens = {
        "system": (TOKENS_PER_MESSAGE + TOKENS_PER_REPLY + _count(counter, "system") + (_count(counter, head) if head else 0)
                   + counter.count_text(tail)),
        "core": _count(counter, core),
        "procedures": counter.count_text(rules) if rules else 0,
        "tools": counter.count_tools(tool_schemas),
    }
    return FixedSections(head, core, rules, tail, tokens)


def build_main_context(
    state: PagefaultState,
    ctx: Context,
    counter: TokenCounter,
    blocks: list[CoreBlock],
    archival_count: int,
    tool_schemas: list[dict[str, Any]],
    *,
    warn: bool = False,
    warn_at: float | None = None,
    procedures: list[Procedure] | None = None,
    app_prompt: str = "",
    prompts: Prompts = DEFAULT_PROMPTS,
    now: datetime | None = None,
) -> MainContext:
    """Render the prompt and count it; with ``warn``, append the memory-pressure note, and with ``warn_at``
    append it when the main context without it reaches ``warn_at`` tokens. ``procedures``
    (learned rules) are shown after core memory, apart from facts. ``app_prompt``: an app's own system
    prompt (``create_agent(system_prompt=...)``), which comes first; its tokens count as ``system``.
    ``prompts``: pagefault's instructions (``Prompts.system``, told about the memory tools among
    ``tool_schemas`` only). ``now``: the request's time for its last line (default: the clock)."""
    fixed = fixed_sections(ctx, counter, blocks, archival_count, tool_schemas, evicted_count=state.evicted_count,
                           procedures=procedures, app_prompt=app_prompt, prompts=prompts, now=now)
    summary = f"<summary_of_evicted_messages>\n{state.summary}\n</summary_of_evicted_messages>" if state.summary else ""
    tokens = {
        "system": fixed.tokens["system"],
        "core": fixed.tokens["core"],
        "summary": _count(counter, summary) if summary else 0,
        "messages": counter.count_messages(state.messages),
        "tools": fixed.tokens["tools"],
        "procedures": fixed.tokens["procedures"],
    }
    sections = ([fixed.head] if fixed.head else []) + [fixed.core] + ([fixed.rules] if fixed.rules else []) + (
        [summary] if summary else [])
    total = before = sum(tokens.values())
    warned = warn or (warn_at is not None and total >= warn_at)
    if warned:
        note = pressure_warning(total, ctx.context_window, bool(SAVING_TOOLS & set(tool_names(tool_schemas))))
        sections.append(note)
        tokens["system"] += counter.count_text(note)
        total = sum(tokens.values())
    sections.append(fixed.tail)
    tokens["total"] = total
    tokens["window"] = ctx.context_window
    return MainContext("\n\n".join(sections), tokens, warned, before)
