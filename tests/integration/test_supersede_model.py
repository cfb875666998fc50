"""Facts that change, judged by a real model: a ``ChatOpenAI`` against the scripted loopback server
answers the structured-output call (``response_format`` json_schema ``Replaced``) naming the stored
records a new archival text replaces. Real Chroma and SQLite in tmp dirs; only the model is scripted.

The model-worded texts here ("The user lives in Lisbon.", "User moved to Berlin in May 2024.") have
different fact keys by the patterns ("the user|home" and "user|home"), so the patterns alone leave
both current (checked as the control); the model's answer is what supersedes Lisbon.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any, TypedDict

import pytest
from blockbuster import blockbuster_ctx
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from support.scripted_openai import API_KEY, ScriptedError, ScriptedOpenAI

from pagefault import Context, OfflineChatModel, memory_tools, open_embedded, open_embedded_async
from pagefault.consolidation.consolidate import consolidate
from pagefault.consolidation.supersede import ModelSupersedeJudge, supersede_judge
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.superseding import PATTERNS, Candidate
from pagefault.stores.validity import OPEN
from pagefault.text.facts import parse_date
from pagefault.window.setup import AgentSetup

D = parse_date
LISBON, BERLIN = "The user lives in Lisbon.", "User moved to Berlin in May 2024."
LOG = "pagefault.stores.archival"


def judge_request(body: dict[str, Any]) -> dict[str, Any] | None:
    """The new statement and the records a structured supersede call shows, or None for another call."""
    rf = body.get("response_format") or {}
    if rf.get("type") != "json_schema" or rf["json_schema"]["name"] != "Replaced":
        return None
    return json.loads(body["messages"][-1]["content"])


def moves(data: dict[str, Any]) -> list[str]:
    """The scripted model's judgement: a move replaces the records of where the user lived."""
    if "moved" not in data["new_statement"]:
        return []
    return [r["id"] for r in data["records"] if re.search(r"\blives? in\b", r["text"])]


class Judged:
    """A scripted server whose structured answers come from ``answer(data)`` (a list of replaced ids, a
    ``Replaced`` dict, or a raw message dict with ``content``), and whose other chat calls are the test's
    ``chat(body)``."""

    def __init__(self, answer=moves, chat=None) -> None:
        self.answer, self.chat = answer, chat
        self.shown: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        data = judge_request(body)
        if data is None:
            assert self.chat is not None, f"unexpected chat call {body}"
            return self.chat(body)
        self.shown.append(data)
        got = self.answer(data)
        if isinstance(got, dict) and "content" in got:
            return got
        return {"content": json.dumps(got if isinstance(got, dict) else {"replaces": got, "restates": []})}


def texts(archival, scope: Scope, query: str, **kw) -> list[str]:
    return [r.text for r, _ in archival.search(scope, query, 3, **kw)]


def test_the_model_supersedes_what_the_patterns_miss(data_dir):
    script = Judged()
    with ScriptedOpenAI(script) as api:
        svc, ana = MemoryServices.open(data_dir), Scope("ana")
        judge = ModelSupersedeJudge(api.chat_model())
        lisbon = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"), judge=judge)
        tea = svc.archival.insert(ana, "Ana likes green tea.", judge=judge)
        berlin = svc.archival.insert(ana, BERLIN, valid_from=D("2024-05-01"), judge=judge)
        body = api.chat_requests[-1]
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["replaces", "restates"]
    # The first insert found nothing to compare with: no call. Tea and Berlin were each judged once.
    assert [d["new_statement"] for d in script.shown] == ["Ana likes green tea.", BERLIN]
    assert {r["id"] for r in script.shown[-1]["records"]} == {lisbon.id, tea.id}
    assert texts(svc.archival, ana, "Where do I live?")[0] == BERLIN
    assert LISBON not in texts(svc.archival, ana, "Where do I live?")
    old = svc.archival.get(ana, lisbon.id).validity
    assert (old.superseded_by, old.valid_to, old.current) == (berlin.id, D("2024-05-01"), False)
    assert texts(svc.archival, ana, "Where do I live?", as_of=D("2024-04-01"))[0] == LISBON
    assert texts(svc.archival, ana, "Where do I live?", as_of=D("2024-06-01"))[0] == BERLIN
    assert svc.archival.get(ana, tea.id).validity.current  # judged, named by nobody
    # One fact now: the timeline, and a consolidation pass, keep Lisbon superseded.
    key = svc.archival.get(ana, berlin.id).fact_key
    assert [r.id for r in svc.archival.timeline(ana, key)] == [lisbon.id, berlin.id]
    consolidate(svc.archival, ana)
    assert not svc.archival.get(ana, lisbon.id).validity.current
    assert svc.archival.get(ana, berlin.id).validity.valid_to == OPEN


