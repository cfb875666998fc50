"""Secrets: keys in user text are redacted before they reach memory (by default), and pagefault
never writes the keys of its own environment into memory, checkpoints, events or logs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from pagefault import Context, open_embedded
from pagefault.safety.redaction import redact
from pagefault.stores import CoreMemory, MemoryServices, Scope

OPENAI = "sk-proj-" + "Q7c2Xr9LmP4tWz8Kd3Nf6Hj1"
AWS = "AKIA" + "Z7Q2X9R4M1P6T3W8"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
       "-----END OPENSSH PRIVATE KEY-----")


@pytest.mark.parametrize("text,secret,kind", [
    (f"my key is {OPENAI} ok", OPENAI, "openai-key"),
    (f"aws id {AWS}", AWS, "aws-access-key"),
    (f"token {GITHUB}", GITHUB, "github-token"),
    (f"here:\n{PEM}\nthanks", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "private-key"),
    ("the wifi password: Tulip-House!", "Tulip-House", "password"),
    ("My password is tulip123.", "tulip123", "password"),
    ('api_key = "abcd1234efgh5678"', "abcd1234efgh5678", "secret"),
])
def test_obvious_secrets_are_redacted(text, secret, kind):
    out = redact(text)
    assert secret not in out.text and f"[REDACTED {kind}]" in out.text and kind in out.found


@pytest.mark.parametrize("text", [
    "I like tokens of appreciation.", "The token is valid until May.", "The password was changed yesterday.",
    "sk-8 is my ski size", "Call me at +1 555 0100.", "",
])
def test_ordinary_text_is_left_alone(text):
    assert redact(text).text == text and redact(text).found == ()


def _files_containing(root: str, needle: str) -> list[str]:
    return [str(p) for p in Path(root).rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_user_secrets_are_redacted_before_memory(data_dir):
    with open_embedded(data_dir) as p:
        g = p.graph()
        ctx = Context(user_id="ana", data_dir=data_dir)
        cfg = {"configurable": {"thread_id": "t1"}}
        g.invoke({"messages": [HumanMessage(f"My OpenAI key is {OPENAI} and my name is Ana.")]}, cfg, context=ctx)
        out = g.invoke({"messages": [HumanMessage("What is my OpenAI key?")]}, cfg, context=ctx)
        assert OPENAI not in out["messages"][-1].content and "[REDACTED openai-key]" in out["messages"][-1].content
        scope = Scope("ana")
        svc = MemoryServices.open(data_dir)
        found = svc.archival.search(scope, "OpenAI key", 5)
        assert any("[REDACTED openai-key]" in r.text for r, _ in found)
        assert not any(OPENAI in r.text for r, _ in found)
        assert OPENAI not in CoreMemory(p.store, scope).get("human").value
        # The checkpoint keeps the conversation as it happened: the key is only in the user's own message.
        for snap in g.get_state_history(cfg):
            for m in snap.values.get("messages", []):
                if OPENAI in str(m.content) or OPENAI in str(getattr(m, "tool_calls", "")):
                    assert isinstance(m, HumanMessage), m
    # Memory files (core store, Chroma, BM25) never hold it.
    assert [f for f in _files_containing(data_dir, OPENAI) if "checkpoints" not in f] == []


class Verbatim(BaseChatModel):
    """Fake LLM: saves the user's text verbatim to archival and core memory, then says done."""

    @property
    def _llm_type(self) -> str:
        return "verbatim"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            msg = AIMessage("", tool_calls=[
                {"name": "archival_memory_insert", "args": {"text": last.content}, "id": "a1", "type": "tool_call"},
                {"name": "core_memory_append", "args": {"section": "human", "text": last.content}, "id": "c1",
                 "type": "tool_call"}])
        else:
            msg = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=msg)])


@pytest.mark.parametrize("redact_secrets", [True, False])
def test_redaction_is_configurable(embedded, data_dir, redact_secrets):
    g = embedded.graph(model=Verbatim())
    text = f"Deploy key for the lab: {GITHUB}"
    g.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t"}},
             context=Context(user_id="ana", data_dir=data_dir, redact_secrets=redact_secrets))
    scope = Scope("ana")
    stored = [r.text for r, _ in MemoryServices.open(data_dir).archival.search(scope, "deploy key lab", 5)]
    core = CoreMemory(embedded.store, scope).get("human").value
    if redact_secrets:
        assert stored == ["Deploy key for the lab: [REDACTED github-token]"]
        assert core == "Deploy key for the lab: [REDACTED github-token]"
    else:
        assert stored == [text] and core == text


