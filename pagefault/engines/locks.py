"""Locks that hold across replicas: Postgres advisory locks, released by the server if a holder dies.

A lock is named by a few strings (``("core", user, agent, "human")``, ``("thread", "t1")``) and
hashed to Postgres' 64-bit advisory-lock key. Each process keeps one connection for its locks and
takes them with ``pg_try_advisory_lock`` in a short backoff loop, never blocking that connection,
so two processes waiting on each other cannot deadlock through it. A session lock is re-entrant on
its connection, so the threads of one process first queue on a local lock of the same name.

With no database (the embedded default) only the local lock is taken: one process, one holder.
"""

from __future__ import annotations

import hashlib
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from pagefault.engines.connections import is_postgres_down, postgres_unavailable

#: Seconds a core-memory edit waits for another replica's edit of the same block.
EDIT_WAIT = 30.0


class LockTimeout(TimeoutError):
    """A lock stayed held by someone else for longer than the caller would wait."""


def lock_key(name: tuple[str, ...]) -> int:
    """The signed 64-bit key of a lock name."""
    digest = hashlib.sha256("\x00".join(name).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class LocalLocks:
    """One ``threading.Lock`` per name, made on first use and dropped when nobody holds or waits."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[tuple[str, ...], list[Any]] = {}  # name -> [lock, users]

    def acquire(self, name: tuple[str, ...], timeout: float) -> bool:
        with self._mutex:
            entry = self._locks.setdefault(name, [threading.Lock(), 0])
            entry[1] += 1
        if entry[0].acquire(timeout=max(timeout, 0.0)):
            return True
        self._forget(name)
        return False

    def release(self, name: tuple[str, ...]) -> None:
        with self._mutex:
            entry = self._locks[name]
        entry[0].release()
        self._forget(name)

    def _forget(self, name: tuple[str, ...]) -> None:
        with self._mutex:
            entry = self._locks.get(name)
            if entry is not None:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[name]


_local = LocalLocks()


class AdvisoryLocks:
    """Named locks shared by every process connected to one Postgres database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._mutex = threading.Lock()  # one statement at a time on the lock connection

    def _connection(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def _execute(self, sql: str, key: int) -> bool:
        with self._mutex:
            try:
                return bool(self._connection().execute(sql, (key,)).fetchone()[0])
            except Exception as e:
                self._drop()  # a broken session has lost its locks anyway; start clean
                if is_postgres_down(e):
                    raise postgres_unavailable(self.url, e) from e
                raise

    def acquire(self, *name: str, timeout: float = EDIT_WAIT) -> None:
        """Take the lock or raise ``LockTimeout`` after ``timeout`` seconds (``ServiceUnavailable`` if the
        database is down)."""
        deadline = time.monotonic() + timeout
        if not _local.acquire(name, timeout):
            raise LockTimeout(f"lock {'/'.join(name)} is held by another run of this process")
        try:
            key, pause = lock_key(name), 0.005
            while not self._execute("SELECT pg_try_advisory_lock(%s)", key):
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"lock {'/'.join(name)} is held by another process")
                time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                pause = min(pause * 2, 0.1)
        except BaseException:
            _local.release(name)
            raise

    def release(self, *name: str) -> None:
        try:
            self._execute("SELECT pg_advisory_unlock(%s)", lock_key(name))
        except Exception:
            pass  # the session is gone, and its locks with it
        finally:
            _local.release(name)

    @contextmanager
    def hold(self, *name: str, timeout: float = EDIT_WAIT) -> Iterator[None]:
        self.acquire(*name, timeout=timeout)
        try:
            yield
        finally:
            self.release(*name)

    def close(self) -> None:
        with self._mutex:
            self._drop()


_registry: dict[str, AdvisoryLocks] = {}
_registry_lock = threading.Lock()


def locks_for(url: str) -> AdvisoryLocks:
    """The process's locks on the database at ``url``."""
    with _registry_lock:
        if url not in _registry:
            _registry[url] = AdvisoryLocks(url)
        return _registry[url]


def conninfo_of(holder: Any) -> str | None:
    """The connection string behind a LangGraph Postgres store or saver (sync or async, connection or
    pool), found through a wrapper's ``store``/``_store``; None for anything else."""
    for _ in range(4):
        conn = getattr(holder, "conn", None)
        if conn is not None:
            break
        holder = getattr(holder, "store", None) or getattr(holder, "_store", None)
        if holder is None:
            return None
    else:
        return None
    info = getattr(conn, "conninfo", None)  # psycopg_pool pools keep the string they were made with
    if isinstance(info, str) and info:
        return info
    pgconn = getattr(conn, "pgconn", None)  # a single connection: rebuild it from libpq (password included)
    if pgconn is None:
        return None
    from psycopg.conninfo import make_conninfo

    opts = {o.keyword.decode(): o.val.decode() for o in pgconn.info if o.val is not None}
    return make_conninfo(**{k: v for k, v in opts.items() if v != ""}) or None


@contextmanager
def edit_lock(store: Any, *name: str, timeout: float = EDIT_WAIT) -> Iterator[None]:
    """Hold ``name`` while a read-modify-write of ``store`` runs: across replicas when the store is
    Postgres, within this process otherwise."""
    url = conninfo_of(store)
    if url is not None:
        with locks_for(url).hold(*name, timeout=timeout):
            yield
        return
    if not _local.acquire(name, timeout):
        raise LockTimeout(f"lock {'/'.join(name)} is held by another run of this process")
    try:
        yield
    finally:
        _local.release(name)
