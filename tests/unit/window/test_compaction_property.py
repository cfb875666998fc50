"""Property: compaction never separates an AI message's tool calls from their results.

Chat APIs (OpenAI's rule is the strictest) reject a request in which a tool result has no tool
call right before it, or a tool call is not followed, contiguously, by a result for each of its
ids. Compaction evicts the oldest messages, so it is where such a split would come from.

Two levels:
(a) pure: ``plan_eviction`` on random message lists and random costs;
(b) end to end: the real graph with SQLite persistence, a user tool and the memory tools, driven by
    a scripted fake chat model (the only fake) that records every request it is sent.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from itertools import count
from typing import Any, Sequence

from hypothesis import HealthCheck, event, example, given, settings, target
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from pagefault import Context, PagefaultState, open_embedded
from pagefault.consolidation.supersede import INSTRUCTIONS as SUPERSEDE_INSTRUCTIONS
from pagefault.tools.handlers import MEMORY_TOOLS
from pagefault.window.compaction import eviction_units, plan_eviction, protected_from
from pagefault.window.main_context import build_main_context
from pagefault.window.setup import AgentSetup

SUMMARY_PREFIX = "Summarize the conversation excerpt"

# One-token words (cl100k, with their leading space), so sizes in words are about sizes in tokens.
VOCAB = ("the cat sat on a mat and then ran to old red barn near green hill where two dogs slept "
         "under big oak tree while rain fell all day long so we made tea read book wrote note").split()


def words(n: int, seed: object) -> str:
    rng = random.Random(str(seed))
    return " ".join(rng.choice(VOCAB) for _ in range(max(n, 0)))


# ------------------------------------------------------------------------------------------
# The invariant, checked on any message sequence (a request without its system message, or a
# state's window).
# ------------------------------------------------------------------------------------------

def call_ids(m: AIMessage) -> list[str]:
    """Ids of the calls an AI message puts on the wire (langchain-openai sends invalid calls as calls too)."""
    return [tc["id"] for tc in m.tool_calls] + [tc.get("id") for tc in m.invalid_tool_calls]


def pairing_violations(messages: Sequence[BaseMessage]) -> list[str]:
    """Every way ``messages`` breaks the tool-call pairing rule; empty when it is a valid request.

    - a ToolMessage must answer a call of an AIMessage earlier in the sequence, and sit in the
      contiguous block of results right after that AIMessage;
    - an AIMessage with calls that is followed by anything must be followed, contiguously, by a
      ToolMessage for every one of its calls.
    """
    problems: list[str] = []
    pending: set[str] = set()  # calls of the last AI message still waiting for their results
    owner = -1
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id in pending:
                pending.discard(m.tool_call_id)
                continue
            earlier = [j for j in range(i) if isinstance(messages[j], AIMessage)
                       and m.tool_call_id in call_ids(messages[j])]
            if earlier:
                problems.append(f"ToolMessage #{i} ({m.tool_call_id}) is not contiguous with its AIMessage #{earlier[-1]}")
            else:
                problems.append(f"ToolMessage #{i} ({m.tool_call_id}) answers no AIMessage in the request")
            continue
        if pending:
            problems.append(f"AIMessage #{owner} is followed by {type(m).__name__} #{i} before results for "
                            f"{sorted(pending)}")
            pending = set()
        if isinstance(m, AIMessage) and call_ids(m):
            pending, owner = set(call_ids(m)), i
    return problems  # calls still pending at the very end: the AI message is followed by nothing


# ------------------------------------------------------------------------------------------
# (a) pure: plan_eviction on random conversations
# ------------------------------------------------------------------------------------------

_ids = count()


@st.composite
def conversations(draw: st.DrawFn, *, invalid_calls: bool = False) -> list[BaseMessage]:
    """Random windows: user messages, plain answers, and tool-call groups with their results.

    A group's results come in any order (the memory node answers memory calls before the user's
    tools run). The window may start anywhere (earlier compactions), and the very last group may
    still wait for some results. With ``invalid_calls``, some AI messages also carry calls whose
    arguments did not parse; the memory node answers those right after the memory calls.
    """
    n_items = draw(st.integers(0, 14))
    out: list[BaseMessage] = []
    for k in range(n_items):
        kind = draw(st.sampled_from(["human", "ai", "calls", "calls"]))
        size = draw(st.integers(0, 60))
        text = words(size, (k, size))
        uid = next(_ids)
        if kind == "human":
            out.append(HumanMessage(text, id=f"h{uid}"))
        elif kind == "ai":
            out.append(AIMessage(text, id=f"a{uid}"))
        else:
            names = draw(st.lists(st.sampled_from(["lookup", *MEMORY_TOOLS]), min_size=1, max_size=3))
            calls = [{"name": n, "args": {"query": text[:20]}, "id": f"call_{uid}_{j}", "type": "tool_call"}
                     for j, n in enumerate(names)]
            bad = []
            if invalid_calls and draw(st.booleans()):
                bad = [{"name": "archival_memory_insert", "args": "{not json", "id": f"bad_{uid}_{j}",
                        "error": "bad JSON", "type": "invalid_tool_call"}
                       for j in range(draw(st.integers(1, 2)))]
            out.append(AIMessage(text, tool_calls=calls, invalid_tool_calls=bad, id=f"a{uid}"))
            memory = [c for c in calls if c["name"] != "lookup"]
            user = [c for c in calls if c["name"] == "lookup"]
            if bad:  # the memory node's order: memory calls, then invalid calls; then the user's tools
                order = [*draw(st.permutations(memory)), *bad, *user]
            else:
                order = draw(st.permutations(calls))
            if k == n_items - 1 and draw(st.booleans()):  # the last group may be mid-flight
                order = order[: draw(st.integers(0, len(order)))]
            for c in order:
                body = words(draw(st.integers(0, 80)), c["id"])
                out.append(ToolMessage(body, tool_call_id=c["id"], name=c["name"], id=f"t_{c['id']}"))
    return out


def owners(messages: Sequence[BaseMessage]) -> dict[int, int]:
    """Index of each ToolMessage -> index of the AIMessage whose call it answers."""
    out = {}
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            out[i] = max(j for j in range(i) if isinstance(messages[j], AIMessage)
                         and m.tool_call_id in call_ids(messages[j]))
    return out


def check_plan(messages: list[BaseMessage], costs: list[int], excess: int) -> None:
    n = plan_eviction(messages, costs, excess)
    limit = protected_from(messages)
    assert 0 <= n <= limit, f"evicts up to {n}, but the current turn starts at {limit}"
    for t, a in owners(messages).items():
        assert (t < n) == (a < n), (
            f"cut at {n} separates AIMessage #{a} from its ToolMessage #{t}: "
            + ("the result is kept without its call" if a < n else "the call is kept without its result"))
    kept = messages[n:]
    assert not kept or not isinstance(kept[0], ToolMessage), f"the window would start with a ToolMessage (cut at {n})"
    # Whole units, and no more than needed: eviction stops at the target.
    units = eviction_units(messages)
    ends = {u[-1] + 1 for u in units}
    assert n == 0 or n in ends, f"cut at {n} is inside an eviction unit"
    evicted_units = [u for u in units if u[-1] < n]
    shed = sum(costs[i] for u in evicted_units for i in u)
    if evicted_units:
        assert shed - sum(costs[i] for i in evicted_units[-1]) < excess, "evicted a unit after reaching the target"
    if shed < excess and len(evicted_units) < len(units):
        assert units[len(evicted_units)][-1] >= limit, "stopped short of the target with an evictable unit left"


@settings(max_examples=400, deadline=None, database=None)
@given(data=st.data(), messages=conversations())
def test_plan_eviction_keeps_tool_calls_with_their_results(data: st.DataObject, messages: list[BaseMessage]) -> None:
    costs = data.draw(st.lists(st.integers(0, 400), min_size=len(messages), max_size=len(messages)), label="costs")
    excess = data.draw(st.integers(-50, sum(costs) + 100), label="excess")
    check_plan(messages, costs, excess)
    # every kept window is a valid request, as far as the evicted part is concerned
    n = plan_eviction(messages, costs, excess)
    kept = messages[n:]
    assert not [p for p in pairing_violations(kept) if "answers no AIMessage" in p], kept


@settings(max_examples=400, deadline=None, database=None)
@given(data=st.data(), messages=conversations(invalid_calls=True))
def test_plan_eviction_keeps_invalid_tool_calls_with_their_results(data: st.DataObject,
                                                                   messages: list[BaseMessage]) -> None:
    """The memory node answers calls whose JSON did not parse with error ToolMessages, and chat APIs
    send those calls as calls: they must travel with their AI message like any other."""
    costs = data.draw(st.lists(st.integers(0, 400), min_size=len(messages), max_size=len(messages)), label="costs")
    excess = data.draw(st.integers(-50, sum(costs) + 100), label="excess")
    check_plan(messages, costs, excess)


def test_plan_eviction_smallest_examples() -> None:
    h = HumanMessage("q", id="h")
    ai = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "c1", "type": "tool_call"},
                                   {"name": "conversation_search", "args": {}, "id": "c2", "type": "tool_call"}], id="a")
    t2 = ToolMessage("r2", tool_call_id="c2", id="t2")
    t1 = ToolMessage("r1", tool_call_id="c1", id="t1")
    done = AIMessage("answer", id="d")
    h2 = HumanMessage("next", id="h2")
    msgs = [h, ai, t2, t1, done, h2]
    assert eviction_units(msgs) == [[0], [1, 2, 3], [4], [5]]
    # shedding a single token past the user message takes the whole call group
    assert plan_eviction(msgs, [1, 1, 1, 1, 1, 1], 2) == 4
    # the current turn is never evicted, however large the excess
    assert plan_eviction(msgs, [1] * 6, 10_000) == 5
    assert plan_eviction([h, ai, t2, t1], [1] * 4, 10_000) == 0


# ------------------------------------------------------------------------------------------
# (b) end to end: the real graph, a scripted fake model, randomized plans
# ------------------------------------------------------------------------------------------

@tool
def lookup(query: str) -> str:
    """Look something up in the team wiki. Returns the page text."""
    size = int(query.split(":", 1)[0])  # the plan encodes how long the page is
    return f"page for {query}: " + words(size, query)


class ScriptedChatModel(BaseChatModel):
    """A fake chat model (fakes are for the LLM only): replies come from a script, one per request.

    Every request the graph sends is recorded. Compaction's summarization requests get a short
    summary and are recorded separately.
    """

    script: list[AIMessage] = Field(default_factory=list)
    requests: list[tuple[int, list[BaseMessage]]] = Field(default_factory=list)
    summary_requests: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[str]] = Field(default_factory=list)
    log: list[tuple[str, int]] = Field(default_factory=list)  # ("reason" | "summary", turn), in call order
    unscripted: int = 0
    turn: int = -1
    model_name: str = "scripted-fake"

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any):
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.bind(tools=names, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if messages and isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(SUMMARY_PREFIX):
            self.summary_requests.append(list(messages))
            self.log.append(("summary", self.turn))
            reply = AIMessage(content=f"Summary {len(self.summary_requests)}: the user and I talked about cats.")
        elif messages and isinstance(messages[0], SystemMessage) and messages[0].content == SUPERSEDE_INSTRUCTIONS:
            # An archival insert asks which stored facts it replaces (consolidation.supersede): none.
            reply = AIMessage("", tool_calls=[{"name": "Replaced", "args": {"replaces": [], "restates": []}, "id": "j"}])
        else:
            self.requests.append((self.turn, list(messages)))
            self.log.append(("reason", self.turn))
            self.bound.append(list(kwargs.get("tools") or []))
            if self.script:
                reply = self.script.pop(0)
            else:
                self.unscripted += 1
                reply = AIMessage(content="(unscripted) done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@dataclass(frozen=True)
class Call:
    kind: str  # lookup | insert | search | conv
    size: int


@dataclass(frozen=True)
class Step:
    calls: tuple[Call, ...]
    content: int  # words of text the AI message carries beside its calls


@dataclass(frozen=True)
class Turn:
    user: int
    steps: tuple[Step, ...]
    answer: int


@dataclass(frozen=True)
class Plan:
    window: int
    turns: tuple[Turn, ...]


calls_st = st.builds(Call, kind=st.sampled_from(["lookup", "lookup", "insert", "search", "conv"]),
                     size=st.integers(1, 1000))
steps_st = st.builds(Step, calls=st.lists(calls_st, min_size=1, max_size=3).map(tuple),
                     content=st.sampled_from([0, 0, 5, 40, 200]))
turns_st = st.builds(Turn, user=st.integers(1, 150), steps=st.lists(steps_st, max_size=2).map(tuple),
                     answer=st.integers(1, 120))
# Windows whose compaction target (half) is above the fixed part of these requests (about 1,150 tokens with
# the lookup tool): a smaller one is refused (window.fixed_part).
plans_st = st.builds(Plan, window=st.sampled_from([2500, 3000, 3500]),
                     turns=st.lists(turns_st, min_size=1, max_size=4).map(tuple))

def fixed_overhead() -> int:
    """Tokens of the prompt before any message (instructions and tool schemas). The schemas grow as
    memory tools do, so the hand-built scenarios below set their windows relative to this."""
    setup = AgentSetup(tools=[lookup])
    ctx = Context()
    return build_main_context(PagefaultState(), ctx, setup.counter(ctx), [], 0, setup.tool_schemas).tokens["total"]


OVERHEAD = fixed_overhead()

#: A plan that overflows even the largest window several times.
BIG_PLAN = Plan(2500, tuple(
    Turn(user=200, steps=(Step((Call("lookup", 800), Call("insert", 150)), 60), Step((Call("conv", 5),), 0)), answer=150)
    for _ in range(4)))
#: A plan whose second turn evicts the first turn between its own two tool steps (it does for windows
#: of about OVERHEAD + 1,350 to + 2,050 tokens; the middle is taken).
MID_TURN_PLAN = Plan(OVERHEAD + 1700, (
    Turn(user=150, steps=(Step((Call("lookup", 300),), 0),), answer=150),
    Turn(user=20, steps=(Step((Call("lookup", 600),), 0), Step((Call("lookup", 600),), 0)), answer=10)))


def evicted_mid_turn(model: "ScriptedChatModel") -> int:
    """Summaries (evictions) that happened after the model already answered in the same turn."""
    return sum(1 for i, (kind, turn) in enumerate(model.log) if kind == "summary" and ("reason", turn) in model.log[:i])


def reply_for(turn_no: int, step_no: int, step: Step) -> AIMessage:
    calls = []
    for k, c in enumerate(step.calls):
        cid = f"call_{turn_no}_{step_no}_{k}"
        text = words(c.size, cid)
        if c.kind == "lookup":
            calls.append({"name": "lookup", "args": {"query": f"{c.size}:{cid}"}, "id": cid, "type": "tool_call"})
        elif c.kind == "insert":
            calls.append({"name": "archival_memory_insert", "args": {"text": text or "x"}, "id": cid, "type": "tool_call"})
        elif c.kind == "search":
            calls.append({"name": "archival_memory_search", "args": {"query": text[:200] or "cat"}, "id": cid,
                          "type": "tool_call"})
        else:
            calls.append({"name": "conversation_search", "args": {"query": text[:200] or "cat"}, "id": cid,
                          "type": "tool_call"})
    return AIMessage(content=words(step.content, (turn_no, step_no)), tool_calls=calls)


@dataclass(frozen=True)
class Cut:
    """The window right after one compaction: how many compactions so far, how many messages had left."""

    compactions: int
    evicted_count: int
    window: tuple[BaseMessage, ...]

    @property
    def first(self) -> BaseMessage:
        return self.window[0]


def cuts_of(graph: Any, config: dict[str, Any]) -> list[Cut]:
    """The window as each compaction left it, oldest first, from the thread's checkpoints."""
    cuts: dict[int, Cut] = {}
    for snap in reversed(list(graph.get_state_history(config))):
        n = snap.values.get("compactions", 0)
        if n and n not in cuts:
            cuts[n] = Cut(n, snap.values.get("evicted_count", 0), tuple(snap.values["messages"]))
    return [cuts[n] for n in sorted(cuts)]


