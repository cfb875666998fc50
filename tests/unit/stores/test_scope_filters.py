"""Scope and search filters, clause by clause: the scope key and namespaces (``stores.scope``), Chroma's
``where`` (``index.hybrid.chroma_where``), the BM25 filters (``index.lexical_sqlite``,
``tests/integration/test_scope_filters_postgres.py`` for
``index.lexical_postgres``), the resident vectors' ``where`` (``index.resident_vectors``) and the scope
checks of archival and recall reads.
Each rule is pinned with the data that breaks when the rule does: two users whose records would meet,
a bound that is inclusive, a clause that must be ANDed. Real SQLite, real Chroma."""

from __future__ import annotations

import string

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from pagefault import MemoryServices, Scope
from pagefault.stores.archival import Provenance
from pagefault.stores.index.hybrid import TAG_PREFIX, chroma_where
from pagefault.stores.index.lexical_sqlite import LexicalDoc, LexicalIndex
from pagefault.stores.index.resident_vectors import ResidentCollection, where_sql
from pagefault.stores.validity import ALL, CURRENT, as_of

# -- whose memory ---------------------------------------------------------------------------------------------


def test_scope_keys_are_length_prefixed_so_no_two_scopes_share_one():
    assert Scope("a|b", "c").key != Scope("a", "b|c").key
    assert Scope("ana").key == "3:ana|default" and Scope("ana", "helper").key == "3:ana|helper"


def test_namespaces_escape_the_escape_character_and_dots():
    assert Scope("a.b").namespace("core") == ("pagefault", "a%2Eb", "default", "core")
    assert Scope("a%2Eb").namespace("core") == ("pagefault", "a%252Eb", "default", "core")
    assert Scope("a.b").namespace() != Scope("a%2Eb").namespace()
    assert Scope("u", "x.y").namespace("procedures") == ("pagefault", "u", "x%2Ey", "procedures")


@pytest.mark.parametrize("user", ["", "   ", "a" * 257, "tab\there", "del\x7f", 7, None],
                         ids=["empty", "blank", "too long", "control", "delete", "int", "none"])
def test_an_id_that_is_not_a_plain_string_is_refused(user):
    with pytest.raises(ValueError, match="user_id"):
        Scope(user)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent_id"):
        Scope("ana", user)  # type: ignore[arg-type]


def test_the_longest_id_is_allowed():
    assert Scope("a" * 256, "b" * 256).key.startswith("256:")


# -- Chroma's where --------------------------------------------------------------------------------------------


def test_chroma_where_is_the_scope_alone_or_every_clause_anded():
    assert chroma_where("s") == {"scope": "s"}
    assert chroma_where("s", thread_id="t", tags=["a", "b"], start=1, end=2, extra={"fact_key": "k"}) == {"$and": [
        {"scope": "s"}, {"thread_id": "t"}, {TAG_PREFIX + "a": True}, {TAG_PREFIX + "b": True},
        {"created_at": {"$gte": 1.0}}, {"created_at": {"$lte": 2.0}}, {"fact_key": "k"}]}
    assert chroma_where("s", validity=CURRENT) == {"$and": [{"scope": "s"}, {"superseded": {"$ne": True}}]}
    assert chroma_where("s", validity=ALL) == {"scope": "s"}
    assert chroma_where("s", thread_id="") == {"$and": [{"scope": "s"}, {"thread_id": ""}]}
    assert chroma_where("s", start=0, end=0) == {"$and": [{"scope": "s"}, {"created_at": {"$gte": 0.0}},
                                                          {"created_at": {"$lte": 0.0}}]}


# -- the BM25 filters --------------------------------------------------------------------------------------------


DOCS = [
    LexicalDoc("a1", "ana", "budget review notes", "t1", 100.0, ("finance",)),
    LexicalDoc("a2", "ana", "budget plan draft", "t2", 200.0, ("finance", "q3")),
    LexicalDoc("a3", "ana", "budget memo old", "t1", 300.0, (), valid_from=50.0, valid_to=250.0, superseded=True),
    LexicalDoc("b1", "ben", "budget review notes", "t1", 100.0, ("finance",)),
]


