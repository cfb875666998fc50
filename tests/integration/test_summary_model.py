"""Compaction summaries with a real ``ChatOpenAI`` against the scripted OpenAI-compatible server on loopback:
the summary call goes to the summary model (``Context.summary_model``, else the chat model), it is
tagged ``nostream`` so ``stream_mode="messages"`` never streams it as the answer, an app's own summary
prompt works (the offline model too), and a failed summary call falls back to the extractive summary,
logged and reported in the ``compaction`` event.

The server records every request; it answers summary calls with a marker word, so a chunk carrying the
summary would be seen, and everything else with the offline model's rules.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from support.scripted_openai import API_KEY, CHAT_MODEL, ScriptedError, ScriptedOpenAI, offline_reply

from pagefault import Context, OfflineChatModel, PagefaultMiddleware, Prompts, open_embedded_async
from pagefault.cli.main import demo_filler
from pagefault.models.chat import load_summary_model
from pagefault.models.tokens import TokenCounter
from pagefault.text.prompts import SUMMARY_INSTRUCTION
from pagefault.text.summary_input import SummaryInput
from pagefault.window.compaction import summarize, summary_instruction
from pagefault.window.setup import AgentSetup

MARK = "ZEBRAQUILL"
"""The word the scripted summary model starts every summary with; no other reply has it."""
SUMMARY_MODEL = "gpt-4.1-nano"
WINDOW = 4000
FIRST = "My name is Ana and I live in Lisbon."
KEY = "sk-proj-" + "Wq7Lp2Zx9Rt4" * 3


def is_summary_call(body: dict[str, Any]) -> bool:
    """A compaction summary request: no tools, and the user message is the summary input."""
    last = (body.get("messages") or [{}])[-1]
    return not body.get("tools") and isinstance(last.get("content"), str) and SummaryInput.parse(last["content"]) is not None


def marked_summaries(body: dict[str, Any]) -> dict[str, Any]:
    if is_summary_call(body):
        return {"content": f"{MARK} " + (offline_reply(body)["content"] or "")}
    return offline_reply(body)


def failing_summaries(body: dict[str, Any]) -> dict[str, Any]:
    if is_summary_call(body):
        raise ScriptedError(500, f"summary backend exploded (upstream key {KEY})")
    return offline_reply(body)


def _turns():
    """The user's turns: a fact, then fillers until the caller sees a compaction (at most 12)."""
    yield FIRST
    for i in range(12):
        yield demo_filler(i)


def _ctx(data_dir: str, api: ScriptedOpenAI, summary_model: str) -> Context:
    return Context(user_id="ana", data_dir=data_dir, context_window=WINDOW,
                   summary_model=f"openai:{summary_model}" if summary_model else "", base_url=api.url)


def _stream_until_compacted(app, mode: Any, **run: Any) -> tuple[list[tuple[Any, dict]], list[dict]]:
    """Turns through ``app.stream(..., stream_mode=mode, **run)`` until one compacts: the message chunks
    (with their metadata) and the custom events of every turn."""
    config = {"configurable": {"thread_id": "t"}}
    chunks: list[tuple[Any, dict]] = []
    events: list[dict] = []
    for text in _turns():
        for item in app.stream({"messages": [HumanMessage(text)]}, config, stream_mode=mode, **run):
            kind, payload = item if isinstance(mode, list) else ("messages", item)
            if kind == "messages":
                chunks.append(payload)
            elif kind == "custom":
                events.append(payload)
        if app.get_state(config).values.get("compactions", 0) >= 1:
            return chunks, events
    raise AssertionError("the conversation never compacted")


def _check_stream(api: ScriptedOpenAI, state: dict, chunks, node: str, summary_model: str) -> None:
    assert state["compactions"] >= 1 and state["summary"].startswith(MARK), state["summary"][:200]
    summaries = [b for b in api.chat_requests if is_summary_call(b)]
    answers = [b for b in api.chat_requests if not is_summary_call(b)]
    assert summaries and answers
    # The summary went to the summary model when one is set, else to the chat model; the answers to the chat model.
    assert {b["model"] for b in summaries} == {summary_model or CHAT_MODEL}
    assert {b["model"] for b in answers} == {CHAT_MODEL}
    if not summary_model:
        assert all(b.get("stream") for b in summaries), "the summary is streamed by the server to the client..."
    texts = [str(m.content) for m, _ in chunks]
    assert not any(MARK in t for t in texts), "...but never streamed to the app as a message chunk"
    answer = [m for m, meta in chunks if isinstance(m, AIMessageChunk) and m.content and meta["langgraph_node"] == node]
    final = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
    streamed = "".join(str(m.content) for m in answer)
    assert final.content and str(final.content) in streamed, "the answer streams, chunk by chunk"
    assert len(answer) > len(str(final.content).split()) // 2


