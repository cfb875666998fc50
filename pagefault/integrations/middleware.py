"""pagefault as LangChain v1 agent middleware: one line gives a ``create_agent`` app virtual memory.

```python
agent = create_agent(model, tools, middleware=[PagefaultMiddleware()], checkpointer=..., store=...)
```

What the middleware adds, the same way the graph does it and with the same stores and settings:

- the memory tools (``memory_tools``), scoped by the run, never by the model;
- around every model call: the app's own system prompt, then pagefault's instructions, core
  memory, the learned procedures and the running summary (the graph's ``build_main_context``);
- budget-driven compaction (the graph's own routine, ``window.compaction.compact_window``): past the trigger,
  the oldest messages are summarized and evicted, after being indexed into recall, so
  ``conversation_search`` still finds them; a one-shot memory-pressure warning before that;
- ``page_fault``, ``memory_pressure`` and ``compaction`` events on the custom stream.

Eviction and the new summary are returned with the model's answer as one state update, so a
checkpoint never holds one without the other.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Annotated, Any, Awaitable, Callable, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
)
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.store.base import BaseStore
from langgraph.types import Command

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.integrations.langchain_tools import embedded_store, memory_tools
from pagefault.models.chat import token_model_name
from pagefault.models.tokens import token_counter
from pagefault.serve.settings import ServerSettings
from pagefault.stores.services import MemoryServices
from pagefault.text.messages import message_text
from pagefault.window.compaction import compact_window
from pagefault.window.main_context import MainContext
from pagefault.window.recall_sync import sync_recall
from pagefault.window.run import MemoryRun
from pagefault.window.thread_owner import claim_thread

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


class PagefaultMiddleware(AgentMiddleware[MemoryAgentState, Any]):
    """MemGPT-style memory for ``create_agent``: memory tools, core memory and summary in the prompt,
    and compaction with eviction to recall.

    ``context`` (or ``Context`` fields as keywords) are the app's settings. A run's context may set
    only who the run is for and a few preferences (``pagefault.serve.CLIENT_FIELDS``); one that sets
    anything else (a URL, an engine, the budget) is refused. ``store`` pins core memory to a store
    instead of the agent's (with neither, the embedded ``store.sqlite`` under ``data_dir``).
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
        store = self.store or getattr(runtime, "store", None) or embedded_store(ctx.data_dir)
        run = MemoryRun.open(ctx, store, config, token_counter(token_model_name(request.model, ctx.model)))
        st = cast(MemoryAgentState, request.state)  # the agent's state has this middleware's state_schema
        claim = claim_thread(st.get("owner"), run.scope, run.thread_id)  # before anything is read or indexed
        schemas = [tool_schema(t) for t in request.tools]
        app_prompt = message_text(request.system_message) if request.system_message is not None else ""

        view = PagefaultState(
            messages=list(st.get("messages", [])), summary=st.get("summary", ""),
            evicted_count=st.get("evicted_count", 0), recall_indexed=st.get("recall_indexed", 0),
            pressure_warned=st.get("pressure_warned", False), compactions=st.get("compactions", 0),
        )
        view = replace(view, recall_indexed=sync_recall(view, config, run.services.recall, run.scope))
        update: dict[str, Any] = {"recall_indexed": view.recall_indexed, **claim}

        def measure(state: PagefaultState) -> MainContext:
            return run.main_context(state, schemas, app_prompt=app_prompt)

        messages = list(request.messages)
        if run.over_budget(measure(view)):
            done = compact_window(view, run, config, request.model, measure)
            update.update(done.update())
            if done.changed:  # the same eviction applied to the request the model is sent
                gone = {m.id for m in done.evicted}
                swapped = {m.id: m for m in done.replaced}
                messages = [swapped.get(m.id, m) for m in messages if m.id not in gone]
            view = done.view
        main, warned = run.prompt(view, schemas, app_prompt=app_prompt)
        update.update(summary=view.summary, evicted_count=view.evicted_count, compactions=view.compactions,
                      pressure_warned=view.pressure_warned or warned, tokens=main.tokens)
        return Prepared(request.override(system_message=SystemMessage(content=main.system_prompt), messages=messages),
                        update, run.services)
