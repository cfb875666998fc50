"""The ``dispatch`` node: runs the user's own tools through LangGraph's ToolNode."""

from __future__ import annotations

from typing import Any, Callable

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt import ToolNode

from pagefault.graph.state import PagefaultState
from pagefault.nodes.memory import answered_ids, last_ai
from pagefault.window.setup import AgentSetup


def make_dispatch(setup: AgentSetup) -> Callable[..., dict[str, Any]]:
    node = ToolNode(list(setup.tools), handle_tool_errors=True) if setup.tools else None

    def dispatch(state: PagefaultState, config: RunnableConfig) -> dict[str, Any]:
        ai = last_ai(state)
        if ai is None or node is None:
            return {}
        done = answered_ids(state)
        calls = [tc for tc in ai.tool_calls if tc["name"] in setup.user_tool_names and tc["id"] not in done]
        if not calls:
            return {}
        # Hand ToolNode only the user's calls; memory calls were answered by the memory node.
        only_user = AIMessage(content="", tool_calls=calls, id=ai.id)
        return node.invoke({"messages": [only_user]}, config)

    return dispatch
