"""Archival memory as the inspector pages it: browsing, the agent's own search, one record, a delete.

- ``browse``: every record of the scope (superseded ones only when asked), newest first, filtered by
  tag, time and trust, a page at a time;
- ``search``: ``ArchivalStore.explained_search``, the hybrid search the agent's
  ``archival_memory_search`` runs (same filters before the limit), each hit with its score's parts;
- ``record_detail``: one record with its fact's timeline (the supersession chain);
- ``delete_record``: the record gone from every index (Chroma or its resident tier, the BM25 table
  and the postings held in memory), its fact's timeline settled again.

Trust is what a search shows the model (``tools.handlers.archival_flags``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pagefault.stores.archival import MAX_TOP_K, ArchivalRecord, ArchivalStore, fact_lock, record_from_hit
from pagefault.stores.index.hybrid import Hit
from pagefault.stores.scope import Scope
from pagefault.tools.handlers import archival_flags

PAGE_SIZE = 20
#: The trust filter's choices.
TRUST_CHOICES = ("any", "trusted", "flagged")
#: Search pages: the search returns at most ``MAX_TOP_K`` records.
MAX_SEARCH_PAGES = MAX_TOP_K // PAGE_SIZE


class PageOutOfRange(LookupError):
    """A page past the last one; the message names the last page."""


@dataclass(frozen=True)
class ArchivalFilters:
    """What a listing shows: a search ``query`` ('' to browse), records with all of ``tags``, of one
    ``trust`` (``TRUST_CHOICES``), created from ``start`` to ``end`` (epoch seconds), and superseded
    records too when ``superseded``."""

    query: str = ""
    tags: tuple[str, ...] = ()
    trust: str = "any"
    start: float | None = None
    end: float | None = None
    superseded: bool = False


@dataclass
class ArchivalRow:
    """One record on a page: the ``record``, its trust ``flags`` and, from a search, its ``hit``
    (fused score and its parts)."""

    record: ArchivalRecord
    flags: tuple[str, ...]
    hit: Hit | None = None


@dataclass
class ArchivalPage:
    """One page of a listing: its ``rows``, the ``page`` number (from 1), whether a next one exists
    (``more``), the ``total`` matching (None for a search, which ranks rather than counts) and the
    number of ``pages`` (None for a search)."""

    rows: list[ArchivalRow]
    page: int
    more: bool
    total: int | None
    pages: int | None


def _passes(row: ArchivalRow, f: ArchivalFilters) -> bool:
    if f.trust == "trusted" and row.flags or f.trust == "flagged" and not row.flags:
        return False
    return True


def browse(archival: ArchivalStore, scope: Scope, f: ArchivalFilters, page: int) -> ArchivalPage:
    """Page ``page`` of ``scope``'s records in ``archival`` that pass the filters ``f``, newest first."""
    rows = []
    for hit, _ in archival.index.find(scope.key):
        rec = record_from_hit(hit)
        p, v = rec.provenance, rec.validity
        if any(t not in rec.tags for t in f.tags) or (f.start is not None and p.created_at < f.start) \
                or (f.end is not None and p.created_at > f.end) or (not f.superseded and v is not None and not v.current):
            continue
        row = ArchivalRow(rec, archival_flags(rec))
        if _passes(row, f):
            rows.append(row)
    rows.sort(key=lambda r: (r.record.provenance.created_at, r.record.id), reverse=True)
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    if page > pages:
        raise PageOutOfRange(f"page {page} is past the last page ({pages})")
    return ArchivalPage(rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE], page, page < pages, len(rows), pages)


def search(archival: ArchivalStore, scope: Scope, f: ArchivalFilters, page: int) -> ArchivalPage:
    """Page ``page`` of the hybrid search of ``scope``'s records for ``f.query``, best first, with the
    filters ``f`` (trust applied to what the search returns, fetching more until the page is full)."""
    if page > MAX_SEARCH_PAGES:
        raise PageOutOfRange(f"page {page} is past the last page a search can show ({MAX_SEARCH_PAGES}: "
                             f"the best {MAX_TOP_K} records)")
    want = page * PAGE_SIZE + 1  # one more than the page: is there a next?
    n = min(want, MAX_TOP_K)
    while True:
        found = archival.explained_search(scope, f.query, n, tags=f.tags, start=f.start, end=f.end,
                                          include_superseded=f.superseded)
        rows = [r for r in (ArchivalRow(rec, archival_flags(rec), hit) for rec, hit in found) if _passes(r, f)]
        if len(rows) >= want or len(found) < n or n >= MAX_TOP_K:
            break
        n = min(n * 4, MAX_TOP_K)
    shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    if page > 1 and not shown:
        raise PageOutOfRange(f"page {page} is past the last page of results ({max(1, math.ceil(len(rows) / PAGE_SIZE))})")
    return ArchivalPage(shown, page, len(rows) > page * PAGE_SIZE, None, None)


@dataclass
class RecordDetail:
    """One record and, when it states a fact, every record of that fact oldest first (``chain``:
    the supersession chain, the record itself included)."""

    row: ArchivalRow
    chain: list[ArchivalRecord]


def record_detail(archival: ArchivalStore, scope: Scope, record_id: str) -> RecordDetail | None:
    """The record ``record_id`` of ``scope`` and its fact's timeline; None if ``scope`` has no such record."""
    rec = archival.get(scope, record_id)
    if rec is None:
        return None
    chain = archival.timeline(scope, rec.fact_key) if rec.fact_key else []
    return RecordDetail(ArchivalRow(rec, archival_flags(rec)), chain)


def delete_record(archival: ArchivalStore, scope: Scope, record_id: str) -> ArchivalRecord | None:
    """Remove the record ``record_id`` of ``scope`` from every index, and settle its fact's timeline
    (a value it superseded holds again); None if ``scope`` has no such record."""
    rec = archival.get(scope, record_id)  # waits for journalled inserts: none can bring it back
    if rec is None:
        return None
    index = archival.index
    if not rec.fact_key:
        index.delete([rec.id])
        return rec
    with fact_lock(index, scope, rec.fact_key):
        index.delete([rec.id])
        archival.settle(scope, rec.fact_key)
    return rec
