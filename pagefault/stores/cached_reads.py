"""Repeated reads of a LangGraph store namespace, answered from memory while the store is unchanged.

Every step of a turn renders the prompt, and the prompt shows core memory and the procedures: four
or five identical store searches per turn. On a ``SqliteStore`` whether anything changed is cheap
to tell exactly: the connection's ``total_changes`` counts this process's writes through it (any
code path), and ``PRAGMA data_version`` moves when another connection (another process) commits.

On a ``PostgresStore`` over a connection pool (``open_postgres``'s) one small query tells it, for the
namespace read, whatever process wrote: the rows' keys with their ``xmin`` (the transaction that
wrote each row version: every insert, update or delete changes the set), hashed in the database. It
is one round trip, as the read is, but an unpipelined one that sends back a hash, not the values;
namespaces holding rows with an expiry (TTL) are not cached (a row expiring writes nothing). Other
stores (the server's own, a single connection) are always read afresh.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Hashable, TypeVar

from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

T = TypeVar("T")

_lock = threading.Lock()
# store -> {namespace: (version, value)}; weak so a closed store's entries go with it
_cache: "weakref.WeakKeyDictionary[BaseStore, dict[tuple[str, ...], tuple[Hashable, Any]]]" = (
    weakref.WeakKeyDictionary())

#: The version of one namespace of a ``PostgresStore`` (and its descendants, and perhaps a few more:
#: the LIKE below has no escape character, so it matches at least what the store's search matches).
_PG_VERSION = ("SELECT count(*) AS n, md5(coalesce(string_agg(prefix || chr(31) || key || chr(31) || xmin::text,"
               " chr(30) ORDER BY prefix, key), '')) AS h, coalesce(bool_or(expires_at IS NOT NULL), false) AS ttl"
               " FROM store WHERE prefix = %s OR prefix LIKE %s ESCAPE ''")


def store_version(store: BaseStore, namespace: tuple[str, ...] = ()) -> Hashable | None:
    """A token that changes whenever the data of ``namespace`` in the store may have changed, or None if
    unknown. (On a ``SqliteStore`` the token is the whole store's.)"""
    if isinstance(store, SqliteStore):
        with store.lock:
            return store.conn.total_changes, store.conn.execute("PRAGMA data_version").fetchone()[0]
    return _postgres_version(store, namespace)


def _postgres_version(store: BaseStore, namespace: tuple[str, ...]) -> Hashable | None:
    """``store_version`` of a ``PostgresStore`` on a pool (None for anything else, or a namespace with TTLs)."""
    try:
        from langgraph.store.postgres import PostgresStore
        from psycopg_pool import ConnectionPool
    except ImportError:  # the postgres extra is not installed: no such store either
        return None
    if not (isinstance(store, PostgresStore) and isinstance(store.conn, ConnectionPool)) or not namespace:
        return None
    path = ".".join(namespace)
    with store.conn.connection() as conn:
        row: Any = conn.execute(_PG_VERSION, (path, path + ".%")).fetchone()
    n, h, ttl = (row["n"], row["h"], row["ttl"]) if isinstance(row, dict) else tuple(row)
    return None if ttl else (int(n), str(h))


def cached_read(store: BaseStore, namespace: tuple[str, ...], read: Callable[[], T]) -> T:
    """``read()``, or its earlier result for this namespace if the store has not changed since."""
    version = store_version(store, namespace)
    if version is None:
        return read()
    with _lock:
        hit = _cache.get(store, {}).get(namespace)
    if hit is not None and hit[0] == version:
        return hit[1]
    value = read()
    if store_version(store, namespace) == version:  # nothing changed while reading: the value is that version's
        with _lock:
            _cache.setdefault(store, {})[namespace] = (version, value)
    return value
