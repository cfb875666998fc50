"""pagefault's memory tools as plain LangChain tools, for any agent, chain or ``ToolNode``.

The tools are the same five the graph binds, run by the same handlers (``run_memory_tool``). Whose
memory a call touches comes from the run, never from the model's arguments: the runtime context
(a pagefault ``Context``, or any context object or mapping with ``user_id``/``agent_id``), else the
config's ``configurable``, else the settings given to ``memory_tools``. Core memory lives in the
store given here, else the agent's store, else the embedded ``store.sqlite`` under ``data_dir``
(the file ``open_embedded`` uses), so the graph, the middleware and these tools share one memory.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.prebuilt import ToolRuntime
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

from pagefault.graph.context import Context
from pagefault.nodes import approval
from pagefault.nodes.thread_owner import claim_thread
from pagefault.nodes.wiring import scope_of, services
from pagefault.serve.settings import ServerSettings
from pagefault.stores.core import CoreMemory
from pagefault.tools import MEMORY_TOOLS, MemoryCall, MemoryTool, ToolError, run_memory_tool, untrusted_core_edit
from pagefault.trust import origins_of

_stores: dict[str, SqliteStore] = {}
_stores_lock = threading.Lock()


def embedded_store(data_dir: str) -> SqliteStore:
    """The SQLite store under ``data_dir`` (opened once per process): core memory when no store is given."""
    path = os.path.abspath(os.path.expanduser(data_dir))
    with _stores_lock:
        if path not in _stores:
            os.makedirs(path, exist_ok=True)
            conn = sqlite3.connect(os.path.join(path, "store.sqlite"), check_same_thread=False,
                                   isolation_level=None, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            store = SqliteStore(conn)
            store.setup()
            _stores[path] = store
        return _stores[path]


def _field(state: Any, name: str, default: Any) -> Any:
    if isinstance(state, Mapping):
        return state.get(name, default)
    return getattr(state, name, default)


@dataclass
class MemoryBinding:
    """The fallbacks a set of tools was made with: settings and (optionally) a store."""

    context: Context
    store: BaseStore | None = None
    app: ServerSettings = field(init=False)

    def __post_init__(self) -> None:
        self.app = ServerSettings.of_app(self.context)

    def settings(self, runtime: ToolRuntime | None) -> Context:
        if runtime is None:
            return self.context
        return self.app.for_app_run(runtime.context, runtime.config)

    def call(self, runtime: ToolRuntime | None) -> MemoryCall:
        """Everything one tool call may touch, fixed by the run."""
        ctx = self.settings(runtime)
        store = self.store or (runtime.store if runtime is not None else None) or embedded_store(ctx.data_dir)
        config = runtime.config if runtime is not None else {}
        thread = (config.get("configurable") or {}).get("thread_id")
        messages = list(_field(runtime.state, "messages", []) or []) if runtime is not None else []
        evicted = _field(runtime.state, "evicted_count", None) if runtime is not None else None
        if runtime is not None:  # under PagefaultMiddleware the thread has an owner; nobody else's call runs
            claim_thread(_field(runtime.state, "owner", None), scope_of(ctx), str(thread or ""))
        offset = int(evicted or 0)
        # Provenance points at the user turn that led to the call, as in the graph's memory node.
        user_idx = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        svc = services(ctx)
        return MemoryCall(
            scope=scope_of(ctx), thread_id=str(thread) if thread is not None else "",
            turn=offset + user_idx if user_idx >= 0 else -1,
            message_id=(messages[user_idx].id or "") if user_idx >= 0 else "",
            core=CoreMemory(store, scope_of(ctx), persona=ctx.persona, block_limit=ctx.core_block_limit),
            archival=svc.archival, recall=svc.recall, default_top_k=ctx.top_k,
            guard=ctx.guard, untrusted_core_edits=ctx.untrusted_core_edits, redact_secrets=ctx.redact_secrets,
            origins=origins_of(messages, frozenset(MEMORY_TOOLS)),
            # Under PagefaultMiddleware the state says where the window starts, as in the graph; an app
            # that trims its own messages keeps no such count, and its searches cover everything.
            window_start=offset if evicted is not None else None,
        )


def _error_text(error: ToolException) -> str:
    return f"Error: {error}"


def _make_tool(spec: MemoryTool, binding: MemoryBinding) -> BaseTool:
    def run(runtime: ToolRuntime = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:  # type: ignore[assignment]
        try:
            call = binding.call(runtime)
            # A core edit steered by untrusted content waits for a person, as in the graph's memory node.
            reasons = untrusted_core_edit(call, spec.name, kwargs)
            if reasons and call.untrusted_core_edits == "approve" and runtime is not None:
                call_id = runtime.tool_call_id or spec.name
                ok = approval.ask([{"tool_call_id": call_id, "tool": spec.name, "args": kwargs, "reasons": reasons}])
                if not ok.get(call_id):
                    raise ToolError("a person declined this core memory edit (it came from untrusted content: "
                                    + "; ".join(reasons) + "); do not retry it")
                call = replace(call, approved=True)
            result = run_memory_tool(call, spec.name, kwargs)
        except ToolError as e:
            _emit(runtime, spec.name, "error", [])
            raise ToolException(str(e)) from e
        _emit(runtime, spec.name, "success", result.artifact.get("citations", []))
        return result.content, result.artifact

    return StructuredTool.from_function(
        func=run, name=spec.name, description=(spec.schema.__doc__ or "").strip(), args_schema=spec.schema,
        response_format="content_and_artifact", handle_tool_error=_error_text,
    )


def _emit(runtime: ToolRuntime | None, tool: str, status: str, citations: list[Any]) -> None:
    """A page-fault event on the run's custom stream (``stream_mode="custom"``), as the graph emits."""
    writer = getattr(runtime, "stream_writer", None)
    if writer is not None:
        writer({"event": "page_fault", "tool": tool, "status": status, "citations": citations,
                "flagged": sum(bool(c.get("flagged")) for c in citations if isinstance(c, dict))})


def memory_tools(context: Context | None = None, *, store: BaseStore | None = None, **settings: Any) -> list[BaseTool]:
    """The five memory tools as LangChain tools.

    ``context`` (or ``Context`` fields as keywords) gives the settings used when the run carries
    none; ``store`` pins core memory to a store instead of the agent's (or the embedded one).
    """
    if context is not None and settings:
        raise TypeError("give either a Context or Context fields as keywords, not both")
    binding = MemoryBinding(context if context is not None else Context(**settings), store)
    return [_make_tool(spec, binding) for spec in MEMORY_TOOLS.values()]
