"""Recall's vectors on the embedded setup (``pagefault.stores.index.resident_vectors``): the Chroma calls recall
makes give Chroma's answers, another connection's writes are seen, and a directory whose recall was
written to Chroma by an earlier version is carried over."""

from __future__ import annotations

import os

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from pagefault import MemoryServices, Scope
from pagefault.stores.index.resident_vectors import ResidentCollection
from pagefault.stores.services import RECALL_FILE

DIM = 16


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def pair(tmp_path):
    """The same collection through two connections, as two processes on one directory would have."""
    path = str(tmp_path / "r.sqlite")
    return ResidentCollection(path, "pagefault_recall"), ResidentCollection(path, "pagefault_recall"), path


def _fill(col: ResidentCollection, n: int = 30) -> np.ndarray:
    v = _vectors(n)
    col.upsert(ids=[f"r{i}" for i in range(n)], embeddings=v, documents=[f"turn {i}" for i in range(n)],
               metadatas=[{"scope": "ana" if i % 3 else "ben", "turn": i, "created_at": float(i), "odd": i % 2 == 1}
                          for i in range(n)])
    return v


def test_query_gives_chromas_cosine_distances_nearest_first(pair, tmp_path):
    col, _, _ = pair
    v = _fill(col)
    chroma = chromadb.PersistentClient(str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False))
    ref = chroma.get_or_create_collection("reference", configuration={"hnsw": {"space": "cosine"}})
    ref.upsert(ids=[f"r{i}" for i in range(len(v))], embeddings=v)
    q = _vectors(1, seed=5)
    mine = col.query(query_embeddings=q, n_results=5, include=["distances", "documents", "metadatas"])
    theirs = ref.query(query_embeddings=q, n_results=5, include=["distances"])
    assert mine["ids"] == theirs["ids"]
    assert np.allclose(mine["distances"][0], theirs["distances"][0], atol=1e-5)
    assert mine["documents"][0][0] == "turn " + mine["ids"][0][0][1:]
    assert mine["metadatas"][0][0]["turn"] == int(mine["ids"][0][0][1:])


def test_where_filters_select_like_chroma(pair):
    col, _, _ = pair
    _fill(col)
    assert col.get(where={"scope": "ben"}, include=[])["ids"] == [f"r{i}" for i in range(0, 30, 3)]
    both = {"$and": [{"scope": "ana"}, {"created_at": {"$gte": 20.0}}, {"odd": True}]}
    assert col.get(where=both, include=[])["ids"] == ["r23", "r25", "r29"]
    either = {"$or": [{"turn": {"$lt": 2}}, {"turn": {"$in": [28, 29]}}]}
    assert col.get(where=either, include=[])["ids"] == ["r0", "r1", "r28", "r29"]
    ben = col.query(query_embeddings=_vectors(1, 9), n_results=50, where={"scope": "ben"}, include=["distances"])
    assert sorted(ben["ids"][0]) == sorted(f"r{i}" for i in range(0, 30, 3))
    assert ben["distances"][0] == sorted(ben["distances"][0])
    assert col.get(limit=4, offset=2, include=[])["ids"] == ["r2", "r3", "r4", "r5"]
    with pytest.raises(ValueError, match="unsupported where operator"):
        col.get(where={"turn": {"$regex": "x"}})
    with pytest.raises(ValueError, match="values must be"):
        col.get(where={"turn": [1, 2]})


def test_upsert_update_and_delete_keep_file_and_memory_together(pair):
    col, _, path = pair
    v = _fill(col)
    col.upsert(ids=["r1"], embeddings=v[7:8], documents=["changed"], metadatas=[{"scope": "ana", "turn": 1}])
    assert col.count() == 30  # an upsert of a known id replaces it
    assert set(col.query(query_embeddings=v[7:8], n_results=2, include=[])["ids"][0]) == {"r1", "r7"}
    col.update(ids=["r2", "missing"], metadatas=[{"scope": "ana", "turn": 2, "flag": "x"}, {"scope": "x"}])
    assert col.get(ids=["r2", "missing"], include=["metadatas"])["metadatas"] == [{"scope": "ana", "turn": 2, "flag": "x"}]
    col.delete(ids=["r3", "r4"])
    assert col.count() == 28 and col.get(ids=["r3"], include=[])["ids"] == []
    got = col.get(ids=["r5"], include=["embeddings", "documents"])
    assert got["documents"] == ["turn 5"] and np.allclose(got["embeddings"][0], v[5], atol=1e-6)
    reopened = ResidentCollection(path, "pagefault_recall")
    assert reopened.count() == 28
    assert reopened.get(ids=["r1"], include=["documents"])["documents"] == ["changed"]
    with pytest.raises(ValueError, match="same length"):
        col.upsert(ids=["a", "b"], embeddings=_vectors(1))
    assert col.count() == 28  # a rejected write changes nothing


