"""Bad tool calls come back to the model as clear errors; the run goes on and memory is intact."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from pagefault import Context
from pagefault.stores import CoreMemory, MemoryServices, Scope


class ScriptedModel(BaseChatModel):
    """Fake LLM: first turn emits the given AI message, then answers 'done'."""

    script: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        last = messages[-1]
        msg = self.script if isinstance(last, HumanMessage) else AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def call(name: str, args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c1", "type": "tool_call"}])


CASES = {
    "unknown section": (call("core_memory_append", {"section": "nope", "text": "x"}), "unknown core memory section"),
    "old text not found": (call("core_memory_replace", {"section": "human", "old": "zzz", "new": "y"}), "not found"),
    "over the block limit": (call("core_memory_append", {"section": "human", "text": "x" * 3000}), "limit"),
    "empty core text": (call("core_memory_append", {"section": "human", "text": "   "}), "non-empty"),
    "empty archival text": (call("archival_memory_insert", {"text": ""}), "non-empty"),
    "top_k zero": (call("archival_memory_search", {"query": "a", "top_k": 0}), "top_k must be between 1 and 50"),
    "top_k huge": (call("conversation_search", {"query": "a", "top_k": 10**9}), "top_k must be between 1 and 50"),
    "top_k negative": (call("archival_memory_search", {"query": "a", "top_k": -3}), "top_k must be between 1 and 50"),
    "wrong arg names": (call("archival_memory_insert", {"txt": 1}), "invalid arguments for archival_memory_insert"),
    "wrong arg types": (call("core_memory_append", {"section": ["human"], "text": {"a": 1}}), "invalid arguments"),
    "unknown tool": (call("delete_everything", {}), "unknown tool 'delete_everything'"),
    "malformed date": (call("archival_memory_search", {"query": "a", "start": "yesterday"}), "ISO date"),
    "empty query": (call("archival_memory_search", {"query": " "}), "query must not be empty"),
    "unparseable call": (AIMessage("", invalid_tool_calls=[{"name": "archival_memory_insert", "args": "{not json",
                                                            "id": "c1", "error": "bad JSON", "type": "invalid_tool_call"}]),
                         "malformed call to archival_memory_insert"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_tool_call_is_a_clear_error_and_state_is_intact(case, embedded, data_dir):
    ai, expected = CASES[case]
    scope = Scope("ana")
    core = CoreMemory(embedded.store, scope)
    core.append("human", "Name: Ana")
    svc = MemoryServices.open(data_dir)
    svc.archival.insert(scope, "Ana likes tea.")
    before = ([b.value for b in core.blocks()], svc.archival.count(scope))

    g = embedded.graph(model=ScriptedModel(script=ai))
    out = g.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}},
                   context=Context(user_id="ana", data_dir=data_dir))
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert len(errors) == 1 and expected in errors[0].content, [m.content for m in errors]
    assert out["messages"][-1].content == "done", "the run must continue after a bad call"
    assert ([b.value for b in core.blocks()], svc.archival.count(scope)) == before
