"""Repeated reads of a LangGraph store namespace, answered from memory while the store is unchanged.

Every step of a turn renders the prompt, and the prompt shows core memory and the procedures: four
or five identical store searches per turn. On a ``SqliteStore`` whether anything changed is cheap
to tell exactly: the connection's ``total_changes`` counts this process's writes through it (any
code path), and ``PRAGMA data_version`` moves when another connection (another process) commits.
Other stores (Postgres, the server's own store) are always read afresh.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, TypeVar

from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

T = TypeVar("T")

_lock = threading.Lock()
# store -> {namespace: (version, value)}; weak so a closed store's entries go with it
_cache: "weakref.WeakKeyDictionary[BaseStore, dict[tuple[str, ...], tuple[tuple[int, int], Any]]]" = (
    weakref.WeakKeyDictionary())


def store_version(store: BaseStore) -> tuple[int, int] | None:
    """A token that changes whenever the store's data may have changed, or None if unknown."""
    if not isinstance(store, SqliteStore):
        return None
    with store.lock:
        return store.conn.total_changes, store.conn.execute("PRAGMA data_version").fetchone()[0]


def cached_read(store: BaseStore, namespace: tuple[str, ...], read: Callable[[], T]) -> T:
    """``read()``, or its earlier result for this namespace if the store has not changed since."""
    version = store_version(store)
    if version is None:
        return read()
    with _lock:
        hit = _cache.get(store, {}).get(namespace)
    if hit is not None and hit[0] == version:
        return hit[1]
    value = read()
    if store_version(store) == version:  # nothing changed while reading: the value is that version's
        with _lock:
            _cache.setdefault(store, {})[namespace] = (version, value)
    return value