class _AppendKey(BaseChatModel):
    """Fake LLM: saves the user's key to core memory, then answers."""

    @property
    def _llm_type(self) -> str:
        return "append-key"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if isinstance(messages[-1], HumanMessage):
            msg = AIMessage("", tool_calls=[{"name": "core_memory_append", "id": "c1", "type": "tool_call",
                                             "args": {"section": "human", "text": f"API key: {OPENAI}"}}])
        else:
            msg = AIMessage("Saved.")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def test_redact_secrets_false_is_honoured_by_the_middleware(data_dir):
    from langchain.agents import create_agent

    from pagefault import PagefaultMiddleware

    with open_embedded(data_dir) as p:
        for redact_secrets, user in ((False, "kay"), (True, "kim")):
            ctx = Context(user_id=user, data_dir=data_dir, redact_secrets=redact_secrets)
            agent = create_agent(_AppendKey(), [], middleware=[PagefaultMiddleware(ctx)],
                                 checkpointer=p.checkpointer, store=p.store)
            agent.invoke({"messages": [HumanMessage("remember my key")]}, {"configurable": {"thread_id": f"t-{user}"}})
            value = CoreMemory(p.store, Scope(user)).get("human").value
            assert (OPENAI in value) is (not redact_secrets), value


def test_redact_secrets_false_is_honoured_by_memory_tools(data_dir):
    from pagefault import memory_tools

    with open_embedded(data_dir) as p:
        for redact_secrets, user in ((False, "kay"), (True, "kim")):
            ctx = Context(user_id=user, data_dir=data_dir, redact_secrets=redact_secrets)
            (append,) = [t for t in memory_tools(ctx, store=p.store) if t.name == "core_memory_append"]
            append.invoke({"section": "human", "text": f"API key: {OPENAI}"})
            value = CoreMemory(p.store, Scope(user)).get("human").value
            assert (OPENAI in value) is (not redact_secrets), value


def test_env_var_must_be_a_real_bool(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_REDACT_SECRETS", "false")
    assert Context().redact_secrets is False
    monkeypatch.setenv("PAGEFAULT_REDACT_SECRETS", "maybe")
    with pytest.raises(ValueError, match="not a valid bool"):
        Context()


def test_pagefault_never_writes_its_own_keys(data_dir, monkeypatch, caplog):
    keys = {"OPENAI_API_KEY": "sk-" + "envOnly9f8e7d6c5b4a3210ZZ", "ANTHROPIC_API_KEY": "sk-ant-" + "envOnly0a1b2c3d4e5f6g7",
            "LANGSMITH_API_KEY": "lsv2_" + "envOnly_5d4c3b2a1f0e9d8c"}
    for k, v in keys.items():
        monkeypatch.setenv(k, v)
    caplog.set_level(logging.DEBUG)
    events = []
    with open_embedded(data_dir) as p:
        g = p.graph()
        ctx = Context(user_id="ana", data_dir=data_dir, context_window=2048)
        cfg = {"configurable": {"thread_id": "t1"}}
        turns = ["My name is Ana and I live in Lisbon.", "I work as a nurse.", "Where do I live?",
                 f"Is this my key: {keys['OPENAI_API_KEY']}", "What is my key?"]
        turns += [f"Filler fact {i}: the blue heron nests near the river bend." for i in range(8)]
        for text in turns:
            for mode, chunk in g.stream({"messages": [HumanMessage(text)]}, cfg, context=ctx,
                                        stream_mode=["updates", "custom"]):
                events.append(repr(chunk))
        state = g.get_state(cfg).values
        assert state["compactions"] >= 1, "the run should have compacted (summaries are memory too)"
        history = list(g.get_state_history(cfg))
    logs = caplog.text
    for name, value in keys.items():
        assert [f for f in _files_containing(data_dir, value) if "checkpoints" not in f] == [], name
        assert value not in logs, name
        # Stream events (page faults, compactions) and every message except the user's own never carry it.
        assert not [e for e in events if value in e and "HumanMessage" not in e], name
        for snap in history:
            for m in snap.values.get("messages", []):
                if value in str(m.content) or value in str(getattr(m, "tool_calls", "")):
                    assert isinstance(m, HumanMessage), (name, m)
            assert value not in snap.values.get("summary", ""), name
    # Keys the user never typed appear in no file at all.
    for name in ("ANTHROPIC_API_KEY", "LANGSMITH_API_KEY"):
        assert _files_containing(data_dir, keys[name]) == [], name


# -- summaries: a model that copies what it summarizes ------------------------------------------------


class CopyingSummarizer(BaseChatModel):
    """Fake LLM: answers "Noted." and, asked for a summary, copies every line of the excerpt that mentions
    the deploy token into it word for word, as a careless model would."""

    @property
    def _llm_type(self) -> str:
        return "copying-summarizer"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        last = str(messages[-1].content)
        if "NEW MESSAGES:" in last:
            text = "\n".join(line for line in last.splitlines() if "deploy token" in line) or "Small talk."
        else:
            text = "Noted."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


TOKEN_TURN = f"The deploy token for the lab is {GITHUB} and it expires in May."
FILLER = [f"Filler {i}: the heron nests by the river bend where the old mill stood " + "and the reeds grow " * 12
          for i in range(14)]


def _summary_is_redacted(summary: str) -> None:
    assert GITHUB not in summary, summary
    assert "The deploy token for the lab is [REDACTED github-token]" in summary, summary


def test_a_compaction_summary_never_holds_a_key(embedded, data_dir):
    """Through the graph: the turn with the key is evicted, and the summary that replaces it is redacted."""
    graph = embedded.graph(model=CopyingSummarizer())
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2300)
    config = {"configurable": {"thread_id": "sum"}}
    for text in [TOKEN_TURN, *FILLER]:
        graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx)
    state = graph.get_state(config).values
    assert state["compactions"] >= 1 and state["evicted_count"] > 0
    _summary_is_redacted(state["summary"])