def test_another_connections_writes_are_seen(pair):
    writer, reader, _ = pair
    assert reader.count() == 0
    v = _fill(writer)
    assert reader.count() == 30
    assert reader.query(query_embeddings=v[4:5], n_results=1, include=[])["ids"] == [["r4"]]
    writer.delete(ids=["r4"])
    writer.upsert(ids=["new"], embeddings=v[4:5], metadatas=[{"scope": "ana"}])
    assert reader.query(query_embeddings=v[4:5], n_results=1, include=[])["ids"] == [["new"]]
    assert reader.count() == 30
    reader.upsert(ids=["from-reader"], embeddings=v[9:10], metadatas=[{"scope": "ana"}])
    assert writer.get(ids=["from-reader"], include=[])["ids"] == ["from-reader"]
    assert writer.count() == reader.count() == 31


def test_two_kinds_share_a_file_and_stay_apart(tmp_path):
    path = str(tmp_path / "r.sqlite")
    turns, units = ResidentCollection(path, "pagefault_recall"), ResidentCollection(path, "pagefault_recall_unit")
    _fill(turns, 5)
    assert units.count() == 0 and units.get(include=[])["ids"] == []
    assert units.query(query_embeddings=_vectors(1), n_results=3, include=[])["ids"] == [[]]


def test_recall_written_to_chroma_by_an_earlier_version_is_carried_over(tmp_path):
    data = tmp_path / "data"
    client = chromadb.PersistentClient(str(data / "chroma"), settings=Settings(anonymized_telemetry=False))
    old = client.get_or_create_collection("pagefault_recall", configuration={"hnsw": {"space": "cosine"}})
    v = _vectors(3)
    old.upsert(ids=["a", "b", "c"], embeddings=v, documents=["user: one", "user: two", "user: three"],
               metadatas=[{"scope": Scope("ana").key, "turn": i, "kind": "recall"} for i in range(3)])
    del old, client
    svc = MemoryServices.open(str(data))
    col = svc.recall.index.collection
    assert isinstance(col, ResidentCollection) and os.path.exists(data / RECALL_FILE)
    assert col.count() == 3
    got = col.get(ids=["b"], include=["documents", "metadatas", "embeddings"])
    assert got["documents"] == ["user: two"] and got["metadatas"][0]["turn"] == 1
    assert np.allclose(got["embeddings"][0], v[1], atol=1e-6)
    assert col.noted("copied from chroma")


def test_a_copy_cut_short_resumes_without_duplicates(tmp_path):
    data = tmp_path / "data"
    client = chromadb.PersistentClient(str(data / "chroma"), settings=Settings(anonymized_telemetry=False))
    old = client.get_or_create_collection("pagefault_recall", configuration={"hnsw": {"space": "cosine"}})
    v = _vectors(5)
    old.upsert(ids=list("abcde"), embeddings=v, documents=list("ABCDE"), metadatas=[{"scope": "s"}] * 5)
    part = ResidentCollection(str(data / RECALL_FILE), "pagefault_recall")  # a copy that stopped after two
    part.upsert(ids=["a", "b"], embeddings=v[:2], documents=["A", "B"], metadatas=[{"scope": "s"}] * 2)
    from pagefault.models.embeddings import OfflineEmbeddings
    from pagefault.stores.services import resident_hybrid

    col = resident_hybrid(client, str(data), "recall", OfflineEmbeddings(), page=2).collection
    assert col.count() == 5 and col.get(include=["documents"])["documents"] == list("ABCDE")
    old.upsert(ids=["f"], embeddings=v[:1], documents=["F"], metadatas=[{"scope": "s"}])
    again = resident_hybrid(client, str(data), "recall", OfflineEmbeddings()).collection
    assert again.count() == 5  # copied once: later Chroma writes are not this directory's recall


def test_a_turn_indexed_on_the_embedded_setup_writes_no_chroma_recall(tmp_path):
    data = str(tmp_path / "data")
    svc, scope = MemoryServices.open(data), Scope("ana")
    from langchain_core.messages import HumanMessage

    svc.recall.add(scope, "t1", [(0, HumanMessage("My sister Lucia studies octopuses.", id="m0"))], "cp")
    assert svc.recall.search(scope, "Lucia octopuses", 1)[0].message_index == 0
    names = {c if isinstance(c, str) else c.name for c in svc.client.list_collections()}
    assert not names & {"pagefault_recall", "pagefault_recall_unit"}
    assert svc.recall.index.collection.count() == svc.recall.units.collection.count() == 1
