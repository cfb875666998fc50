"""Named locks shared by every process that opens one embedded data directory (``FileLocks``).

Several processes may open the same directory at once: two ``pagefault chat`` windows, a script beside
a notebook, a CLI command beside an app. Their runs on one thread, their edits of one core block and
their first-time setup must take turns, as replicas do on Postgres (``AdvisoryLocks``). ``FileLocks``
answers the same ``NamedLocks`` interface with POSIX record locks (``fcntl.lockf``) on one file,
``locks`` in the directory: a name is hashed to a byte offset of that file, so any number of names
share it, and a process that dies holding a lock loses it to the kernel at once.

A record lock belongs to the process, not to a thread, so the threads of one process first queue on a
local lock of the same name. Closing any descriptor of the file would drop every lock the process holds
on it, so the file is opened here only (once per process while it holds or waits for a lock, closed when
it holds none); nothing else may open it.

Waiting is fair between processes. A waiter first takes the name's gate (the byte after the lock's) and
keeps it until it has the lock, so a holder coming back for its next turn queues behind the waiter
instead of taking the lock again at once: two processes taking turns on one thread alternate.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from pagefault.engines.connections import ServiceUnavailable
from pagefault.engines.locks import EDIT_WAIT, LocalLocks, LockTimeout, NamedLocks, lock_key, lock_label

#: The lock file's name in the data directory.
LOCK_FILE = "locks"
#: Longest pause between two tries while another process holds a lock (seconds).
MAX_PAUSE = 0.02
_OFFSETS = (1 << 61) - 1


def _offsets(name: tuple[str, ...]) -> tuple[int, int]:
    """The byte of the lock ``name`` and the byte of its gate."""
    base = 2 * (lock_key(name) & _OFFSETS)
    return base, base + 1


class FileLocks(NamedLocks):
    """Named locks of the data directory ``folder``, shared by every process that opens it (see the
    module docstring). Get the process's one instance per directory with ``file_locks``."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.path = os.path.join(folder, LOCK_FILE)
        self._local = LocalLocks()
        self._mutex = threading.Lock()  # guards the descriptor and how many use it
        self._fd = -1
        self._users = 0

    def _open(self) -> int:
        with self._mutex:
            if self._fd < 0:
                try:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                except OSError as e:
                    raise OSError(e.errno, f"cannot open the lock file {self.path}: {e.strerror}") from e
            self._users += 1
            return self._fd

    def _close(self) -> None:
        with self._mutex:
            self._users -= 1
            if self._users == 0:  # the process holds nothing here: closing drops no lock
                os.close(self._fd)
                self._fd = -1

    @staticmethod
    def _try(fd: int, offset: int) -> bool:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset, os.SEEK_SET)
            return True
        except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: another process has it
            return False

    @staticmethod
    def _unlock(fd: int, offset: int) -> None:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset, os.SEEK_SET)

    def acquire(self, *name: str, timeout: float = EDIT_WAIT) -> None:
        """Take the lock ``name`` from every other process and thread, or raise ``LockTimeout`` after
        ``timeout`` seconds."""
        # A bound on the wait: past it the caller is told (LockTimeout), never handed a stale value.
        deadline = time.monotonic() + timeout
        if not self._local.acquire(name, timeout):
            raise LockTimeout(f"lock {lock_label(name)} is held by another run of this process")
        try:
            fd = self._open()
        except BaseException:
            self._local.release(name)
            raise
        lock, gate = _offsets(name)
        gated, pause = False, 0.001
        try:
            while True:
                gated = gated or self._try(fd, gate)
                if gated and self._try(fd, lock):
                    gated = False
                    self._unlock(fd, gate)  # the next waiter may queue now
                    return
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"lock {lock_label(name)} is held by another process on {self.folder}")
                time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                pause = min(pause * 2, MAX_PAUSE)
        except BaseException:
            if gated:
                self._unlock(fd, gate)
            self._close()
            self._local.release(name)
            raise

    def release(self, *name: str) -> None:
        """Let go of the lock ``name``, which this process holds."""
        try:
            self._unlock(self._fd, _offsets(name)[0])
        finally:
            self._close()
            self._local.release(name)

    def outage(self, error: BaseException) -> ServiceUnavailable | None:
        """None: a local file has no service to be down."""
        return None


_registry: dict[str, FileLocks] = {}
_registry_lock = threading.Lock()


def file_locks(data_dir: str) -> FileLocks:
    """The process's locks on the data directory ``data_dir`` (which must exist)."""
    path = os.path.realpath(data_dir)
    with _registry_lock:
        if path not in _registry:
            _registry[path] = FileLocks(path)
        return _registry[path]