def test_without_the_model_both_stay_current(data_dir):
    """The control: the patterns alone (the offline model's judge) do not tie these two."""
    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    lisbon = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"), judge=PATTERNS)
    svc.archival.insert(ana, BERLIN, valid_from=D("2024-05-01"), judge=PATTERNS)
    assert svc.archival.get(ana, lisbon.id).validity.current
    assert LISBON in texts(svc.archival, ana, "Where do I live?")


def test_pattern_facts_and_the_model_agree(data_dir):
    """The words of the issue, which the patterns read too: the model names the same record, once."""
    script = Judged(lambda d: [r["id"] for r in d["records"] if "Lisbon" in r["text"]])
    with ScriptedOpenAI(script) as api:
        svc, bo = MemoryServices.open(data_dir), Scope("bo")
        judge = ModelSupersedeJudge(api.chat_model())
        lisbon = svc.archival.insert(bo, "I live in Lisbon.", valid_from=D("2019-03-01"), judge=judge)
        berlin = svc.archival.insert(bo, "I moved to Berlin in May 2024.", valid_from=D("2024-05-01"), judge=judge)
    assert [r["id"] for r in script.shown[0]["records"]] == [lisbon.id]
    assert (lisbon.fact_key, berlin.fact_key) == ("user|home", "user|home")
    assert svc.archival.get(bo, lisbon.id).validity.superseded_by == berlin.id
    assert texts(svc.archival, bo, "Where do I live?")[0] == "I moved to Berlin in May 2024."


def homes(data: dict[str, Any]) -> list[str]:
    """The scripted model for "Home: <city>" notes: a new city replaces the other cities."""
    return [r["id"] for r in data["records"] if r["text"].startswith("Home: ") and r["text"] != data["new_statement"]]


@pytest.mark.parametrize("defer", [False, True])
def test_a_tied_fact_said_again_after_it_changed_holds_once_more(data_dir, defer):
    """No pattern reads "Home: Lisbon": the model ties the notes into one fact, and the same words said
    again later are a new record that supersedes Berlin, the journalled way and the direct one."""
    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    with ScriptedOpenAI(Judged(homes)) as api:
        judge = ModelSupersedeJudge(api.chat_model())
        lisbon = svc.archival.insert(ana, "Home: Lisbon", valid_from=D("2019-03-01"), defer=defer, judge=judge)
        berlin = svc.archival.insert(ana, "Home: Berlin", valid_from=D("2024-05-01"), defer=defer, judge=judge)
        assert not svc.archival.get(ana, lisbon.id).validity.current
        again = svc.archival.insert(ana, "Home: Lisbon", valid_from=D("2025-01-01"), defer=defer, judge=judge)
        assert texts(svc.archival, ana, "Home")[0] == "Home: Lisbon"
    assert again.id != lisbon.id
    key = svc.archival.get(ana, berlin.id).fact_key
    assert key == f"record|{lisbon.id}"
    assert [(r.id, r.validity.valid_to) for r in svc.archival.timeline(ana, key)] == [
        (lisbon.id, D("2024-05-01")), (berlin.id, D("2025-01-01")), (again.id, OPEN)]


EMPLOYER = re.compile(r"^(?P<n>\w+ \w+) (?:has (?P<v1>\w+) as employer|still has (?P<v2>\w+) as employer"
                      r"|switched employer to (?P<v3>\w+))\.$")


def employer(text: str) -> tuple[str, str] | None:
    m = EMPLOYER.match(text)
    return (m.group("n"), m.group("v1") or m.group("v2") or m.group("v3")) if m else None