CASES = [("messages", SUMMARY_MODEL), (["messages", "custom"], "")]


@pytest.mark.parametrize("mode,summary_model", CASES)
def test_the_graphs_summary_goes_to_the_summary_model_and_is_not_streamed(embedded, data_dir, monkeypatch,
                                                                           mode, summary_model):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)  # init_chat_model's ChatOpenAI reads it
    with ScriptedOpenAI(reply=marked_summaries) as api:
        graph = embedded.graph(model=api.chat_model(streaming=True))
        chunks, events = _stream_until_compacted(graph, mode, context=_ctx(data_dir, api, summary_model))
        _check_stream(api, graph.get_state({"configurable": {"thread_id": "t"}}).values, chunks, "reason",
                      summary_model)
        if isinstance(mode, list):
            comp = [e for e in events if e["event"] == "compaction"]
            assert comp and comp[0]["summary"] == "model" and "summary_error" not in comp[0], comp


@pytest.mark.parametrize("mode,summary_model", CASES)
def test_the_middlewares_summary_goes_to_the_summary_model_and_is_not_streamed(embedded, data_dir, monkeypatch,
                                                                                mode, summary_model):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with ScriptedOpenAI(reply=marked_summaries) as api:
        agent = create_agent(api.chat_model(streaming=True), [], system_prompt="You are Acme's assistant.",
                             middleware=[PagefaultMiddleware(_ctx(data_dir, api, summary_model))],
                             checkpointer=embedded.checkpointer, store=embedded.store)
        chunks, events = _stream_until_compacted(agent, mode)
        _check_stream(api, agent.get_state({"configurable": {"thread_id": "t"}}).values, chunks, "model", summary_model)
        if isinstance(mode, list):
            comp = [e for e in events if e["event"] == "compaction"]
            assert comp and comp[0]["summary"] == "model" and "summary_error" not in comp[0], comp


async def _astream_until_compacted(agent, mode: list[str]) -> tuple[list[tuple[Any, dict]], list[dict], dict]:
    """``_stream_until_compacted`` through ``astream``: the chunks, the custom events and the state after."""
    config = {"configurable": {"thread_id": "t"}}
    chunks: list[tuple[Any, dict]] = []
    events: list[dict] = []
    for text in _turns():
        async for kind, payload in agent.astream({"messages": [HumanMessage(text)]}, config, stream_mode=mode):
            if kind == "messages":
                chunks.append(payload)
            elif kind == "custom":
                events.append(payload)
        state = (await agent.aget_state(config)).values
        if state.get("compactions", 0) >= 1:
            return chunks, events, state
    raise AssertionError("the conversation never compacted")


