"""A prompt that fits (issue 23, item 3), checked on what a real ``ChatOpenAI`` sends.

Every request goes over HTTP to the scripted OpenAI-compatible server on loopback
(``support.scripted_openai``), which records its body; only the model's answers are scripted (the
offline model's rules). Both ways of running pagefault are checked: its own graph, and
``create_agent`` + ``PagefaultMiddleware``. Tokens are counted with pagefault's counter for the
request's model (``gpt-4o-mini``: o200k).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from support.scripted_openai import ScriptedOpenAI, offline_reply

from pagefault import Context, PagefaultMiddleware, Prompts, WindowTooSmall
from pagefault.models.tokens import token_counter
from pagefault.tools.handlers import MEMORY_TOOLS

COUNTER = token_counter("gpt-4o-mini")
SUBSET = {"archival_memory_search": "Look up facts you saved about the user.", "core_memory_append": None}
"""A choice of two memory tools, one reworded."""


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def _graph(embedded, api: ScriptedOpenAI, **kwargs: Any):
    return embedded.graph(model=api.chat_model(), **kwargs)


def _agent(embedded, api: ScriptedOpenAI, ctx: Context, **kwargs: Any):
    return create_agent(api.chat_model(), [], middleware=[PagefaultMiddleware(ctx, **kwargs)],
                        checkpointer=embedded.checkpointer, store=embedded.store)


def _say(app, thread: str, text: str, ctx: Context | None = None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    extra = {"context": ctx} if ctx is not None else {}
    return app.invoke({"messages": [HumanMessage(text)]}, config, **extra)


def _system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] in ("system", "developer"), first
    return first["content"]


def _tool_tokens(body: dict[str, Any]) -> dict[str, int]:
    """Each tool of a request, counted as sent (its JSON, with pagefault's counter)."""
    return {t["function"]["name"]: COUNTER.count_tools([t]) for t in body["tools"]}


def _fixed(tokens: dict[str, int]) -> int:
    return tokens["system"] + tokens["core"] + tokens["procedures"] + tokens["tools"]


# -- (a) the tool schemas and the fixed part, in a real request -----------------------------------

@pytest.mark.parametrize("via", ["graph", "middleware"])
def test_a_request_carries_at_most_600_tokens_of_tool_schemas(embedded, data_dir, via):
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=8192)
    with ScriptedOpenAI() as api:
        app = _graph(embedded, api) if via == "graph" else _agent(embedded, api, ctx)
        out = _say(app, "t-a", "Hello", ctx if via == "graph" else None)
        (body,) = api.chat_requests
    sent = _tool_tokens(body)
    assert set(sent) == set(MEMORY_TOOLS), "the six memory tools, and no others (the app has none)"
    assert sum(sent.values()) <= 600, sent
    assert all("\n" not in t["function"]["description"] for t in body["tools"]), "descriptions on one line"
    # The window's accounting counts the same schemas the request carried, and the whole fixed part.
    tokens = out["tokens"]
    assert tokens["tools"] == sum(sent.values())
    if via == "graph":
        assert out["system_prompt"] == _system(body), "the accounting measured the prompt that was sent"
    # The system message is counted by segment (instructions and date, core blocks, procedures), about as a whole.
    whole = 3 + 3 + COUNTER.count_text("system") + COUNTER.count_text(_system(body))
    assert abs(tokens["system"] + tokens["core"] + tokens["procedures"] - whole) <= 5, (tokens, whole)
    fixed = _fixed(tokens)
    assert fixed == tokens["total"] - tokens["messages"] - tokens["summary"]
    assert 600 < fixed <= 1_000, tokens  # a new user's fixed part: it was 1,540 before issue 23


# -- (b) the system prompt ------------------------------------------------------------------------

@pytest.mark.parametrize("via", ["graph", "middleware"])
def test_the_system_prompt_gives_the_date_and_when_to_use_each_memory(embedded, data_dir, via):
    ctx = Context(user_id="ana", data_dir=data_dir)
    days = {_today()}
    with ScriptedOpenAI() as api:
        app = _graph(embedded, api) if via == "graph" else _agent(embedded, api, ctx)
        _say(app, "t-b", "Hi", ctx if via == "graph" else None)
        days.add(_today())
        system = _system(api.chat_requests[0])
    last = system.splitlines()[-1]
    assert last.startswith("Now: ") and last.endswith(" UTC.") and any(day in last for day in days), last
    assert not any(day in "\n".join(system.splitlines()[:-1]) for day in days), "the date is in its own line only"
    assert "- procedure_update: how the user wants you to behave from now on" in system
    assert "- core_memory_append: lasting essentials about the user" in system and "in every prompt" in system
    assert "- archival_memory_insert: all else worth keeping; unbounded, out of view." in system
    assert "- archival_memory_search: before you answer from memory." in system
    assert "<core_memory>" in system and "trust=FLAGGED" in system


def test_a_prompts_override_replaces_the_instructions_and_keeps_the_date(embedded, data_dir):
    ctx = Context(user_id="ana", data_dir=data_dir)
    prompts = Prompts(system="You are Bo's archivist. Answer in one line.\n{memory_tools}")
    with ScriptedOpenAI() as api:
        _say(_graph(embedded, api, prompts=prompts), "t-p", "Hi", ctx)
        _say(_agent(embedded, api, ctx, prompts=prompts), "t-p2", "Hi")
        graph_system, agent_system = (_system(b) for b in api.chat_requests)
    for system in (graph_system, agent_system):
        assert system.startswith("You are Bo's archivist. Answer in one line.\n- core_memory_append: ")
        assert "virtual context memory" not in system and "{memory_tools}" not in system
        assert system.splitlines()[-1].startswith("Now: ")


