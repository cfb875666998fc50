"""Named locks that hold across processes, behind one interface (``NamedLocks``) every backend answers.

A lock is named by a few strings (``("core", user, agent, "human")``, ``("thread", "t1")``). Three
backends stand in for each other:

- ``AdvisoryLocks``: Postgres advisory locks, shared by every replica on one database and released by
  the server if a holder dies. Each process keeps one connection for its locks and takes them with
  ``pg_try_advisory_lock`` in a short backoff loop, never blocking that connection, so two processes
  waiting on each other cannot deadlock through it;
- ``FileLocks`` (``pagefault.engines.file_locks``): record locks on one file of an embedded data
  directory, shared by every process that opens it and released by the kernel if a holder dies;
- ``ProcessLocks``: within this process only, for what no other process shares.

A Postgres session lock, and a record lock, belongs to the connection or the process, not to a thread,
so the threads of one process first queue on a local lock of the same name (``LocalLocks``).

``locks_of(holder)`` says which locks guard what a store or checkpointer keeps: the ones it was opened
with (``bind_locks``: the embedded files are bound to their directory's ``FileLocks``, ``open_postgres``'s
saver and store to the advisory locks of the URL it was given), the advisory locks of the database of a
LangGraph Postgres store or saver opened elsewhere on a pool (the pool's own connection string), else
this process's own.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

from pagefault.engines.connections import ServiceUnavailable, is_postgres_down, postgres_unavailable

#: Seconds a core-memory edit waits for another replica's edit of the same block.
EDIT_WAIT = 30.0


class LockTimeout(TimeoutError):
    """A lock stayed held by someone else for longer than the caller would wait."""


def lock_key(name: tuple[str, ...]) -> int:
    """The signed 64-bit key of a lock name."""
    digest = hashlib.sha256("\x00".join(name).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_label(name: tuple[str, ...]) -> str:
    """A lock name as messages show it: ``thread/t1``."""
    return "/".join(name)


class NamedLocks(Protocol):
    """Exclusive locks named by a few strings, held by this process against every other that shares them.

    ``acquire`` waits up to ``timeout`` seconds, then raises ``LockTimeout``; ``release`` lets go of a
    lock this process took; ``hold`` is both around a block; ``outage`` says whether an error means the
    service behind the locks is down."""

    def acquire(self, *name: str, timeout: float = EDIT_WAIT) -> None:
        """Take the lock ``name``, waiting at most ``timeout`` seconds (then ``LockTimeout``)."""
        ...

    def release(self, *name: str) -> None:
        """Let go of the lock ``name``, which this process holds."""
        ...

    def outage(self, error: BaseException) -> ServiceUnavailable | None:
        """The ``ServiceUnavailable`` that ``error`` stands for when the service behind these locks is
        down, else None."""
        ...

    @contextmanager
    def hold(self, *name: str, timeout: float = EDIT_WAIT) -> Iterator[None]:
        """Hold the lock ``name`` (waiting at most ``timeout`` seconds) while the block runs."""
        self.acquire(*name, timeout=timeout)
        try:
            yield
        finally:
            self.release(*name)


class LocalLocks:
    """One ``threading.Lock`` per name, made on first use and dropped when nobody holds or waits."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[tuple[str, ...], list[Any]] = {}  # name -> [lock, users]

    def acquire(self, name: tuple[str, ...], timeout: float) -> bool:
        """Take ``name`` within ``timeout`` seconds; False if another thread kept it that long."""
        with self._mutex:
            entry = self._locks.setdefault(name, [threading.Lock(), 0])
            entry[1] += 1
        if entry[0].acquire(timeout=max(timeout, 0.0)):
            return True
        self._forget(name)
        return False

    def release(self, name: tuple[str, ...]) -> None:
        """Let go of ``name``, which this thread took."""
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


class ProcessLocks(NamedLocks):
    """Named locks within this process only: for a store or checkpointer that no other process shares."""

    def __init__(self) -> None:
        self._local = LocalLocks()

    def acquire(self, *name: str, timeout: float = EDIT_WAIT) -> None:
        """Take the lock ``name`` from this process's other threads (``LockTimeout`` after ``timeout`` s)."""
        if not self._local.acquire(name, timeout):
            raise LockTimeout(f"lock {lock_label(name)} is held by another run of this process")

    def release(self, *name: str) -> None:
        """Let go of the lock ``name``."""
        self._local.release(name)

    def outage(self, error: BaseException) -> ServiceUnavailable | None:
        """None: nothing outside the process is involved."""
        return None


PROCESS_LOCKS = ProcessLocks()
"""The process's own locks, for what nothing else shares."""


