"""Validity on the production path: a Chroma server (metadata filters) with the BM25 shadow in Postgres."""

from __future__ import annotations

import pytest
from support.engines import chroma_server, fresh_database
from support.validity_scenario import check_validity

from pagefault.stores import MemoryServices, Scope
from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
from pagefault.stores.validity import ALL, CURRENT, as_of
from pagefault.text.facts import parse_date


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    root = tmp_path_factory.mktemp("validity-server")
    with fresh_database("pf_validity") as url, chroma_server(root / "chroma") as chroma:
        yield MemoryServices.open(str(root / "data"), chroma_url=chroma.url, database_url=url)


def test_validity_on_a_chroma_server_and_postgres_bm25(svc):
    assert isinstance(svc.archival.index.lexical, PostgresLexicalIndex)
    check_validity(svc.archival, Scope("ana"))


def test_the_postgres_bm25_side_filters_by_validity_itself(svc):
    """Each side of the hybrid applies validity before its limit (not the fusion afterwards)."""
    scope = Scope("kai")
    old = svc.archival.insert(scope, "As of 2024-01-10, Kai's city is Paris.")
    new = svc.archival.insert(scope, "As of 2024-05-03, Kai's city is Berlin.")
    lex = svc.archival.index.lexical
    assert [i for i, _ in lex.search("Kai city", scope.key, 10, validity=CURRENT)] == [new.id]
    assert [i for i, _ in lex.search("Kai city", scope.key, 10, validity=as_of(parse_date("2024-02-01")))] == [old.id]
    assert {i for i, _ in lex.search("Kai city", scope.key, 10, validity=ALL)} == {old.id, new.id}


def test_a_superseding_insert_reads_each_record_from_the_chroma_server_once(svc, monkeypatch):
    """A new value of a fact: the new record's absence is asked of the BM25 shadow, and the records of the
    fact are read from Chroma once, under the fact's lock, and restamped from that read (each Chroma call
    is a round trip to the server)."""
    scope = Scope("lena")
    old = svc.archival.insert(scope, "As of 2024-01-10, Lena's city is Oslo.")
    collection = svc.archival.index.collection
    real_get, gets = collection.get, []
    monkeypatch.setattr(collection, "get", lambda *a, **k: gets.append(k.get("ids") or k.get("where")) or real_get(*a, **k))
    new = svc.archival.insert(scope, "As of 2024-06-01, Lena's city is Bergen.")
    monkeypatch.undo()
    assert len(gets) == 1, gets  # the fact's records (by their fact key); before: the new id and a restamp's too
    now = {r.id: r.validity for r in svc.archival.timeline(scope, new.fact_key)}
    assert now[old.id].valid_to == new.validity.valid_from and now[new.id].current and not now[old.id].current
    assert [r.id for r, _ in svc.archival.search(scope, "Lena city", 5)] == [new.id]