def run_plan(plan: Plan, user_id: str = "prop-user") -> tuple[ScriptedChatModel, dict[str, Any], list[int], list[Cut]]:
    """Run every turn of ``plan`` through the real graph; return the model, final state, per-turn
    compactions and the window after each cut."""
    model = ScriptedChatModel()
    per_turn = []
    with tempfile.TemporaryDirectory(prefix="pagefault-prop-", ignore_cleanup_errors=True) as tmp:
        ctx = Context(user_id=user_id, data_dir=tmp, context_window=plan.window, model="offline")
        with open_embedded(tmp) as persistence:
            graph = persistence.graph(tools=[lookup], model=model)
            config = {"configurable": {"thread_id": "prop-thread"}}
            for t, turn in enumerate(plan.turns):
                model.turn = t
                model.script = [reply_for(t, s, step) for s, step in enumerate(turn.steps)]
                model.script.append(AIMessage(content=f"answer {t}: " + words(turn.answer, ("answer", t))))
                graph.invoke({"messages": [HumanMessage(f"turn {t}: " + words(turn.user, ("user", t)))]}, config,
                             context=ctx)
                assert model.script == [], f"turn {t}: {len(model.script)} scripted replies were never requested"
                state = graph.get_state(config).values
                window = list(state["messages"])
                assert pairing_violations(window) == [], (t, pairing_violations(window))
                per_turn.append(state.get("compactions", 0))
            cuts = cuts_of(graph, config)
    return model, state, per_turn, cuts


