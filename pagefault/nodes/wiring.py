"""What every node needs from the run: scope, stores, model, token counter, thread and checkpoint."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import Runtime

from langgraph.config import get_config

from pagefault.backends import Engines
from pagefault.graph.context import Context
from pagefault.models import load_chat_model, token_model_name
from pagefault.stores.core import CoreMemory
from pagefault.stores.scope import Scope
from pagefault.serve.settings import ServerSettings, check_client_settings, identity_of
from pagefault.stores.services import MemoryServices
from pagefault.tokens import TokenCounter, token_counter
from pagefault.tools import MEMORY_TOOL_SCHEMAS

@dataclass
class Wiring:
    """How a graph was built: an explicit model (else the context's), the user's own tools, and for a
    served graph the server's settings (``served``), which decide what a client's context may set."""

    model: BaseChatModel | None = None
    tools: Sequence[BaseTool] = ()
    served: ServerSettings | None = None
    _schemas: list[dict[str, Any]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        clash = set(names) & {t.name for t in MEMORY_TOOL_SCHEMAS}
        if clash:
            raise ValueError(f"tool names {sorted(clash)} are reserved for pagefault's memory tools")
        if len(set(names)) != len(names):
            raise ValueError("tool names must be unique")
        self._schemas = [convert_to_openai_tool(t) for t in self.all_tools]

    @property
    def user_tool_names(self) -> set[str]:
        return {t.name for t in self.tools}

    @property
    def all_tools(self) -> list[BaseTool]:
        return [*MEMORY_TOOL_SCHEMAS, *self.tools]

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    def chat_model(self, ctx: Context) -> BaseChatModel:
        return self.model or load_chat_model(ctx.model, ctx.base_url)

    def counter(self, ctx: Context) -> TokenCounter:
        return token_counter(token_model_name(self.model, ctx.model))


    def context(self, runtime: Runtime[Any]) -> Context:
        """The run's settings. In process, the run's ``Context`` as given. Served, the server's settings
        with the client's fields, checked, and the user from LangGraph auth (``ServerSettings.for_run``)."""
        ctx = runtime.context
        if self.served is None:
            if ctx is None:
                return Context()
            if isinstance(ctx, dict):  # some callers hand the raw mapping through
                return Context(**ctx)
            return ctx
        client = dataclasses.asdict(ctx) if dataclasses.is_dataclass(ctx) and not isinstance(ctx, type) else ctx
        return self.served.for_run(check_client_settings(client), identity_of(_run_config()))


def _run_config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # outside a run (a node called directly in a unit test): nobody is authenticated
        return {}


def scope_of(ctx: Context) -> Scope:
    return Scope(ctx.user_id, ctx.agent_id)


def core_memory(runtime: Runtime[Any], ctx: Context) -> CoreMemory:
    if runtime.store is None:
        raise RuntimeError(
            "pagefault needs a LangGraph store for core memory: use build_graph(store=...) or serve the "
            "graph with `langgraph dev`, which provides one"
        )
    return CoreMemory(runtime.store, scope_of(ctx), persona=ctx.persona, block_limit=ctx.core_block_limit,
                      redact_secrets=ctx.redact_secrets)


def services(ctx: Context) -> MemoryServices:
    """The run's memory, where its settings say (on a served graph, the server's environment)."""
    e = Engines.of(ctx)
    return MemoryServices.open(e.data_dir, chroma_url=e.chroma_url, database_url=e.database_url)


def thread_id(config: RunnableConfig) -> str:
    tid = (config.get("configurable") or {}).get("thread_id")
    return str(tid) if tid is not None else "default"


def checkpoint_id(config: RunnableConfig) -> str:
    """The saved checkpoint this step started from (it holds the step's input messages)."""
    conf = config.get("configurable") or {}
    return str((conf.get("checkpoint_map") or {}).get("") or conf.get("checkpoint_id") or "")
