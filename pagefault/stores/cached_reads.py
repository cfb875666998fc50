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

A prompt asks for two namespaces (core memory, procedures) and the archival count at every turn's
start: ``versions_with`` asks for the versions and one more scalar of the same database (the count)
in one statement, and ``cached_read(version=...)`` takes a version read that way.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Callable, Hashable, TypeVar

from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

from pagefault.engines.connections import is_postgres_down, postgres_unavailable

T = TypeVar("T")

_lock = threading.Lock()
# store -> {namespace: (version, value)}; weak so a closed store's entries go with it
_cache: "weakref.WeakKeyDictionary[BaseStore, dict[tuple[str, ...], tuple[Hashable, Any]]]" = (
    weakref.WeakKeyDictionary())

#: The version of one namespace of a ``PostgresStore`` (and its descendants, and perhaps a few more:
#: the LIKE below has no escape character, so it matches at least what the store's search matches), as
#: one text value: its row count and a hash of its rows' keys and ``xmin``; NULL if a row has an expiry.
_PG_VERSION = ("(SELECT CASE WHEN coalesce(bool_or(expires_at IS NOT NULL), false) THEN NULL ELSE count(*)::text"
               " || ':' || md5(coalesce(string_agg(prefix || chr(31) || key || chr(31) || xmin::text, chr(30)"
               " ORDER BY prefix, key), '')) END FROM store WHERE prefix = %s OR prefix LIKE %s ESCAPE '')")
#: ``cached_read``'s ``version`` when the caller read none.
UNREAD: Any = object()


def store_version(store: BaseStore, namespace: tuple[str, ...] = ()) -> Hashable | None:
    """A token that changes whenever the data of ``namespace`` in the store may have changed, or None if
    unknown. (On a ``SqliteStore`` the token is the whole store's.)"""
    if isinstance(store, SqliteStore):
        with store.lock:
            return store.conn.total_changes, store.conn.execute("PRAGMA data_version").fetchone()[0]
    return _postgres_version(store, namespace)


def _pooled(store: BaseStore) -> Any:
    """The connection pool of a ``PostgresStore`` opened on one (``open_postgres``'s), else None."""
    try:
        from langgraph.store.postgres import PostgresStore
        from psycopg_pool import ConnectionPool
    except ImportError:  # the postgres extra is not installed: no such store either
        return None
    return store.conn if isinstance(store, PostgresStore) and isinstance(store.conn, ConnectionPool) else None


def _version_args(namespace: tuple[str, ...]) -> tuple[str, str]:
    path = ".".join(namespace)
    return path, path + ".%"


def _postgres_version(store: BaseStore, namespace: tuple[str, ...]) -> Hashable | None:
    """``store_version`` of a ``PostgresStore`` on a pool (None for anything else, or a namespace with TTLs)."""
    pool = _pooled(store)
    if pool is None or not namespace:
        return None
    with pool.connection() as conn:
        row: Any = conn.execute(f"SELECT {_PG_VERSION} AS v", _version_args(namespace)).fetchone()
    return _value(row)


def _value(row: Any) -> Any:
    return row["v"] if isinstance(row, dict) else row[0]


def same_database(store: BaseStore, url: str) -> bool:
    """Whether ``store`` is a ``PostgresStore`` on a pool connected to the database at ``url`` (host, port,
    database and user alike)."""
    pool = _pooled(store)
    if pool is None or not url:
        return False
    try:
        return _where(pool.conninfo) == _where(url)
    except Exception:  # a conninfo psycopg cannot parse: not known to be the same
        return False


@functools.lru_cache(maxsize=64)
def _where(conninfo: str) -> tuple[Any, ...]:
    """(host, port, database, user) of a conninfo or URL (asked at every turn's start: parsed once)."""
    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(conninfo)
    return (d.get("host") or "localhost", str(d.get("port") or 5432), d.get("dbname"), d.get("user"))


def versions_with(store: BaseStore, namespaces: list[tuple[str, ...]], scalar: tuple[str, tuple[Any, ...]]
                  ) -> tuple[list[Hashable | None], Any]:
    """The versions of ``namespaces`` (as ``store_version``) and the value of ``scalar`` (an SQL
    expression and its parameters, of the store's database: ``same_database``), in one statement."""
    pool = _pooled(store)
    assert pool is not None, "versions_with needs a PostgresStore on a pool"
    columns = [f"{_PG_VERSION} AS v{n}" for n in range(len(namespaces))] + [f"({scalar[0]}) AS extra"]
    args = [a for ns in namespaces for a in _version_args(ns)] + list(scalar[1])
    try:
        with pool.connection() as conn:
            row: Any = conn.execute("SELECT " + ", ".join(columns), args).fetchone()
    except Exception as e:
        if is_postgres_down(e):
            raise postgres_unavailable(pool.conninfo, e) from e
        raise
    values = list(row.values()) if isinstance(row, dict) else list(row)
    return values[:-1], values[-1]


def cached_read(store: BaseStore, namespace: tuple[str, ...], read: Callable[[], T], *,
                version: Hashable | None = UNREAD) -> T:
    """``read()``, or its earlier result for this namespace if the store has not changed since.
    ``version``: the namespace's ``store_version``, if the caller has just read it (``versions_with``)."""
    if version is UNREAD:
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