def check_requests(model: ScriptedChatModel) -> None:
    assert model.unscripted == 0
    assert model.requests, "the model was never called"
    for n, (turn, request) in enumerate(model.requests):
        assert isinstance(request[0], SystemMessage), f"request {n} does not start with the system prompt"
        body = request[1:]
        assert not any(isinstance(m, SystemMessage) for m in body), f"request {n}: a second system message"
        problems = pairing_violations(body)
        assert not problems, f"request {n} (turn {turn}) breaks tool-call pairing: {problems}\n" + "\n".join(
            f"  {type(m).__name__} id={m.id} calls={call_ids(m) if isinstance(m, AIMessage) else ''}"
            f"{getattr(m, 'tool_call_id', '')}" for m in body)
        # the current user turn is always in the request (never evicted)
        humans = [m for m in body if isinstance(m, HumanMessage)]
        assert humans and str(humans[-1].content).startswith(f"turn {turn}:"), f"request {n} lost the current turn"
        assert "lookup" in model.bound[n] and set(MEMORY_TOOLS) <= set(model.bound[n])
    for request in model.summary_requests:
        assert len(request) == 2 and isinstance(request[1], HumanMessage)


@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(plan=BIG_PLAN)
@example(plan=MID_TURN_PLAN)
@given(plan=plans_st)
def test_graph_requests_never_split_tool_calls_from_results(plan: Plan) -> None:
    model, state, per_turn, cuts = run_plan(plan)
    check_requests(model)
    assert len(cuts) == state.get("compactions", 0)
    for cut in cuts:  # every cut falls between units: the window never begins with a tool result
        assert not isinstance(cut.first, ToolMessage), cut
    compactions = state.get("compactions", 0)
    event(f"compacted: {compactions > 0}")
    mid_turn = evicted_mid_turn(model)
    event(f"evicted between tool steps of a turn: {mid_turn > 0}")
    target(float(mid_turn), label="evictions between tool steps")
    truncated = any("truncated by pagefault" in str(m.content) for _, r in model.requests for m in r)
    event(f"a message was truncated in the window: {truncated}")
    target(float(compactions), label="compactions")
    assert len(model.summary_requests) <= compactions  # a summary only when something was evicted
    # nothing lost, nothing duplicated: the evicted prefix plus the window is the whole thread
    produced = sum(2 + len(turn.steps) + sum(len(step.calls) for step in turn.steps) for turn in plan.turns)
    assert state.get("evicted_count", 0) + len(state["messages"]) == produced


