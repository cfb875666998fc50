"""Recall is indexed behind the turn (``pagefault.stores.writers.recall_writer``) without losing anything:
reads wait for it, eviction waits for it, a failed job is retried, a forked thread is re-indexed, and
``recall_indexed`` only ever counts turns the writer confirmed."""

from __future__ import annotations

import threading

from langchain_core.messages import AIMessage, HumanMessage

from pagefault import Context, MemoryServices, Scope
from pagefault.graph.state import PagefaultState
from pagefault.stores.recall import recall_id
from pagefault.window.recall_sync import sync_recall

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_id": "cp-1"}}


def _state(*texts: str, evicted: int = 0, indexed: int = 0, ids: str = "m") -> PagefaultState:
    messages = [HumanMessage(t, id=f"{ids}{evicted + i}") if i % 2 == 0 else AIMessage(t, id=f"{ids}{evicted + i}")
                for i, t in enumerate(texts)]
    return PagefaultState(messages=messages, evicted_count=evicted, recall_indexed=indexed)


def _stored(svc, scope, turn):
    got = svc.recall.index.collection.get(ids=[recall_id(scope, "t1", turn)], include=["documents"])
    return got["documents"][0] if got["documents"] else None


def test_a_search_right_after_the_turn_finds_it(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    state = _state("My sister Lucia studies octopuses in Valencia.", "Noted.")
    sync_recall(state, CONFIG, svc.recall, scope)  # queued, not awaited
    hits = svc.recall.search(scope, "Lucia octopuses", 3)
    assert [h.turn for h in hits][:1] == [0]
    assert svc.recall.count(scope) == 2


def test_recall_indexed_counts_only_confirmed_turns(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    gate = threading.Event()
    add = svc.recall.writer.write
    svc.recall.writer.write = lambda *a: (gate.wait(30), add(*a))[1]  # hold the writer mid-job
    try:
        state = _state("one", "two", "three")
        assert sync_recall(state, CONFIG, svc.recall, scope) == 0, "nothing is confirmed while the job runs"
        gate.set()
        svc.recall.writer.flush()
        assert sync_recall(state, CONFIG, svc.recall, scope) == 3
    finally:
        svc.recall.writer.write = add


def test_eviction_indexes_what_the_writer_could_not(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    add = svc.recall.writer.write

    def down(*a):
        raise ConnectionError("store down")

    svc.recall.writer.write = down
    try:
        state = _state("The boat is called Gaviota.", "Nice name.", "It is moored in Denia.")
        assert sync_recall(state, CONFIG, svc.recall, scope) == 0
        svc.recall.writer.flush()
        assert svc.recall.writer.failures == 1 and _stored(svc, scope, 0) is None
        # Compaction is about to evict turns 0-1: they are indexed before sync returns.
        assert sync_recall(state, CONFIG, svc.recall, scope, evicting_below=2) == 3
        assert _stored(svc, scope, 0) == "user: The boat is called Gaviota."
    finally:
        svc.recall.writer.write = add
    # The failed turns were un-queued, so the writer takes them again next time.
    assert svc.recall.writer.submit(scope, "t1", list(enumerate(state.messages)), "cp-2") == 3


def test_a_forked_thread_is_indexed_again(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    sync_recall(_state("I adopted a cat.", "Congratulations!"), CONFIG, svc.recall, scope)
    svc.recall.writer.flush()
    forked = _state("I adopted a dog.", "Congratulations!", ids="fork")  # same turns, other messages
    gate, add = threading.Event(), svc.recall.writer.write
    svc.recall.writer.write = lambda *a: (gate.wait(30), add(*a))[1]  # hold the writer mid-job
    try:
        # The first thread's turns were confirmed; the fork's messages at those turns are not.
        assert sync_recall(forked, CONFIG, svc.recall, scope) == 0
        gate.set()
        svc.recall.writer.flush()
    finally:
        svc.recall.writer.write = add
        gate.set()
    assert _stored(svc, scope, 0) == "user: I adopted a dog."
    assert sync_recall(forked, CONFIG, svc.recall, scope) == 2


def test_the_graph_leaves_no_turn_unfindable(embedded, data_dir, say):
    """Through the graph with a small window: every turn the compactions evicted is in recall."""
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2_048, model="offline")
    graph = embedded.graph()
    for i in range(30):
        say(graph, ctx, "w", f"Note {i}: the blue kayak number {i} is stored in shed {i}.")
    values = graph.get_state({"configurable": {"thread_id": "w"}}).values
    assert values["compactions"] >= 1
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    got = svc.recall.index.collection.get(
        ids=[recall_id(scope, "w", t) for t in range(values["evicted_count"])], include=[])
    assert len(got["ids"]) == values["evicted_count"], "an evicted turn is missing from recall"
    assert values["recall_indexed"] >= values["evicted_count"]


def test_a_reader_does_not_wait_for_turns_in_its_own_window(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    writer = svc.recall.writer
    gate = threading.Event()
    add = writer.write
    writer.write = lambda *a: (gate.wait(30), add(*a))[1]  # hold the writer mid-job
    try:
        sync_recall(_state("The boat is called Aurora.", "Noted."), CONFIG, svc.recall, scope)
        # Those turns are in thread t1's window from turn 0: its reader goes on, anyone else waits.
        assert writer.flush(timeout=0.2, in_window=(scope, "t1", 0)) is True
        assert writer.flush(timeout=0.2, in_window=(scope, "t1", 1)) is False, "turn 0 has left that window"
        assert writer.flush(timeout=0.2, in_window=(scope, "t2", 0)) is False, "another thread's reader waits"
        assert writer.flush(timeout=0.2) is False
        # Eviction waits for exactly the turns it evicts.
        state = _state("The boat is called Aurora.", "Noted.", "It is moored in Split.", "Noted.")
        done = []
        worker = threading.Thread(target=lambda: done.append(sync_recall(state, CONFIG, svc.recall, scope,
                                                                         evicting_below=2)))
        worker.start()
        worker.join(0.3)
        assert worker.is_alive(), "eviction of turns 0-1 waits for them"
        gate.set()
        worker.join(30)
        assert done and done[0] >= 2
    finally:
        writer.write = add
        gate.set()
    assert [h.turn for h in svc.recall.search(scope, "boat Aurora", 3)][:1] == [0]


def test_the_writers_write_once_the_answer_is_out(embedded, data_dir, say, slow_writers):
    """A turn's answer ends both writers' linger (set to 30 s here): what the turn queued is written in
    the pause before the next turn, with no search or compaction waiting for it."""
    ctx = Context(user_id="ana", data_dir=data_dir, model="offline")
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    graph = embedded.graph()
    say(graph, ctx, "t", "My sister Lucia studies octopuses in Valencia.")  # journals an archival insert
    say(graph, ctx, "t", "Thanks!")  # its start queues the first turn's messages for recall
    assert slow_writers(scope), "a writer is still lingering after the answer"
    assert svc.recall.count(scope) >= 2 and svc.archival.count(scope) == 1


def test_minted_ids_are_left_out_of_the_vector_not_out_of_bm25(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    rid = "arc-" + "0123456789abcdef01234567"
    state = _state("The kayak is blue.", f"Noted. I saved that to memory ({rid}).")
    svc.recall.add(scope, "t1", list(enumerate(state.messages)), "cp-1")
    got = svc.recall.index.collection.get(ids=[recall_id(scope, "t1", 1)], include=["documents", "embeddings"])
    assert rid in got["documents"][0], "the stored text keeps the id"
    plain = svc.embeddings.embed_array(["assistant: Noted. I saved that to memory ()."])[0]
    assert float(got["embeddings"][0] @ plain) > 0.9999, "the vector is the text's without the id"
    assert [h.message_index for h in svc.recall.search(scope, rid, 1)] == [1], "BM25 still finds the id"


def test_conversation_search_leaves_out_what_is_still_in_the_window(embedded, data_dir):
    """The model sees its window already: those turns are no results, whether or not the writer has
    indexed them yet; older turns of the thread and other threads are."""
    from dataclasses import replace

    from pagefault.stores.core import CoreMemory
    from pagefault.tools.handlers import ConversationSearch, MemoryCall, conversation_search

    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    texts = ["The kayak is blue.", "Noted.", "The kayak is moored in Split.", "Noted.", "Where is the kayak?", "Noted."]
    svc.recall.add(scope, "t1", list(enumerate(_state(*texts).messages)), "cp-1")
    svc.recall.add(scope, "t2", [(0, HumanMessage("My kayak is red.", id="o0"))], "cp-2")
    call = MemoryCall(scope, "t1", 4, "m4", CoreMemory(embedded.store, scope), svc.archival, svc.recall, window_start=2)
    hits = conversation_search(call, ConversationSearch(query="kayak", top_k=5)).artifact["hits"]
    assert {(h["thread_id"], h["message_index"]) for h in hits} == {("t1", 0), ("t1", 1), ("t2", 0)}
    everything = conversation_search(replace(call, window_start=None), ConversationSearch(query="kayak", top_k=10))
    assert ("t1", 2) in {(h["thread_id"], h["message_index"]) for h in everything.artifact["hits"]}
