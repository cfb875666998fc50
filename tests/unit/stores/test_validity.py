"""Validity on archival facts: supersession at write time, default search without superseded facts,
``as_of`` search, successor pointers, out-of-order writes, a value that comes back; embedded
(Chroma directory + SQLite BM25) here, Chroma server + Postgres BM25 in test_validity_server.py."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from support.validity_scenario import check_validity

from pagefault import Context, open_embedded
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.core import CoreMemory
from pagefault.text.facts import parse_date, parse_fact
from pagefault.tools.handlers import ArchivalSearch, MemoryCall, archival_memory_search
from pagefault.tools.trust import Origins

D = parse_date


def test_validity_on_the_embedded_stores(data_dir):
    svc = MemoryServices.open(data_dir)
    check_validity(svc.archival, Scope("ana"))


def test_facts_without_a_subject_pattern_are_stored_as_before(data_dir):
    svc = MemoryServices.open(data_dir)
    scope = Scope("bo")
    a = svc.archival.insert(scope, "The meeting went well and we ate cake.")
    b = svc.archival.insert(scope, "The meeting went badly and nobody ate cake.")
    assert (a.fact_key, b.fact_key) == ("", "")
    assert {r.id for r, _ in svc.archival.search(scope, "meeting cake", 5)} == {a.id, b.id}
    assert all(svc.archival.get(scope, i).validity.current for i in (a.id, b.id))


def test_other_users_facts_never_supersede(data_dir):
    svc = MemoryServices.open(data_dir)
    mine = svc.archival.insert(Scope("ana"), "Kai's city is Oslo.")
    svc.archival.insert(Scope("eve"), "Kai's city is Rome.")
    assert svc.archival.get(Scope("ana"), mine.id).validity.current


@pytest.mark.parametrize("text,fact", [
    ("As of 2024-05-03, Kai Berg's city is Oslo.", ("kai berg", "city", "oslo", D("2024-05-03"))),
    ("The favourite colour of Ana is now teal.", ("ana", "favourite colour", "teal", None)),
    ("My name is Ana and I live in Lisbon.", ("user", "name", "ana", None)),
    ("On 3 May 2024, I moved to Paris.", ("user", "home", "paris", D("2024-05-03"))),
    ("My sister Lucia works at the aquarium.", ("my sister lucia", "employer", "the aquarium", None)),
    ("Kai works as a nurse.", ("kai", "job", "nurse", None)),
])
def test_fact_patterns(text, fact):
    f = parse_fact(text)
    assert (f.subject, f.attribute, f.value, f.since) == fact


@pytest.mark.parametrize("text", ["I think Kai's city is Oslo.", "hello there", "What is Kai's city?"])
def test_text_that_states_no_fact(text):
    assert parse_fact(text) is None


def _call(svc, store, scope) -> MemoryCall:
    return MemoryCall(scope=scope, thread_id="t", turn=0, message_id="m", core=CoreMemory(store, scope),
                      archival=svc.archival, recall=svc.recall, origins=Origins())


def test_archival_memory_search_takes_as_of(data_dir):
    svc = MemoryServices.open(data_dir)
    scope = Scope("ana")
    svc.archival.insert(scope, "As of 2024-01-10, Ana's city is Paris.")
    new = svc.archival.insert(scope, "As of 2024-05-03, Ana's city is Berlin.")
    with open_embedded(data_dir) as p:
        call = _call(svc, p.store, scope)
        now = archival_memory_search(call, ArchivalSearch(query="Ana city"))
        then = archival_memory_search(call, ArchivalSearch(query="Ana city", as_of="2024-02-01"))
    assert [h["text"] for h in now.artifact["hits"]] == ["As of 2024-05-03, Ana's city is Berlin."]
    assert [h["text"] for h in then.artifact["hits"]] == ["As of 2024-01-10, Ana's city is Paris."]
    assert then.artifact["hits"][0]["validity"]["superseded_by"] == new.id
    assert "valid=2024-01-10 00:00..2024-05-03 00:00" in then.content
    assert "valid=2024-05-03 00:00..now" in now.content


def test_a_changed_fact_told_to_the_graph_supersedes_the_old_one(data_dir):
    ctx = Context(user_id="ana", data_dir=data_dir)
    with open_embedded(data_dir) as p:
        g = p.graph()
        cfg = {"configurable": {"thread_id": "t1"}}
        g.invoke({"messages": [HumanMessage("I live in Paris.")]}, cfg, context=ctx)
        g.invoke({"messages": [HumanMessage("I moved to Berlin.")]}, cfg, context=ctx)
        out = g.invoke({"messages": [HumanMessage("Where do I live?")]}, cfg, context=ctx)
    answer = out["messages"][-1].content
    assert answer.startswith('From memory: "I moved to Berlin."')
    svc = MemoryServices.open(data_dir)
    texts = [(r.text, r.validity.current) for r in svc.archival.timeline(Scope("ana"), "user|home")]
    with open_embedded(data_dir) as p:
        assert CoreMemory(p.store, Scope("ana")).get("human").value == "Lives in: Berlin"
    assert texts == [("I live in Paris.", False), ("I moved to Berlin.", True)]


def test_a_value_that_came_back_is_not_stored_again_on_every_restatement(data_dir):
    """Paris, then London, then Paris again: one current Paris record, however often it is restated."""
    svc = MemoryServices.open(data_dir)
    scope = Scope("ines")
    t0 = D("2024-01-01")
    first = svc.archival.insert(scope, "Ines's city is Paris.", valid_from=t0)
    svc.archival.insert(scope, "Ines's city is London.", valid_from=t0 + 86_400)
    back = svc.archival.insert(scope, "Ines's city is Paris.", valid_from=t0 + 2 * 86_400)
    assert back.id != first.id and back.validity.current
    again = svc.archival.insert(scope, "Ines's city is Paris.", valid_from=t0 + 3 * 86_400)
    assert again.id == back.id
    timeline = svc.archival.timeline(scope, back.fact_key)
    assert [(r.text, r.validity.current) for r in timeline] == [
        ("Ines's city is Paris.", False), ("Ines's city is London.", False), ("Ines's city is Paris.", True)]


def test_a_new_value_reads_only_the_records_it_can_change(data_dir):
    """A fact restated at every turn: each new value reads the open record, not the whole history."""
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    for i, city in enumerate(["Paris", "Berlin", "Lyon", "Rome", "Oslo", "Quito"]):
        svc.archival.insert(scope, f"As of 2024-0{i + 1}-01, Ana's city is {city}.")
    lexical = svc.archival.index.lexical
    assert len(lexical.fact_records(scope.key, "ana|city", D("2024-07-01"))) == 1, "only the open record"
    assert len(lexical.fact_records(scope.key, "ana|city", D("2024-03-15"))) == 4, "Lyon (open then) and later ones"
    quito = [r for r in svc.archival.timeline(scope, "ana|city") if r.validity.current]
    assert [r.text for r in quito] == ["As of 2024-06-01, Ana's city is Quito."]
    late = svc.archival.insert(scope, "As of 2024-03-20, Ana's city is Cusco.")  # slots into March
    assert [(r.text.split()[-1], r.validity.superseded_by == late.id) for r in svc.archival.timeline(scope, "ana|city")
            ][2:5] == [("Lyon.", True), ("Cusco.", False), ("Rome.", False)]


def test_a_bm25_file_from_before_fact_keys_is_filled_once(data_dir):
    import sqlite3

    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    old = svc.archival.insert(scope, "As of 2024-01-10, Ana's city is Paris.")
    path = f"{svc.data_dir}/lexical.sqlite"
    db = sqlite3.connect(path)
    with db:  # as a file written before the column existed
        db.execute("DROP INDEX archival_fact")
        db.execute("ALTER TABLE archival_docs DROP COLUMN fact_key")
        db.execute("DELETE FROM archival_meta")
    db.close()
    from pagefault.stores.archival import ArchivalStore
    from pagefault.stores.index.hybrid import HybridIndex
    from pagefault.stores.index.lexical_sqlite import LexicalIndex

    lexical = LexicalIndex(path, "archival")
    assert lexical.fact_records(scope.key, "ana|city", 0.0) is None, "unknown keys: the caller reads Chroma"
    store = ArchivalStore(HybridIndex(svc.archival.index.collection, lexical, svc.embeddings))
    assert lexical.fact_records(scope.key, "ana|city", 0.0) == [old.id]
    berlin = store.insert(scope, "As of 2024-05-03, Ana's city is Berlin.")
    assert store.get(scope, old.id).validity.superseded_by == berlin.id