def test_graph_compacts_mid_conversation_with_tool_calls() -> None:
    """Deterministic runs that are sure to compact, with the same request checks, and where each cut falls."""
    model, state, per_turn, cuts = run_plan(BIG_PLAN)
    check_requests(model)
    assert state["compactions"] > 0 and state["evicted_count"] > 0, per_turn
    assert model.summary_requests, "eviction asks the model for a summary"
    assert state["summary"].startswith("Summary")
    # Each turn (7 messages: user, two tool steps with 3 results, answer) outgrows the window on its own:
    # its first compaction evicts every earlier turn whole, the next ones cut its own big messages down.
    assert [c.evicted_count for c in cuts] == [0, 7, 7, 7, 14, 14, 14, 21, 21, 21], [c.evicted_count for c in cuts]
    for cut in cuts:
        assert [m for m in cut.window if isinstance(m, HumanMessage)] == [cut.first], "the window begins at its turn"
        assert str(cut.first.content).startswith(f"turn {cut.evicted_count // 7}:"), cut.first.content

    model, state, per_turn, cuts = run_plan(MID_TURN_PLAN)
    check_requests(model)
    assert evicted_mid_turn(model) > 0, model.log
    # Turn 1 evicts turn 0 (user, call, result, answer) between its own two tool steps: the window then
    # begins at turn 1's user message, and holds its first step, call and result together.
    first_cut = cuts[0]
    assert first_cut.evicted_count == 4 and str(first_cut.first.content).startswith("turn 1:"), first_cut
    assert [type(m).__name__ for m in first_cut.window[:3]] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert all(c.evicted_count == 4 and str(c.first.content).startswith("turn 1:") for c in cuts), cuts