@pytest.fixture(params=["resident", "fts5"])
def lexical(request, tmp_path):
    """The same documents in each SQLite BM25 backend: resident postings, plain FTS5
    (``tests/integration/test_scope_filters_postgres.py`` runs these checks on Postgres)."""
    index = LexicalIndex(str(tmp_path / "lexical.sqlite"), "archival", resident=request.param == "resident")
    index.upsert(DOCS)
    yield index
    index.close()


def _ids(found) -> set[str]:
    return {i for i, _ in found}


def test_bm25_search_keeps_to_its_scope(lexical):
    assert _ids(lexical.search("budget", "ana", 10)) == {"a1", "a2", "a3"}
    assert _ids(lexical.search("budget", "ben", 10)) == {"b1"}
    assert _ids(lexical.search("budget", "nobody", 10)) == set()


def test_bm25_filters_apply_together(lexical):
    assert _ids(lexical.search("budget", "ana", 10, thread_id="t1")) == {"a1", "a3"}
    assert _ids(lexical.search("budget", "ana", 10, tags=["finance"])) == {"a1", "a2"}
    assert _ids(lexical.search("budget", "ana", 10, tags=["finance", "q3"])) == {"a2"}
    assert _ids(lexical.search("budget", "ana", 10, start=100.0, end=200.0)) == {"a1", "a2"}  # both bounds inclusive
    assert _ids(lexical.search("budget", "ana", 10, start=101.0)) == {"a2", "a3"}
    assert _ids(lexical.search("budget", "ana", 10, end=199.0)) == {"a1"}


def test_bm25_validity_filters(lexical):
    assert _ids(lexical.search("budget", "ana", 10, validity=CURRENT)) == {"a1", "a2"}
    assert _ids(lexical.search("budget", "ana", 10, validity=ALL)) == {"a1", "a2", "a3"}
    # as_of: valid_from (else created_at) <= t < valid_to (open if none).
    assert _ids(lexical.search("budget", "ana", 10, validity=as_of(60.0))) == {"a3"}
    assert _ids(lexical.search("budget", "ana", 10, validity=as_of(100.0))) == {"a1", "a3"}
    assert _ids(lexical.search("budget", "ana", 10, validity=as_of(250.0))) == {"a1", "a2"}


def test_matching_applies_the_same_filters_to_given_ids(lexical):
    if not lexical.can_match:
        assert lexical.matching(["a1"], "ana") is None  # Postgres: the vector side filters in Chroma
        return
    every = ["a1", "a2", "a3", "b1", "missing"]
    assert lexical.matching(every, "ana") == {"a1", "a2", "a3"}
    assert lexical.matching(every, "ben") == {"b1"}
    assert lexical.matching(every, "ana", thread_id="t2") == {"a2"}
    assert lexical.matching(every, "ana", tags=["q3"]) == {"a2"}
    assert lexical.matching(every, "ana", start=150.0, end=300.0, validity=CURRENT) == {"a2"}
    assert lexical.matching([], "ana") == set()


def test_fact_records_keep_to_the_scope_and_the_span(tmp_path):
    index = LexicalIndex(str(tmp_path / "facts.sqlite"), "archival")
    index.fill_fact_keys({})  # a fresh file: every row carries its fact key
    index.upsert([
        LexicalDoc("old", "ana", "I live in Porto.", created_at=1.0, valid_from=1.0, valid_to=5.0, superseded=True,
                   fact_key="user|home"),
        LexicalDoc("now", "ana", "I live in Lisbon.", created_at=5.0, valid_from=5.0, fact_key="user|home"),
        LexicalDoc("ben", "ben", "I live in Berlin.", created_at=6.0, valid_from=6.0, fact_key="user|home"),
        LexicalDoc("job", "ana", "I work at a bakery.", created_at=6.0, valid_from=6.0, fact_key="user|job"),
    ])
    assert set(index.fact_records("ana", "user|home", 5.0)) == {"old", "now"}  # old ends at 5: still touched
    assert set(index.fact_records("ana", "user|home", 6.0)) == {"now"}
    assert set(index.fact_records("ana", "user|home", 0.0)) == {"old", "now"}
    assert set(index.fact_records("ben", "user|home", 0.0)) == {"ben"}
    index.close()


