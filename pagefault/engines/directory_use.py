"""Which processes use an embedded data directory's tiers: a shared lock each, an exclusive one to reindex.

A process that opens a directory's archival and recall (``MemoryServices.open``) holds a shared
record lock on its ``in_use`` file for as long as it runs (``hold_shared``); the kernel lets go of it
when the process exits, however it ends. ``pagefault reindex`` rewrites those tiers, so it must be
alone: ``alone`` takes the lock exclusively, and refuses (``DirectoryBusy``) when another process
holds it. A process that opens the directory while a reindex runs is refused the same way, so it
never writes into collections that are being replaced.

This file is apart from ``locks`` (``engines.file_locks``), which closes its descriptor when it holds
no lock; this one stays open while the process uses the directory.
"""

from __future__ import annotations

import fcntl
import os
import threading
from contextlib import contextmanager
from typing import Iterator

#: The file every process that uses a directory's tiers holds a shared lock on.
USE_FILE = "in_use"

_held: dict[str, int] = {}  # directory -> the descriptor this process holds its lock through
_mutex = threading.Lock()


class DirectoryBusy(OSError):
    """The data directory is held by another process in a way that excludes this one (a reindex
    running, or other processes using it while a reindex would start); the message says which."""


def _descriptor(path: str) -> int:
    fd = _held.get(path)
    if fd is None:
        fd = os.open(os.path.join(path, USE_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        _held[path] = fd
    return fd


def hold_shared(path: str) -> None:
    """Note that this process uses the directory at ``path`` (absolute), until it exits: ``DirectoryBusy``
    if a reindex is rewriting it now."""
    with _mutex:
        if path in _held:
            return
        fd = _descriptor(path)
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            del _held[path]
            os.close(fd)
            raise DirectoryBusy(f"{path}: `pagefault reindex` is re-embedding this data directory; "
                                "open it again when the reindex is done") from None


@contextmanager
def alone(path: str) -> Iterator[None]:
    """Hold the directory at ``path`` (absolute) exclusively while the block runs (then share it again,
    as every process that used it does): ``DirectoryBusy`` if another process uses it."""
    with _mutex:
        new = path not in _held
        fd = _descriptor(path)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if new:  # this process held nothing: leave it so
                del _held[path]
                os.close(fd)
            raise DirectoryBusy(f"{path}: another process (an agent, `pagefault chat`, a server, a notebook) "
                                "has this data directory open; stop it, then run the command again") from None
    try:
        yield
    finally:
        with _mutex:
            fcntl.lockf(fd, fcntl.LOCK_SH)


def release(path: str) -> None:
    """Stop using the directory at ``path`` (absolute) from this process: its shared hold is let go
    (``MemoryServices.forget``, once this process's tiers there are closed)."""
    with _mutex:
        fd = _held.pop(path, None)
        if fd is not None:
            os.close(fd)  # closing the descriptor lets go of the lock