#: The hand-built windows below: large enough for their messages, sized against the prompt's own tokens.
INVALID_WINDOW = max(8000, 5 * OVERHEAD)


def bad_call(cid: str, name: str = "archival_memory_insert") -> dict[str, Any]:
    """A call whose JSON did not parse, as a provider's reply carries it (``invalid_tool_calls``)."""
    return {"name": name, "args": "{\"text\": oops", "id": cid, "error": "bad JSON", "type": "invalid_tool_call"}


def run_two_turns(first_user: str, first_replies: list[AIMessage], second_user_words: int
                  ) -> tuple[ScriptedChatModel, dict[str, Any], list[BaseMessage], list[Cut]]:
    """Turn 0 with ``first_replies``, then a plain turn 1; the model, final state, turn 0's window and the cuts."""
    model = ScriptedChatModel()
    with tempfile.TemporaryDirectory(prefix="pagefault-prop-", ignore_cleanup_errors=True) as tmp:
        ctx = Context(user_id="inv-user", data_dir=tmp, context_window=INVALID_WINDOW, model="offline")
        with open_embedded(tmp) as persistence:
            graph = persistence.graph(tools=[lookup], model=model)
            config = {"configurable": {"thread_id": "inv-thread"}}
            model.turn, model.script = 0, list(first_replies)
            graph.invoke({"messages": [HumanMessage(first_user)]}, config, context=ctx)
            turn0 = list(graph.get_state(config).values["messages"])
            model.turn, model.script = 1, [AIMessage(content="ok")]
            graph.invoke({"messages": [HumanMessage("turn 1: " + words(second_user_words, "t1"))]}, config, context=ctx)
            state = graph.get_state(config).values
            cuts = cuts_of(graph, config)
    check_requests(model)
    return model, state, turn0, cuts


