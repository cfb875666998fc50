"""Turns are conversational: a user message and everything up to the next user message is one turn,
counted from 0. Searches, citations, the CLI's ``/search`` and ``inspect`` number turns so, and give
each message's position in the thread (its message index) beside it, also for messages evicted from
the window and for threads and recall entries from before pagefault counted turns."""

from __future__ import annotations

import io
import re

from langchain_core.messages import HumanMessage, ToolMessage

from pagefault import Context
from pagefault.cli.main import Session, demo_filler, main
from pagefault.graph.saved_state import SavedHistory
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.recall import conversation_turns

CONFIG = {"configurable": {"thread_id": "t1"}}
NOTEBOOK = "The blue notebook is hidden behind the piano in the attic."


def _turn_of(messages, index: int) -> int:
    return conversation_turns(messages)[index]


def _history(graph, thread: str = "t1"):
    """Every message of a thread, oldest first (the first version of each)."""
    seen = {}
    for snap in reversed(list(graph.get_state_history({"configurable": {"thread_id": thread}}))):
        base = (snap.values or {}).get("evicted_count", 0)
        for i, m in enumerate((snap.values or {}).get("messages", [])):
            seen.setdefault(base + i, m)
    return [seen[i] for i in range(len(seen))]


def test_conversation_turns_count_user_messages():
    h, a = HumanMessage("hi"), ToolMessage("x", tool_call_id="c")
    assert conversation_turns([a, h, a, a, h, a]) == [0, 0, 0, 0, 1, 1]
    assert conversation_turns([a, h, a], users_before=3) == [2, 3, 3]


def test_search_lines_name_the_turn_and_the_message(embedded, data_dir):
    ctx = Context(user_id="ana", data_dir=data_dir)
    session = Session(embedded, ctx, "t1", out=io.StringIO())
    session.say("My name is Ana and I live in Lisbon.", trace=False)
    session.say("My sister Lucia plays the cello in Porto.", trace=False)
    session.say("Thanks!", trace=False)  # its start indexes the second turn's messages
    history = _history(session.graph)
    lines = session.search("Lucia cello Porto", k=10)
    recall = [re.fullmatch(r'recall thread t1, turn (\d+), message (\d+): "(\w+)(?: \w+)?: .*"', line) for line in lines
              if line.startswith("recall")]
    assert recall and all(recall), lines
    roles = {"user": "human", "assistant": "ai", "tool": "tool"}
    for m in recall:
        turn, index, role = int(m.group(1)), int(m.group(2)), m.group(3)
        assert history[index].type == roles[role], (m.group(0), history[index])
        assert turn == _turn_of(history, index), m.group(0)
    second = next(i for i, m in enumerate(history) if "cello" in str(m.content))
    assert second > 1 and f"recall thread t1, turn 1, message {second}: \"user: My sister Lucia" in "\n".join(lines)
    assert any(int(m.group(1)) == 1 and m.group(3) != "user" for m in recall), "the agent's part of turn 1 is turn 1"
    archival = next(line for line in lines if line.startswith("archival") and "cello" in line)
    assert f"(thread t1, turn 1, message {second}):" in archival, archival


def test_inspect_counts_agree_with_a_search_right_after_the_first_turn(embedded, data_dir, say, capsys):
    g = embedded.graph()
    out = say(g, Context(user_id="ana", data_dir=data_dir), "t1", "My name is Ana and I live in Lisbon.")
    hits = MemoryServices.open(data_dir).recall.search(Scope("ana"), "Ana Lisbon", 50, thread_id="t1")
    assert hits, "the turn's messages are found at once"
    assert out["recall_indexed"] < len(hits), "the checkpoint confirmed fewer than the writer has written since"
    assert main(["inspect", "--user", "ana", "--thread", "t1", "--data-dir", data_dir]) == 0
    printed = capsys.readouterr().out
    n = len(out["messages"])
    assert f"thread: {n} message(s) in 1 turn(s); {n} message(s) in the window, 0 evicted" in printed, printed
    assert f"{len(hits)} of this thread's {n} message(s) indexed" in printed, printed
    assert {h.turn for h in hits} == {0} and {h.message_index for h in hits} <= set(range(n))


def _evict_the_notebook(g, say, ctx):
    say(g, ctx, "t1", "My name is Ana and I live in Lisbon.")
    say(g, ctx, "t1", NOTEBOOK)
    i = 0
    while not any("piano" in str(m.content) for m in _history(g)[: g.get_state(CONFIG).values["evicted_count"]]):
        say(g, ctx, "t1", demo_filler(i))
        i += 1
        assert i < 30, "compaction never evicted the notebook"