@pytest.mark.parametrize("restates", [True, False])
def test_restatements_tie_so_one_named_record_is_enough(data_dir, restates):
    """Shown one candidate only, the model names one of the two Umbrella records when the job changes;
    the restatement was tied to the first statement, so both are superseded. Without restates (the
    control), the one it was not shown stays current beside the new job."""
    def answer(data):
        name, value = employer(data["new_statement"])
        said = [(r["id"], employer(r["text"])) for r in data["records"]]
        same = [i for i, e in said if e and e[0] == name and e[1] == value]
        return {"replaces": [i for i, e in said if e and e[0] == name and e[1] != value],
                "restates": same if restates else []}

    svc, cleo = MemoryServices.open(data_dir), Scope("cleo")
    with ScriptedOpenAI(Judged(answer)) as api:
        judge = ModelSupersedeJudge(api.chat_model(), candidates=1)
        first = svc.archival.insert(cleo, "Cleo Berg has Umbrella as employer.", valid_from=D("2020-01-01"),
                                    judge=judge)
        again = svc.archival.insert(cleo, "Cleo Berg still has Umbrella as employer.", valid_from=D("2021-01-01"),
                                    judge=judge)
        new = svc.archival.insert(cleo, "Cleo Berg switched employer to Monarch.", valid_from=D("2022-01-01"),
                                  judge=judge)
    assert svc.archival.get(cleo, new.id).validity.current
    stale = [i for i in (first.id, again.id) if svc.archival.get(cleo, i).validity.current]
    assert len(stale) == (0 if restates else 1)
    if restates:
        key = svc.archival.get(cleo, new.id).fact_key
        assert [r.id for r in svc.archival.timeline(cleo, key)] == [first.id, again.id, new.id]
        assert svc.archival.get(cleo, first.id).validity.valid_to == D("2022-01-01")  # the value held until then
        assert texts(svc.archival, cleo, "Who does Cleo work for?")[0] == "Cleo Berg switched employer to Monarch."


def test_an_id_named_both_ways_is_ignored(data_dir, caplog):
    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    lisbon = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"))
    with ScriptedOpenAI(Judged(lambda d: {"replaces": [lisbon.id], "restates": [lisbon.id]})) as api, \
            caplog.at_level(logging.WARNING, logger=LOG):
        svc.archival.insert(ana, BERLIN, valid_from=D("2024-05-01"), judge=ModelSupersedeJudge(api.chat_model()))
    assert svc.archival.get(ana, lisbon.id).validity.current and svc.archival.get(ana, lisbon.id).fact_key != "user|home"
    assert any("both replaces and restates" in r.getMessage() and lisbon.id in r.getMessage() for r in caplog.records)


def test_an_id_outside_the_candidates_is_ignored(data_dir, caplog):
    """The model names another user's record (a real id) and one that does not exist: both are dropped,
    with a warning; nothing of either user is superseded, and the insert is stored."""
    svc, ana, eve = MemoryServices.open(data_dir), Scope("ana"), Scope("eve")
    eves = svc.archival.insert(eve, LISBON, valid_from=D("2019-03-01"))
    script = Judged(lambda d: [eves.id, "arc-000000000000000000000000"])
    with ScriptedOpenAI(script) as api, caplog.at_level(logging.WARNING, logger=LOG):
        judge = ModelSupersedeJudge(api.chat_model())
        lisbon = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"))
        berlin = svc.archival.insert(ana, BERLIN, valid_from=D("2024-05-01"), judge=judge)
    assert len(script.shown) == 1 and [r["id"] for r in script.shown[0]["records"]] == [lisbon.id]
    assert eves.id not in json.dumps(script.shown)  # another user's record is never a candidate
    assert svc.archival.get(eve, eves.id).validity.current
    assert svc.archival.get(ana, lisbon.id).validity.current
    assert svc.archival.get(ana, berlin.id).validity.current and berlin.created
    warned = [r.getMessage() for r in caplog.records if "not among the candidates" in r.getMessage()]
    assert len(warned) == 1 and eves.id in warned[0] and "arc-000000000000000000000000" in warned[0]


@pytest.mark.parametrize("failure", ["server error", "not json", "wrong shape"])
def test_a_failing_structured_call_falls_back_to_the_patterns(data_dir, caplog, failure):
    def broken(data):
        if failure == "server error":
            raise ScriptedError(500, "the model is down")
        return {"content": "I think Lisbon is replaced." if failure == "not json" else json.dumps({"ids": [1]})}

    script = Judged(broken)
    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    with ScriptedOpenAI(script) as api, caplog.at_level(logging.WARNING, logger=LOG):
        judge = ModelSupersedeJudge(api.chat_model())
        said = svc.archival.insert(ana, "I live in Lisbon.", valid_from=D("2019-03-01"), judge=judge)
        other = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"), judge=judge)
        moved = svc.archival.insert(ana, "I live in Berlin.", valid_from=D("2024-05-01"), judge=judge)
    assert len(script.shown) == 2  # asked for both later inserts, and both answers failed
    failed = [r.getMessage() for r in caplog.records if "supersede judge failed" in r.getMessage()]
    assert len(failed) == 2 and all("the patterns decide" in m for m in failed)
    # The patterns still decide: the same key ("user|home") supersedes, another key does not.
    assert svc.archival.get(ana, said.id).validity.superseded_by == moved.id
    assert svc.archival.get(ana, other.id).validity.current
    assert svc.archival.get(ana, moved.id).validity.current