# -- the resident vectors' where ---------------------------------------------------------------------------------


@pytest.fixture
def vectors(tmp_path):
    col = ResidentCollection(str(tmp_path / "r.sqlite"), "pagefault_recall")
    rng = np.random.default_rng(1)
    v = rng.standard_normal((6, 8)).astype(np.float32)
    meta = [{"scope": "ana", "thread_id": "t1", "turn": 0, "role": "human"},
            {"scope": "ana", "thread_id": "t1", "turn": 1, "role": "ai"},
            {"scope": "ana", "thread_id": "t2", "turn": 0, "role": "human"},
            {"scope": "ben", "thread_id": "t1", "turn": 0, "role": "human"},
            {"scope": "ben", "thread_id": "t1", "turn": 1, "role": "ai", "flag": True},
            {"scope": "ben", "thread_id": "t1", "turn": 2, "role": "human", "flag": False}]
    col.upsert(ids=[f"r{i}" for i in range(6)], embeddings=v, documents=[f"d{i}" for i in range(6)], metadatas=meta)
    return col, v


def _where_ids(col: ResidentCollection, where) -> list[str]:
    return col.get(where=where, include=[])["ids"]


def test_resident_where_ands_and_ors_like_chroma(vectors):
    col, _ = vectors
    assert _where_ids(col, {"$and": [{"scope": "ana"}, {"thread_id": "t1"}]}) == ["r0", "r1"]
    assert _where_ids(col, {"scope": "ana", "thread_id": "t1"}) == ["r0", "r1"]  # two keys mean both
    assert _where_ids(col, {"$or": [{"scope": "ben"}, {"thread_id": "t2"}]}) == ["r2", "r3", "r4", "r5"]
    assert _where_ids(col, {"$and": [{"scope": "ben"}, {"$or": [{"turn": 0}, {"turn": 2}]}]}) == ["r3", "r5"]


def test_resident_where_operators(vectors):
    col, _ = vectors
    assert _where_ids(col, {"turn": {"$lt": 1}}) == ["r0", "r2", "r3"]
    assert _where_ids(col, {"turn": {"$lte": 1}}) == ["r0", "r1", "r2", "r3", "r4"]
    assert _where_ids(col, {"turn": {"$gt": 1}}) == ["r5"]
    assert _where_ids(col, {"turn": {"$gte": 1}}) == ["r1", "r4", "r5"]
    assert _where_ids(col, {"role": {"$ne": "human"}}) == ["r1", "r4"]
    assert _where_ids(col, {"turn": {"$in": [1, 2]}}) == ["r1", "r4", "r5"]
    assert _where_ids(col, {"turn": {"$nin": [1, 2]}}) == ["r0", "r2", "r3"]
    assert _where_ids(col, {"flag": True}) == ["r4"] and _where_ids(col, {"flag": False}) == ["r5"]
    assert _where_ids(col, {"role": "human"}) == ["r0", "r2", "r3", "r5"]


@pytest.mark.parametrize("where", [{}, {"$and": []}, {"$or": "x"}, {"$not": {"a": 1}}, {"$contains": "x"},
                                   {"a": {"$like": 1}}, {"a": {"$in": []}}, {"a": {"$in": "ab"}}, {"a": [1]}, "scope"],
                         ids=["empty", "empty and", "or of a string", "not", "contains", "like", "empty in",
                              "in a string", "a list value", "a string"])
