"""Whether a context window fits its agent: the fixed part of every request (system prompt, core blocks,
procedures, tool schemas) must leave room for messages under ``compaction_target``.

Compaction brings the main context down to ``compaction_target`` x ``context_window`` tokens by evicting
messages. When the fixed part alone reaches that, every compaction evicts everything but the current
turn, and every request is over budget. ``check_window`` refuses such a window with the numbers, when a
turn starts and before any model call (so nothing is sent and nothing is evicted). The graph and
``PagefaultMiddleware`` both call it. ``Context(context_window=...)`` cannot: the fixed part depends on
the tools, the prompts and the user's core memory, known only when a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagefault.graph.context import Context
from pagefault.window.main_context import MainContext


@dataclass(frozen=True)
class FixedPart:
    """The tokens every request of a run carries before any message: ``system`` (the app's prompt,
    pagefault's instructions and the statistics and date lines), ``core`` (core memory blocks),
    ``procedures`` (learned rules) and ``tools`` (the tool schemas)."""

    system: int
    core: int
    procedures: int
    tools: int

    @classmethod
    def of(cls, main: MainContext) -> "FixedPart":
        """The fixed part of ``main`` (a measured main context), without its memory-pressure note."""
        note = main.total - main.measured
        return cls.of_tokens({**main.tokens, "system": main.tokens["system"] - note})

    @classmethod
    def of_tokens(cls, tokens: dict[str, int]) -> "FixedPart":
        """The fixed part of a request measured by segment (``main_context.fixed_sections``)."""
        return cls(tokens["system"], tokens["core"], tokens.get("procedures", 0), tokens["tools"])

    @property
    def total(self) -> int:
        """All four parts, in tokens."""
        return self.system + self.core + self.procedures + self.tools


class WindowTooSmall(ValueError):
    """A context window whose fixed part leaves no room for messages under ``compaction_target``. Its
    message names the numbers; ``fixed`` (a ``FixedPart``), ``window`` and ``target`` (the fraction) hold them."""

    def __init__(self, fixed: FixedPart, window: int, target: float) -> None:
        room = int(target * window)
        need = int(fixed.total / target) + 1  # the smallest window whose target is above the fixed part
        super().__init__(
            f"context_window={window:,} is too small for this agent: the fixed part of every request is "
            f"{fixed.total:,} tokens (system prompt {fixed.system:,}, core blocks {fixed.core:,}, procedures "
            f"{fixed.procedures:,}, tool schemas {fixed.tools:,}), and compaction brings the main context down to "
            f"compaction_target x context_window = {target:g} x {window:,} = {room:,} tokens, which leaves no room "
            f"for messages. Use a context_window above {need:,} tokens (or fewer tools, a shorter prompt, smaller core "
            "blocks, a higher compaction_target). Nothing was sent to the model.")
        self.fixed, self.window, self.target = fixed, window, target


def check_window(main: MainContext | FixedPart, ctx: Context) -> FixedPart:
    """The fixed part of ``main`` (the main context a turn starts with, measured as it will be sent, or
    its fixed part alone), or ``WindowTooSmall`` when it reaches ``ctx.compaction_target`` x ``ctx.context_window``."""
    fixed = main if isinstance(main, FixedPart) else FixedPart.of(main)
    if fixed.total >= ctx.compaction_target * ctx.context_window:
        raise WindowTooSmall(fixed, ctx.context_window, ctx.compaction_target)
    return fixed
