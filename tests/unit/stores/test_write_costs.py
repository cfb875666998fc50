"""What keeps writes cheap without changing what is stored: batches padded to like lengths, bookkeeping
turns that borrow a vector, record counts kept by triggers."""

from __future__ import annotations

import sqlite3

import numpy as np
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from pagefault import MemoryServices, Scope
from pagefault.models.embeddings import _BATCH, _batches, _Model
from pagefault.stores.index.lexical_sqlite import LexicalDoc, LexicalIndex
from pagefault.stores.recall import recall_id


def test_batches_group_like_lengths():
    lengths = [3, 200, 4, 5, 120, 7, 250]
    groups = _batches(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        assert max(lengths[i] for i in g) <= 2 * min(lengths[i] for i in g) and len(g) <= _BATCH
    assert [sorted(g) for g in groups] == [[0, 2, 3], [5], [1, 4], [6]]


def test_a_batch_gives_the_vectors_one_by_one_gives():
    model = _Model.get()
    texts = ["Thanks!", "The spare key is under the red flowerpot. " * 12, "Lucia studies octopuses in Valencia."]
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-3)


def test_bookkeeping_turns_borrow_the_vector_of_the_turn_they_serve(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    call = AIMessage("", tool_calls=[{"name": "archival_memory_insert", "args": {"text": "x"}, "id": "c1"}])
    turns = [HumanMessage("My boat is called Gaviota."), call,
             ToolMessage("Saved as archival record arc-1.", tool_call_id="c1", name="archival_memory_insert"),
             AIMessage("Noted: your boat is Gaviota.")]
    svc.recall.add(scope, "t1", list(enumerate(turns[:2])), "cp-1")
    svc.recall.add(scope, "t1", [(2, turns[2]), (3, turns[3])], "cp-2")  # its first turn borrows across batches
    got = svc.recall.index.collection.get(ids=[recall_id(scope, "t1", t) for t in range(4)], include=["embeddings"])
    vec = dict(zip(got["ids"], got["embeddings"]))
    v = [np.asarray(vec[recall_id(scope, "t1", t)]) for t in range(4)]
    assert np.allclose(v[1], v[0]) and np.allclose(v[2], v[0]), "the call and its result carry the user's vector"
    assert not np.allclose(v[3], v[0]), "words the model wrote are embedded"


def test_counts_are_kept_by_triggers(tmp_path):
    path = str(tmp_path / "l.sqlite")
    index = LexicalIndex(path, "archival")
    index.upsert([LexicalDoc("a", "s1", "one"), LexicalDoc("b", "s1", "two"), LexicalDoc("c", "s2", "three")])
    index.upsert([LexicalDoc("a", "s1", "one again")])  # replacing a record does not count it twice
    assert (index.count("s1"), index.count("s2"), index.count("s3")) == (2, 1, 0)
    index.delete(["b", "missing"])
    assert index.count("s1") == 1
    db = sqlite3.connect(path)  # a file from before the counts table: counted once when opened
    with db:
        db.execute("DROP TABLE archival_counts")
        db.execute("DROP TRIGGER archival_count_add")
        db.execute("DROP TRIGGER archival_count_remove")
    db.close()
    again = LexicalIndex(path, "archival")
    assert (again.count("s1"), again.count("s2")) == (1, 1)
    again.upsert([LexicalDoc("d", "s2", "four")])
    assert again.count("s2") == 2
