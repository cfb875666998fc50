"""Where in a thread a memory came from: the conversational ``turn`` and the ``message_index``, and how
records written before pagefault counted turns (they know only the message index) read and show."""

from __future__ import annotations

import json
import time

from langchain_core.messages import AIMessage, HumanMessage

from pagefault.models.offline import _citation_text
from pagefault.safety.guard import GUARD_VERSION
from pagefault.stores import CoreMemory, MemoryServices, Scope
from pagefault.stores.archival import archival_id
from pagefault.stores.index.hybrid import IndexedText
from pagefault.stores.provenance import Provenance, log_position, shown_log_entry
from pagefault.stores.validity import Validity
from pagefault.stores.writers.archival_journal import entry_runs
from pagefault.tools.handlers import ArchivalSearch, ConversationSearch, MemoryCall, archival_memory_search, conversation_search


def test_provenance_stores_both_and_reads_old_metadata():
    p = Provenance("t1", 1, "m5", "user", 1.0, message_index=5)
    meta = p.metadata()
    assert (meta["turn"], meta["conversation_turn"]) == (5, 1), "the stored 'turn' key keeps its old meaning"
    back = Provenance.from_metadata({**meta, "thread_id": "t1", "created_at": 1.0})
    assert (back.turn, back.message_index) == (1, 5)
    old = Provenance.from_metadata({"thread_id": "t1", "turn": 5, "message_id": "m5", "source": "user"})
    assert (old.turn, old.message_index) == (-1, 5), "a record from before turns were counted"
    junk = Provenance.from_metadata({"turn": "five", "conversation_turn": 2.5})
    assert (junk.turn, junk.message_index) == (-1, -1)


def test_log_entries_old_and_new():
    new = Provenance("t1", 1, "m5", "user", 1.0, message_index=5).log_entry("append")
    assert log_position(new) == (1, 5) and shown_log_entry(new) == new
    old = {"op": "append", "thread_id": "t1", "turn": 5, "message_id": "m5"}
    assert log_position(old) == (-1, 5)
    assert shown_log_entry(old) == {**old, "turn": -1, "message_index": 5}


def test_an_old_core_log_entry_shows_its_message_index(embedded):
    core, scope = CoreMemory(embedded.store, Scope("ana")), Scope("ana")
    core.append("human", "Name: Ana", provenance=Provenance("t1", 1, "m5", "user", message_index=5))
    item = embedded.store.get(scope.namespace("core"), "human")
    old_entry = {"op": "append", "source": "user", "thread_id": "t0", "turn": 7, "message_id": "m7", "at": 1.0,
                 "flags": []}
    embedded.store.put(scope.namespace("core"), "human", {**item.value, "log": [old_entry, *item.value["log"]]})
    log = core.get("human").log
    assert [(e["turn"], e["message_index"]) for e in log] == [(-1, 7), (1, 5)]


def test_an_old_journal_entry_reads_its_turn_as_the_message_index():
    prov = {"thread_id": "t1", "turn": 5, "message_id": "m5", "source": "user", "created_at": 1.0, "flags": [],
            "offset": -1}
    raw = json.dumps({"user_id": "ana", "agent_id": "default", "text": "x", "tags": [], "since": 1.0, "prov": prov})
    (_, [(_, entry)]), = entry_runs([(1, "ana/default", "arc-1", raw)])
    assert (entry[2].turn, entry[2].message_index) == (-1, 5)


def _call(svc, store, scope) -> MemoryCall:
    return MemoryCall(scope, "t9", 0, "m0", CoreMemory(store, scope), svc.archival, svc.recall)


def test_old_records_show_their_message_index_in_results_and_citations(embedded, data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    text = "Ana's cello teacher lives in Porto."
    old_meta = {"kind": "archival", "thread_id": "t1", "turn": 5, "message_id": "m5", "source": "user", "flags": "",
                "flagged": False, "guard_version": GUARD_VERSION, **Validity(time.time(), recorded_at=time.time()).metadata()}
    svc.archival.index.upsert([IndexedText(archival_id(scope, text), text, scope.key, "t1", time.time(), metadata=old_meta)])
    svc.recall.add(scope, "t1", [(5, HumanMessage("My cello teacher lives in Porto.", id="m5")),
                                 (6, AIMessage("Noted.", id="m6"))], "cp-1")  # no turns: as before they were counted

    found = archival_memory_search(_call(svc, embedded.store, scope), ArchivalSearch(query="cello teacher Porto"))
    assert "thread=t1 turn=- message=5 " in found.content, found.content
    (cite,) = found.artifact["citations"]
    assert (cite["turn"], cite["message_index"]) == (-1, 5)
    assert _citation_text({**cite, "source": "archival"}) == f"[archival {cite['id']}, from thread t1 message 5]"

    recalled = conversation_search(_call(svc, embedded.store, scope), ConversationSearch(query="cello teacher Porto"))
    assert "thread=t1 turn=- message=5 origin=user" in recalled.content, recalled.content
    hit = next(h for h in recalled.artifact["hits"] if h["message_index"] == 5)
    assert hit["turn"] == -1 and _citation_text(hit) == "[thread t1, message 5]"

    svc.recall.add(scope, "t1", [(5, HumanMessage("My cello teacher lives in Porto.", id="m5"))], "cp-1", turns={5: 1})
    hit = next(h for h in svc.recall.search(scope, "cello teacher Porto", 5) if h.message_index == 5)
    assert hit.turn == 1 and _citation_text(hit.citation()) == "[thread t1, turn 1]", "re-indexed with its turn"
