"""Compaction: when the main context passes its trigger, summarize and evict (the one routine the
graph's ``compact`` node and ``PagefaultMiddleware`` both run).

Rules it keeps (each a bug some peer shipped):
- an AI message with tool calls is evicted together with all its results, never apart;
- the current user turn (the last user message and everything after it) is never evicted;
- the window is never wiped: eviction stops at the target, and the summary replaces what left;
- a message too big for the window is put in the window truncated, with a pointer to its full
  text in recall, so compaction cannot loop on it;
- summary and eviction are one state update, so a checkpoint never holds one without the other;
- the summary call is pagefault's, not the answer: it is tagged ``nostream`` (``summary_config``), so
  ``stream_mode="messages"`` never streams it, and it goes to the summary model (``Context.summary_model``,
  else the chat model: ``models.chat.load_summary_model``) with the app's summary prompt
  (``Prompts.summary``, as ``MemoryRun.prompts`` carries it);
- a failed summary call never loses the eviction: the extractive summary stands in, with a warning
  logged and the ``compaction`` event saying so (``"summary": "extractive fallback"``, ``"summary_error"``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import string
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.constants import TAG_NOSTREAM

from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.models.offline import OfflineChatModel
from pagefault.models.tokens import TokenCounter
from pagefault.safety.redaction import redact
from pagefault.stores.recall import conversation_turns, speaker
from pagefault.text.messages import message_text
from pagefault.text.prompts import SUMMARY_PROMPT
from pagefault.text.summary_input import SummaryInput
from pagefault.window.events import emit_compaction
from pagefault.window.main_context import MainContext
from pagefault.window.recall_sync import sync_recall
from pagefault.window.run import MemoryRun, users_before

#: Share of the window the running summary may take.
SUMMARY_SHARE = 0.15
#: Share of the window one message may take before it is truncated in the window.
MESSAGE_SHARE = 0.35
#: A message at or under this many tokens is never truncated.
MIN_TRUNCATE_TOKENS = 200
#: Longest line per message in the summarizer's transcript.
TRANSCRIPT_LINE_CHARS = 2_000
#: Longest summary error the event and the log carry.
ERROR_CHARS = 300
#: The ``compaction`` event's ``summary``: who wrote it.
BY_MODEL, FALLBACK, UNCHANGED = "model", "extractive fallback", "unchanged"

logger = logging.getLogger(__name__)


def eviction_units(messages: Sequence[BaseMessage]) -> list[list[int]]:
    """Group message indexes so an AI tool-call message and its results form one unit."""
    units: list[list[int]] = []
    i = 0
    while i < len(messages):
        unit = [i]
        m = messages[i]
        if isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls):
            # Every result that follows, including errors for calls whose JSON did not parse.
            j = i + 1
            while j < len(messages) and isinstance(messages[j], ToolMessage):
                unit.append(j)
                j += 1
            i = j
        else:
            i += 1
        units.append(unit)
    return units


def protected_from(messages: Sequence[BaseMessage]) -> int:
    """Index where the current user turn starts; nothing from here on may be evicted."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return len(messages)


def plan_eviction(messages: Sequence[BaseMessage], costs: Sequence[int], excess: int) -> int:
    """How many leading messages to evict to shed ``excess`` tokens, in whole units."""
    limit = protected_from(messages)
    shed = 0
    count = 0
    for unit in eviction_units(messages):
        if shed >= excess or unit[-1] >= limit:
            break
        shed += sum(costs[i] for i in unit)
        count = unit[-1] + 1
    return count


M = TypeVar("M", bound=BaseMessage)


def truncate(message: M, keep_tokens: int, counter: TokenCounter, where: str) -> M:
    """The message with its text cut to about ``keep_tokens``, pointing at its full text in recall."""
    text = message_text(message)
    ids = counter.encoding.encode_ordinary(text)
    head = counter.encoding.decode(ids[: max(keep_tokens, 0)])
    note = (f"\n[... truncated by pagefault: {len(ids)} tokens in full; the full text is in recall as {where}; "
            "use conversation_search]")
    kwargs = dict(message.additional_kwargs or {})
    kwargs["pagefault"] = {**kwargs.get("pagefault", {}), "truncated": True}
    return message.model_copy(update={"content": head + note, "additional_kwargs": kwargs})


