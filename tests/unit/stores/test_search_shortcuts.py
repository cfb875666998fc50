"""Search at scale skips Chroma's metadata filter and BM25's full join, and must give the same answers."""

from __future__ import annotations

import numpy as np
import pytest

from pagefault.stores.index.hybrid import IndexedText, chroma_where
from pagefault.stores.services import MemoryServices
from pagefault.stores.validity import CURRENT
from pagefault.text.terms import query_terms

WORDS = "harbour lantern orchard copper meadow river falcon ledger saffron quarry violet kiln loom canoe".split()


@pytest.fixture
def index(tmp_path):
    rng = np.random.default_rng(3)
    idx = MemoryServices.open(str(tmp_path / "pf")).archival.index
    items, vecs = [], []
    for i in range(700):
        scope = "small" if i % 70 == 0 else "big"  # 10 records in a scope of their own
        text = " ".join(rng.choice(WORDS, size=8)) + f" item {i}"
        items.append(IndexedText(id=f"r{i}", text=text, scope=scope, thread_id=f"t{i % 3}",
                                 tags=("even",) if i % 2 == 0 else (), metadata={"kind": "archival"}))
        v = rng.standard_normal(384).astype(np.float32)
        vecs.append(v / np.linalg.norm(v))
    idx.upsert(items, np.asarray(vecs))
    return idx


def _filtered(idx, qv, scope, n, **filters):
    got = idx.collection.query(query_embeddings=qv.reshape(1, -1), n_results=n, include=["distances"],
                               where=chroma_where(scope, validity=CURRENT, **filters))
    return got["ids"][0]


@pytest.mark.parametrize("filters", [{}, {"thread_id": "t1"}, {"tags": ("even",)}])
def test_dense_candidates_equal_the_filtered_chroma_query(index, filters):
    rng = np.random.default_rng(9)
    for _ in range(5):
        qv = rng.standard_normal(384).astype(np.float32)
        qv /= np.linalg.norm(qv)
        near = index.unfiltered_neighbours(qv, "big", 20, validity=CURRENT, **filters)
        assert near is not None, "enough candidates pass: no fallback"
        exact = _filtered(index, qv, "big", 20, **filters)
        # Both are approximate nearest neighbours (HNSW; random vectors are its hardest case): the same
        # records up to the last one or two, nearest first, every one passing the filters.
        assert len(near) == 20 and len(set(near) & set(exact)) >= 18
        assert list(near.values()) == sorted(near.values(), reverse=True)
        assert set(near) <= set(index.lexical.matching(list(near), "big", validity=CURRENT, **filters))
        sig = index.signals("copper lantern", qv, "big", 20, validity=CURRENT, **filters)
        assert list(sig.dense) == list(near) and set(sig.docs) == set(near)  # docs came with them


def test_a_small_scope_falls_back_to_the_filtered_query(index):
    qv = np.ones(384, dtype=np.float32) / np.sqrt(384)
    assert index.unfiltered_neighbours(qv, "small", 20, validity=CURRENT) is None
    sig = index.signals("copper", qv, "small", 20, validity=CURRENT)
    assert sorted(sig.dense) == sorted(f"r{i}" for i in range(0, 700, 70))


def test_bm25_top_matches_equal_the_full_filtered_query(index):
    lex = index.lexical
    for query, scope, filters in [("copper lantern river", "big", {}), ("saffron kiln", "big", {"thread_id": "t2"}),
                                  ("violet", "small", {}), ("falcon meadow item", "big", {"tags": ("even",)})]:
        got = lex.search(query, scope, 30, validity=CURRENT, **filters)
        match = " OR ".join(f'"{w}"' for w in query_terms(query))
        sql = ("SELECT d.id, -bm25(archival_fts) AS s FROM archival_fts JOIN archival_docs d ON d.rid = archival_fts.rowid"
               " WHERE archival_fts MATCH ? AND d.scope = ? AND d.superseded = 0")
        args = [match, scope]
        if "thread_id" in filters:
            sql += " AND d.thread_id = ?"
            args.append(filters["thread_id"])
        if "tags" in filters:
            sql += " AND instr(d.tags, '|even|') > 0"
        full = lex.db.execute(sql + " ORDER BY s DESC LIMIT 30", args).fetchall()
        assert [i for i, _ in got] == [i for i, _ in full], query
        assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in full]
        other = "r1" if scope == "small" else "r0"  # a record of the other scope
        assert lex.matching([i for i, _ in got] + [other, "nope"], scope, validity=CURRENT, **filters) == {i for i, _ in got}
