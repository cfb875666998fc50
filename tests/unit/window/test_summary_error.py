"""A failed summary call, in ``pagefault.window.compaction.summarize``: the extractive summary stands in, and
the error it reports is redacted and cut to ``ERROR_CHARS``. The summary model here is a chat model that
always raises (only the LLM is faked); the fallback, the redaction and the cut are the real code."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult

from pagefault.graph.context import Context
from pagefault.models.tokens import TokenCounter
from pagefault.window.compaction import ERROR_CHARS, summarize

EVICTED = [HumanMessage("My name is Ana and I live in Lisbon. I have a cat."), AIMessage("Noted, Ana.")]
PREFIX = "RuntimeError: "


class FailingModel(BaseChatModel):
    """A summary model whose every call raises ``RuntimeError(message)``."""

    message: str

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        raise RuntimeError(self.message)

    @property
    def _llm_type(self) -> str:
        return "failing"


def _summarize(message: str):
    return summarize(FailingModel(message=message), Context(user_id="ana", context_window=8192), "", EVICTED,
                     TokenCounter())


def test_a_failed_call_leaves_the_extractive_summary_and_a_redacted_error():
    key = "sk-proj-" + "Wq7Lp2Zx9Rt4" * 3
    done = _summarize(f"upstream refused key {key}")
    assert done.source == "extractive fallback"
    assert done.text.splitlines()[0] == "user: My name is Ana and I live in Lisbon."
    assert done.error.startswith(PREFIX + "upstream refused key ") and key not in done.error
    assert key not in done.text


def test_an_error_of_exactly_error_chars_is_kept_whole_and_a_longer_one_is_cut_to_that_length():
    exact = "x" * (ERROR_CHARS - len(PREFIX))
    assert _summarize(exact).error == PREFIX + exact
    longer = _summarize(exact + "y").error
    assert len(longer) == ERROR_CHARS
    assert longer == (PREFIX + exact)[: ERROR_CHARS - 1] + "…"
