"""A ``create_agent`` app whose runs on another user's thread are refused before anything is saved.

``PagefaultMiddleware`` cannot do it alone: the app compiles the agent, and LangGraph checkpoints a
run's input, then applies it to the thread's messages (the next checkpoint), before the first
middleware hook (``before_agent``) runs. The middleware still refuses such a run at that hook and at
its model call, so nothing is read or indexed for it, but the refused input stays in the thread. An
``OwnerCheckedAgent`` checks the thread's owner (``window.thread_owner.refuse_foreign_run``, the check
the pagefault graph makes) in its ``stream`` / ``astream``, through which ``invoke`` and ``ainvoke``
go, and ``resume``, before LangGraph sees the run. Make one with ``PagefaultMiddleware.owner_checked``.

An app that is not wrapped still keeps a refused input out of the owner's turns: the refusing step
(``PagefaultMiddleware.before_agent``) removes the messages the refused run added (``refused_input``), so
the owner's window, model calls and recall never hold them; the thread's history (its earlier
checkpoints) does.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator, Sequence, cast

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from pagefault.engines.thread_lock import AdmittingGraph, SerializedGraph, compiled_fields, serialized
from pagefault.serve.settings import ServerSettings
from pagefault.stores.scope import Scope
from pagefault.window.cut_short import FirstStep
from pagefault.window.thread_owner import arefuse_foreign_run, refuse_foreign_run


class OwnerCheckedAgent(AdmittingGraph):
    """A compiled agent (any ``CompiledStateGraph``) whose runs are refused with ``ThreadOwnedError``,
    before anything is saved, on a thread another user or agent owns. ``app`` are the settings of its
    ``PagefaultMiddleware`` (``PagefaultMiddleware.app``): they say who a run is for, as the middleware
    reads it."""

    def __init__(self, *, app: ServerSettings, **graph: Any) -> None:
        super().__init__(**graph)
        self.app = app

    def _scope(self, config: RunnableConfig, context: Any) -> Scope | None:
        """Who a run is for (None: a context the middleware itself refuses at the run's first step)."""
        try:
            ctx = self.app.for_app_run(context, config)
        except (TypeError, ValueError):
            return None
        return Scope(ctx.user_id, ctx.agent_id)

    def admit(self, config: RunnableConfig, context: Any) -> None:
        """``ThreadOwnedError`` for a run with ``config`` and ``context`` on a thread another user or agent owns."""
        refuse_foreign_run(self.checkpointer, config, self._scope(config, context))

    async def aadmit(self, config: RunnableConfig, context: Any) -> None:
        """``admit`` for async runs (``config`` and ``context`` the same), with the saver's async read."""
        await arefuse_foreign_run(self.checkpointer, config, self._scope(config, context))

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """LangGraph's ``stream``, after the owner check (``admit``)."""
        self.admit(config or {}, kwargs.get("context"))
        yield from super().stream(input, config, **kwargs)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """LangGraph's ``astream``, after the owner check (``aadmit``)."""
        await self.aadmit(config or {}, kwargs.get("context"))
        async for part in super().astream(input, config, **kwargs):
            yield part


def owner_checked(agent: CompiledStateGraph[Any, Any, Any, Any], app: ServerSettings) -> OwnerCheckedAgent:
    """``agent`` as an ``OwnerCheckedAgent`` for a middleware's settings ``app``. An agent that is a
    ``SerializedGraph`` already stays one, with its locks and wait, and its owner check runs inside the
    thread's turn."""
    if isinstance(agent, OwnerCheckedAgent):
        return agent
    if isinstance(agent, SerializedGraph):
        fields = {k: v for k, v in compiled_fields(agent).items() if k not in ("locks", "wait")}
        inner = OwnerCheckedAgent(app=app, **fields)
        return cast(OwnerCheckedAgent, serialized(inner, locks=agent.locks, wait=agent.wait))
    return OwnerCheckedAgent(app=app, **compiled_fields(agent))


def refused_input(messages: Sequence[AnyMessage], config: RunnableConfig) -> list[RemoveMessage]:
    """The removals of what a refused run added to the thread's ``messages`` (its input), for its first
    step (``config``, the step's): the messages the thread's checkpoint before the run's input did not
    hold. None for a run without a checkpointer or nested in another graph."""
    first = FirstStep.of(config)
    if first is None:
        return []
    held = first.held_before(first.before_input())
    return [RemoveMessage(id=m.id) for m in messages if m.id is not None and m.id not in held]
