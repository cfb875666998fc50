"""The BM25 scope and search filters of ``tests/unit/stores/test_scope_filters.py`` on Postgres
(``pagefault.stores.index.lexical_postgres``): the same documents and the same checks as on SQLite, in a
fresh database."""

from __future__ import annotations

import random
import string

import pytest
from support.engines import fresh_database
from unit.stores.test_scope_filters import (
    DOCS,
    count_with_checks,
    test_bm25_filters_apply_together,
    test_bm25_search_keeps_to_its_scope,
    test_bm25_validity_filters,
    test_matching_applies_the_same_filters_to_given_ids,
)

from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex

__all__ = ["test_bm25_filters_apply_together", "test_bm25_search_keeps_to_its_scope", "test_bm25_validity_filters",
           "test_matching_applies_the_same_filters_to_given_ids"]


@pytest.fixture(scope="module")
def database():
    with fresh_database("scope") as url:
        yield url


@pytest.fixture
def lexical(database):
    """The unit checks' documents in a Postgres BM25 table of its own."""
    index = PostgresLexicalIndex(database, "archival_" + "".join(random.choice(string.ascii_lowercase) for _ in range(8)))
    index.upsert(DOCS)
    yield index
    index.close()


def test_count_with_adds_the_ids_not_stored_yet():
    with fresh_database("count_with") as url:
        count_with_checks(PostgresLexicalIndex(url, "archival"))
