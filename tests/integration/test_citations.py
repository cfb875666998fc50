"""Citations end to end: every offline answer that used retrieved memory names its source in the
text and carries it as structured data in ``response_metadata["citations"]``; each citation
resolves to the record or checkpointed turn it names."""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, HumanMessage

from pagefault import Context
from pagefault.stores import MemoryServices, Scope

ARCHIVAL_KEYS = {"source", "id", "thread_id", "turn", "created_at", "origin", "flagged", "flags"}
RECALL_KEYS = {"source", "thread_id", "turn", "checkpoint_id", "message_id", "origin", "flagged", "flags"}


def _answer(out) -> AIMessage:
    return out["messages"][-1]


def test_archival_answer_cites_a_record_that_exists(embedded, data_dir, say):
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir)
    say(g, ctx, "t1", "My sister Lucia plays the cello in Porto.")
    answer = _answer(say(g, ctx, "t2", "What instrument does Lucia play?"))
    (cite,) = answer.response_metadata["citations"]
    assert set(cite) == ARCHIVAL_KEYS
    assert (cite["source"], cite["thread_id"], cite["turn"], cite["origin"], cite["flagged"]) == (
        "archival", "t1", 0, "user", False)
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
    assert (cite["source"], cite["thread_id"], cite["turn"], cite["origin"]) == ("recall", "old", 0, "user")
    assert "[thread old, turn 0]" in answer.content and "flowerpot" in answer.content
    snap = g.get_state({"configurable": {"thread_id": "old", "checkpoint_id": cite["checkpoint_id"]}})
    cited = [m for m in snap.values["messages"] if m.id == cite["message_id"]]
    assert cited and "flowerpot" in cited[0].content


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