def test_the_middlewares_async_summary_is_not_streamed_either(data_dir, monkeypatch):
    """``astream``: the middleware's async path awaits the summary (``asummarize``), tagged the same."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)

    async def converse(api: ScriptedOpenAI) -> tuple[list[tuple[Any, dict]], list[dict], dict]:
        async with open_embedded_async(data_dir) as mem:
            agent = create_agent(api.chat_model(streaming=True), [],
                                 middleware=[PagefaultMiddleware(_ctx(data_dir, api, SUMMARY_MODEL))],
                                 checkpointer=mem.checkpointer, store=mem.store)
            return await _astream_until_compacted(agent, ["messages", "custom"])

    with ScriptedOpenAI(reply=marked_summaries) as api:
        chunks, events, state = asyncio.run(converse(api))
        _check_stream(api, state, chunks, "model", SUMMARY_MODEL)
        assert [e["summary"] for e in events if e["event"] == "compaction"][:1] == ["model"]


# -- a failed summary call ----------------------------------------------------------------------------


def _check_fallback(state: dict, events: list[dict], caplog: pytest.LogCaptureFixture) -> None:
    assert state["compactions"] >= 1 and state["evicted_count"] > 0
    assert "user: " + FIRST in state["summary"], "the extractive summary stands in for the model's"
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and final.content, "the turn still gets its answer"
    comp = [e for e in events if e["event"] == "compaction"]
    assert comp, events
    first = comp[0]
    assert first["summary"] == "extractive fallback", first
    kind, _, said = first["summary_error"].partition(": ")
    assert kind.endswith("Error") and "500" in said and "exploded" in said, first["summary_error"]
    assert {"evicted", "truncated", "tokens_before", "tokens_after", "window"} <= set(first)
    warnings = [r for r in caplog.records if r.name == "pagefault.window.compaction" and r.levelno == logging.WARNING]
    assert warnings and first["summary_error"] in warnings[0].getMessage()
    # No secret in the event or the log: the key the error carried is redacted.
    assert KEY not in first["summary_error"] and all(KEY not in r.getMessage() for r in caplog.records)


def test_a_failed_summary_in_the_graph_falls_back_logged_and_reported(embedded, data_dir, caplog):
    caplog.set_level(logging.WARNING, logger="pagefault.window.compaction")
    with ScriptedOpenAI(reply=failing_summaries) as api:
        graph = embedded.graph(model=api.chat_model())
        _, events = _stream_until_compacted(graph, ["custom", "values"], context=_ctx(data_dir, api, ""))
        assert any(is_summary_call(b) for b in api.chat_requests), "the summary call was made (and failed)"
        _check_fallback(graph.get_state({"configurable": {"thread_id": "t"}}).values, events, caplog)


def test_a_failed_async_summary_in_the_middleware_falls_back_logged_and_reported(data_dir, caplog):
    caplog.set_level(logging.WARNING, logger="pagefault.window.compaction")

    async def converse(api: ScriptedOpenAI) -> tuple[list[tuple[Any, dict]], list[dict], dict]:
        async with open_embedded_async(data_dir) as mem:
            agent = create_agent(api.chat_model(), [], middleware=[PagefaultMiddleware(_ctx(data_dir, api, ""))],
                                 checkpointer=mem.checkpointer, store=mem.store)
            return await _astream_until_compacted(agent, ["custom", "values"])

    with ScriptedOpenAI(reply=failing_summaries) as api:
        _, events, state = asyncio.run(converse(api))
        assert any(is_summary_call(b) for b in api.chat_requests), "the summary call was made (and failed)"
        _check_fallback(state, events, caplog)


def test_an_empty_summary_answer_is_a_failed_call_too(caplog):
    """A model that answers the summary call with no text would leave an eviction without its summary."""
    caplog.set_level(logging.WARNING, logger="pagefault.window.compaction")
    ctx = Context(user_id="ana", context_window=8192)
    with ScriptedOpenAI(reply=lambda body: {"content": ""} if is_summary_call(body) else offline_reply(body)) as api:
        done = summarize(api.chat_model(), ctx, "", EVICTED, TokenCounter())
        assert len(api.chat_requests) == 1
    assert done.source == "extractive fallback" and done.error == "ValueError: the summary model answered with no text"
    assert done.text.splitlines()[0] == "user: My name is Ana and I live in Lisbon."
    assert any(done.error in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


# -- the summary prompt and the summary model's choice ------------------------------------------------

CUSTOM = "Condense the excerpt below into notes for yourself, in at most {max_words} words."
EVICTED = [HumanMessage("My name is Ana and I live in Lisbon. I have a cat."), AIMessage("Noted, Ana.")]


def test_a_custom_summary_prompt_is_sent_and_the_offline_rules_still_summarize():
    ctx = Context(user_id="ana", context_window=8192)
    with ScriptedOpenAI() as api:  # the server's default answers are the offline model's rules
        done = summarize(api.chat_model(), ctx, "Earlier: Ana likes tea.", EVICTED, TokenCounter(), prompt=CUSTOM)
        (body,) = api.chat_requests
    words = int(0.15 * 8192) * 3 // 4
    assert body["messages"][0] == {"role": "system", "content": CUSTOM.format(max_words=words)}
    assert not body["messages"][0]["content"].startswith(SUMMARY_INSTRUCTION)
    assert done.error == "" and done.source == "model"
    assert done.text.splitlines() == ["Earlier: Ana likes tea.", "user: My name is Ana and I live in Lisbon.",
                                      "assistant: Noted, Ana."]
    # In process, the offline model itself, told the same custom prompt, writes the same summary.
    offline = summarize(OfflineChatModel(), ctx, "Earlier: Ana likes tea.", EVICTED, TokenCounter(), prompt=CUSTOM)
    assert offline.text == done.text


@pytest.mark.parametrize("app", ["graph", "middleware"])
def test_an_apps_summary_prompt_reaches_the_summary_call_and_the_offline_rules_answer_it(embedded, data_dir, app):
    """``Prompts(summary=...)`` given to the graph or the middleware is the summary call's system message;
    the server's offline rules know the call by its input, not by pagefault's own prompt."""
    prompts = Prompts(summary=CUSTOM)
    with ScriptedOpenAI() as api:
        ctx = _ctx(data_dir, api, "")
        if app == "graph":
            runner, run = embedded.graph(model=api.chat_model(), prompts=prompts), {"context": ctx}
        else:
            runner, run = create_agent(api.chat_model(), [], middleware=[PagefaultMiddleware(ctx, prompts=prompts)],
                                       checkpointer=embedded.checkpointer, store=embedded.store), {}
        _, events = _stream_until_compacted(runner, ["custom", "values"], **run)
        state = runner.get_state({"configurable": {"thread_id": "t"}}).values
    summaries = [b for b in api.chat_requests if is_summary_call(b)]
    words = int(0.15 * WINDOW) * 3 // 4
    assert summaries and all(b["messages"][0] == {"role": "system", "content": CUSTOM.format(max_words=words)}
                             for b in summaries)
    assert not any(b["messages"][0]["content"].startswith(SUMMARY_INSTRUCTION) for b in api.chat_requests)
    assert "user: " + FIRST in state["summary"], state["summary"][:300]
    assert [e["summary"] for e in events if e["event"] == "compaction"][:1] == ["model"]


def test_the_offline_model_takes_a_user_message_shaped_like_the_input_as_a_summary_only_without_tools():
    text = SummaryInput("", "user: I live in Lisbon.").render()
    model = OfflineChatModel()
    assert model.invoke([HumanMessage(text)]).content == "user: I live in Lisbon."
    tools = [{"type": "function", "function": {"name": "archival_memory_insert", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}}}}]
    with_tools = model.invoke([HumanMessage(text)], tools=tools)
    assert with_tools.tool_calls and with_tools.tool_calls[0]["name"] == "archival_memory_insert"


@pytest.mark.parametrize("prompt,names", [
    ("", "empty"), ("Summarize {topic} in {max_words} words.", "'topic'"), ("At most {max_words words.", "expected '}'"),
    ("Use {} words.", "''")])
def test_a_summary_prompt_that_cannot_be_filled_in_is_refused_naming_it(prompt, names):
    with pytest.raises(ValueError) as e:
        summary_instruction(prompt, 100)
    assert names in str(e.value) and (not prompt or repr(prompt) in str(e.value)), str(e.value)
    assert summary_instruction("At most {max_words} words, {{literally}}.", 7) == "At most 7 words, {literally}."


def test_the_summary_model_is_the_setting_when_set_else_the_chat_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    chat = OfflineChatModel(model="the-chat-model")
    setup = AgentSetup(model=chat)
    assert setup.summary_model(Context()) is chat
    assert setup.summary_model(Context(summary_model="offline")) is not chat
    assert isinstance(setup.summary_model(Context(summary_model="offline")), OfflineChatModel)
    nano = setup.summary_model(Context(summary_model=f"openai:{SUMMARY_MODEL}", base_url="http://127.0.0.1:9/v1"))
    assert type(nano).__name__ == "ChatOpenAI" and nano.model_name == SUMMARY_MODEL
    assert load_summary_model("", "", chat) is chat
    with pytest.raises(ValueError, match="summary_model 'nosuchprovider:x'"):
        load_summary_model("nosuchprovider:x", "", chat)
