"""pagefault's memory tools as plain LangChain tools, for any agent, chain or ``ToolNode``.

The tools are made as the graph's are (``window.toolset.memory_tool_set``: all six, or those ``tools=``
chooses, as ``choose_memory_tools`` reads it), with the same schemas, run by the same handlers. Whose
memory a call touches comes from the run, never from the model's arguments: LangGraph auth's user
where there is one, else the runtime context (a pagefault ``Context``, or any context object or
mapping with ``user_id``/``agent_id``), else the config's ``configurable``, else the settings given
to ``memory_tools``. Every other setting is the app's (``ServerSettings.for_app_run``). Core memory lives in the
store given here, else the agent's store, else the embedded ``store.sqlite`` under ``data_dir``
(the file ``open_embedded`` uses), so the graph, the middleware and these tools share one memory.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolRuntime
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

from pagefault.engines.file_locks import file_locks
from pagefault.engines.locks import bind_locks
from pagefault.graph.context import Context, ContextSettings, context_keywords, context_of
from pagefault.models.tokens import token_counter
from pagefault.serve.settings import ServerSettings
from pagefault.tools.handlers import MemoryCall, MemoryToolChoice, choose_memory_tools
from pagefault.window.run import MemoryRun, state_field
from pagefault.window.thread_owner import claim_thread
from pagefault.window.toolset import memory_tool_set

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

    def memory_call(self, runtime: ToolRuntime | None) -> MemoryCall:
        """What one tool call may touch, fixed by the run it runs in (``runtime``; None: called directly, with
        these settings and no thread): how these tools open a call (``window.toolset.OpenCall``)."""
        ctx = self.settings(runtime)
        store = self.store or (runtime.store if runtime is not None else None) or embedded_store(ctx.data_dir)
        config = runtime.config if runtime is not None else {}
        run = MemoryRun.open(ctx, store, config, token_counter(ctx.model), judge=self.model)
        if runtime is None:
            return run.memory_call([], None)
        # Under PagefaultMiddleware the thread has an owner, and nobody else's call runs; the state says
        # where the window starts, as in the graph (an app that trims its own messages keeps no such count).
        claim_thread(state_field(runtime.state, "owner", None), run.scope, run.thread_id)
        return run.state_call(runtime.state)


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
    """The memory tools ``tools`` chooses (see ``memory_tools``), their calls opened with ``binding``
    (``window.toolset.memory_tool_set``, the factory the graph's tools come from too)."""
    return memory_tool_set(choose_memory_tools(tools), binding.memory_call)
