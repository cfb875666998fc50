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
- ``page_fault``, ``memory_pressure`` and ``compaction`` events on the custom stream;
- a turn cut short is not lost (``window.cut_short.fold_cut_short``, the agent's first step): the input of a
  run killed before it got past its input checkpoint is put in the thread before the new input, and a tool
  call whose tool never ran gets its saved result, or an error saying it did not run.

Eviction and the new summary are returned with the model's answer as one state update, so a
checkpoint never holds one without the other.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Annotated, Any, Awaitable, Callable, NotRequired, Unpack, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command

from pagefault.engines.thread_lock import warn_unserialized
from pagefault.graph.context import Context, ContextSettings, context_keywords, context_of
from pagefault.graph.state import PagefaultState
from pagefault.integrations.langchain_tools import MemoryBinding, bound_tools, embedded_store
from pagefault.integrations.owner_checked import OwnerCheckedAgent, owner_checked, refused_input
from pagefault.models.chat import load_summary_model, token_model_name
from pagefault.models.tokens import token_counter
from pagefault.serve.settings import ServerSettings
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.text.ids import check_run_ids
from pagefault.text.messages import message_text
from pagefault.text.prompts import Prompts
from pagefault.tools.handlers import MemoryToolChoice
from pagefault.window.compaction import Compaction, acompact_window, compact_window
from pagefault.window.cut_short import fold_cut_short, folded
from pagefault.window.fixed_part import check_window
from pagefault.window.main_context import MainContext
from pagefault.window.recall_sync import sync_recall
from pagefault.window.run import MemoryRun
from pagefault.window.thread_owner import claim_thread, owner_of

_OUTPUT_ONLY = OmitFromSchema(input=True, output=False)


class MemoryAgentState(AgentState):
    """The agent's state plus the bookkeeping paging needs (the graph's fields, by the same names)."""

    summary: NotRequired[Annotated[str, _OUTPUT_ONLY]]
    evicted_count: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    evicted_user_messages: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    recall_indexed: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    owner: NotRequired[Annotated[dict[str, str], _OUTPUT_ONLY]]
    pressure_warned: NotRequired[Annotated[bool, _OUTPUT_ONLY]]
    compactions: NotRequired[Annotated[int, _OUTPUT_ONLY]]
    tokens: NotRequired[Annotated[dict[str, Any], _OUTPUT_ONLY]]
    received: NotRequired[Annotated[str, PrivateStateAttr]]
    """The checkpoint the last run's first step started from: the inputs saved before it are in the thread."""


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


@dataclass
class _Turn:
    """One model call's preparation, between its steps (the async path runs them apart)."""

    run: MemoryRun
    config: RunnableConfig
    view: PagefaultState
    schemas: list[dict[str, Any]]
    app_prompt: str
    messages: list[Any]
    update: dict[str, Any]
    over_budget: bool = False

    def measure(self, state: PagefaultState) -> MainContext:
        """The main context as this app sends it: its tools and its own system prompt included."""
        return self.run.main_context(state, self.schemas, app_prompt=self.app_prompt)

    def absorb(self, done: Compaction) -> None:
        """A compaction's eviction, applied to the state update and to the request the model is sent."""
        self.update.update(done.update())
        if done.changed:
            gone = {m.id for m in done.evicted}
            swapped = {m.id: m for m in done.replaced}
            self.messages = [swapped.get(m.id, m) for m in self.messages if m.id not in gone]
        self.view = done.view


class PagefaultMiddleware(AgentMiddleware[MemoryAgentState, Any]):
    """MemGPT-style memory for ``create_agent``: memory tools, core memory and summary in the prompt,
    and compaction with eviction to recall.

    ``context``, or the ``Context`` fields as keywords (``user_id`` ... ``database_url``, each None for
    ``Context``'s default; see ``ContextSettings``), are the app's settings, not both:
    ``PagefaultMiddleware(user_id="ana", model="openai:gpt-4o-mini")``. A run's context may set only
    who the run is for and a few preferences (``pagefault.serve.CLIENT_FIELDS``); one that sets
    anything else (a URL, an engine, the budget) is refused. ``store`` pins core memory to a store
    instead of the agent's (with neither, the embedded ``store.sqlite`` under ``data_dir``).
    ``tools`` chooses the memory tools it gives the agent: a list of their names, or a mapping of
    names to the descriptions the model is sent (all six when None; a ValueError names an unknown
    one); the system prompt tells the model about the memory tools its request carries, no others.
    ``prompts``: pagefault's prompts (``Prompts``: its instructions, the summarizer's).

    A turn whose window is too small for the agent's fixed part (the app's and pagefault's system
    prompt, core blocks, procedures, every tool's schema: not below ``compaction_target`` x
    ``context_window``) is refused at its first model call with ``WindowTooSmall``, which names the
    numbers: nothing is sent to the model, and the input stays in the thread (a later run with a
    window that fits answers it with its own).

    A thread belongs to the user and agent of its first run. The middleware refuses another's run at its
    first step, after LangGraph has saved its input in the thread; ``owner_checked(agent)`` refuses it
    before anything is saved.

    Its public attributes: ``context`` (the app's settings), ``app`` (them as ``ServerSettings``),
    ``store``, ``tools`` (the memory tools it gives the agent) and ``prompts``.
    """

    state_schema = MemoryAgentState

    @context_keywords
    def __init__(self, context: Context | None = None, *, store: BaseStore | None = None,
                 tools: MemoryToolChoice = None, prompts: Prompts | None = None,
                 **settings: Unpack[ContextSettings]) -> None:
        super().__init__()
        self.context = context_of(context, settings)
        self.app = ServerSettings.of_app(self.context)
        self.store = store
        # The tools' archival inserts are judged by the agent's own model, learnt at its first model call.
        self._binding = MemoryBinding(self.context, store)
        self.tools = bound_tools(self._binding, tools)
        self.prompts = Prompts() if prompts is None else prompts
        if not isinstance(self.prompts, Prompts):
            raise ValueError(f"prompts must be a pagefault Prompts, got {prompts!r}")

    def owner_checked(self, agent: CompiledStateGraph[Any, Any, Any, Any]) -> OwnerCheckedAgent:
        """``agent`` (the app compiled with this middleware) with its runs on another user's thread refused
        before anything of them is saved (``integrations.owner_checked``); a serialized agent stays so."""
        return owner_checked(agent, self.app)

    # -- the run's first step ----------------------------------------------------------------

    def before_agent(self, state: MemoryAgentState, runtime: Any) -> dict[str, Any] | None:
        """LangChain's first-step hook: put right what runs cut short on this thread left undone
        (``window.cut_short.fold_cut_short``), on a thread this run's user and agent own."""
        config = _config()
        check_run_ids(config, getattr(runtime, "context", None))  # a wrapped app refused it before its input was saved
        ctx = self.app.for_app_run(getattr(runtime, "context", None), config)
        owner = state.get("owner")
        if owner and owner != owner_of(Scope(ctx.user_id, ctx.agent_id)):
            # The model call refuses the run; its input leaves the owner's window (integrations.owner_checked).
            return {"messages": refused_input(list(state.get("messages", [])), config)}
        fold = fold_cut_short(list(state.get("messages", [])), config, state.get("received", ""))
        update: dict[str, Any] = {"received": fold.received}
        if fold.messages is not None:
            update["messages"] = folded(fold)
        return update

    async def abefore_agent(self, state: MemoryAgentState, runtime: Any) -> dict[str, Any] | None:
        """``before_agent`` for async runs, its checkpoint reads in a worker thread (which sees the run's config)."""
        return await asyncio.to_thread(self.before_agent, state, runtime)

    # -- the model call ----------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ExtendedModelResponse:
        """LangChain's model-call hook: send ``handler`` (the next middleware, or the model) the
        request as ``prepare`` rewrites it, and return the answer with pagefault's state update
        (eviction, summary, counters) as one ``Command``."""
        prepared = self.prepare(request)
        response = handler(prepared.request)
        prepared.answered(response)
        return ExtendedModelResponse(model_response=response, command=Command(update=prepared.update))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ExtendedModelResponse:
        """``wrap_model_call`` for async runs (``ainvoke``, ``astream``): ``handler`` is awaited, and the
        request is rewritten by ``aprepare``."""
        # Stores and indexes are synchronous: they run in a worker thread; the summary's model call is awaited.
        prepared = await self.aprepare(request)
        response = await handler(prepared.request)
        prepared.answered(response)
        return ExtendedModelResponse(model_response=response, command=Command(update=prepared.update))

    def prepare(self, request: ModelRequest) -> Prepared:
        """Index, compact if over budget, warn once under pressure, and render the system prompt of
        ``request`` (one model call of the agent): the rewritten request and the state update that goes
        with its answer."""
        self._binding.model = request.model
        turn = self._begin(request)
        if turn.over_budget:
            summarizer = load_summary_model(turn.run.ctx.summary_model, turn.run.ctx.base_url, request.model)
            turn.absorb(compact_window(turn.view, turn.run, turn.config, summarizer, turn.measure))
        return self._end(turn, request)

    async def aprepare(self, request: ModelRequest) -> Prepared:
        """``prepare`` for async runs: the stores' work in a worker thread, a summary's model call awaited."""
        self._binding.model = request.model
        turn = await asyncio.to_thread(self._begin, request)
        if turn.over_budget:
            summarizer = load_summary_model(turn.run.ctx.summary_model, turn.run.ctx.base_url, request.model)
            turn.absorb(await acompact_window(turn.view, turn.run, turn.config, summarizer, turn.measure))
        return await asyncio.to_thread(self._end, turn, request)

    def _begin(self, request: ModelRequest) -> "_Turn":
        runtime = request.runtime
        config = _config()
        warn_unserialized(config)  # a create_agent app's runs take turns only when it is wrapped
        # The app owns every setting but who the run is for (and a few preferences): a run's context
        # that sets a server-owned field is refused (pagefault.serve.settings).
        ctx = self.app.for_app_run(getattr(runtime, "context", None), config)
        store = self.store or getattr(runtime, "store", None) or embedded_store(ctx.data_dir)
        run = MemoryRun.open(ctx, store, config, token_counter(token_model_name(request.model, ctx.model)),
                             prompts=self.prompts, memory_tools=frozenset(t.name for t in self.tools))
        st = cast(MemoryAgentState, request.state)  # the agent's state has this middleware's state_schema
        claim = claim_thread(st.get("owner"), run.scope, run.thread_id)  # before anything is read or indexed
        view = PagefaultState(
            messages=list(st.get("messages", [])), summary=st.get("summary", ""),
            evicted_count=st.get("evicted_count", 0), recall_indexed=st.get("recall_indexed", 0),
            pressure_warned=st.get("pressure_warned", False), compactions=st.get("compactions", 0),
            evicted_user_messages=st.get("evicted_user_messages", -1),
        )
        view = replace(view, recall_indexed=sync_recall(view, config, run.services.recall, run.scope))
        turn = _Turn(run, config, view, [tool_schema(t) for t in request.tools],
                     message_text(request.system_message) if request.system_message is not None else "",
                     list(request.messages), {"recall_indexed": view.recall_indexed, **claim})
        main = turn.measure(view)
        if turn.messages and isinstance(turn.messages[-1], HumanMessage):  # a turn starts: no model call yet
            check_window(main, ctx)
        turn.over_budget = run.over_budget(main)
        return turn

    def _end(self, turn: "_Turn", request: ModelRequest) -> Prepared:
        view = turn.view
        main = turn.run.sending(turn.run.prompt(view, turn.schemas, app_prompt=turn.app_prompt))
        warned = main.warned
        turn.update.update(summary=view.summary, evicted_count=view.evicted_count, compactions=view.compactions,
                           evicted_user_messages=view.evicted_user_messages if view.evicted_count else 0,
                           pressure_warned=view.pressure_warned or warned, tokens=main.tokens)
        return Prepared(request.override(system_message=SystemMessage(content=main.system_prompt),
                                         messages=turn.messages), turn.update, turn.run.services)