def test_a_where_it_cannot_answer_exactly_is_refused(where):
    with pytest.raises(ValueError):
        where_sql(where)


def test_resident_get_and_query_keep_to_the_where(vectors):
    col, v = vectors
    ben = {"scope": "ben"}
    assert col.get(ids=["r0", "r3", "r5"], where=ben, include=[])["ids"] == ["r3", "r5"]
    assert col.get(where=ben, limit=2, include=[])["ids"] == ["r3", "r4"]
    assert col.get(where=ben, limit=2, offset=1, include=[])["ids"] == ["r4", "r5"]
    assert col.get(ids=["r5", "r3", "r4"], limit=2, offset=1, include=[])["ids"] == ["r3", "r4"]
    assert col.get(ids=["r5", "r3", "r4"], limit=2, include=[])["ids"] == ["r5", "r3"]
    assert col.get(ids=["r5", "r3", "r4"], offset=2, include=[])["ids"] == ["r4"]
    assert col.get(limit=2, include=[])["ids"] == ["r0", "r1"]
    assert col.get(ids=["r1"], include=["documents"])["documents"] == ["d1"]
    near = col.query(query_embeddings=v[0:1], n_results=6, where=ben, include=["distances"])
    assert sorted(near["ids"][0]) == ["r3", "r4", "r5"]
    assert col.query(query_embeddings=v[0:1], n_results=1, include=["distances"])["ids"] == [["r0"]]


# -- archival and recall reads ------------------------------------------------------------------------------------


def test_archival_reads_never_return_another_scopes_records(data_dir):
    archival = MemoryServices.open(data_dir).archival
    ana, ben = Scope("ana"), Scope("ben")
    mine = archival.insert(ana, "My locker code is 4417.")
    archival.insert(ben, "My locker code is 9921.")
    archival.insert(Scope("ana", "other-agent"), "My locker code is 5555.")
    assert archival.get(ana, mine.id) is not None and archival.get(ben, mine.id) is None
    assert archival.get(Scope("ana", "other-agent"), mine.id) is None
    assert archival.get(ana, "") is None and archival.get(ana, "arc-missing") is None
    assert (archival.count(ana), archival.count(ben), archival.count(Scope("nobody"))) == (1, 1, 0)
    assert [r.text for r, _ in archival.search(ben, "locker code", 10)] == ["My locker code is 9921."]


def test_one_users_fact_never_settles_anothers(data_dir):
    archival = MemoryServices.open(data_dir).archival
    ana, ben = Scope("ana"), Scope("ben")
    lisbon = archival.insert(ana, "As of 2024-01-10, I live in Lisbon.")
    archival.insert(ben, "As of 2024-05-03, I live in Berlin.")
    assert lisbon.fact_key
    assert [r.text for r in archival.timeline(ana, lisbon.fact_key)] == ["As of 2024-01-10, I live in Lisbon."]
    assert [r.text for r in archival.timeline(ben, lisbon.fact_key)] == ["As of 2024-05-03, I live in Berlin."]
    job = archival.insert(ana, "As of 2024-02-01, I work at a bakery.")
    assert job.fact_key and job.fact_key != lisbon.fact_key
    settled = archival.settle(ana, lisbon.fact_key)
    assert list(settled) == [lisbon.id] and settled[lisbon.id].current
    now = archival.search(ana, "where do I live", 5)
    assert [r.text for r, _ in now][0] == "As of 2024-01-10, I live in Lisbon." and now[0][0].validity.current
    assert "As of 2024-05-03, I live in Berlin." not in [r.text for r, _ in now]