def test_a_middleware_summary_never_holds_a_key(embedded, data_dir):
    """Through PagefaultMiddleware in a create_agent app: the same eviction, the same redacted summary."""
    from langchain.agents import create_agent

    from pagefault import PagefaultMiddleware

    agent = create_agent(CopyingSummarizer(), tools=[], checkpointer=embedded.checkpointer, store=embedded.store,
                         middleware=[PagefaultMiddleware(Context(user_id="ana", data_dir=data_dir, context_window=2300))])
    config = {"configurable": {"thread_id": "mw-sum"}}
    for text in [TOKEN_TURN, *FILLER]:
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    state = agent.get_state(config).values
    assert state["compactions"] >= 1 and state["evicted_count"] > 0
    _summary_is_redacted(state["summary"])


# -- archival inserts, by each route that writes them ------------------------------------------------------


def test_archival_inserts_are_redacted_through_the_store_api(data_dir):
    """``ArchivalStore.insert`` and ``insert_many`` (a document's passages) redact before they store."""
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    one = svc.archival.insert(scope, f"The lab's AWS id is {AWS}.")
    many = svc.archival.insert_many(scope, [(f"Passage one names {OPENAI}.", None), ("Passage two is plain.", None)])
    assert one.text == "The lab's AWS id is [REDACTED aws-access-key]."
    assert [r.text for r in many] == ["Passage one names [REDACTED openai-key].", "Passage two is plain."]
    stored = svc.archival.index.collection.get(where={"scope": scope.key}, include=["documents"])["documents"]
    assert not [t for t in stored if AWS in t or OPENAI in t] and len(stored) == 3
    assert svc.archival.index.lexical.texts([one.id]) == {one.id: one.text}
    kept = svc.archival.insert(scope, f"Kept as given: {AWS}.", redact_secrets=False)
    assert kept.text == f"Kept as given: {AWS}."


def test_archival_inserts_are_redacted_through_the_langchain_tools(data_dir):
    from pagefault import memory_tools

    tools = {t.name: t for t in memory_tools(Context(user_id="ana", data_dir=data_dir))}
    tools["archival_memory_insert"].invoke({"text": f"Deploy key for the lab: {GITHUB}"})
    found = tools["archival_memory_search"].invoke({"query": "deploy key lab"})
    assert GITHUB not in found and "Deploy key for the lab: [REDACTED github-token]" in found, found
    stored = [r.text for r, _ in MemoryServices.open(data_dir).archival.search(Scope("ana"), "deploy key lab", 5)]
    assert stored == ["Deploy key for the lab: [REDACTED github-token]"]
