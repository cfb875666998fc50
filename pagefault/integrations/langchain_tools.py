"""pagefault's memory tools as plain LangChain tools, for any agent, chain or ``ToolNode``.

The tools are the ones the graph binds (all six, or those ``tools=`` chooses, as
``choose_memory_tools`` reads it), with the same schemas, run by the same handlers (``run_memory_tool``). Whose
memory a call touches comes from the run, never from the model's arguments: LangGraph auth's user
where there is one, else the runtime context (a pagefault ``Context``, or any context object or
mapping with ``user_id``/``agent_id``), else the config's ``configurable``, else the settings given
to ``memory_tools``. Every other setting is the app's (``ServerSettings.for_app_run``). Core memory lives in the
store given here, else the agent's store, else the embedded ``store.sqlite`` under ``data_dir``
(the file ``open_embedded`` uses), so the graph, the middleware and these tools share one memory.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool, ToolException
from langgraph.prebuilt import ToolRuntime
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

from pagefault.consolidation.supersede import supersede_judge
from pagefault.engines.file_locks import file_locks
from pagefault.engines.locks import bind_locks
from pagefault.graph.context import Context, ContextSettings, context_keywords, context_of
from pagefault.models.tokens import token_counter
from pagefault.serve.settings import ServerSettings
from pagefault.tools.approval import Request, Reviewed
from pagefault.tools.handlers import MemoryTool, MemoryToolChoice, MemoryToolSchema, ToolError, choose_memory_tools
from pagefault.window.events import emit_page_fault
from pagefault.window.run import MemoryRun
from pagefault.window.thread_owner import claim_thread

_stores: dict[str, SqliteStore] = {}
_stores_lock = threading.Lock()


def embedded_store(data_dir: str) -> SqliteStore:
    """The SQLite store under ``data_dir`` (opened once per process): core memory when no store is given."""
    path = os.path.abspath(os.path.expanduser(data_dir))
    with _stores_lock:
        if path not in _stores:
            os.makedirs(path, exist_ok=True)
            locks = file_locks(path)  # the directory's: its setup and its core edits take turns across processes
            with locks.hold("setup", timeout=120.0):
                conn = sqlite3.connect(os.path.join(path, "store.sqlite"), check_same_thread=False,
                                       isolation_level=None, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                store = SqliteStore(conn)
                store.setup()
            bind_locks(store, locks)
            _stores[path] = store
        return _stores[path]


def _field(state: Any, name: str, default: Any) -> Any:
    if isinstance(state, Mapping):
        return state.get(name, default)
    return getattr(state, name, default)


@dataclass
class MemoryBinding:
    """The fallbacks a set of tools was made with: settings, (optionally) a store, and the chat model
    whose judge decides which stored facts an archival insert replaces (``model``: None, the judge of
    ``Context.model``; ``PagefaultMiddleware`` sets it to its agent's model)."""

    context: Context
    store: BaseStore | None = None
    model: BaseChatModel | None = None
    app: ServerSettings = field(init=False)

    def __post_init__(self) -> None:
        self.app = ServerSettings.of_app(self.context)

    def settings(self, runtime: ToolRuntime | None) -> Context:
        if runtime is None:
            return self.context
        return self.app.for_app_run(runtime.context, runtime.config)

    def reviewed(self, runtime: ToolRuntime | None, tool: str, args: dict[str, Any]) -> tuple[Reviewed, Request]:
        """One tool call, fixed by the run and reviewed as the graph's memory node reviews its calls."""
        ctx = self.settings(runtime)
        store = self.store or (runtime.store if runtime is not None else None) or embedded_store(ctx.data_dir)
        config = runtime.config if runtime is not None else {}
        run = MemoryRun.open(ctx, store, config, token_counter(ctx.model))
        if self.model is not None:
            run.supersede = supersede_judge(self.model)
        messages = list(_field(runtime.state, "messages", []) or []) if runtime is not None else []
        if runtime is not None:  # under PagefaultMiddleware the thread has an owner; nobody else's call runs
            claim_thread(_field(runtime.state, "owner", None), run.scope, run.thread_id)
        # Under PagefaultMiddleware the state says where the window starts, as in the graph; an app
        # that trims its own messages keeps no such count, and its searches cover everything.
        evicted = _field(runtime.state, "evicted_count", None) if runtime is not None else None
        users = _field(runtime.state, "evicted_user_messages", None) if runtime is not None else None
        call = run.memory_call(messages, int(evicted) if evicted is not None else None,
                               int(users) if users is not None else -1)
        request = Request((runtime.tool_call_id if runtime is not None else None) or tool, tool, args)
        return Reviewed(call, [request], can_ask=runtime is not None), request


def _error_text(error: ToolException) -> str:
    return f"Error: {error}"


def _make_tool(spec: MemoryTool, binding: MemoryBinding) -> BaseTool:
    # langchain-core injects the runtime only into a parameter annotated exactly ``ToolRuntime`` (not
    # ``ToolRuntime | None``), and a direct call gets None: that None default cannot be typed.
    def run(runtime: ToolRuntime = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:  # type: ignore[assignment]
        try:
            reviewed, request = binding.reviewed(runtime, spec.name, kwargs)
            result = reviewed.run(request)
        except ToolError as e:
            emit_page_fault(spec.name, "error", [])
            raise ToolException(str(e)) from e
        emit_page_fault(spec.name, "success", result.artifact.get("citations", []))
        return result.content, result.artifact

    async def arun(runtime: ToolRuntime = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:  # type: ignore[assignment]
        # The stores are synchronous (SQLite, Chroma): the call runs in a worker thread, off the event
        # loop, with the run's context (an approval's interrupt() reaches the run from there too).
        return await asyncio.to_thread(run, runtime, **kwargs)

    return MemoryToolSchema.from_function(
        func=run, coroutine=arun, name=spec.name, description=spec.description,
        args_schema=spec.schema, response_format="content_and_artifact", handle_tool_error=_error_text,
    )


@context_keywords
def memory_tools(context: Context | None = None, *, store: BaseStore | None = None, tools: MemoryToolChoice = None,
                 **settings: Unpack[ContextSettings]) -> list[BaseTool]:
    """The memory tools as LangChain tools: all six, or those ``tools`` chooses.

    ``context``, or the ``Context`` fields as keywords (``user_id`` ... ``database_url``, each None for
    ``Context``'s default; see ``ContextSettings``), are the app's settings, not both; a run may set
    only the client fields (``pagefault.serve.CLIENT_FIELDS``).
    ``store`` pins core memory to a store instead of the agent's (or the embedded one).
    ``tools``: a list of memory tool names (those tools), or a mapping of names to the descriptions the
    model is sent (those tools, reworded); None for all six. A ValueError names an unknown tool and lists
    the memory tools.
    """
    return bound_tools(MemoryBinding(context_of(context, settings), store), tools)


def bound_tools(binding: MemoryBinding, tools: MemoryToolChoice = None) -> list[BaseTool]:
    """The memory tools ``tools`` chooses (see ``memory_tools``), carried out with ``binding``."""
    return [_make_tool(spec, binding) for spec in choose_memory_tools(tools)]