def test_superseded_and_point_in_time_archival_search(data_dir):
    archival = MemoryServices.open(data_dir).archival
    ana = Scope("ana")
    archival.insert(ana, "As of 2024-01-10, I live in Lisbon.", provenance=Provenance(created_at=1_704_900_000))
    archival.insert(ana, "As of 2024-05-03, I live in Berlin.", provenance=Provenance(created_at=1_714_700_000))
    assert [r.text for r, _ in archival.search(ana, "where do I live", 5)] == ["As of 2024-05-03, I live in Berlin."]
    march = 1_709_251_200.0  # 2024-03-01
    assert [r.text for r, _ in archival.search(ana, "where do I live", 5, as_of=march)] == [
        "As of 2024-01-10, I live in Lisbon."]
    every = {r.text for r, _ in archival.search(ana, "where do I live", 5, include_superseded=True)}
    assert every == {"As of 2024-01-10, I live in Lisbon.", "As of 2024-05-03, I live in Berlin."}


def test_recall_thread_counts_keep_to_the_scope(data_dir):
    recall = MemoryServices.open(data_dir).recall
    ana, ben = Scope("ana"), Scope("ben")
    recall.add(ana, "t1", [(0, HumanMessage("hi")), (1, AIMessage("hello")), (2, HumanMessage("again"))], "cp")
    recall.add(ben, "t1", [(0, HumanMessage("yo")), (1, HumanMessage("more")), (2, HumanMessage("most")),
                           (3, HumanMessage("last"))], "cp")
    assert (recall.thread_count(ana, "t1"), recall.thread_count(ben, "t1"), recall.thread_count(ana, "t2")) == (3, 4, 0)
    assert [recall.user_messages_before(ana, "t1", i) for i in (0, 1, 2, 3)] == [0, 1, 1, 2]
    assert recall.user_messages_before(ben, "t1", 3) == 3
    assert recall.user_messages_before(ana, "t1", -1) == 0


def test_recall_search_keeps_to_its_scope_thread_and_span(data_dir):
    recall = MemoryServices.open(data_dir).recall
    ana, ben = Scope("ana"), Scope("ben")
    recall.add(ana, "t1", [(0, HumanMessage("my bike is in locker 9"))], "cp", created_at=100.0)
    recall.add(ana, "t2", [(0, HumanMessage("the spare bike key is in locker 12"))], "cp", created_at=200.0)
    recall.add(ben, "t1", [(0, HumanMessage("my bike is in locker 31"))], "cp", created_at=100.0)

    def found(scope: Scope, **filters) -> set[tuple[str, str]]:
        return {(h.thread_id, h.text) for h in recall.search(scope, "bike locker", 10, **filters)}

    assert found(ana) == {("t1", "user: my bike is in locker 9"), ("t2", "user: the spare bike key is in locker 12")}
    assert found(ana, thread_id="t2") == {("t2", "user: the spare bike key is in locker 12")}
    assert found(ben) == {("t1", "user: my bike is in locker 31")}
    assert found(ana, start=150.0) == {("t2", "user: the spare bike key is in locker 12")}
    assert found(ana, end=150.0) == {("t1", "user: my bike is in locker 9")}
    assert found(ana, thread_id="t1", start=150.0) == set()


def test_find_lists_a_scopes_records_by_page_with_their_vectors(data_dir):
    archival = MemoryServices.open(data_dir).archival
    ana, ben = Scope("ana"), Scope("ben")
    mine = {archival.insert(ana, f"Ana's note number {i} about gardening.", ["garden"] if i % 2 else []).id
            for i in range(5)}
    archival.insert(ben, "Ben's note about gardening.", ["garden"])
    index = archival.index
    for page in (2, 5, 100):  # pages that end short, exactly and never
        found = index.find(ana.key, page=page)
        assert {h.id for h, _ in found} == mine and len(found) == 5
        assert all(v is None and h.text.startswith("Ana's note") and h.metadata["scope"] == ana.key for h, v in found)
    tagged = index.find(ana.key, extra={TAG_PREFIX + "garden": True})
    assert len(tagged) == 2 and all(h.metadata["scope"] == ana.key for h, _ in tagged)
    both = index.find(ana.key, extra={TAG_PREFIX + "garden": True, "kind": "archival"})
    assert {h.id for h, _ in both} == {h.id for h, _ in tagged}
    with_vectors = index.find(ana.key, embeddings=True, page=3)
    assert len(with_vectors) == 5
    for hit, vector in with_vectors:
        assert vector is not None and vector.shape == (index.embeddings.embed_array(["x"]).shape[1],)
        assert hit.text.startswith("Ana's note") and hit.metadata["scope"] == ana.key
        assert np.allclose(vector, index.embeddings.embed_array([hit.text])[0], atol=1e-4)


