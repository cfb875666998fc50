"""The main context: rendering the system prompt and measuring every segment in tokens."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langchain_core.messages import SystemMessage

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.models.tokens import TOKENS_PER_MESSAGE, TOKENS_PER_REPLY, TokenCounter
from pagefault.stores.core import CoreBlock
from pagefault.stores.procedures import Procedure, render_procedures
from pagefault.text.prompts import PRESSURE_MARKER, SYSTEM_PROMPT

INSTRUCTIONS = SYSTEM_PROMPT


@dataclass
class MainContext:
    """The rendered system prompt and the token cost of each segment of the request."""

    system_prompt: str
    tokens: dict[str, int]

    @property
    def total(self) -> int:
        return self.tokens["total"]

    def system_message(self) -> SystemMessage:
        return SystemMessage(content=self.system_prompt)


@lru_cache(maxsize=512)
def _count(counter: TokenCounter, text: str) -> int:
    """Tokens of a prompt section. The router and the reason node both measure every step, and the
    instructions, core blocks, summary and tool schemas rarely change between steps: count each text once."""
    return counter.count_text(text)


_tool_tokens: dict[tuple[int, int], tuple[list[dict[str, Any]], int]] = {}


def _count_tools(counter: TokenCounter, schemas: list[dict[str, Any]]) -> int:
    """Tokens of a graph's tool schemas, counted once per schema list (a graph's list never changes)."""
    key = (id(counter), id(schemas))
    hit = _tool_tokens.get(key)
    if hit is None or hit[0] is not schemas:
        if len(_tool_tokens) > 256:  # graphs come and go (tests build hundreds): forget old lists
            _tool_tokens.clear()
        hit = _tool_tokens[key] = (schemas, counter.count_tools(schemas))
    return hit[1]


#: The parts of the main context, in prompt order, as token accounting and overviews name them.
SEGMENTS = ("system", "core", "procedures", "summary", "messages", "tools")


def render_core(blocks: list[CoreBlock]) -> str:
    parts = ["<core_memory>"]
    for b in blocks:
        parts.append(f'<{b.label} chars="{b.usage}">\n{b.value}\n</{b.label}>')
    parts.append("</core_memory>")
    return "\n".join(parts)


def render_stats(state: PagefaultState, archival_count: int) -> str:
    return (f"Memory: {state.evicted_count} earlier message(s) of this conversation are out of the window "
            f"(conversation_search finds them); archival memory holds {archival_count} record(s).")


def pressure_warning(used: int, window: int) -> str:
    return (f"{PRESSURE_MARKER}: the main context is at {100 * used // window}% of its {window}-token budget. "
            "The oldest messages will soon be summarized and evicted. Save anything important to archival "
            "or core memory now.")


def build_main_context(
    state: PagefaultState,
    ctx: Context,
    counter: TokenCounter,
    blocks: list[CoreBlock],
    archival_count: int,
    tool_schemas: list[dict[str, Any]],
    *,
    warn: bool = False,
    procedures: list[Procedure] | None = None,
    app_prompt: str = "",
) -> MainContext:
    """Render the prompt and count it; with ``warn``, append the memory-pressure note. ``procedures``
    (learned rules) are shown after core memory, apart from facts. ``app_prompt``: an app's own system
    prompt (``create_agent(system_prompt=...)``), which comes first; its tokens count as ``system``."""
    instructions = INSTRUCTIONS + "\n\n" + render_stats(state, archival_count)
    if app_prompt.strip():
        instructions = app_prompt + "\n\n" + instructions
    core = render_core(blocks)
    summary = f"<summary_of_evicted_messages>\n{state.summary}\n</summary_of_evicted_messages>" if state.summary else ""
    tokens = {
        "system": TOKENS_PER_MESSAGE + TOKENS_PER_REPLY + _count(counter, "system") + _count(counter, instructions),
        "core": _count(counter, core),
        "summary": _count(counter, summary) if summary else 0,
        "messages": counter.count_messages(state.messages),
        "tools": _count_tools(counter, tool_schemas),
    }
    rules = render_procedures(procedures or [])
    tokens["procedures"] = counter.count_text(rules) if rules else 0
    sections = [instructions, core] + ([rules] if rules else []) + ([summary] if summary else [])
    total = sum(tokens.values())
    if warn:
        note = pressure_warning(total, ctx.context_window)
        sections.append(note)
        tokens["system"] += counter.count_text(note)
        total = sum(tokens.values())
    tokens["total"] = total
    tokens["window"] = ctx.context_window
    return MainContext("\n\n".join(sections), tokens)
