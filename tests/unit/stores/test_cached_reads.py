"""Core memory read from a cache is never stale: writes through the same SqliteStore by any code
path, and writes by another connection (another process) to the same file, are seen at once.
``tests/integration/test_cached_reads_postgres.py`` checks the same on Postgres, through another pool."""

from __future__ import annotations

import sqlite3

from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

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
