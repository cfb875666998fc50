"""The flows the graph, the middleware, the memory tools and the CLI share have one copy each, so
what one path does the others do too. Each test here is a drift a copy once had."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from pagefault import Context, PagefaultMiddleware, memory_tools, open_embedded
from pagefault.cli.main import Session
from pagefault.stores import CoreMemory, Scope

KEY = "sk-proj-" + "Zq3x" * 12


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers from a script (the LLM is the only part faked)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self


def _append_key_then_answer() -> ScriptedModel:
    return ScriptedModel(messages=iter([
        AIMessage("", tool_calls=[{"name": "core_memory_append", "id": "c1",
                                   "args": {"section": "human", "text": f"API key: {KEY}"}}]),
        AIMessage("Saved."),
    ]))


def test_redact_secrets_false_is_honoured_by_the_middleware(tmp_path):
    with open_embedded(str(tmp_path / "pf")) as p:
        for redact, user in ((False, "kay"), (True, "kim")):
            ctx = Context(user_id=user, data_dir=str(tmp_path / "pf"), redact_secrets=redact)
            agent = create_agent(_append_key_then_answer(), [], middleware=[PagefaultMiddleware(ctx)],
                                 checkpointer=p.checkpointer, store=p.store)
            agent.invoke({"messages": [{"role": "user", "content": "remember my key"}]},
                         {"configurable": {"thread_id": f"t-{user}"}})
            value = CoreMemory(p.store, Scope(user)).get("human").value
            assert (KEY in value) is (not redact), value


def test_redact_secrets_false_is_honoured_by_memory_tools(tmp_path):
    with open_embedded(str(tmp_path / "pf")) as p:
        for redact, user in ((False, "kay"), (True, "kim")):
            (append,) = [t for t in memory_tools(Context(user_id=user, data_dir=str(tmp_path / "pf"),
                                                         redact_secrets=redact), store=p.store)
                         if t.name == "core_memory_append"]
            append.invoke({"section": "human", "text": f"API key: {KEY}"})
            value = CoreMemory(p.store, Scope(user)).get("human").value
            assert (KEY in value) is (not redact), value


def test_cli_context_counts_what_the_model_is_sent(tmp_path):
    """/context (and the demo's bars) measure the same segments the reason node sent, procedures included."""
    import io

    with open_embedded(str(tmp_path / "pf")) as p:
        ctx = Context(user_id="ana", data_dir=str(tmp_path / "pf"))
        s = Session(p, ctx, "t-context", out=io.StringIO())
        s.say("Always answer in French.")
        s.say("My name is Ana.")
        sent = s.state()["tokens"]  # what the last model call was sent, by segment
        shown = s.context_tokens()
        assert sent["procedures"] > 0, sent
        for segment in ("system", "core", "procedures", "summary", "tools"):
            assert shown[segment] == sent[segment], (segment, shown, sent)
