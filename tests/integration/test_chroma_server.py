"""Archival and recall on a real Chroma server (``chroma run``), with the BM25 index in Postgres, and
two users served by one process: nothing of one ever reaches the other.

Isolation is checked through every door: the graph's answers, each memory tool (with a model that
tries to name the other user in its arguments), the stores' own APIs and the BM25 index.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from support.engines import chroma_server, fresh_database

from pagefault import Context
from pagefault.engines.connections import ServerCollection
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import CoreMemory, MemoryServices, Scope
from pagefault.stores.archival import archival_id
from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
from pagefault.stores.index.lexical_sqlite import LexicalDoc

ANA_FACTS = ["My name is Ana and I live in Lisbon.", "My locker code at the gym is 4417.",
             "My sister Lucia works at the aquarium in Valencia."]


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("chroma-server")
    with fresh_database("pf_chroma") as url, chroma_server(root / "chroma") as chroma:
        with open_postgres(url) as persistence:
            yield {"url": url, "chroma": chroma.url, "persistence": persistence, "data_dir": str(root / "data")}


def _ctx(engines, user: str) -> Context:
    return Context(user_id=user, chroma_url=engines["chroma"], database_url=engines["url"],
                   data_dir=engines["data_dir"])


def _svc(engines) -> MemoryServices:
    return MemoryServices.open(engines["data_dir"], chroma_url=engines["chroma"], database_url=engines["url"])


def _say(graph, ctx, thread, text):
    return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)


def test_services_use_the_server_and_postgres(engines):
    svc = _svc(engines)
    assert isinstance(svc.archival.index.collection.inner, ServerCollection)  # behind its write batches
    assert isinstance(svc.archival.index.lexical, PostgresLexicalIndex)
    assert svc.chroma_url == engines["chroma"] and svc.database_url == engines["url"]
    rec = svc.archival.insert(Scope("srv-carl"), "Carl keeps his spare keys under the blue flowerpot.", ["home"])
    again = svc.archival.insert(Scope("srv-carl"), "carl keeps his  spare keys under the blue flowerpot.")
    assert again.id == rec.id and not again.created
    hits = svc.archival.search(Scope("srv-carl"), "where are the spare keys", 3, tags=["home"])
    assert [r.id for r, _ in hits] == [rec.id]
    assert not os.path.exists(engines["data_dir"]), "nothing is written to the local data directory"


@pytest.fixture(scope="module")
def two_users(engines):
    """Ana tells the agent three facts on two threads; Bob, served by the same process, asks about them."""
    graph = engines["persistence"].graph()
    ana, bob = _ctx(engines, "srv-ana"), _ctx(engines, "srv-bob")
    for i, fact in enumerate(ANA_FACTS):
        _say(graph, ana, f"ana-{i % 2}", fact)
    answers = {q: _say(graph, bob, "bob-1", q)["messages"][-1].content
               for q in ("What is my locker code?", "Where does my sister work?", "What is my name?")}
    return graph, ana, bob, answers


def test_the_other_user_gets_nothing_through_the_graph(engines, two_users):
    graph, ana, bob, answers = two_users
    for q, a in answers.items():
        assert "4417" not in a and "Lucia" not in a and "Ana" not in a and "found nothing" in a, (q, a)
    persistence = engines["persistence"]
    assert CoreMemory(persistence.store, Scope("srv-bob")).get("human").value == ""
    assert CoreMemory(persistence.store, Scope("srv-ana")).get("human").value == "Name: Ana\nLives in: Lisbon"
    assert all("Ana" not in str(i.value) for i in persistence.store.search(("pagefault", "srv-bob"), limit=100))
    # Ana, on a new thread, still finds her own facts.
    answer = _say(graph, ana, "ana-new", "What is my locker code?")["messages"][-1].content
    assert "4417" in answer, answer


def test_the_other_user_gets_nothing_through_the_apis(engines, two_users):
    svc = _svc(engines)
    ana, bob = Scope("srv-ana"), Scope("srv-bob")
    assert svc.archival.count(ana) == 3 and svc.archival.count(bob) == 0
    assert svc.archival.search(bob, "locker code 4417", 10) == []
    assert svc.recall.search(bob, "locker code 4417", 10) and all(
        h.thread_id == "bob-1" for h in svc.recall.search(bob, "locker code 4417", 10))
    assert all(h.thread_id.startswith("ana-") for h in svc.recall.search(ana, "locker code", 10))
    for index in (svc.archival.index, svc.recall.index, svc.recall.units):
        assert all(i not in index.lexical.ids(bob.key) for i in index.lexical.ids(ana.key))
        assert [d for d, _ in index.lexical.search("Lucia aquarium locker 4417", bob.key, 50)
                if d in index.lexical.ids(ana.key)] == []
    ana_record = svc.archival.search(ana, "locker code", 1)[0][0]
    assert svc.archival.get(bob, ana_record.id) is None, "an id from another scope is not found"


class Intruder(BaseChatModel):
    """A model that tries to reach another user: it names her in its tool arguments and asks for her ids."""

    calls: Any = None

    @property
    def _llm_type(self) -> str:
        return "intruder"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "Intruder":
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], HumanMessage):
            msg = AIMessage("", tool_calls=[{**c, "id": f"c{i}", "type": "tool_call"} for i, c in enumerate(self.calls)])
        else:
            msg = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def test_model_output_cannot_choose_whose_memory(engines, two_users):
    other = {"user_id": "srv-ana", "scope": "8:srv-ana|default", "agent_id": "default", "thread_id": "ana-0"}
    calls = [
        {"name": "archival_memory_search", "args": {"query": "locker code 4417", **other}},
        {"name": "conversation_search", "args": {"query": "locker code 4417", **other}},
        {"name": "core_memory_append", "args": {"section": "human", "text": "Owns a red kayak.", **other}},
        {"name": "archival_memory_insert", "args": {"text": "Bob owns a red kayak.", **other}},
    ]
    graph = engines["persistence"].graph(model=Intruder(calls=calls))
    values = _say(graph, _ctx(engines, "srv-bob"), "bob-intruder", "hello")
    results = {m.name: m for m in values["messages"] if isinstance(m, ToolMessage)}
    assert "4417" not in results["archival_memory_search"].content
    assert all(c["thread_id"].startswith("bob") for c in results["conversation_search"].artifact["citations"])
    assert "4417" not in results["conversation_search"].content
    store = engines["persistence"].store
    assert CoreMemory(store, Scope("srv-ana")).get("human").value == "Name: Ana\nLives in: Lisbon"
    assert CoreMemory(store, Scope("srv-bob")).get("human").value == "Owns a red kayak."
    svc = _svc(engines)
    assert svc.archival.count(Scope("srv-ana")) == 3 and svc.archival.count(Scope("srv-bob")) == 1


def test_a_retried_insert_repairs_a_record_left_in_chroma_only(engines, monkeypatch):
    """A crash between the Chroma write and the BM25 write: the retry writes the missing BM25 half. The
    BM25 shadow lacks the record, so the retry writes it whole, as new (the crashed call returned none),
    without asking Chroma whether it is there."""
    svc, scope = _svc(engines), Scope("srv-half-chroma")
    text = "Dora parks her camper van behind the old sawmill on Tuesdays."
    lexical = svc.archival.index.lexical

    def crash(docs):
        raise RuntimeError("killed between the Chroma write and the BM25 write")

    monkeypatch.setattr(lexical, "upsert", crash)
    with pytest.raises(RuntimeError, match="killed between"):
        svc.archival.insert(scope, text, ["travel"])
    monkeypatch.undo()
    rid = archival_id(scope, text)
    assert svc.archival.index.collection.get(ids=[rid], include=[])["ids"] == [rid], "Chroma half written"
    assert lexical.texts([rid]) == {} and svc.archival.count(scope) == 0, "BM25 half missing"

    gets, collection = [], svc.archival.index.collection
    real_get = collection.get
    monkeypatch.setattr(collection, "get", lambda *a, **k: gets.append(k) or real_get(*a, **k))
    again = svc.archival.insert(scope, text, ["travel"])
    monkeypatch.undo()
    assert (again.id, again.created, again.tags) == (rid, True, ("travel",)) and gets == []
    assert lexical.texts([rid]) == {rid: text} and lexical.ids(scope.key) == {rid}
    assert [d for d, _ in lexical.search("camper sawmill", scope.key, 5, tags=["travel"])] == [rid]
    assert svc.archival.count(scope) == 1
    assert svc.archival.index.collection.get(where={"scope": scope.key}, include=[])["ids"] == [rid]


def test_a_retried_insert_repairs_a_record_left_in_bm25_only(engines):
    svc, scope = _svc(engines), Scope("srv-half-bm25")
    text = "Emil's ferry ticket number is FX-20931."
    rid = archival_id(scope, text)
    svc.archival.index.lexical.upsert([LexicalDoc(rid, scope.key, text, "", 0.0, ())])
    assert svc.archival.index.collection.get(ids=[rid], include=[])["ids"] == []

    again = svc.archival.insert(scope, text)
    assert (again.id, again.created) == (rid, True)
    assert svc.archival.index.collection.get(ids=[rid], include=["documents"])["documents"] == [text]
    assert svc.archival.index.lexical.ids(scope.key) == {rid} and svc.archival.count(scope) == 1
    assert [r.id for r, _ in svc.archival.search(scope, "ferry ticket FX-20931", 3)] == [rid]


def test_with_a_local_bm25_file_records_other_hosts_wrote_are_still_found(engines, tmp_path):
    """Chroma server, no database URL: each host has its own BM25 file, so one host's file lacks what
    another wrote. The dense side must then ask Chroma itself, not filter through the local file."""
    scope = Scope("srv-hosts")
    host_a = MemoryServices.open(str(tmp_path / "a"), chroma_url=engines["chroma"], database_url="")
    host_b = MemoryServices.open(str(tmp_path / "b"), chroma_url=engines["chroma"], database_url="")
    assert not host_b.archival.index.shadow_is_complete
    rec = host_a.archival.insert(scope, "Dora's bicycle is locked at the station on platform two.")
    assert host_b.archival.count(scope) == 0  # b's BM25 file never saw it
    hits = host_b.archival.search(scope, "where is Dora's bicycle", 3)
    assert rec.id in [r.id for r, _ in hits]
