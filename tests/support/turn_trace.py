"""What one memory turn touches: the package files it enters, and how often it builds a run's parts.

``trace_memory_turn`` runs one turn of the pagefault graph on an embedded directory (a search, then an
answer, from a scripted model: the LLM is the only part faked) with ``sys.setprofile`` on the caller's
thread, after a warm-up turn on the same thread, so imports and first opens are not counted. It records
every ``pagefault/`` file a Python call enters, the file-to-file hops, the ``MemoryRun`` builds (``MemoryRun.open``) of each
step and the ``build_main_context`` calls of each step (a step is one graph node; an edge's calls count
with the node before it)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

import pagefault

PACKAGE = os.path.dirname(os.path.abspath(pagefault.__file__))
NODES = {"reason", "memory", "dispatch", "compact"}


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers from a script."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self


@dataclass
class TurnTrace:
    """What the traced turn touched (see the module docstring)."""

    files: set[str] = field(default_factory=set)
    hops: set[tuple[str, str]] = field(default_factory=set)
    steps: list[str] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)
    main_contexts: Counter[str] = field(default_factory=Counter)
    model_calls: int = 0


def _script() -> ScriptedModel:
    return ScriptedModel(messages=iter([
        AIMessage("Hello."),  # the warm-up turn
        AIMessage("", tool_calls=[{"name": "conversation_search", "id": "s1", "args": {"query": "Lisbon"}}]),
        AIMessage("You live in Lisbon."),
    ]))


def trace_memory_turn(data_dir: str) -> TurnTrace:
    """Trace one memory turn (see the module docstring) on a fresh embedded directory ``data_dir``."""
    from pagefault import Context, open_embedded

    trace = TurnTrace()
    model = _script()
    ctx = Context(user_id="ana", data_dir=data_dir)
    config = {"configurable": {"thread_id": "traced"}}
    with open_embedded(data_dir) as p:
        graph = p.graph(model=model)
        graph.invoke({"messages": [{"role": "user", "content": "I live in Lisbon."}]}, config, context=ctx)
        step = ["(before)"]
        last: list[str | None] = [None]

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event != "call":
                return
            path = os.path.abspath(frame.f_code.co_filename)
            if not path.startswith(PACKAGE + os.sep):
                return
            rel = os.path.relpath(path, PACKAGE)
            trace.files.add(rel)
            if last[0] is not None and last[0] != rel:
                trace.hops.add((last[0], rel))
            last[0] = rel
            name = frame.f_code.co_name
            if name in NODES and "make_" in (frame.f_code.co_qualname or ""):
                step[0] = name
                trace.steps.append(name)
            elif frame.f_code.co_qualname == "MemoryRun.open":
                trace.runs[step[0]] += 1
            elif name == "build_main_context":
                trace.main_contexts[step[0]] += 1

        sys.setprofile(profile)
        try:
            graph.invoke({"messages": [{"role": "user", "content": "Where do I live?"}]}, config, context=ctx)
        finally:
            sys.setprofile(None)
    trace.model_calls = trace.steps.count("reason")
    return trace


if __name__ == "__main__":  # print today's figures: python -m support.turn_trace (from tests/)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t = trace_memory_turn(os.path.join(d, "pf"))
    print(f"files entered: {len(t.files)}, file-to-file hops: {len(t.hops)}")
    print(f"steps: {t.steps}")
    print(f"MemoryRun builds by step: {dict(t.runs)} (total {sum(t.runs.values())})")
    print(f"build_main_context by step: {dict(t.main_contexts)} (total {sum(t.main_contexts.values())}), "
          f"model calls {t.model_calls}")
    for f in sorted(t.files):
        print("  ", f)
