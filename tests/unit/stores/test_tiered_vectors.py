"""The archival tiers on the embedded setup: small writes resident, moved to Chroma in chunks."""

from __future__ import annotations

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from pagefault.stores.index import tiered_vectors as tiered
from pagefault.stores.index.resident_vectors import ResidentCollection
from pagefault.stores.index.tiered_vectors import TieredCollection
from pagefault.stores.scope import Scope
from pagefault.stores.services import ARCHIVAL_RECENT_FILE, MemoryServices

DIM = 8


def vec(i: int) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    v[(i + 1) % DIM] = 0.1 * (i // DIM + 1)
    return (v / np.linalg.norm(v)).tolist()


def collections(tmp_path):
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False))
    cold = client.get_or_create_collection("tiers", configuration={"hnsw": {"space": "cosine"}})
    return cold, ResidentCollection(str(tmp_path / "hot.sqlite"), "tiers")


def put(col, ids):
    col.upsert(ids=[f"r{i}" for i in ids], embeddings=[vec(i) for i in ids],
               metadatas=[{"n": i, "scope": "s"} for i in ids], documents=[f"text {i}" for i in ids])


def test_small_writes_stay_resident_and_large_ones_go_to_chroma(tmp_path):
    cold, hot = collections(tmp_path)
    col = TieredCollection(cold, hot)
    put(col, range(3))
    assert (hot.count(), cold.count()) == (3, 0)
    put(col, range(100, 100 + tiered.DIRECT))
    assert (hot.count(), cold.count()) == (3, tiered.DIRECT)
    assert col.count() == 3 + tiered.DIRECT


def test_reads_see_both_tiers_once_in_order(tmp_path):
    cold, hot = collections(tmp_path)
    col = TieredCollection(cold, hot)
    put(col, range(40))  # Chroma
    put(col, [40, 41, 5])  # resident; r5 rewritten, so its Chroma copy goes
    assert hot.count() == 3 and cold.count() == 39 and col.count() == 42
    got = col.get(ids=["r41", "r0", "missing", "r5"], include=["documents", "metadatas", "embeddings"])
    assert got["ids"] == ["r41", "r0", "r5"]
    assert got["documents"] == ["text 41", "text 0", "text 5"]
    assert np.allclose(got["embeddings"][1], vec(0))
    pages = []
    for offset in range(0, 50, 7):
        pages += col.get(where={"scope": "s"}, limit=7, offset=offset, include=[])["ids"]
    assert sorted(pages) == sorted(f"r{i}" for i in range(42)) and len(pages) == 42
    for i in (3, 41, 5):
        q = col.query(query_embeddings=[vec(i)], n_results=3, include=["distances", "documents"])
        assert q["ids"][0][0] == f"r{i}" and q["documents"][0][0] == f"text {i}"
        assert q["distances"][0] == sorted(q["distances"][0])
    assert col.query(query_embeddings=[vec(1)], n_results=2, include=["documents"])["distances"] is None


def test_update_and_delete_reach_the_tier_holding_the_record(tmp_path):
    cold, hot = collections(tmp_path)
    col = TieredCollection(cold, hot)
    put(col, range(40))
    put(col, [50])
    col.update(ids=["r50", "r1"], metadatas=[{"n": -50, "scope": "s"}, {"n": -1, "scope": "s"}])
    assert hot.get(ids=["r50"])["metadatas"][0]["n"] == -50
    assert cold.get(ids=["r1"])["metadatas"][0]["n"] == -1
    col.delete(ids=["r50", "r2"])
    assert col.get(ids=["r50", "r2", "r3"], include=[])["ids"] == ["r3"]


def test_a_full_resident_tier_moves_its_oldest_records_to_chroma(tmp_path, monkeypatch):
    monkeypatch.setattr(tiered, "MOVE_AT", 10)
    monkeypatch.setattr(tiered, "MOVE_CHUNK", 4)
    cold, hot = collections(tmp_path)
    col = TieredCollection(cold, hot)
    for i in range(10):
        put(col, [i])
    assert (hot.count(), cold.count()) == (6, 4)
    assert sorted(cold.get(include=[])["ids"]) == ["r0", "r1", "r2", "r3"]
    moved = cold.get(ids=["r2"], include=["documents", "metadatas", "embeddings"])
    assert moved["documents"] == ["text 2"] and moved["metadatas"][0]["n"] == 2
    assert np.allclose(moved["embeddings"][0], vec(2), atol=1e-6)
    assert col.count() == 10 and len(set(col.get(include=[])["ids"])) == 10


def test_a_move_cut_short_by_a_crash_is_finished_on_open(tmp_path):
    cold, hot = collections(tmp_path)
    put(hot, [1, 2])
    put(cold, [2])  # Chroma written, the resident copy not yet removed
    col = TieredCollection(cold, hot)
    assert hot.get(include=[])["ids"] == ["r1"]
    assert col.count() == 2 and sorted(col.get(include=[])["ids"]) == ["r1", "r2"]
    put(hot, [2])  # another process mid-move, seen from this one
    q = col.query(query_embeddings=[vec(2)], n_results=3, include=["distances"])
    assert q["ids"][0][:2] == ["r2", "r1"] and len(set(q["ids"][0])) == len(q["ids"][0])


def test_archival_inserts_of_a_turn_are_resident_then_in_chroma(tmp_path, monkeypatch):
    monkeypatch.setattr(tiered, "MOVE_AT", 6)
    monkeypatch.setattr(tiered, "MOVE_CHUNK", 3)
    svc = MemoryServices.open(str(tmp_path / "data"))
    assert (tmp_path / "data" / ARCHIVAL_RECENT_FILE).exists()
    scope = Scope("u")
    ids = [svc.archival.insert(scope, f"Note {i}: the blue kettle is on shelf {i}.", defer=True).id for i in range(8)]
    hits = svc.archival.search(scope, "which shelf holds the blue kettle", 8)
    assert {r.id for r, _ in hits} == set(ids)
    col = svc.archival.index.collection
    assert isinstance(col, TieredCollection)
    assert col.cold.count() >= 3 and col.cold.count() + col.hot.count() == 8
    assert svc.archival.count(scope) == 8


@pytest.mark.parametrize("n", [0, 1])
def test_query_of_an_empty_resident_tier_is_chroma_alone(tmp_path, n):
    cold, hot = collections(tmp_path)
    col = TieredCollection(cold, hot)
    put(col, range(40))
    if n:
        put(col, [99])
    q = col.query(query_embeddings=[vec(7)], n_results=5)
    assert q["ids"][0][0] == "r7" and len(q["ids"][0]) == 5
