"""(e) Token counts for OpenAI model names equal tiktoken's, with the network cut off."""

from __future__ import annotations

import json
import socket

import pytest
import tiktoken
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import pagefault.models.tokens as tokens
from pagefault.models.tokens import TOKENS_PER_MESSAGE, TokenCounter

SAMPLES = [
    "Hello, world!",
    "Ünïcödé, emoji 🚀🔥 and CJK 記憶體分頁 mixed with code: def f(x): return x**2",
    "  leading and trailing spaces\n\n\tand tabs  ",
    "<|endoftext|> is treated as plain text here",
    "x" * 5000,
]


@pytest.fixture
def offline_tiktoken(tmp_path, monkeypatch):
    """A fresh, empty tiktoken cache, no loaded encodings, and no network at all."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    monkeypatch.setattr(tokens, "_installed", set())
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def no_network(*args, **kwargs):
        raise AssertionError("token counting tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    return tmp_path / "tiktoken-cache"


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4o", "openai:gpt-4.1", "gpt-4", "gpt-3.5-turbo"])
def test_openai_counts_equal_tiktoken_offline(offline_tiktoken, model):
    counter = TokenCounter(model)
    name = model.split(":", 1)[-1]
    # tiktoken loads the encoding from the cache we filled, checking tiktoken's own pinned sha256.
    reference = tiktoken.encoding_for_model(name)
    assert counter.exact and counter.encoding.name == reference.name
    for text in SAMPLES:
        assert counter.count_text(text) == len(reference.encode_ordinary(text))
    assert any(offline_tiktoken.iterdir()), "the encoding file must be in tiktoken's cache"


def test_message_and_tool_counts_follow_the_chat_format(offline_tiktoken):
    counter = TokenCounter("gpt-4o-mini")
    enc = tiktoken.encoding_for_model("gpt-4o-mini")
    n = lambda s: len(enc.encode_ordinary(s))  # noqa: E731
    human = HumanMessage("What is my name?", id="h1")
    assert counter.count_message(human) == TOKENS_PER_MESSAGE + n("human") + n("What is my name?")
    call = AIMessage("", id="a1", tool_calls=[{"name": "archival_memory_search", "args": {"query": "name"}, "id": "c1"}])
    assert counter.count_message(call) == TOKENS_PER_MESSAGE + n("ai") + n("") + n("archival_memory_search") + n(
        json.dumps({"query": "name"}))
    result = ToolMessage("Ana", tool_call_id="c1", id="t1")
    assert counter.count_message(result) == TOKENS_PER_MESSAGE + n("tool") + n("Ana") + n("c1")
    schema = {"type": "function", "function": {"name": "f", "parameters": {}}}
    assert counter.count_tools([schema]) == n(json.dumps(schema, sort_keys=True))


def test_per_message_counts_are_cached_not_recomputed(offline_tiktoken, monkeypatch):
    counter = TokenCounter("gpt-4o-mini")
    history = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(200)]
    first = counter.count_messages(history)
    calls = []
    original = counter.count_text
    monkeypatch.setattr(counter, "count_text", lambda t: calls.append(t) or original(t))
    history.append(HumanMessage("one more", id="new"))
    assert counter.count_messages(history) == first + counter.count_message(history[-1])
    assert len(calls) == 2, "only the new message may be tokenized (role + text)"


def test_other_models_use_the_documented_approximation(offline_tiktoken):
    counter = TokenCounter("ollama:llama3.1")
    cl100k = tiktoken.get_encoding("cl100k_base")
    text = "A sentence for a local model."
    assert not counter.exact
    assert counter.count_text(text) == -(-len(cl100k.encode_ordinary(text)) * 110 // 100)
