"""The OpenAI request contract: every request ``ChatOpenAI`` sends for pagefault is a valid
chat-completions payload, through a conversation that compacts.

Only the provider's HTTP is replaced (``respx`` intercepts ``ChatOpenAI``'s ``httpx`` client; nothing
of pagefault is faked). The "provider" answers with the offline model's rules, so the conversation
pages out, fills the window, compacts and pages in as it would with a real model (over HTTP the
rules see only the text of tool results, so the test checks that the paged-in fact reaches the
request, not the wording of a final answer). Every request is
checked against the chat-completions schema (roles, tool schemas as JSON Schema) and the ordering
OpenAI enforces: each ``tool`` message directly after the assistant message that called it (or a
sibling result), answering one of its ``tool_call_ids``, and no call left unanswered.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import jsonschema
import pytest
import respx
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from support.scripted_openai import structured_reply

from pagefault import Context, OfflineChatModel, PagefaultMiddleware
from pagefault.cli.main import demo_filler
from pagefault.models.offline import SUMMARY_INSTRUCTION

URL = "https://api.openai.com/v1/chat/completions"
MODEL = "gpt-4o-mini"

TOOL_CALL = {
    "type": "object", "required": ["id", "type", "function"], "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "type": {"const": "function"},
        "function": {"type": "object", "required": ["name", "arguments"], "additionalProperties": False,
                     "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}}},
    },
}
MESSAGE = {
    "oneOf": [
        {"type": "object", "required": ["role", "content"], "properties": {
            "role": {"enum": ["system", "developer"]}, "content": {"type": "string"}, "name": {"type": "string"}},
         "additionalProperties": False},
        {"type": "object", "required": ["role", "content"], "properties": {
            "role": {"const": "user"}, "content": {"type": ["string", "array"]}, "name": {"type": "string"}},
         "additionalProperties": False},
        {"type": "object", "required": ["role"], "properties": {
            "role": {"const": "assistant"}, "content": {"type": ["string", "null"]}, "name": {"type": "string"},
            "tool_calls": {"type": "array", "minItems": 1, "items": TOOL_CALL}},
         "additionalProperties": False, "anyOf": [{"required": ["tool_calls"]}, {"properties": {"content": {"type": "string"}}}]},
        {"type": "object", "required": ["role", "content", "tool_call_id"], "properties": {
            "role": {"const": "tool"}, "content": {"type": ["string", "array"]}, "tool_call_id": {"type": "string"}},
         "additionalProperties": False},
    ]
}
TOOL = {
    "type": "object", "required": ["type", "function"], "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "function": {"type": "object", "required": ["name", "parameters"], "additionalProperties": False,
                     "properties": {"name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                                    "description": {"type": "string"}, "strict": {"type": "boolean"},
                                    "parameters": {"type": "object"}}},
    },
}
REQUEST = {
    "type": "object", "required": ["model", "messages"],
    "properties": {
        "model": {"const": MODEL},
        "messages": {"type": "array", "minItems": 1, "items": MESSAGE},
        "tools": {"type": "array", "minItems": 1, "items": TOOL},
        "stream": {"const": False},
        "n": {"const": 1},
        "temperature": {"type": "number"},
        "parallel_tool_calls": {"type": "boolean"},
        "response_format": {"type": "object", "required": ["type", "json_schema"], "properties": {
            "type": {"const": "json_schema"},
            "json_schema": {"type": "object", "required": ["name", "schema"]}}},
    },
}


def check_payload(body: dict[str, Any]) -> None:
    """Raise AssertionError unless ``body`` is a chat-completions request OpenAI would accept."""
    jsonschema.validate(body, REQUEST)
    names = [t["function"]["name"] for t in body.get("tools", [])]
    assert len(names) == len(set(names)), f"duplicate tool names {names}"
    for t in body.get("tools", []):
        params = t["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert params.get("type") == "object", f"{t['function']['name']}: parameters must be an object schema"
    messages = body["messages"]
    assert messages[0]["role"] in ("system", "developer"), "the prompt starts with the system message"
    pending: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            assert i > 0 and messages[i - 1]["role"] in ("assistant", "tool"), \
                f"message {i}: a tool message must directly follow its assistant message"
            assert m["tool_call_id"] in pending, f"message {i}: tool_call_id {m['tool_call_id']} answers no open call"
            pending.discard(m["tool_call_id"])
            continue
        assert not pending, f"message {i} ({m['role']}): tool calls {sorted(pending)} were never answered"
        if m["role"] == "assistant":
            for tc in m.get("tool_calls") or []:
                assert tc["function"]["name"] in names, f"call to unbound tool {tc['function']['name']}"
                assert isinstance(json.loads(tc["function"]["arguments"]), dict)
            pending = {tc["id"] for tc in m.get("tool_calls") or []}
    assert not pending, f"the request ends with unanswered tool calls {sorted(pending)}"


def _to_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        content = m.get("content") or ""
        if m["role"] in ("system", "developer"):
            out.append(SystemMessage(content))
        elif m["role"] == "user":
            out.append(HumanMessage(content))
        elif m["role"] == "assistant":
            calls = [{"name": tc["function"]["name"], "args": json.loads(tc["function"]["arguments"]), "id": tc["id"]}
                     for tc in m.get("tool_calls") or []]
            names.update({c["id"]: c["name"] for c in calls})
            out.append(AIMessage(content, tool_calls=calls))
        else:
            out.append(ToolMessage(content, tool_call_id=m["tool_call_id"], name=names.get(m["tool_call_id"])))
    return out


class Provider:
    """Plays OpenAI over HTTP: validates each request, answers with the offline model's rules."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.ids = itertools.count()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        try:
            assert request.headers["authorization"] == "Bearer sk-test"
            assert request.headers["content-type"].startswith("application/json")
            check_payload(body)
        except (AssertionError, jsonschema.ValidationError, json.JSONDecodeError) as e:
            self.problems.append(f"request {len(self.requests)}: {e}")
            return httpx.Response(400, json={"error": {"message": str(e)[:500], "type": "invalid_request_error"}})
        structured = structured_reply(body)  # the supersede judge's call: it replaces nothing
        if structured is not None:
            return self._answer({"role": "assistant", **structured}, None)
        reply = OfflineChatModel().invoke(_to_langchain(body["messages"]), tools=body.get("tools") or [])
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.tool_calls:
            message["tool_calls"] = [{"id": tc["id"], "type": "function",
                                      "function": {"name": tc["name"], "arguments": json.dumps(tc["args"])}}
                                     for tc in reply.tool_calls]
        return self._answer(message, reply)

    def _answer(self, message: dict[str, Any], reply: AIMessage | None) -> httpx.Response:
        usage = (reply.usage_metadata if reply is not None else None) or {}
        return httpx.Response(200, json={
            "id": f"chatcmpl-{next(self.ids)}", "object": "chat.completion", "created": 1_700_000_000, "model": MODEL,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": usage.get("input_tokens", 0), "completion_tokens": usage.get("output_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0)},
        })