def transcript(messages: Sequence[BaseMessage]) -> str:
    lines = []
    for m in messages:
        text = " ".join(message_text(m).split())[:TRANSCRIPT_LINE_CHARS]
        if isinstance(m, AIMessage) and m.tool_calls:
            text = (text + " [called " + ", ".join(tc["name"] for tc in m.tool_calls) + "]").strip()
        lines.append(f"{speaker(m)}: {text}")
    return "\n".join(lines)


def fit_summary(summary: str, max_tokens: int, counter: TokenCounter) -> str:
    """Keep the newest lines of a summary that has outgrown its share of the window: as many as fit.

    The oldest lines are dropped one at a time until the rest fits. (A bisection over how many to drop
    was wrong: a text's token count does not always fall as lines leave it, since a run of blank lines
    can be one token or several, and it could drop more than it had to.)"""
    if counter.count_text(summary) <= max_tokens:
        return summary
    lines = summary.splitlines()
    for drop in range(len(lines)):
        kept = "\n".join(["(older summary dropped)", *lines[drop:]])
        if counter.count_text(kept) <= max_tokens:
            return kept
    return ""


def summary_instruction(prompt: str, max_words: int) -> str:
    """The summary call's system message: ``prompt`` (``Prompts.summary``) with ``{max_words}`` filled in.
    A prompt that is empty, or has another placeholder or a stray brace, is refused naming it."""
    if not prompt.strip():
        raise ValueError("the summary prompt is empty; give Prompts(summary=...) an instruction, or leave the default")
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None}
    except ValueError as e:
        raise ValueError(f"summary prompt {prompt!r}: {e} (write {{{{ and }}}} for literal braces)") from e
    if fields - {"max_words"}:
        raise ValueError(f"summary prompt {prompt!r} has placeholders {sorted(fields - {'max_words'})}; only "
                         "{max_words} is filled in (write {{ and }} for literal braces)")
    return prompt.format(max_words=max_words)


def summary_config(config: RunnableConfig | None) -> RunnableConfig:
    """The run's ``config`` for the summary call, tagged ``nostream`` (LangGraph's ``stream_mode="messages"``
    leaves a call so tagged out, as LangChain's ``SummarizationMiddleware`` does its own) and marked
    ``pagefault_call="summary"`` in its metadata (traces tell it from the answer)."""
    return merge_configs(config, {"tags": [TAG_NOSTREAM], "metadata": {"pagefault_call": "summary"}})


@dataclass(frozen=True)
class Summary:
    """The running summary a compaction wrote: its ``text`` and, when the summary call failed and the
    extractive summary stands in, the ``error`` (``"<type>: <message>"``, redacted, cut short)."""

    text: str
    error: str = ""

    @property
    def source(self) -> str:
        """Who wrote it, as the ``compaction`` event says: ``"model"`` or ``"extractive fallback"``."""
        return FALLBACK if self.error else BY_MODEL


