"""Write-behind: archival inserts (``archival_journal``) and recall indexing (``recall_writer``)
done off the turn path, with durable journals so a crash loses nothing."""

from __future__ import annotations

import threading


def joined(thread: threading.Thread | None, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds for a writer ``thread`` already told to stop (its ``close``); True
    once it no longer runs (also when there is none, or when the caller is that thread)."""
    if thread is None or thread is threading.current_thread():
        return True
    thread.join(timeout)
    return not thread.is_alive()

