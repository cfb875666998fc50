"""Core memory read from a cache is never stale on Postgres: a namespace's version comes from the database,
so writes through another pool (another replica) are seen at once, and a namespace with expiring rows is
always read (``pagefault.stores.cached_reads``)."""

from __future__ import annotations

import pytest
from support.engines import fresh_database

from pagefault.persistence.postgres import open_postgres
from pagefault.stores.cached_reads import cached_read, store_version
from pagefault.stores.core import CoreMemory
from pagefault.stores.scope import Scope


@pytest.fixture(scope="module")
def postgres():
    with fresh_database("pf_cached") as url:
        with open_postgres(url) as here, open_postgres(url) as there:  # two pools: two replicas' stores
            yield here.store, there.store


def test_core_blocks_on_postgres_follow_another_replicas_writes(postgres):
    here, there = postgres
    core = CoreMemory(here, Scope("pg-ann"))
    assert core.blocks()[1].value == ""
    CoreMemory(there, Scope("pg-ann")).append("human", "Lives in Oslo.")  # another pool, another "replica"
    assert core.blocks()[1].value == "Lives in Oslo."
    value = dict(there.get(core.namespace, "human").value)
    value["value"] = "Rewritten directly."
    there.put(core.namespace, "human", value, index=False)  # same key, same row count: a new row version
    assert core.blocks()[1].value == "Rewritten directly."
    there.delete(core.namespace, "human")
    assert core.blocks()[1].value == ""


def test_unchanged_postgres_namespace_is_read_once(postgres):
    here, there = postgres
    ns, calls = ("pg-once", "core"), []
    read = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert [cached_read(here, ns, read) for _ in range(3)] == [1, 1, 1]
    there.put(("pg-once", "other"), "k", {"x": 1})  # another namespace: still cached
    assert cached_read(here, ns, read) == 1
    there.put(ns + ("deeper",), "k", {"x": 1})  # below it: the store's search would return it
    assert cached_read(here, ns, read) == 2
    there.put(ns, "k", {"x": 2})
    assert cached_read(here, ns, read) == 3 and cached_read(here, ns, read) == 3


def test_a_postgres_namespace_with_expiring_rows_is_always_read(postgres):
    here, _ = postgres
    ns, calls = ("pg-ttl", "core"), []
    here.put(ns, "k", {"x": 1}, ttl=60)
    assert store_version(here, ns) is None
    read = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert [cached_read(here, ns, read) for _ in range(2)] == [1, 2]