def test_an_evicted_statement_keeps_its_turn(embedded, data_dir, say):
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2500)
    _evict_the_notebook(g, say, ctx)
    values = g.get_state(CONFIG).values
    history = _history(g)
    evicted = history[: values["evicted_count"]]
    assert values["evicted_user_messages"] == sum(isinstance(m, HumanMessage) for m in evicted) >= 2
    second = next(i for i, m in enumerate(history) if "piano" in str(m.content))
    assert second > 1

    out = say(g, ctx, "t1", "Where is the blue notebook hidden?")
    result = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "conversation_search"][-1]
    hit = next(h for h in result.artifact["hits"] if "piano" in h["text"] and h["origin"] == "user")
    assert (hit["thread_id"], hit["turn"], hit["message_index"]) == ("t1", 1, second)
    assert f"thread=t1 turn=1 message={second} origin=user" in result.content, result.content
    # The question, asked after the eviction, is numbered on from the evicted messages.
    asked = len(_history(g)) - 1 - [m.type for m in reversed(_history(g))].index("human")
    cites = out["messages"][-1].response_metadata.get("citations", [])
    assert cites and all(c["turn"] <= 1 for c in cites if c["thread_id"] == "t1"), cites
    say(g, ctx, "t1", "Thanks!")  # indexes the question
    found = MemoryServices.open(data_dir).recall.search(Scope("ana"), "Where is the blue notebook hidden?", 5,
                                                        thread_id="t1")
    question = next(h for h in found if h.text == "user: Where is the blue notebook hidden?")
    assert (question.turn, question.message_index) == (_turn_of(_history(g), asked), asked)
    assert question.turn == sum(isinstance(m, HumanMessage) for m in _history(g)[:asked])


def test_a_thread_from_before_turns_were_counted(embedded, data_dir, say):
    """Recall entries without a turn show their message index and turn -1; a thread whose state never
    counted its evicted user messages is numbered from recall; ``rebuild`` gives old entries their turn."""
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2500)
    _evict_the_notebook(g, say, ctx)
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    svc.recall.writer.flush()
    rows = svc.recall.index.collection.get(where={"thread_id": "t1"}, include=["metadatas"])
    svc.recall.index.collection.update(ids=rows["ids"], metadatas=[
        {k: v for k, v in m.items() if k != "conversation_turn"} for m in rows["metadatas"]])
    g.update_state(CONFIG, {"evicted_user_messages": -1}, as_node="reason")
    history = _history(g)
    second = next(i for i, m in enumerate(history) if "piano" in str(m.content))

    old = next(h for h in svc.recall.search(scope, "blue notebook piano attic", 5, thread_id="t1") if h.role == "human")
    assert (old.turn, old.message_index) == (-1, second)
    assert old.citation()["turn"] == -1 and old.citation()["message_index"] == second
    session = Session(embedded, ctx, "t1", out=io.StringIO())
    assert f"recall thread t1, turn ?, message {second}: " in "\n".join(session.search("blue notebook piano", k=10))

    out = say(g, ctx, "t1", "My bicycle is the red one by the gate.")  # numbered on from recall's count
    index = len(_history(g)) - 1 - [m.type for m in reversed(_history(g))].index("human")
    users = sum(isinstance(m, HumanMessage) for m in _history(g)[:index])
    saved = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "archival_memory_insert"][-1]
    cite = saved.artifact["citations"][0]
    assert (cite["turn"], cite["message_index"]) == (users, index), cite
    assert svc.archival.get(scope, cite["id"]).provenance.turn == users

    assert svc.recall.rebuild(SavedHistory(embedded.checkpointer), scope, "t1") > 0
    again = next(h for h in svc.recall.search(scope, "blue notebook piano attic", 5, thread_id="t1") if h.role == "human")
    assert (again.turn, again.message_index) == (1, second)


def test_a_create_agent_app_numbers_turns_past_eviction(embedded, data_dir):
    """PagefaultMiddleware keeps the same count in the agent's state: turns go on past evicted messages."""
    from langchain.agents import create_agent

    from pagefault import OfflineChatModel, PagefaultMiddleware

    # A window where no compaction falls between the insert and the turn's answer (the check below).
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2200)
    agent = create_agent(OfflineChatModel(), [], middleware=[PagefaultMiddleware(ctx)],
                         checkpointer=embedded.checkpointer, store=embedded.store)
    config = {"configurable": {"thread_id": "app"}}

    said: list[str] = []

    def say(text: str) -> dict:
        said.append(text)
        return agent.invoke({"messages": [HumanMessage(text)]}, config)

    say("My name is Ana and I live in Lisbon.")
    say(NOTEBOOK)
    while say(demo_filler(len(said))).get("evicted_user_messages", 0) < 2:
        assert len(said) < 30, "the middleware never evicted the notebook"
    out = say("My bicycle is the red one by the gate.")
    assert out["evicted_count"] > 0 and out["evicted_user_messages"] >= 2
    saved = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "archival_memory_insert"][-1]
    cite = saved.artifact["citations"][0]
    window_index = next(j for j, m in enumerate(out["messages"]) if "bicycle" in str(m.content))
    assert (cite["turn"], cite["message_index"]) == (len(said) - 1, out["evicted_count"] + window_index), cite
    hits = MemoryServices.open(data_dir).recall.search(Scope("ana"), "blue notebook piano attic", 5, thread_id="app")
    assert any(h.turn == 1 and h.message_index > 1 and h.role == "human" for h in hits), hits
