"""Core memory read from a cache is never stale: writes through the same SqliteStore by any code
path, and writes by another connection (another process) to the same file, are seen at once; on
Postgres, writes through another pool (another replica) too."""

from __future__ import annotations

import sqlite3

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from support.engines import fresh_database

from pagefault.persistence.postgres import open_postgres
from pagefault.stores.cached_reads import cached_read, store_version
from pagefault.stores.core import CoreMemory
from pagefault.stores.scope import Scope


def _store(path: str) -> SqliteStore:
    store = SqliteStore(sqlite3.connect(path, check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def test_core_blocks_follow_every_writer(tmp_path):
    path = str(tmp_path / "store.sqlite")
    here, there = _store(path), _store(path)
    core = CoreMemory(here, Scope("ann"))
    assert core.blocks()[1].value == ""
    CoreMemory(there, Scope("ann")).append("human", "Lives in Oslo.")  # another connection
    assert core.blocks()[1].value == "Lives in Oslo."
    core.append("human", "Has a cat.")
    assert core.blocks()[1].value == "Lives in Oslo.\nHas a cat."
    value = dict(here.get(core.namespace, "human").value)
    value["value"] = "Rewritten directly."
    here.put(core.namespace, "human", value, index=False)  # this process, not through CoreMemory
    assert core.blocks()[1].value == "Rewritten directly."


def test_unchanged_store_is_read_once_and_other_stores_always(tmp_path):
    store = _store(str(tmp_path / "s.sqlite"))
    calls = []
    read = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert cached_read(store, ("a",), read) == 1
    assert cached_read(store, ("a",), read) == 1
    store.put(("b",), "k", {"x": 1})
    assert cached_read(store, ("a",), read) == 2
    memory = InMemoryStore()
    assert store_version(memory) is None
    assert [cached_read(memory, ("a",), read) for _ in range(2)] == [3, 4]


# --- PostgresStore: a namespace's version from the database, whatever process wrote -------------------

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
