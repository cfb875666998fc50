"""The memory tools as LangChain tools: one ``StructuredTool`` each, all made by one factory, ``memory_tool_set``.

The graph (``AgentSetup``), ``PagefaultMiddleware`` and ``memory_tools()`` each make their tools here, once,
and use those objects on every path: the graph binds them to its model in ``reason`` and runs them in its
``memory`` node through a LangGraph ``ToolNode``; the middleware gives them to its agent, which binds and
runs them; ``memory_tools()`` returns them. A tool gets its run through LangGraph's ``ToolRuntime`` (store,
context, state, config, tool call id). What differs between the paths is only how a run is opened into a
``MemoryCall`` (``OpenCall``): with a graph's settings and store, or with an app's and their fallbacks.

A call is reviewed before it runs (``tools.approval.Reviewed``). A tool reviews its own call (and pauses
the run with ``interrupt()`` when a person must approve it), unless the run's config holds a reviewed step
that covers it (``with_step``): the graph's memory node reviews every memory call of its AI message
together, before any of them runs, so that nothing is asked or written twice when the run resumes, and
hands the step to the tools in their config.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools.base import ArgsSchema
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel

from pagefault.tools.approval import Request, Reviewed
from pagefault.tools.handlers import MemoryCall, MemoryTool, ToolError, invalid_arguments, model_schema
from pagefault.window.events import emit_page_fault

OpenCall = Callable[[ToolRuntime | None], MemoryCall]
"""How a set of memory tools opens what a call may touch (a ``MemoryCall``) from the call's ``ToolRuntime``;
None for a tool called directly, outside any run. A ``ToolError`` it raises goes back to the model."""

#: Where a run's config carries the step its memory calls were reviewed in (``with_step``).
_STEP = "__pagefault_reviewed_step"


def with_step(config: RunnableConfig, step: Reviewed) -> RunnableConfig:
    """``config`` with ``step``, for running the calls ``step`` reviewed: each memory tool that runs with it
    carries out its call as the step decided, instead of reviewing the call alone."""
    return {**config, "configurable": {**(config.get("configurable") or {}), _STEP: step}}


def _step(runtime: ToolRuntime | None, request: Request) -> Reviewed | None:
    """The reviewed step in the run's config that covers ``request``, if there is one."""
    if runtime is None:
        return None
    step = (runtime.config.get("configurable") or {}).get(_STEP)
    return step if isinstance(step, Reviewed) and request.tool_call_id in step.ids else None


class MemoryStructuredTool(StructuredTool):
    """A memory tool as LangChain sees it: a ``StructuredTool`` whose arguments are validated by its
    pydantic ``args_schema``, and shown to the model as ``model_schema`` of it (its ``tool_call_schema``,
    what ``bind_tools`` and ``convert_to_openai_tool`` send)."""

    @property
    def tool_call_schema(self) -> ArgsSchema:
        """``model_schema`` of the tool's pydantic ``args_schema`` (LangChain's own for any other)."""
        args = self.args_schema
        if isinstance(args, type) and issubclass(args, BaseModel):
            return model_schema(args)
        return super().tool_call_schema


def _error_text(error: ToolException) -> str:
    return f"Error: {error}"


def _memory_tool(spec: MemoryTool, open_call: OpenCall) -> BaseTool:
    # langchain-core injects the runtime only into a parameter annotated exactly ``ToolRuntime`` (not
    # ``ToolRuntime | None``), and a direct call gets None: that None default cannot be typed.
    def run(runtime: ToolRuntime = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:  # type: ignore[assignment]
        tool_call_id = runtime.tool_call_id if runtime is not None else None
        request = Request(spec.name if tool_call_id is None else tool_call_id, spec.name, kwargs)
        try:
            step = _step(runtime, request) or Reviewed(open_call(runtime), [request], can_ask=runtime is not None)
            result = step.run(request)
        except ToolError as e:
            emit_page_fault(spec.name, "error", [])
            raise ToolException(str(e)) from e
        emit_page_fault(spec.name, "success", result.artifact.get("citations", []))
        return result.content, result.artifact

    async def arun(runtime: ToolRuntime = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:  # type: ignore[assignment]
        # The stores are synchronous (SQLite, Chroma): the call runs in a worker thread, off the event
        # loop, with the run's context (an approval's interrupt() reaches the run from there too).
        return await asyncio.to_thread(run, runtime, **kwargs)

    def invalid(error: Any) -> str:
        # Arguments the schema refuses (a pydantic ValidationError): the handlers' own words, on every path.
        emit_page_fault(spec.name, "error", [])
        return f"Error: {invalid_arguments(spec.name, error)}"

    return MemoryStructuredTool.from_function(
        func=run, coroutine=arun, name=spec.name, description=spec.description, args_schema=spec.schema,
        response_format="content_and_artifact", handle_tool_error=_error_text, handle_validation_error=invalid,
    )


def memory_tool_set(specs: Sequence[MemoryTool], open_call: OpenCall) -> list[BaseTool]:
    """The memory tools ``specs`` (``choose_memory_tools``'s) as LangChain tools, each call opened with
    ``open_call``: the one factory of the graph's, the middleware's and ``memory_tools()``'s tools."""
    return [_memory_tool(spec, open_call) for spec in specs]