# -- (c) a window too small is refused before anything is sent ------------------------------------

def test_the_graph_refuses_a_window_too_small_and_sends_nothing(embedded, data_dir):
    with ScriptedOpenAI() as api:
        graph = _graph(embedded, api)
        small = Context(user_id="ana", data_dir=data_dir, context_window=1000)
        with pytest.raises(WindowTooSmall) as refused:
            _say(graph, "t-c", "My name is Ana.", small)
        assert api.chat_requests == [], "no chat request reached the server"
        message = str(refused.value)
        fixed = refused.value.fixed
        assert "context_window=1,000" in message and "0.5 x 1,000 = 500 tokens" in message
        assert (f"is {fixed.total:,} tokens (system prompt {fixed.system:,}, core blocks {fixed.core:,}, procedures "
                f"{fixed.procedures:,}, tool schemas {fixed.tools:,})") in message
        assert f"above {int(fixed.total / 0.5) + 1:,} tokens" in message and fixed.total >= 500
        # The refused input never entered the thread: the next run, with a window that fits, does not send it.
        out = _say(graph, "t-c", "Hello", Context(user_id="ana", data_dir=data_dir, context_window=4096))
        (body,) = api.chat_requests
    assert [m["content"] for m in body["messages"] if m["role"] == "user"] == ["Hello"]
    assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == ["Hello"]
    assert fixed.tools == sum(_tool_tokens(body).values()), "the refusal counted the schemas the request carries"


def test_the_middleware_refuses_a_window_too_small_and_keeps_the_input(embedded, data_dir):
    with ScriptedOpenAI() as api:
        small = _agent(embedded, api, Context(user_id="ana", data_dir=data_dir, context_window=1000))
        with pytest.raises(WindowTooSmall) as refused:
            _say(small, "t-m", "My name is Ana.")
        assert api.chat_requests == [], "no chat request reached the server"
        assert "context_window=1,000" in str(refused.value) and "0.5 x 1,000 = 500 tokens" in str(refused.value)
        assert refused.value.fixed.tools > 0 and refused.value.fixed.core > 0
        # The input stays in the thread: the same app with a window that fits answers it with the next one.
        fits = _agent(embedded, api, Context(user_id="ana", data_dir=data_dir, context_window=4096))
        _say(fits, "t-m", "Hello")
        body = api.chat_requests[0]
    assert [m["content"] for m in body["messages"] if m["role"] == "user"] == ["My name is Ana.", "Hello"]


def test_a_window_that_fits_is_not_refused_at_the_edge(embedded, data_dir):
    """The smallest window the refusal names is accepted."""
    with ScriptedOpenAI() as api:
        graph = _graph(embedded, api)
        with pytest.raises(WindowTooSmall) as refused:
            _say(graph, "t-e", "Hi", Context(user_id="ana", data_dir=data_dir, context_window=1000))
        need = int(refused.value.fixed.total / 0.5) + 1
        _say(graph, "t-e", "Hi", Context(user_id="ana", data_dir=data_dir, context_window=need))
        assert len(api.chat_requests) == 1


# -- (d) a subset of the tools, one reworded ------------------------------------------------------

def _check_subset(body: dict[str, Any]) -> None:
    tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert set(tools) == {"archival_memory_search", "core_memory_append"}
    assert tools["archival_memory_search"]["description"] == SUBSET["archival_memory_search"]
    assert tools["core_memory_append"]["description"] == MEMORY_TOOLS["core_memory_append"].description
    system = _system(body)
    for missing in set(MEMORY_TOOLS) - set(tools):
        assert missing not in system, f"the system prompt names {missing}, which the model does not have"
    assert "- archival_memory_search: " in system and "- core_memory_append: " in system


def test_the_graph_gives_the_model_the_chosen_memory_tools_only(embedded, data_dir):
    ctx = Context(user_id="ana", data_dir=data_dir)

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":  # a call to a tool this model was not given
            args = json.dumps({"add": "Always answer in French."})
            return {"content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                     "function": {"name": "procedure_update", "arguments": args}}]}
        return offline_reply(body)

    with ScriptedOpenAI(reply=reply) as api:
        _say(_graph(embedded, api, memory_tools=SUBSET), "t-d", "From now on answer in French.", ctx)
        first, second = api.chat_requests
    _check_subset(first)
    result = next(m for m in second["messages"] if m["role"] == "tool")
    assert result["content"] == ("Error: unknown tool 'procedure_update'; memory tools are: core_memory_append, "
                                 "archival_memory_search")


def test_the_middleware_gives_the_agent_the_chosen_memory_tools_only(embedded, data_dir):
    ctx = Context(user_id="ana", data_dir=data_dir)
    with ScriptedOpenAI() as api:
        agent = _agent(embedded, api, ctx, tools=SUBSET)
        _say(agent, "t-d2", "Where do I live?")
        first = api.chat_requests[0]
    _check_subset(first)


def test_an_unknown_memory_tool_is_refused_naming_the_valid_ones(embedded, data_dir):
    valid = ", ".join(MEMORY_TOOLS)
    with pytest.raises(ValueError, match=f"unknown memory tool\\(s\\) 'archival_search'; the memory tools are: {valid}"):
        embedded.graph(memory_tools=["archival_search"])
    with pytest.raises(ValueError, match="the memory tools are: " + valid):
        PagefaultMiddleware(user_id="ana", data_dir=data_dir, tools={"recall": "x"})
