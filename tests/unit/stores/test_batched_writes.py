"""Chroma refuses a write of more records than its ``max_batch_size``; ``BatchedCollection`` cuts writes
to the limit its client reports (``pagefault.stores.index.batched_writes``). Real embedded Chroma."""

from __future__ import annotations

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from pagefault.stores.index.batched_writes import BatchedCollection, write_limit


@pytest.fixture
def chroma(tmp_path):
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False))
    return client, client.get_or_create_collection("batched-writes", embedding_function=None,
                                                   configuration={"hnsw": {"space": "cosine"}})


def test_writes_above_the_engines_limit_go_in_batches_it_takes(chroma):
    client, raw = chroma
    limit = write_limit(client)
    n = limit + 7
    ids = [f"r{k}" for k in range(n)]
    vectors = np.random.default_rng(7).random((n, 8), dtype=np.float32)
    with pytest.raises(Exception, match="max(imum)? batch size"):  # the engine's own refusal, as one write
        raw.upsert(ids=ids, embeddings=vectors, documents=ids, metadatas=[{"v": 0}] * n)
    col = BatchedCollection(raw, limit)
    col.upsert(ids=ids, embeddings=vectors, documents=ids, metadatas=[{"v": k} for k in range(n)])
    assert col.count() == n
    col.update(ids=ids, metadatas=[{"v": -k} for k in range(n)])
    got = col.get(ids=[ids[0], ids[limit], ids[-1]], include=["metadatas", "documents", "embeddings"])
    assert got["documents"] == [ids[0], ids[limit], ids[-1]]
    assert [m["v"] for m in got["metadatas"]] == [0, -limit, -(n - 1)]
    assert np.allclose(got["embeddings"][2], vectors[-1], atol=1e-6), "the last batch's vectors, as given"


def test_a_batch_holds_at_least_one_record(chroma):
    with pytest.raises(ValueError, match="at least one record"):
        BatchedCollection(chroma[1], 0)