def test_a_judge_that_takes_too_long_leaves_it_to_the_patterns(data_dir, caplog):
    release = threading.Event()

    def stuck(data):
        release.wait(30)
        return moves(data)

    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    with ScriptedOpenAI(Judged(stuck)) as api, caplog.at_level(logging.WARNING, logger=LOG):
        judge = ModelSupersedeJudge(api.chat_model(), timeout=0.2)
        lisbon = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"))
        berlin = svc.archival.insert(ana, BERLIN, valid_from=D("2024-05-01"), judge=judge)
        release.set()
    assert berlin.created and svc.archival.get(ana, lisbon.id).validity.current
    assert any("no answer in 0.2 s" in r.getMessage() for r in caplog.records)


def test_a_deferred_insert_is_judged_behind_the_turn(data_dir):
    """On the embedded setup the insert is journalled: it returns before the model is asked; the
    writer asks it, and a read waits for the judged write."""
    asked, release = threading.Event(), threading.Event()

    def slow(data):
        asked.set()
        assert release.wait(30)
        return moves(data)

    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    assert svc.archival.journal is not None
    lisbon = svc.archival.insert(ana, LISBON, valid_from=D("2019-03-01"))
    with ScriptedOpenAI(Judged(slow)) as api:
        judge = ModelSupersedeJudge(api.chat_model())
        berlin = svc.archival.insert(ana, BERLIN, valid_from=D("2024-05-01"), defer=True, judge=judge)
        assert berlin.created and svc.archival.journal.is_pending(berlin.id)
        svc.archival.journal.hurry()
        assert asked.wait(30), "the writer never asked the model"
        release.set()
        assert texts(svc.archival, ana, "Where do I live?")[0] == BERLIN  # waits for the judged write
    assert svc.archival.get(ana, lisbon.id).validity.superseded_by == berlin.id


def test_the_run_picks_the_judge_of_its_chat_model(data_dir, embedded):
    with ScriptedOpenAI(Judged()) as api:
        assert supersede_judge(OfflineChatModel()) is PATTERNS and supersede_judge("offline") is PATTERNS
        assert isinstance(supersede_judge(api.chat_model()), ModelSupersedeJudge)
        config = {"configurable": {"thread_id": "t"}}
        offline = Context(user_id="ana", data_dir=data_dir)
        assert AgentSetup().open_run(offline, embedded.store, config).memory_call([], 0).supersede is PATTERNS
        assert AgentSetup(model=OfflineChatModel()).open_run(offline, embedded.store, config).memory_call(
            [], 0).supersede is PATTERNS
        called = AgentSetup(model=api.chat_model()).open_run(offline, embedded.store, config).memory_call([], 0)
        assert isinstance(called.supersede, ModelSupersedeJudge)
        named = Context(user_id="ana", data_dir=data_dir, model="openai:gpt-4o-mini", base_url=api.url)
        assert isinstance(AgentSetup().open_run(named, embedded.store, config).memory_call([], 0).supersede,
                          ModelSupersedeJudge)
    with pytest.raises(ValueError, match="candidates must be a positive integer, got 0"):
        ModelSupersedeJudge(OfflineChatModel(), candidates=0)


