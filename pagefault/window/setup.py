"""How a graph was set up: its model, the user's tools and, when served, the server's settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime

from pagefault.graph.context import Context
from pagefault.models.chat import load_chat_model, load_summary_model, token_model_name
from pagefault.models.tokens import TokenCounter, token_counter
from pagefault.serve.settings import ServerSettings, check_client_settings, identity_of
from pagefault.text.prompts import Prompts
from pagefault.tools.handlers import MEMORY_TOOLS, MemoryCall, MemoryToolChoice, ToolError, choose_memory_tools
from pagefault.window.fixed_part import check_window
from pagefault.window.run import MemoryRun, state_field
from pagefault.window.thread_owner import claim_thread
from pagefault.window.toolset import memory_tool_set


@dataclass
class AgentSetup:
    """How a graph was built, fixed for all its runs: an explicit model (else the context's), the
    user's own tools, the memory tools its model gets (``memory_tools``, a ``MemoryToolChoice``: all six
    when None), its ``prompts``, and for a served graph the server's settings (``served``), which decide
    what a client's context may set. The memory tools themselves (``memory_toolset``) are made once, here:
    the reason node binds them and the memory node runs them, the same objects."""

    model: BaseChatModel | None = None
    tools: Sequence[BaseTool] = ()
    served: ServerSettings | None = None
    memory_tools: MemoryToolChoice = None
    prompts: Prompts = field(default_factory=Prompts)
    _memory: list[BaseTool] = field(default_factory=list, init=False)
    _schemas: list[dict[str, Any]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        clash = set(names) & set(MEMORY_TOOLS)
        if clash:
            raise ValueError(f"tool names {sorted(clash)} are reserved for pagefault's memory tools")
        if len(set(names)) != len(names):
            raise ValueError("tool names must be unique")
        if not isinstance(self.prompts, Prompts):
            raise ValueError(f"prompts must be a pagefault Prompts, got {self.prompts!r}")
        self._memory = memory_tool_set(choose_memory_tools(self.memory_tools), self._tool_call)
        self._schemas = [convert_to_openai_tool(t) for t in self.all_tools]

    @property
    def user_tool_names(self) -> set[str]:
        return {t.name for t in self.tools}

    @property
    def memory_tool_names(self) -> frozenset[str]:
        """The memory tools this graph's model has (a call to another one is refused)."""
        return frozenset(t.name for t in self._memory)

    @property
    def memory_toolset(self) -> list[BaseTool]:
        """This graph's memory tools (``window.toolset``): bound to its model, and run in its memory node."""
        return list(self._memory)

    @property
    def all_tools(self) -> list[BaseTool]:
        return [*self._memory, *self.tools]

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    def chat_model(self, ctx: Context) -> BaseChatModel:
        return self.model or load_chat_model(ctx.model, ctx.base_url)

    def summary_model(self, ctx: Context) -> BaseChatModel:
        """The model that writes compaction summaries: ``ctx.summary_model`` when set, else the chat model."""
        return load_summary_model(ctx.summary_model, ctx.base_url, self.chat_model(ctx))

    def counter(self, ctx: Context) -> TokenCounter:
        return token_counter(token_model_name(self.model, ctx.model))

    def open_run(self, ctx: Context, store: Any, config: RunnableConfig) -> MemoryRun:
        """What one step of a run of this graph touches (``MemoryRun``), counted in its model's tokens, with
        this graph's prompts and memory tools; its archival inserts are judged by this graph's explicit
        model, if it has one (else the context's)."""
        return MemoryRun.open(ctx, store, config, self.counter(ctx), prompts=self.prompts,
                              memory_tools=self.memory_tool_names, judge=self.model)

    def check_window(self, context: Any, config: RunnableConfig, store: Any) -> None:
        """``WindowTooSmall`` for a run (started with ``context`` and ``config``) whose window cannot hold this
        graph's fixed part, before the run starts: the compiled graph asks this of a run with new input
        before LangGraph saves the input, so a refused input never enters the thread. Nothing is checked
        without a store (the run itself says it needs one)."""
        if store is None:
            return
        ctx = self.run_context(context, config)
        check_window(self.open_run(ctx, store, config).fixed_part(self.tool_schemas), ctx)

    def memory_call(self, context: Any, store: Any, state: Any, config: RunnableConfig) -> MemoryCall:
        """What the memory calls of the last AI message in ``state`` may touch, in a run of this graph: the
        run opened (``context``, the one it was started with; its ``store`` and ``config``), the thread's
        owner checked (``ThreadOwnedError`` before anything is read), and the window's place in the
        thread read from ``state`` (the graph's ``PagefaultState``, or another agent's state mapping)."""
        run = self.open_run(self.run_context(context, config), store, config)
        claim_thread(state_field(state, "owner", None), run.scope, run.thread_id)
        return run.state_call(state)

    def _tool_call(self, runtime: ToolRuntime | None) -> MemoryCall:
        """How this graph's memory tools open a call (``window.toolset.OpenCall``): from the run they run in."""
        if runtime is None:
            raise ToolError("this graph's memory tools run inside a run (its store, context and state); "
                            "for direct calls use pagefault.memory_tools()")
        return self.memory_call(runtime.context, runtime.store, runtime.state, runtime.config)

    def context(self, runtime: Runtime[Any]) -> Context:
        """The run's settings, from inside the run (a node): ``run_context`` of its runtime's context."""
        return self.run_context(runtime.context, _run_config())

    def run_context(self, ctx: Any, config: RunnableConfig) -> Context:
        """The settings of a run given ``ctx`` (the context it was started with) and its ``config``. In
        process, the run's ``Context`` as given. Served, the server's settings with the client's fields,
        checked, and the user from LangGraph auth in ``config`` (``ServerSettings.for_run``)."""
        if self.served is None:
            if ctx is None:
                return Context()
            if isinstance(ctx, dict):  # some callers hand the raw mapping through
                return Context(**ctx)
            return ctx
        client = dataclasses.asdict(ctx) if dataclasses.is_dataclass(ctx) and not isinstance(ctx, type) else ctx
        return self.served.for_run(check_client_settings(client), identity_of(config))


def _run_config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # outside a run (a node called directly in a unit test): nobody is authenticated
        return {}
