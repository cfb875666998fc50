"""What one step of a run touches: its settings, scope, thread, core and procedural memory, the
tiers and the token counter (``MemoryRun``), opened the same way by the graph's nodes, the
middleware, the memory tools and the CLI. It holds the one copy of three flows they share:

- ``core_memory``: the ``CoreMemory`` of a run's scope, with its persona, block limit and redaction;
- ``MemoryRun.main_context``: the main context as the model is sent it, measured by segment, from the
  stores as they are now (``PromptReads``);
- ``MemoryRun.memory_call``: everything a memory tool call may touch, fixed by the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore

from pagefault.consolidation.supersede import supersede_judge
from pagefault.engines.connections import Engines
from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.models.tokens import TokenCounter
from pagefault.stores.cached_reads import same_database, versions_with
from pagefault.stores.core import CoreBlock, CoreMemory
from pagefault.stores.procedures import ProceduralMemory, Procedure
from pagefault.stores.recall import RecallIndex
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.stores.superseding import SupersedeJudge
from pagefault.text.prompts import Prompts
from pagefault.tools.handlers import MEMORY_TOOLS, MemoryCall
from pagefault.tools.trust import origins_of
from pagefault.window.events import emit
from pagefault.window.fixed_part import FixedPart
from pagefault.window.main_context import DEFAULT_PROMPTS, MainContext, build_main_context, fixed_sections

#: Reads a main context's core memory and procedures beside its archival count (``MemoryRun.main_context``).
_PROMPT_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pagefault-prompt-reads")
@dataclass(frozen=True)
class PromptReads:
    """What a main context reads of the stores: the scope's core blocks, its procedures and how many
    archival records it has (each a round trip on Postgres, asked at once). Read afresh for every main
    context: nothing is carried from one step to the next, so a write is seen by the next step that
    measures or sends the prompt, whoever made it."""

    blocks: list[CoreBlock]
    procedures: list[Procedure]
    records: int


def core_memory(store: BaseStore, ctx: Context) -> CoreMemory:
    """The core memory of a run: its scope's blocks, with the run's persona, block limit and redaction."""
    return CoreMemory(store, Scope(ctx.user_id, ctx.agent_id), persona=ctx.persona, block_limit=ctx.core_block_limit,
                      redact_secrets=ctx.redact_secrets)


def services(ctx: Context, store: BaseStore | None = None) -> MemoryServices:
    """The tiers of a run, where its settings say (on a served graph, the server's environment), with the
    embedding they name. ``store``: the run's store; one ``open_embedded`` opened keeps every tier in its
    directory (``Engines.of``: a ``ctx.data_dir`` naming another is refused)."""
    e = Engines.of(ctx, store)
    return MemoryServices.open(e.data_dir, chroma_url=e.chroma_url, database_url=e.database_url, embeddings=e.embeddings)


def state_field(state: Any, name: str, default: Any) -> Any:
    """``name`` of an agent's state: a mapping (``create_agent``'s) or an object (the graph's ``PagefaultState``)."""
    if isinstance(state, Mapping):
        return state.get(name, default)
    return getattr(state, name, default)


def thread_id(config: RunnableConfig) -> str:
    tid = (config.get("configurable") or {}).get("thread_id")
    return str(tid) if tid is not None else "default"


def checkpoint_id(config: RunnableConfig) -> str:
    """The saved checkpoint this step started from (it holds the step's input messages)."""
    conf = config.get("configurable") or {}
    return str((conf.get("checkpoint_map") or {}).get("") or conf.get("checkpoint_id") or "")


def users_before(recall: RecallIndex, scope: Scope, thread: str, evicted_count: int, counted: int) -> int:
    """How many user messages a thread had before its window: none when nothing was evicted, the
    state's ``evicted_user_messages`` when it counted them, else (a thread compacted before pagefault
    counted them) the user messages recall holds below ``evicted_count``."""
    if evicted_count <= 0:
        return 0
    if counted >= 0:
        return counted
    return recall.user_messages_before(scope, thread, evicted_count)


@dataclass
class MemoryRun:
    """Everything one step of a run reads and writes, fixed by the run (never by the model)."""

    ctx: Context
    scope: Scope
    thread_id: str
    checkpoint_id: str
    store: BaseStore
    core: CoreMemory
    procedures: ProceduralMemory
    services: MemoryServices
    counter: TokenCounter
    #: Which stored facts an archival insert replaces (``stores.superseding``); None: the judge of the model
    #: ``ctx.model`` names (the patterns for the offline model). A graph with an explicit model has its own.
    supersede: SupersedeJudge | None = None
    #: pagefault's prompts for this run's model (``AgentSetup.prompts``, the middleware's ``prompts``).
    prompts: Prompts = DEFAULT_PROMPTS
    #: The memory tools this run's model has; a memory call to another one is refused.
    memory_tools: frozenset[str] = frozenset(MEMORY_TOOLS)

    @classmethod
    def open(cls, ctx: Context, store: BaseStore | None, config: RunnableConfig, counter: TokenCounter, *,
             prompts: Prompts = DEFAULT_PROMPTS, memory_tools: frozenset[str] = frozenset(MEMORY_TOOLS),
             judge: BaseChatModel | None = None) -> "MemoryRun":
        """The one place a step's run is put together, for the graph (``AgentSetup.open_run``), the middleware
        and the memory tools: each hands over what it was built with. ``counter``: tokens of the run's model;
        ``prompts`` and ``memory_tools``: the ones its model has; ``judge``: the chat model whose judge decides
        which stored facts an archival insert replaces (None: the one ``ctx.model`` names)."""
        if store is None:
            raise RuntimeError(
                "pagefault needs a LangGraph store for core memory: use build_graph(store=...) or serve the "
                "graph with `langgraph dev`, which provides one")
        scope = Scope(ctx.user_id, ctx.agent_id)
        return cls(ctx, scope, thread_id(config), checkpoint_id(config), store, core_memory(store, ctx),
                   ProceduralMemory(store, scope), services(ctx, store), counter,
                   supersede=supersede_judge(judge) if judge is not None else None, prompts=prompts,
                   memory_tools=memory_tools)

    def main_context(self, state: PagefaultState, tool_schemas: list[dict[str, Any]], *, app_prompt: str = "",
                     warn_at: float | None = None) -> MainContext:
        """The main context as the model is sent it: instructions, core memory, learned procedures,
        the summary, the window's messages and the tool schemas, each measured in tokens; with the
        memory-pressure note when it reaches ``warn_at`` tokens without it."""
        reads = self.prompt_reads()
        return build_main_context(state, self.ctx, self.counter, reads.blocks, reads.records, tool_schemas,
                                  warn_at=warn_at, procedures=reads.procedures, app_prompt=app_prompt,
                                  prompts=self.prompts)

    def prompt_reads(self) -> PromptReads:
        """The stores' part of a main context, read now."""
        if (together := self._read_together()) is not None:
            return together
        # Each read is a round trip on Postgres: asked at once (on SQLite each takes microseconds).
        blocks = _PROMPT_READS.submit(self.core.blocks)
        procedures = _PROMPT_READS.submit(self.procedures.list)
        records = self.services.archival.count(self.scope)
        return PromptReads(blocks.result(), procedures.result(), records)

    def _read_together(self) -> PromptReads | None:
        """Every part read in one statement where the store and the archival count share a Postgres
        database (the replicated setup): the namespaces' versions and the count, then only the namespaces
        that changed (``cached_reads.versions_with``). None elsewhere."""
        count = self.services.archival.count_query(self.scope)
        if count is None or not same_database(self.store, count[0]):
            return None
        (blocks, procedures), records = versions_with(self.store, [self.core.namespace, self.procedures.namespace],
                                                      count[1:])
        return PromptReads(self.core.blocks(version=blocks), self.procedures.list(version=procedures), int(records))

    def prompt(self, state: PagefaultState, tool_schemas: list[dict[str, Any]], *,
               app_prompt: str = "") -> MainContext:
        """The main context to send now, measured once: with the one-shot memory-pressure note when it is
        due (``MainContext.warned``). The caller that sends it says so (``sending``)."""
        warn_at = None if state.pressure_warned else self.ctx.warning_fraction * self.ctx.context_window
        return self.main_context(state, tool_schemas, app_prompt=app_prompt, warn_at=warn_at)

    def sending(self, main: MainContext) -> MainContext:
        """``main`` is sent to the model: a ``memory_pressure`` event when it carries the note."""
        if main.warned:
            emit({"event": "memory_pressure", "tokens": main.total, "window": self.ctx.context_window})
        return main

    def fixed_part(self, tool_schemas: list[dict[str, Any]]) -> FixedPart:
        """The fixed part of this run's requests (``window.fixed_part``), from the stores as they are now."""
        reads = self.prompt_reads()
        return FixedPart.of_tokens(fixed_sections(self.ctx, self.counter, reads.blocks, reads.records, tool_schemas,
                                                  procedures=reads.procedures, prompts=self.prompts).tokens)

    def over_budget(self, main: MainContext) -> bool:
        """Whether the main context (without the pressure note) is past the compaction trigger."""
        return main.measured > self.ctx.compaction_trigger * self.ctx.context_window

    def state_call(self, state: Any) -> MemoryCall:
        """``memory_call`` for the last AI message of an agent's ``state``: the graph's ``PagefaultState``, or
        a state mapping (``create_agent``'s). A state without ``evicted_count`` is an app's that keeps no such
        count (it trims its own messages, say): its recall searches cover everything."""
        evicted = state_field(state, "evicted_count", None)
        users = state_field(state, "evicted_user_messages", None)
        return self.memory_call(list(state_field(state, "messages", None) or []),
                                int(evicted) if evicted is not None else None, int(users) if users is not None else -1)

    def memory_call(self, messages: Sequence[BaseMessage], evicted_count: int | None,
                    evicted_user_messages: int = -1) -> MemoryCall:
        """What the memory tool calls of the last AI message may touch. Provenance points at the user
        message that led to them: its turn and its message index. ``evicted_count`` says where the window
        starts (None: the app keeps no such count, so recall searches cover everything, and ``messages``
        are numbered from 0); ``evicted_user_messages`` how many user messages were evicted (-1: not
        counted; see ``users_before``)."""
        offset = evicted_count or 0
        user_idx = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        turn = -1
        if user_idx >= 0:
            users = users_before(self.services.recall, self.scope, self.thread_id, offset, evicted_user_messages)
            turn = users + sum(isinstance(m, HumanMessage) for m in messages[: user_idx + 1]) - 1
        return MemoryCall(
            scope=self.scope, thread_id=self.thread_id, turn=turn,
            message_index=offset + user_idx if user_idx >= 0 else -1,
            message_id=(messages[user_idx].id or "") if user_idx >= 0 else "",
            core=self.core, archival=self.services.archival, recall=self.services.recall,
            default_top_k=self.ctx.top_k, guard=self.ctx.guard, untrusted_core_edits=self.ctx.untrusted_core_edits,
            redact_secrets=self.ctx.redact_secrets, origins=origins_of(list(messages), frozenset(MEMORY_TOOLS)),
            window_start=evicted_count, tools=self.memory_tools,
            supersede=self.supersede if self.supersede is not None else supersede_judge(self.ctx.model, self.ctx.base_url),
        )