def test_graph_keeps_invalid_tool_calls_with_their_results() -> None:
    """A model reply with a call whose JSON did not parse (``invalid_tool_calls``) next to a valid one.

    The memory node answers the invalid call with an error ToolMessage beside the user tool's result.
    In turn 1 the compaction's cut falls right after that AI message and its two results: the window
    then begins with turn 0's answer, and no result of the evicted message is left behind.
    """
    w = INVALID_WINDOW
    big = int(0.3 * w)  # the AI message and its lookup's page: each under a message's share of the window
    model, state, turn0, cuts = run_two_turns("turn 0: look it up", [
        AIMessage(content=words(big, "big"),
                  tool_calls=[{"name": "lookup", "args": {"query": f"{big}:c"}, "id": "call_ok", "type": "tool_call"}],
                  invalid_tool_calls=[bad_call("call_bad")]),
        AIMessage(content="done " + words(int(0.05 * w), "done")),
    ], int(0.3 * w) - OVERHEAD)  # just over the trigger; shedding the big message and its results reaches the target
    assert [type(m).__name__ for m in turn0] == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage"]
    assert {m.tool_call_id for m in turn0[2:4]} == {"call_ok", "call_bad"}
    assert state["compactions"] == 1 and len(cuts) == 1, "the scenario must compact exactly once"
    (cut,) = cuts
    assert cut.evicted_count == 4, "the cut falls right after the AI message's results"
    assert isinstance(cut.first, AIMessage) and cut.first.id == turn0[4].id and not cut.first.tool_calls


