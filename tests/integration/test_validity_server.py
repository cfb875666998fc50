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
