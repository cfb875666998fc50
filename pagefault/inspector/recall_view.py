"""Recall as the inspector shows it: ``RecallIndex.search`` across a user's threads (or one), each
hit marked as still in its thread's context window or evicted from it, with its trust flags.

A message is in the window when its message index is at or past its thread's latest
``evicted_count``; the rest left the window in a compaction and are found only by search.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagefault.inspector.history import ThreadInfo
from pagefault.stores.recall import RecallHit, RecallIndex
from pagefault.stores.scope import Scope
from pagefault.tools.handlers import recall_flags

#: Hits a recall search shows.
RECALL_HITS = 25


@dataclass
class RecallRow:
    """One hit: the past message (``hit``), whether it is still ``in_window``, and its trust ``flags``."""

    hit: RecallHit
    in_window: bool
    flags: tuple[str, ...]


def recall_search(recall: RecallIndex, scope: Scope, query: str, threads: list[ThreadInfo],
                  thread_id: str | None = None, k: int = RECALL_HITS) -> list[RecallRow]:
    """The best ``k`` messages of ``scope`` in ``recall`` for ``query`` (of ``thread_id`` only, if
    given), best first, each placed against its thread's window (``threads``: the user's)."""
    window_start = {t.thread_id: t.evicted for t in threads}
    return [RecallRow(h, h.message_index >= window_start.get(h.thread_id, 0), recall_flags(h))
            for h in recall.search(scope, query, k, thread_id=thread_id)
            if h.thread_id in window_start]
