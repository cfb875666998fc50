"""The in-memory BM25 postings rank exactly as SQLite FTS5 does and follow every write, including
writes by another connection (another process) to the same file."""

from __future__ import annotations

import random
import sqlite3

import pytest

from pagefault.stores.index import lexical_sqlite as lexical_mod
from pagefault.stores.index.lexical_sqlite import LexicalDoc, LexicalIndex
from pagefault.stores.index.resident_bm25 import ResidentBM25, tokens

WORDS = ("harbour ledger silver copper kiln quarry lantern orchard compass piano canoe bridge archive windmill "
         "delivered repaired inspected shipped sold bought weighed painted mapped restored borrowed measured "
         "Bari Cork Riga Ghent Porto Split Malmo Leiden Nantes Oviedo Helena Felix Rosa Mira Noor Pablo").split()


def corpus(n: int, seed: int = 7) -> list[LexicalDoc]:
    rng = random.Random(seed)
    return [LexicalDoc(f"d{i}", "alice" if i % 3 else "bob", " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30))),
                       thread_id=f"t{i % 4}", created_at=float(i))
            for i in range(n)]


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5))) for _ in range(n)]


def both(tmp_path, docs):
    fast = LexicalIndex(str(tmp_path / "fast.sqlite"), "archival")
    slow = LexicalIndex(str(tmp_path / "slow.sqlite"), "archival", resident=False)
    for idx in (fast, slow):
        idx.upsert(docs)
    return fast, slow


def assert_same(fast: LexicalIndex, slow: LexicalIndex, qs, **filters):
    for q in qs:
        a, b = fast.search(q, "alice", 10, **filters), slow.search(q, "alice", 10, **filters)
        assert [i for i, _ in a] == [i for i, _ in b], q
        assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9), q


def test_rankings_match_fts5_with_filters_and_changes(tmp_path):
    docs = corpus(600)
    fast, slow = both(tmp_path, docs)
    qs = queries(60)
    assert_same(fast, slow, qs)
    assert fast.resident is not None and len(fast.resident) == 600  # caught up by the first search
    assert_same(fast, slow, qs, thread_id="t1")
    assert_same(fast, slow, qs, start=100.0, end=400.0)
    rng = random.Random(3)
    changed = [LexicalDoc(d.id, d.scope, " ".join(rng.choice(WORDS) for _ in range(8)), d.thread_id, d.created_at)
               for d in rng.sample(docs, 150)]
    gone = [d.id for d in rng.sample(docs, 120)]
    for idx in (fast, slow):
        idx.upsert(changed)
        idx.delete(gone)
    assert_same(fast, slow, qs)
    assert len(fast.resident) == 600 - len({*gone})


def test_another_connections_writes_are_followed(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    server, cli = LexicalIndex(path, "archival"), LexicalIndex(path, "archival")
    server.upsert([LexicalDoc("a", "alice", "the silver harbour"), LexicalDoc("b", "alice", "a copper kiln")])
    assert [i for i, _ in cli.search("silver", "alice", 5)] == ["a"]
    cli.upsert([LexicalDoc("c", "alice", "a silver lantern in Riga")])
    assert {i for i, _ in server.search("silver", "alice", 5)} == {"a", "c"}
    # The newest row is replaced: SQLite hands its rowid to the new row, with other words.
    cli.upsert([LexicalDoc("c", "alice", "an orchard in Cork")])
    assert [i for i, _ in server.search("silver", "alice", 5)] == ["a"]
    assert [i for i, _ in server.search("orchard", "alice", 5)] == ["c"]
    cli.delete(["a"])
    assert server.search("silver", "alice", 5) == []
    assert server.resident is not None and len(server.resident) == 2


def test_opening_a_filled_file_loads_in_the_background(tmp_path):
    path = str(tmp_path / "filled.sqlite")
    docs = corpus(400)
    LexicalIndex(path, "archival").upsert(docs)
    reopened = LexicalIndex(path, "archival")
    reference = LexicalIndex(str(tmp_path / "ref.sqlite"), "archival", resident=False)
    reference.upsert(docs)
    reopened.upsert([LexicalDoc("late", "alice", "harbour harbour harbour Bari")])  # while it may be loading
    reference.upsert([LexicalDoc("late", "alice", "harbour harbour harbour Bari")])
    assert reopened.wait_resident(60)
    assert_same(reopened, reference, queries(40))
    assert len(reopened.resident) == 401


def test_a_reader_behind_the_pruned_log_reloads(tmp_path, monkeypatch):
    monkeypatch.setattr(lexical_mod, "LOG_KEEP", 20)
    monkeypatch.setattr(lexical_mod, "PRUNE_EVERY", 2)
    path = str(tmp_path / "pruned.sqlite")
    reader, writer = LexicalIndex(path, "archival"), LexicalIndex(path, "archival")
    reader.upsert([LexicalDoc("first", "alice", "silver")])
    for k in range(10):
        writer.upsert([LexicalDoc(f"w{k}-{j}", "alice", f"copper lantern {k}") for j in range(10)])
    assert sqlite3.connect(path).execute("SELECT min(seq) FROM archival_log").fetchone()[0] > 2
    writer.delete(["first"])
    assert reader.search("silver", "alice", 5) == []  # reloads from the rows, FTS5 answers meanwhile
    assert reader.wait_resident(60)
    assert reader.search("silver", "alice", 5) == []
    assert len(reader.search("copper", "alice", 200)) == 100


def test_tokens_fold_case_and_diacritics_and_stem():
    assert tokens("Café RUNNING cafés, naïve_word") == ["cafe", "run", "cafe", "naiv", "word"]


def test_removed_documents_stop_counting_and_compact():
    r = ResidentBM25()
    for i in range(10):
        r.add(i, "silver harbour" if i < 5 else "copper harbour")
    for i in range(5):
        r.remove(i)
    (best, _), matched = r.top(["harbour"], 1)[0][0], r.top(["silver"], 5)[1]
    assert matched == 0 and best >= 5
    r.compact()
    assert not r.has_term("silver")
    assert [rid for rid, _ in r.top(["copper"], 10)[0]] == [5, 6, 7, 8, 9]


def test_tokens_from_many_threads_at_once():
    """Searches run their BM25 side on worker threads: stemming must not share state between them."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(5)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 14))) + suffix
             for _ in range(3000) for suffix in ("ing", "ational", "ies")]
    texts = [" ".join(words[k:k + 60]) for k in range(0, len(words), 60)]
    expected = [tokens(t) for t in texts]
    from pagefault.stores.index import resident_bm25
    resident_bm25.forget_stems()
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(tokens, texts)) == expected
