"""Citations end to end: every offline answer that used retrieved memory names its source in the
text and carries it as structured data in ``response_metadata["citations"]``; each citation
resolves to the record or checkpointed turn it names."""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from pagefault import Context
from pagefault.stores import MemoryServices, Scope

ARCHIVAL_KEYS = {"source", "id", "thread_id", "turn", "message_index", "created_at", "origin", "flagged", "flags"}
RECALL_KEYS = {"source", "thread_id", "turn", "message_index", "checkpoint_id", "message_id", "origin", "flagged",
               "flags"}


def _answer(out) -> AIMessage:
    return out["messages"][-1]


def test_archival_answer_cites_a_record_that_exists(embedded, data_dir, say):
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir)
    say(g, ctx, "t1", "My sister Lucia plays the cello in Porto.")
    answer = _answer(say(g, ctx, "t2", "What instrument does Lucia play?"))
    (cite,) = answer.response_metadata["citations"]
    assert set(cite) == ARCHIVAL_KEYS
    assert (cite["source"], cite["thread_id"], cite["turn"], cite["message_index"], cite["origin"], cite["flagged"]) == (
        "archival", "t1", 0, 0, "user", False)
    assert f"[archival {cite['id']}, from thread t1 turn 0]" in answer.content
    record = MemoryServices.open(data_dir).archival.get(Scope("ana"), cite["id"])
    assert record is not None and record.text in answer.content and record.provenance.created_at == cite["created_at"]


def test_recall_answer_cites_the_checkpointed_turn(embedded, data_dir, say):
    g = embedded.graph()
    # Recorded without a reply (history import): the words live only in recall, not in archival.
    say(g, Context(user_id="ana", data_dir=data_dir, respond=False), "old", "The spare key is under the blue flowerpot.")
    assert MemoryServices.open(data_dir).archival.count(Scope("ana")) == 0
    answer = _answer(say(g, Context(user_id="ana", data_dir=data_dir), "new", "Where is the spare key?"))
    (cite,) = answer.response_metadata["citations"]
    assert set(cite) == RECALL_KEYS
    assert (cite["source"], cite["thread_id"], cite["turn"], cite["message_index"], cite["origin"]) == (
        "recall", "old", 0, 0, "user")
    assert "[thread old, turn 0]" in answer.content and "flowerpot" in answer.content
    snap = g.get_state({"configurable": {"thread_id": "old", "checkpoint_id": cite["checkpoint_id"]}})
    cited = [m for m in snap.values["messages"] if m.id == cite["message_id"]]
    assert cited and "flowerpot" in cited[0].content


def _human_indexes(values) -> list[int]:
    return [i for i, m in enumerate(values["messages"]) if isinstance(m, HumanMessage)]


def test_the_second_statement_is_cited_as_turn_1_not_by_its_message_index(embedded, data_dir, say):
    """Turns are conversational: the user's second statement is turn 1, wherever its message sits
    after the first turn's tool calls, results and answer; the message index travels beside it."""
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir)
    say(g, ctx, "t1", "My name is Ana and I live in Lisbon.")
    second = _human_indexes(say(g, ctx, "t1", "My sister Lucia plays the cello in Porto."))[1]
    assert second > 1, "the first turn's replies come between the two statements"
    out = say(g, ctx, "t2", "What instrument does Lucia play?")
    answer = _answer(out)
    (cite,) = answer.response_metadata["citations"]
    assert (cite["source"], cite["thread_id"], cite["turn"], cite["message_index"]) == ("archival", "t1", 1, second)
    assert f"[archival {cite['id']}, from thread t1 turn 1]" in answer.content, answer.content
    assert f"turn {second}" not in answer.content
    # The tool result the model read says the same, in its text and in its artifact.
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "archival_memory_search")
    hit = next(h for h in result.artifact["hits"] if h["id"] == cite["id"])
    assert (hit["turn"], hit["message_index"]) == (1, second)
    assert f"id={cite['id']} origin=user thread=t1 turn=1 message={second} " in result.content, result.content
    record = MemoryServices.open(data_dir).archival.get(Scope("ana"), cite["id"])
    assert record is not None and (record.provenance.turn, record.provenance.message_index) == (1, second)


def test_a_recalled_second_statement_is_cited_as_turn_1(embedded, data_dir, say):
    g = embedded.graph()
    say(g, Context(user_id="ana", data_dir=data_dir), "old", "My name is Ana and I live in Lisbon.")
    # Recorded without a reply: the words live only in recall.
    recorded = Context(user_id="ana", data_dir=data_dir, respond=False)
    second = _human_indexes(say(g, recorded, "old", "The spare key is under the blue flowerpot."))[1]
    assert second > 1
    out = say(g, Context(user_id="ana", data_dir=data_dir), "new", "Where is the spare key?")
    answer = _answer(out)
    (cite,) = answer.response_metadata["citations"]
    assert (cite["source"], cite["thread_id"], cite["turn"], cite["message_index"]) == ("recall", "old", 1, second)
    assert "[thread old, turn 1]" in answer.content and "flowerpot" in answer.content, answer.content
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "conversation_search")
    assert f"thread=old turn=1 message={second} origin=user" in result.content, result.content
    snap = g.get_state({"configurable": {"thread_id": "old", "checkpoint_id": cite["checkpoint_id"]}})
    cited = [i for i, m in enumerate(snap.values["messages"]) if m.id == cite["message_id"]]
    assert cited == [second - snap.values.get("evicted_count", 0)], "message_index addresses the cited message"


def test_every_answer_from_memory_is_cited(embedded, data_dir, say):
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir)
    script = ["What is my favourite colour?", "My name is Ana and I live in Lisbon.", "I work as a marine biologist.",
              "What is my name?", "Where do I live?", "Hello", "What do I do for work?"]
    answers = []
    events = []
    for text in script:
        for mode, chunk in g.stream({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t1"}},
                                    context=ctx, stream_mode=["values", "custom"]):
            if mode == "custom":
                events.append(chunk)
            else:
                last = chunk["messages"][-1]
        answers.append(last)
    from_memory = [a for a in answers if a.content.startswith("From memory")]
    assert len(from_memory) == 3
    for a in answers:
        cites = a.response_metadata.get("citations", [])
        if a.content.startswith("From memory"):
            assert cites, a.content
            for c in cites:
                where = (f"[archival {c['id']}" if c["source"] == "archival"
                         else f"[thread {c['thread_id']}, turn {c['turn']}]")
                assert where in a.content
        else:
            assert not cites, a.content
    assert re.search(r"found nothing", answers[0].content), "nothing stored yet: nothing to cite"
    # The page-fault events carry the same structured citations as they happen.
    searches = [e for e in events if e.get("event") == "page_fault" and e["tool"] == "archival_memory_search"]
    assert searches and all(isinstance(c, dict) and c["source"] == "archival" for e in searches for c in e["citations"])