class AdvisoryLocks(NamedLocks):
    """Named locks shared by every process connected to one Postgres database (at ``url``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._mutex = threading.Lock()  # one statement at a time on the lock connection
        self._local = LocalLocks()

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
        # A bound on the wait: past it the caller is told (LockTimeout), never handed a stale value.
        deadline = time.monotonic() + timeout
        if not self._local.acquire(name, timeout):
            raise LockTimeout(f"lock {lock_label(name)} is held by another run of this process")
        try:
            key, pause = lock_key(name), 0.005
            while not self._execute("SELECT pg_try_advisory_lock(%s)", key):
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"lock {lock_label(name)} is held by another process")
                time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                pause = min(pause * 2, 0.1)
        except BaseException:
            self._local.release(name)
            raise

    def release(self, *name: str) -> None:
        """Let go of the lock ``name`` (a lost session has let go of it already)."""
        try:
            self._execute("SELECT pg_advisory_unlock(%s)", lock_key(name))
        except Exception:
            pass  # the session is gone, and its locks with it
        finally:
            self._local.release(name)

    def outage(self, error: BaseException) -> ServiceUnavailable | None:
        """``ServiceUnavailable`` naming PostgreSQL when ``error`` says the database cannot be reached."""
        if isinstance(error, ServiceUnavailable) or not is_postgres_down(error):
            return None
        return postgres_unavailable(self.url, error)

    def close(self) -> None:
        """Close the lock connection (the server lets go of every lock it held)."""
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


# store or checkpointer -> the locks it was opened with; weak, so a closed store's entry goes with it
_bound: "weakref.WeakKeyDictionary[Any, NamedLocks]" = weakref.WeakKeyDictionary()
# Postgres stores and savers on one connection, unbound, already warned about (held weakly)
_warned: "weakref.WeakSet[Any]" = weakref.WeakSet()
_log = logging.getLogger("pagefault.locks")


def bind_locks(holder: Any, locks: NamedLocks) -> None:
    """Say that what ``holder`` (a store or a checkpointer) keeps is guarded by ``locks``: every
    process that opens the same files or database takes the same ones. Whoever opens a store or saver
    binds it (``open_embedded``, ``open_postgres``: the advisory locks of the URL it was given)."""
    _bound[holder] = locks


def _bound_to(holder: Any) -> NamedLocks | None:
    try:
        return _bound.get(holder)
    except TypeError:  # not weakly referenceable (or not hashable): nothing was bound to it
        return None


def _layers(holder: Any) -> Iterator[Any]:
    """``holder``, then what it wraps, through a wrapper's public ``store`` attribute (a few deep)."""
    for _ in range(4):
        if holder is None:
            return
        yield holder
        holder = getattr(holder, "store", None)


def _pool_conninfo(holder: Any) -> str | None:
    """The connection string of the psycopg pool a LangGraph Postgres store or saver (sync or async) was
    made on: the string the pool was given (its public ``conninfo``); None for anything else, a store or
    saver on a single connection included."""
    info = getattr(getattr(holder, "conn", None), "conninfo", None)
    return info if isinstance(info, str) and info else None


def locks_of(holder: Any) -> NamedLocks:
    """The locks that guard what ``holder`` (a store or a checkpointer, or a wrapper whose ``store`` is
    one) keeps: the ones it was bound to (``bind_locks``); for a LangGraph Postgres store or saver opened
    elsewhere on a pool, the advisory locks of the pool's database; else this process's own (logged once
    for a Postgres store or saver on a single connection, whose database these locks cannot name: bind
    it, ``bind_locks(saver, locks_for(url))``, or open it with ``open_postgres``)."""
    layers = list(_layers(holder))
    for layer in layers:
        bound = _bound_to(layer)
        if bound is not None:
            return bound
    for layer in layers:
        url = _pool_conninfo(layer)
        if url is not None:
            return locks_for(url)
        if _postgres_connection(layer):
            _warn_unbound(layer)
            break
    return PROCESS_LOCKS


def _postgres_connection(holder: Any) -> bool:
    """Whether ``holder`` is a store or saver on a single psycopg connection."""
    try:
        import psycopg
    except ImportError:  # the postgres extra is not installed: no such store either
        return False
    return isinstance(getattr(holder, "conn", None), (psycopg.Connection, psycopg.AsyncConnection))


def _warn_unbound(holder: Any) -> None:
    try:
        if holder in _warned:
            return
        _warned.add(holder)
    except TypeError:  # not weakly referenceable: warned every time
        pass
    _log.warning("pagefault: %s is on one Postgres connection and bound to no locks, so its edits and runs take "
                 "turns within this process only; bind it to its database's (engines.locks.bind_locks(holder, "
                 "locks_for(url))) or open it with open_postgres", type(holder).__name__)


@contextmanager
def edit_lock(store: Any, *name: str, timeout: float = EDIT_WAIT) -> Iterator[None]:
    """Hold ``name`` while a read-modify-write of ``store`` runs, against every process that shares the
    store (``locks_of``): replicas on Postgres, processes on one embedded directory, else this process's
    threads."""
    with locks_of(store).hold(*name, timeout=timeout):
        yield