def test_graph_keeps_the_results_of_a_message_whose_calls_all_failed_to_parse() -> None:
    """An AI message whose only call did not parse (``invalid_tool_calls`` alone), answered by an error
    ToolMessage, then a step with a valid call. Turn 1's cut falls right after the unparseable message
    and its error result: the window begins with the next step's AI message, never with the error."""
    w = INVALID_WINDOW
    model, state, turn0, cuts = run_two_turns("turn 0: " + words(int(0.2 * w), "u0"), [
        AIMessage(content=words(int(0.3 * w), "big"), invalid_tool_calls=[bad_call("call_bad", "archival_memory_search")]),
        AIMessage(content="again", tool_calls=[{"name": "lookup", "args": {"query": f"{int(0.05 * w)}:c"},
                                                "id": "call_ok", "type": "tool_call"}]),
        AIMessage(content="done " + words(int(0.02 * w), "done")),
    ], int(0.36 * w) - OVERHEAD)
    assert [type(m).__name__ for m in turn0] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage",
                                                 "AIMessage"]
    assert turn0[1].invalid_tool_calls and not turn0[1].tool_calls and turn0[2].tool_call_id == "call_bad"
    assert state["compactions"] == 1 and len(cuts) == 1, "the scenario must compact exactly once"
    (cut,) = cuts
    assert cut.evicted_count == 3, "the cut falls right after the unparseable message and its error result"
    assert cut.first.id == turn0[3].id and [tc["id"] for tc in cut.first.tool_calls] == ["call_ok"]


def test_a_message_whose_calls_all_failed_to_parse_keeps_its_results():
    """An AI message with only invalid_tool_calls (its JSON did not parse) and the error results that answer
    them form one eviction unit, as a message with valid calls does: evicting one without the other
    would leave an orphaned tool message."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    bad = AIMessage("", invalid_tool_calls=[{"name": "archival_memory_search", "args": "{not json", "id": "c1",
                                             "error": "bad json", "type": "invalid_tool_call"}])
    messages = [HumanMessage("hi"), bad, ToolMessage("Error: malformed call", tool_call_id="c1"), HumanMessage("ok")]
    assert eviction_units(messages) == [[0], [1, 2], [3]]
