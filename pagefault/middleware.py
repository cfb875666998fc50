"""pagefault as LangChain v1 agent middleware: one line gives a ``create_agent`` app virtual memory.

```python
agent = create_agent(model, tools, middleware=[PagefaultMiddleware()], checkpointer=..., store=...)
```

What the middleware adds, the same way the graph does it and with the same stores and settings:

- the memory tools (``memory_tools``), scoped by the run, never by the model;
- around every model call: the app's own system prompt, then pagefault's instructions, core
  memory, the learned procedures and the running summary (the graph's ``build_main_context``);
- budget-driven compaction (the graph's ``plan_compaction`` and ``summarize``): past the trigger,
  the oldest messages are summarized and evicted, after being indexed into recall, so
  ``conversation_search`` still finds them; a one-shot memory-pressure warning before that;
- ``page_fault``, ``memory_pressure`` and ``compaction`` events on the custom stream.

Eviction and the new summary are returned with the model's answer as one state update, so a
checkpoint never holds one without the other.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any, Awaitable, Callable, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
)
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config, get_stream_writer
from langgraph.store.base import BaseStore
from langgraph.types import Command

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.models import token_model_name
from pagefault.nodes.compact import plan_compaction, summarize
from pagefault.nodes.main_context import MainContext, build_main_context
from pagefault.nodes.recall_sync import sync_recall
from pagefault.nodes.wiring import scope_of, services, thread_id
from pagefault.stores.core import CoreMemory
from pagefault.stores.procedures import ProceduralMemory
from pagefault.stores.services import MemoryServices
from pagefault.tokens import TokenCounter, message_text, token_counter
from pagefault.nodes.thread_owner import claim_thread
from pagefault.serve.settings import ServerSettings
from pagefault.toolkit import embedded_store, memory_tools

_OUTPUT_ONLY = OmitFromSchema(input=True, output=False)


class MemoryAgentState(AgentState):
    """The agent's state plus the bookkeeping paging needs (the graph's fields, by the same names)."""

    summary: NotRequired[Annotated[str, _OUTPUT_ONLY]]
    evicted_count: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    recall_indexed: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    owner: NotRequired[Annotated[dict[str, str], _OUTPUT_ONLY]]
    pressure_warned: NotRequired[Annotated[bool, _OUTPUT_ONLY]]
    compactions: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    tokens: NotRequired[Annotated[dict[str, Any], _OUTPUT_ONLY]]


@dataclass
class Prepared:
    """A model request rewritten by pagefault, and the state update that goes with its answer."""

    request: ModelRequest
    update: dict[str, Any]
    services: MemoryServices

    def answered(self, response: ModelResponse) -> None:
        """An answer (no tool call left to run) ends the turn: the memory writers write now
        (``MemoryServices.turn_over``), in the pause before the next turn."""
        calls = any(isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls) for m in response.result)
        if not calls or getattr(response, "structured_response", None) is not None:
            self.services.turn_over()


def tool_schema(tool: Any) -> dict[str, Any]:
    """A tool as the provider sees it (provider-native dict tools pass through as they are)."""
    try:
        return convert_to_openai_tool(tool)
    except Exception:
        return tool if isinstance(tool, dict) else {"name": getattr(tool, "name", str(tool))}


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph run (e.g. a unit test of the middleware)
        return {}


def _emit(event: dict[str, Any]) -> None:
    try:
        get_stream_writer()(event)
    except RuntimeError:
        pass


class PagefaultMiddleware(AgentMiddleware[MemoryAgentState, Any]):
    """MemGPT-style memory for ``create_agent``: memory tools, core memory and summary in the prompt,
    and compaction with eviction to recall.

    ``context`` (or ``Context`` fields as keywords) are the settings when the run's context is not a
    pagefault ``Context``; ``store`` pins core memory to a store instead of the agent's (with
    neither, the embedded ``store.sqlite`` under ``data_dir``).
    """

    state_schema = MemoryAgentState

    def __init__(self, context: Context | None = None, *, store: BaseStore | None = None, **settings: Any) -> None:
        super().__init__()
        if context is not None and settings:
            raise TypeError("give either a Context or Context fields as keywords, not both")
        self.context = context if context is not None else Context(**settings)
        self.app = ServerSettings.of_app(self.context)
        self.store = store
        self.tools = memory_tools(self.context, store=store)

    # -- the model call ----------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ExtendedModelResponse:
        prepared = self.prepare(request)
        response = handler(prepared.request)
        prepared.answered(response)
        return ExtendedModelResponse(model_response=response, command=Command(update=prepared.update))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ExtendedModelResponse:
        # Stores, indexes and the summarizer are synchronous: keep them off the event loop.
        prepared = await asyncio.to_thread(self.prepare, request)
        response = await handler(prepared.request)
        prepared.answered(response)
        return ExtendedModelResponse(model_response=response, command=Command(update=prepared.update))

    def prepare(self, request: ModelRequest) -> Prepared:
        """Index, compact if over budget, warn once under pressure, and render the system prompt."""
        runtime = request.runtime
        config = _config()
        # The app owns every setting but who the run is for (and a few preferences): a run's context
        # that sets a server-owned field is refused (pagefault.serve.settings).
        ctx = self.app.for_app_run(getattr(runtime, "context", None), config)
        scope = scope_of(ctx)
        st = request.state
        claim = claim_thread(st.get("owner"), scope, thread_id(config))  # before anything is read or indexed
        svc = services(ctx)
        store = self.store or getattr(runtime, "store", None) or embedded_store(ctx.data_dir)
        core = CoreMemory(store, scope, persona=ctx.persona, block_limit=ctx.core_block_limit,
                          redact_secrets=ctx.redact_secrets)
        counter = token_counter(token_model_name(request.model, ctx.model))
        schemas = [tool_schema(t) for t in request.tools]
        app_prompt = message_text(request.system_message) if request.system_message is not None else ""

        view = PagefaultState(
            messages=list(st.get("messages", [])), summary=st.get("summary", ""),
            evicted_count=st.get("evicted_count", 0), recall_indexed=st.get("recall_indexed", 0),
            pressure_warned=st.get("pressure_warned", False), compactions=st.get("compactions", 0),
        )
        update: dict[str, Any] = {"recall_indexed": sync_recall(view, config, svc.recall, scope), **claim}

        procedures = ProceduralMemory(store, scope).list()

        def measure(state: PagefaultState, warn: bool = False) -> MainContext:
            main = build_main_context(state, ctx, counter, core.blocks(), svc.archival.count(scope), schemas, warn=warn,
                                      procedures=procedures)
            return _with_app_prompt(main, app_prompt, counter)

        main = measure(view)
        messages = list(request.messages)
        if main.total > ctx.compaction_trigger * ctx.context_window:
            view, messages, main = self._compact(view, messages, main, ctx, counter, request, config, measure, update)
        warn = not view.pressure_warned and main.total >= ctx.warning_fraction * ctx.context_window
        if warn:
            main = measure(view, warn=True)
            _emit({"event": "memory_pressure", "tokens": main.total, "window": ctx.context_window})
        update.update(summary=view.summary, evicted_count=view.evicted_count, compactions=view.compactions,
                      pressure_warned=view.pressure_warned or warn, tokens=main.tokens)
        return Prepared(request.override(system_message=SystemMessage(content=main.system_prompt), messages=messages),
                        update, svc)

    def _compact(self, view: PagefaultState, messages: list[BaseMessage], before: MainContext, ctx: Context,
                 counter: TokenCounter, request: ModelRequest, config: RunnableConfig,
                 measure: Callable[[PagefaultState], MainContext], update: dict[str, Any]):
        """The graph's compaction, applied to the agent's messages; returns the new view, request
        messages and main context, and adds the eviction to ``update``."""
        window = list(view.messages)
        costs = [counter.count_message(m) for m in window]
        thread = thread_id(config)
        plan = plan_compaction(window, costs, before.total, ctx, counter,
                               lambda i: f"thread {thread} turn {view.evicted_count + i}")
        evicted = window[:plan.evict]
        replaced = list(plan.cut.values())
        # Evicted (and truncated) turns must be findable before they leave the window.
        update["recall_indexed"] = sync_recall(view, config, services(ctx).recall, scope_of(ctx),
                                               evicting_below=view.evicted_count + plan.reach)
        if not evicted and not replaced:
            return view, messages, before
        summary = summarize(request.model, ctx, view.summary, evicted, counter, config) if evicted else view.summary
        kept = [plan.cut.get(i, m) for i, m in enumerate(window[plan.evict:])]
        view = PagefaultState(messages=kept, summary=summary, evicted_count=view.evicted_count + len(evicted),
                              recall_indexed=view.recall_indexed, pressure_warned=False,
                              compactions=view.compactions + 1)
        gone = {m.id for m in evicted}
        swapped = {m.id: m for m in replaced}
        messages = [swapped.get(m.id, m) for m in messages if m.id not in gone]
        after = measure(view)
        _emit({"event": "compaction", "evicted": len(evicted), "truncated": len(replaced),
               "tokens_before": before.total, "tokens_after": after.total, "window": ctx.context_window})
        update["messages"] = [RemoveMessage(id=m.id) for m in evicted] + replaced
        return view, messages, after


def _with_app_prompt(main: MainContext, app_prompt: str, counter: TokenCounter) -> MainContext:
    """The app's own system prompt first, then pagefault's; its tokens count as ``system``."""
    if not app_prompt.strip():
        return main
    extra = counter.count_text(app_prompt + "\n\n")
    tokens = dict(main.tokens, system=main.tokens["system"] + extra, total=main.tokens["total"] + extra)
    return MainContext(app_prompt + "\n\n" + main.system_prompt, tokens)