@pytest.fixture
def provider():
    p = Provider()
    with respx.mock(assert_all_called=True, assert_all_mocked=True) as mock:
        mock.post(URL).mock(side_effect=p)
        yield p


def _chat_openai() -> ChatOpenAI:
    # The user-level knob for a custom HTTP client; respx intercepts its transport.
    return ChatOpenAI(model=MODEL, api_key="sk-test", http_client=httpx.Client(), max_retries=0)


CONVERSATION = ["My name is Ana and I live in Lisbon.", "My sister works at the aquarium in Valencia.",
                *[demo_filler(i) for i in range(5)], "Where does my sister work?"]


def _check_conversation(provider: Provider, state: dict[str, Any]) -> None:
    assert not provider.problems, "\n".join(provider.problems)
    assert state["compactions"] >= 1 and state["evicted_count"] > 0, "the conversation must have compacted"
    summaries = [r for r in provider.requests if r["messages"][0]["content"].startswith(SUMMARY_INSTRUCTION)]
    assert summaries and all("tools" not in r for r in summaries), "compaction asks the model for a summary"
    judged = [r for r in provider.requests if "response_format" in r]  # does a new fact replace an old one?
    assert judged and all("tools" not in r for r in judged), "a real model judges which facts a new one replaces"
    agent_calls = [r for r in provider.requests if r not in summaries and r not in judged]
    assert all({t["function"]["name"] for t in r["tools"]} >= {"archival_memory_search", "conversation_search",
                                                                  "archival_memory_insert"} for r in agent_calls)
    # After compaction the summary is in the system prompt and the first turn is out of the window.
    last = agent_calls[-1]
    assert "<summary_of_evicted_messages>" in last["messages"][0]["content"]
    assert not any("My name is Ana" in (m.get("content") or "") for m in last["messages"][1:] if m["role"] == "user")
    # The last turn paged the evicted fact back in: its tool results, sent to the model, hold it.
    results = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert any("Valencia" in r for r in results), results


def test_graph_requests_are_valid_chat_completions(provider, embedded, data_dir):
    graph = embedded.graph(model=_chat_openai())
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=3000, model=f"openai:{MODEL}")
    config = {"configurable": {"thread_id": "contract"}}
    for text in CONVERSATION:
        graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx)
    _check_conversation(provider, graph.get_state(config).values)
    assert len(provider.requests) >= 2 * len(CONVERSATION)


def test_middleware_requests_are_valid_chat_completions(provider, embedded, data_dir):
    agent = create_agent(_chat_openai(), [], system_prompt="You are Acme's assistant.",
                         middleware=[PagefaultMiddleware(user_id="ana", data_dir=data_dir, context_window=3000)],
                         checkpointer=embedded.checkpointer, store=embedded.store)
    config = {"configurable": {"thread_id": "contract-mw"}}
    for text in CONVERSATION:
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    state = agent.get_state(config).values
    _check_conversation(provider, state)
    assert all(r["messages"][0]["content"].startswith(("You are Acme's assistant.", SUMMARY_INSTRUCTION))
               for r in provider.requests if "response_format" not in r)


def test_the_checker_rejects_what_openai_rejects():
    """The contract check itself: payloads OpenAI refuses are refused here too."""
    ok = {"model": MODEL, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]}
    check_payload(ok)
    orphan = json.loads(json.dumps(ok))
    orphan["messages"].insert(3, {"role": "user", "content": "in between"})
    with pytest.raises(AssertionError, match="never answered"):
        check_payload(orphan)
    wrong_id = json.loads(json.dumps(ok))
    wrong_id["messages"][3]["tool_call_id"] = "b"
    with pytest.raises(AssertionError, match="answers no open call"):
        check_payload(wrong_id)
    bad_schema = json.loads(json.dumps(ok))
    bad_schema["tools"][0]["function"]["parameters"] = {"type": "object", "properties": {"x": {"type": 5}}}
    with pytest.raises(jsonschema.SchemaError):
        check_payload(bad_schema)