def _summary_request(ctx: Context, previous: str, evicted: Sequence[BaseMessage],
                     prompt: str) -> tuple[list[BaseMessage], int]:
    """The summarizer's request, and the summary's share of the window in tokens."""
    max_tokens = int(SUMMARY_SHARE * ctx.context_window)
    return [
        SystemMessage(content=summary_instruction(prompt, max_tokens * 3 // 4)),
        HumanMessage(content=SummaryInput(previous, transcript(evicted)).render()),
    ], max_tokens


def _summary(text: str, ctx: Context, counter: TokenCounter, max_tokens: int, error: str = "") -> Summary:
    if ctx.redact_secrets:  # the summary is memory pagefault writes: no keys in it
        text = redact(text).text
    return Summary(fit_summary(text.strip(), max_tokens, counter), error)


def _answered(reply: BaseMessage) -> str:
    """The summary in the model's ``reply``; an empty one is a failed call (the eviction must leave a summary)."""
    text = message_text(reply)
    if not text.strip():
        raise ValueError("the summary model answered with no text")
    return text


def _fallback(request: list[BaseMessage], error: Exception) -> tuple[str, str]:
    """The extractive summary (the offline model's rules, no I/O) and the error, logged, that called for it."""
    said = redact(f"{type(error).__name__}: {' '.join(str(error).split())}").text  # never a key in a log
    said = said if len(said) <= ERROR_CHARS else said[: ERROR_CHARS - 1] + "…"
    logger.warning("the compaction summary call failed, so the extractive summary was used: %s", said)
    return message_text(OfflineChatModel().invoke(request)), said


def summarize(model: BaseChatModel, ctx: Context, previous: str, evicted: Sequence[BaseMessage],
              counter: TokenCounter, config: RunnableConfig | None = None, *,
              prompt: str = SUMMARY_PROMPT) -> Summary:
    """The running summary merged with the evicted messages by ``model`` told ``prompt`` (``{max_words}``
    filled in), in a call tagged ``nostream`` (``summary_config``), fitted to its share of the window.
    If the call fails, the extractive summary, with the error (``Summary.error``, logged)."""
    request, max_tokens = _summary_request(ctx, previous, evicted, prompt)
    try:
        text, error = _answered(model.invoke(request, summary_config(config))), ""
    except Exception as e:  # never lose the eviction's summary to a flaky model: fall back to extractive
        text, error = _fallback(request, e)
    return _summary(text, ctx, counter, max_tokens, error)


async def asummarize(model: BaseChatModel, ctx: Context, previous: str, evicted: Sequence[BaseMessage],
                     counter: TokenCounter, config: RunnableConfig | None = None, *,
                     prompt: str = SUMMARY_PROMPT) -> Summary:
    """``summarize`` with the model awaited (``ainvoke``), for async runs."""
    request, max_tokens = _summary_request(ctx, previous, evicted, prompt)
    try:
        text, error = _answered(await model.ainvoke(request, summary_config(config))), ""
    except Exception as e:  # as in summarize: the extractive fallback (rules, no I/O)
        text, error = _fallback(request, e)
    return _summary(text, ctx, counter, max_tokens, error)


@dataclass
class CompactionPlan:
    """What one compaction does: evict the first ``evict`` messages, cut some of the rest down."""

    evict: int
    cut: dict[int, AnyMessage]
    """Index into the messages after eviction -> its truncated copy (same id, replaces it)."""
    tokens: int
    """The main context's total after the plan, before the summary grows."""

    @property
    def reach(self) -> int:
        """Messages of the window, from its start, that the plan evicts or cuts."""
        return max([self.evict, *[self.evict + i + 1 for i in self.cut]])


def plan_compaction(messages: Sequence[AnyMessage], costs: Sequence[int], total: int, ctx: Context,
                    counter: TokenCounter, where: Callable[[int], str]) -> CompactionPlan:
    """Evict down to the target and truncate what is still too big; ``where(i)`` locates message i."""
    n_evict = plan_eviction(messages, costs, total - int(ctx.compaction_target * ctx.context_window))
    kept = messages[n_evict:]
    # A message too big for the window, or the current turn still over the trigger, is cut down
    # in place, largest first (full text stays in recall), so compaction can never loop on it.
    max_msg = int(MESSAGE_SHARE * ctx.context_window)
    total -= sum(costs[:n_evict])
    cut: dict[int, AnyMessage] = {}
    for i in sorted(range(len(kept)), key=lambda i: -costs[n_evict + i]):
        m, cost = kept[i], costs[n_evict + i]
        if (m.additional_kwargs or {}).get("pagefault", {}).get("truncated") or cost <= MIN_TRUNCATE_TOKENS:
            continue
        over = total - int(ctx.compaction_trigger * ctx.context_window)
        if cost <= max_msg and over <= 0:
            break
        keep = max(MIN_TRUNCATE_TOKENS, min(max_msg, cost - max(over, 0)) - 64)
        cut[i] = truncate(m, keep, counter, where(n_evict + i))
        total -= cost - counter.count_message(cut[i])
    return CompactionPlan(n_evict, cut, total)


@dataclass
class Compaction:
    """What one compaction did: the window after it (``view``), what left it and what was cut down."""

    view: PagefaultState
    evicted: list[AnyMessage]
    replaced: list[AnyMessage]
    tokens_before: int
    tokens_after: int

    @property
    def changed(self) -> bool:
        return bool(self.evicted or self.replaced)

    def messages_update(self) -> list[BaseMessage]:
        """The ``messages`` channel update: the evicted removed, the cut ones replaced by id."""
        removals: list[BaseMessage] = [RemoveMessage(id=m.id or "") for m in self.evicted]
        return removals + list(self.replaced)

    def update(self) -> dict[str, Any]:
        """The state update, summary and eviction together (a checkpoint never holds one without the other)."""
        if not self.changed:
            return {"recall_indexed": self.view.recall_indexed}
        return {"messages": self.messages_update(), "summary": self.view.summary,
                "evicted_count": self.view.evicted_count, "evicted_user_messages": self.view.evicted_user_messages,
                "recall_indexed": self.view.recall_indexed, "pressure_warned": False,
                "compactions": self.view.compactions}


@dataclass
class _Planned:
    """A compaction worked out and its turns indexed, before the summary is written."""

    before: MainContext
    plan: CompactionPlan
    evicted: list[AnyMessage]
    replaced: list[AnyMessage]
    indexed: int
    users: int = 0
    """User messages of the thread before the window (``window.run.users_before``)."""


def _plan_window(state: PagefaultState, run: MemoryRun, config: RunnableConfig,
                 measure: Callable[[PagefaultState], MainContext]) -> _Planned:
    ctx, counter = run.ctx, run.counter
    before = measure(state)
    messages = list(state.messages)
    costs = [counter.count_message(m) for m in messages]
    users = users_before(run.services.recall, run.scope, run.thread_id, state.evicted_count, state.evicted_user_messages)
    turns = conversation_turns(messages, users)
    plan = plan_compaction(messages, costs, before.total, ctx, counter,
                           lambda i: f"thread {run.thread_id} turn {turns[i]} (message {state.evicted_count + i})")
    # Evicted (and truncated) messages must be findable before they leave the window.
    indexed = sync_recall(state, config, run.services.recall, run.scope, evicting_below=state.evicted_count + plan.reach)
    return _Planned(before, plan, messages[:plan.evict], list(plan.cut.values()), indexed, users)


def _apply(state: PagefaultState, run: MemoryRun, planned: _Planned, summary: Summary | None,
           measure: Callable[[PagefaultState], MainContext]) -> Compaction:
    """The compaction ``planned`` with ``summary`` (None: nothing was evicted, the summary stays)."""
    plan, evicted, replaced, before = planned.plan, planned.evicted, planned.replaced, planned.before
    if not evicted and not replaced:
        return Compaction(dataclasses.replace(state, recall_indexed=planned.indexed), [], [], before.total, before.total)
    view = dataclasses.replace(
        state, messages=[plan.cut.get(i, m) for i, m in enumerate(list(state.messages)[plan.evict:])],
        summary=state.summary if summary is None else summary.text,
        evicted_count=state.evicted_count + len(evicted), recall_indexed=planned.indexed, pressure_warned=False,
        evicted_user_messages=planned.users + sum(isinstance(m, HumanMessage) for m in evicted),
        compactions=state.compactions + 1)
    after = measure(view).total
    emit_compaction(evicted=len(evicted), truncated=len(replaced), tokens_before=before.total, tokens_after=after,
                    window=run.ctx.context_window, summary=UNCHANGED if summary is None else summary.source,
                    summary_error="" if summary is None else summary.error)
    return Compaction(view, evicted, replaced, before.total, after)


def compact_window(state: PagefaultState, run: MemoryRun, config: RunnableConfig, model: BaseChatModel,
                   measure: Callable[[PagefaultState], MainContext]) -> Compaction:
    """Evict the oldest messages down to the target, summarized, after indexing them into recall so
    ``conversation_search`` still finds them; cut down what is still too big. ``model`` writes the
    summary (the summary model: ``models.chat.load_summary_model``), told the run's summary prompt
    (``run.prompts.summary``); ``measure`` renders the main context as the caller sends it (its tools
    and prompt). Emits a ``compaction`` event."""
    planned = _plan_window(state, run, config, measure)
    summary = (summarize(model, run.ctx, state.summary, planned.evicted, run.counter, config,
                         prompt=run.prompts.summary)
               if planned.evicted else None)
    return _apply(state, run, planned, summary, measure)


async def acompact_window(state: PagefaultState, run: MemoryRun, config: RunnableConfig, model: BaseChatModel,
                          measure: Callable[[PagefaultState], MainContext]) -> Compaction:
    """``compact_window`` for async runs: the stores' work in a worker thread, the summary awaited."""
    planned = await asyncio.to_thread(_plan_window, state, run, config, measure)
    summary = (await asummarize(model, run.ctx, state.summary, planned.evicted, run.counter, config,
                                prompt=run.prompts.summary)
               if planned.evicted else None)
    return await asyncio.to_thread(_apply, state, run, planned, summary, measure)