def test_dense_scores_are_cosine_similarities_on_both_paths(data_dir):
    archival = MemoryServices.open(data_dir).archival
    ana = Scope("ana")
    for text in ("Ana grows tomatoes.", "Ana repairs bicycles.", "Ana sings in a choir."):
        archival.insert(ana, text)
    archival.insert(Scope("ben"), "Ben grows tomatoes.")
    index = archival.index
    qvec = index.embeddings.embed_array(["who grows tomatoes"])[0]
    shortcut = index.signals("who grows tomatoes", qvec, ana.key, 10, validity=CURRENT)  # the shadow-filtered path
    point = index.signals("who grows tomatoes", qvec, ana.key, 10, validity=as_of(4e9))  # Chroma's own filter
    for sig in (shortcut, point):
        assert set(sig.dense) == {h.id for h, _ in index.find(ana.key)}
        for rid, score in sig.dense.items():
            text = index.get([rid])[0].text
            assert abs(score - float(np.dot(qvec, index.embeddings.embed_array([text])[0]))) < 1e-3, (rid, score)


def test_archival_counts_inserts_still_waiting_to_be_written(data_dir):
    archival = MemoryServices.open(data_dir).archival
    assert archival.journal is not None
    archival.journal.linger = 30.0  # the writer would take its time
    ana = Scope("ana")
    archival.insert(ana, "Ana's first note.", defer=True)
    archival.insert(ana, "Ana's second note.", defer=True)
    archival.insert(Scope("ben"), "Ben's note.", defer=True)
    assert archival.count(ana) == 2 and archival.count(Scope("ben")) == 1
    archival.journal.flush()
    assert archival.count(ana) == 2, "written, not counted twice"


def test_archival_count_never_misses_an_insert_the_writer_is_storing(data_dir):
    """``count`` reads the journal's pending ids and the BM25 shadow at one moment: while the writer stores
    inserts, every count sees each insert made so far once (two separate reads of the shadow, with a write
    between them, once counted a pending insert as neither pending nor stored)."""
    import threading

    archival = MemoryServices.open(data_dir).archival
    assert archival.journal is not None
    archival.journal.linger = 0.0
    ana, seen, made = Scope("ana"), [], []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            before = len(made)
            seen.append((before, archival.count(ana), len(made)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(60):
            archival.insert(ana, f"Ana's note number {i} about the {string.ascii_lowercase[i % 26]} ledger.", defer=True)
            made.append(i)
    finally:
        archival.journal.flush()
        done.set()
        watcher.join()
    assert archival.count(ana) == 60
    assert len(seen) > 60, "the watcher counted while the writer wrote"
    # One insert may be under way (journalled, not yet returned) while a count runs: at most one more.
    wrong = [(lo, n, hi) for lo, n, hi in seen if not lo <= n <= hi + 1]
    assert not wrong, f"counts outside the inserts made around them: {wrong[:5]}"


def test_count_with_adds_the_ids_not_stored_yet(tmp_path):
    count_with_checks(LexicalIndex(str(tmp_path / "lexical.sqlite"), "archival"))


def count_with_checks(index) -> None:
    index.upsert([LexicalDoc(id=f"a{i}", scope="ana", thread_id="", created_at=0.0, tags=(), text=f"note {i}")
                  for i in range(3)])
    assert index.count_with("ana", []) == index.count("ana") == 3
    assert index.count_with("ana", ["a1", "a2", "new-1", "new-2", "new-2"]) == 5