def test_memory_tools_judge_by_the_model_their_context_names(data_dir, embedded, monkeypatch):
    """The plain tools (and so ``PagefaultMiddleware``) know no chat model but ``Context.model``: named
    there, it is loaded on the first judgement (by ``init_chat_model``) and judges."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    script = Judged()
    with ScriptedOpenAI(script) as api:
        ctx = Context(user_id="ana", data_dir=data_dir, model="openai:gpt-4o-mini", base_url=api.url)
        tools = {t.name: t for t in memory_tools(ctx, store=embedded.store)}
        tools["archival_memory_insert"].invoke({"text": LISBON, "valid_from": "2019-03-01"})
        tools["archival_memory_insert"].invoke({"text": BERLIN, "valid_from": "2024-05-01"})
        found = tools["archival_memory_search"].invoke({"query": "Where do I live?"})
        judged = [b for b in api.chat_requests if judge_request(b)]
    assert [d["new_statement"] for d in script.shown] == [BERLIN] and judged[0]["model"] == "gpt-4o-mini"
    assert re.findall(r'text: "([^"]*)"', found) == [BERLIN]


class Steps(TypedDict):
    n: int


def test_the_judges_call_is_not_streamed_as_an_answer():
    """Inside a graph node (the memory node, when inserts are not journalled) the judge's call is tagged
    ``nostream``: ``stream_mode="messages"`` shows nothing of it, where a plain call of the model shows."""
    with ScriptedOpenAI(Judged(lambda d: ["arc-1"], chat=lambda body: {"content": "plain"})) as api:
        judge, model = ModelSupersedeJudge(api.chat_model()), api.chat_model()

        def streamed(step) -> list[Any]:
            graph = StateGraph(Steps)
            graph.add_node("memory", lambda state: (step(), {"n": 1})[1])
            graph.add_edge(START, "memory")
            return list(graph.compile().stream({"n": 0}, stream_mode="messages"))

        judged = streamed(lambda: judge.judge(BERLIN, [Candidate("arc-1", LISBON, "", 0.0)]))
        plain = streamed(lambda: model.invoke("hello"))
    assert judged == [] and "".join(m.content for m, _ in plain) == "plain"
    assert len(api.chat_requests) == 2 and judge_request(api.chat_requests[0]) is not None


# -- end to end: the scripted ChatOpenAI runs pagefault's graph and words its own inserts ----------------

SAYS = {"I live in Lisbon.": ("archival_memory_insert", {"text": LISBON, "valid_from": "2019-03-01"}),
        "I moved to Berlin in May 2024.": ("archival_memory_insert", {"text": BERLIN, "valid_from": "2024-05-01"}),
        "Where do I live?": ("archival_memory_search", {"query": "Where do I live?"})}


def agent(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted chat model: a tool call for each user message, then an answer from its result."""
    last = body["messages"][-1]
    if last["role"] == "user":
        name, args = SAYS[last["content"]]
        return {"content": None, "tool_calls": [{"id": f"call_{len(body['messages'])}", "type": "function",
                                                 "function": {"name": name, "arguments": json.dumps(args)}}]}
    first = re.search(r'text: "([^"]*)"', last["content"] or "")
    return {"content": f"From memory: {first.group(1)}" if first else "Noted."}


def _check_graph_run(svc: MemoryServices, script: Judged, eves: str, out: dict[str, Any]) -> None:
    ana = Scope("ana")
    found = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "archival_memory_search"]
    hits = found[-1].artifact["hits"]
    assert hits[0]["text"] == BERLIN and LISBON not in [h["text"] for h in hits]
    assert out["messages"][-1].content == f"From memory: {BERLIN}"
    assert [d["new_statement"] for d in script.shown] == [BERLIN]  # Lisbon, the first, had nothing to compare
    assert eves not in json.dumps(script.shown)
    lisbon = next(r for r, _ in svc.archival.search(ana, "Lisbon", 5, include_superseded=True) if r.text == LISBON)
    assert lisbon.validity.valid_to == D("2024-05-01") and not lisbon.validity.current
    assert texts(svc.archival, ana, "Where do I live?", as_of=D("2024-04-01"))[0] == LISBON
    assert svc.archival.get(Scope("eve"), eves).validity.current


def test_the_graph_with_a_real_model_supersedes_through_its_own_inserts(data_dir):
    svc = MemoryServices.open(data_dir)
    eves = svc.archival.insert(Scope("eve"), LISBON, valid_from=D("2019-03-01")).id
    script = Judged(chat=agent)
    ctx = Context(user_id="ana", data_dir=data_dir)
    with ScriptedOpenAI(script) as api, open_embedded(data_dir) as memory:
        graph = memory.graph(model=api.chat_model())
        for text in SAYS:
            out = graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t"}}, context=ctx)
    inserts = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "archival_memory_insert"]
    assert [m.status for m in inserts] == ["success", "success"]
    _check_graph_run(svc, script, eves, out)


async def test_the_async_graph_with_a_real_model_supersedes_without_blocking_the_loop(data_dir):
    svc = MemoryServices.open(data_dir)
    eves = svc.archival.insert(Scope("eve"), LISBON, valid_from=D("2019-03-01")).id
    script = Judged(chat=agent)
    ctx = Context(user_id="ana", data_dir=data_dir)
    config = {"configurable": {"thread_id": "t"}}
    with ScriptedOpenAI(script) as api:
        async with open_embedded_async(data_dir) as memory:
            graph = memory.graph(model=api.chat_model())
            said = list(SAYS)
            await graph.ainvoke({"messages": [HumanMessage(said[0])]}, config, context=ctx)  # first opens
            with blockbuster_ctx():
                for text in said[1:]:
                    out = await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=ctx)
    _check_graph_run(svc, script, eves, out)
