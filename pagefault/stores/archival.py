"""Archival memory: an unbounded, searchable store of facts and documents, in Chroma.

Record ids are a hash of scope and normalised text, so a retried insert (or the same fact
written twice) lands on the same record instead of duplicating it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from pagefault.guard import scan
from pagefault.redact import redact
from pagefault.stores.hybrid import TAG_PREFIX, Hit, HybridIndex, IndexedText
from pagefault.stores.lexical import LexicalDoc
from pagefault.stores.provenance import Provenance
from pagefault.stores.scope import Scope
from pagefault.stores.valid import check_unicode

MAX_TEXT_CHARS = 20_000
MAX_TAGS = 16
MAX_QUERY_CHARS = 20_000
MAX_TOP_K = 1_000
_TAG = re.compile(r"[A-Za-z0-9_\-:]{1,64}")


def archival_id(scope: Scope, text: str) -> str:
    norm = " ".join(text.split()).lower()
    return "arc-" + hashlib.sha256(f"{scope.key}\x00{norm}".encode()).hexdigest()[:24]


def check_tags(tags: object) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, (list, tuple)):
        raise ValueError("tags must be a list of strings")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags")
    out = []
    for t in tags:
        if not isinstance(t, str) or not _TAG.fullmatch(t):
            raise ValueError(f"bad tag {t!r}: use 1-64 letters, digits, '_', '-' or ':'")
        out.append(t)
    return tuple(dict.fromkeys(out))


def check_search(query: object, top_k: object, start: object = None, end: object = None,
                 thread_id: object = None) -> None:
    """Reject what no index can answer: a non-string or oversized query, a top_k out of range,
    times that are not epoch seconds, a thread id that is not a string."""
    if not isinstance(query, str):
        raise ValueError("query must be a string")
    check_unicode(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"query is longer than {MAX_QUERY_CHARS} characters")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be an integer between 1 and {MAX_TOP_K}, got {top_k!r}")
    for name, t in (("start", start), ("end", end)):
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t != t or abs(t) > 1e12):
            raise ValueError(f"{name} must be epoch seconds (a finite number) or None, got {t!r}")
    if thread_id is not None and not isinstance(thread_id, str):
        raise ValueError(f"thread_id must be a string or None, got {thread_id!r}")
    if thread_id is not None:
        check_unicode(thread_id, "thread_id")


@dataclass
class ArchivalRecord:
    id: str
    text: str
    tags: tuple[str, ...]
    provenance: Provenance
    created: bool = True  # False when the insert found the record already stored

    def citation(self) -> dict[str, Any]:
        p = self.provenance
        return {"source": "archival", "id": self.id, "thread_id": p.thread_id, "turn": p.turn,
                "created_at": p.created_at, "origin": p.source, "flagged": p.flagged}


def record_from_hit(hit: Hit) -> ArchivalRecord:
    m = hit.metadata
    tags = tuple(sorted(k[len(TAG_PREFIX):] for k in m if k.startswith(TAG_PREFIX)))
    return ArchivalRecord(hit.id, hit.text, tags, Provenance.from_metadata(m), created=False)


class ArchivalStore:
    """Insert and hybrid-search archival records of one or many scopes."""

    def __init__(self, index: HybridIndex) -> None:
        self.index = index

    def insert(
        self, scope: Scope, text: str, tags: Sequence[str] = (), provenance: Provenance | None = None,
        *, redact_secrets: bool = True,
    ) -> ArchivalRecord:
        """Store ``text`` (secrets redacted unless told not to); the guard's flags go into its provenance."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"text is {len(text)} characters; archival records hold at most {MAX_TEXT_CHARS}"
                             " (split it, or ingest it as a document)")
        check_unicode(text, "text")
        tags = check_tags(tags)
        if provenance is not None and not isinstance(provenance, Provenance):
            raise ValueError("provenance must be a Provenance")
        if redact_secrets:
            text = redact(text).text
        prov = provenance or Provenance()
        prov = replace(prov, flags=tuple(dict.fromkeys((*prov.flags, *scan(text).rules))))
        rid = archival_id(scope, text)
        existing = self.index.get([rid])
        if existing:
            record = record_from_hit(existing[0])
            self._repair_lexical(existing[0], record)
            return record
        item = IndexedText(
            id=rid, text=text, scope=scope.key, thread_id=prov.thread_id, created_at=prov.created_at,
            tags=tags, metadata={"kind": "archival", **prov.metadata()},
        )
        self.index.upsert([item])
        return ArchivalRecord(rid, text, tags, prov, created=True)

    def _repair_lexical(self, hit: Hit, record: ArchivalRecord) -> None:
        """A crash between the Chroma write and the BM25 write leaves the record in Chroma only; the
        retried insert finds it there and writes the missing BM25 half from what Chroma holds."""
        if self.index.lexical.texts([hit.id]):
            return
        m = hit.metadata
        self.index.lexical.upsert([LexicalDoc(hit.id, str(m.get("scope", "")), hit.text, str(m.get("thread_id", "")),
                                              float(m.get("created_at", 0.0)), record.tags)])

    def search(
        self,
        scope: Scope,
        query: str,
        top_k: int = 5,
        *,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
    ) -> list[tuple[ArchivalRecord, float]]:
        check_search(query, top_k, start, end)
        hits = self.index.search(query, scope.key, top_k, tags=check_tags(tags), start=start, end=end)
        return [(record_from_hit(h), h.score) for h in hits]

    def get(self, scope: Scope, record_id: str) -> ArchivalRecord | None:
        if not isinstance(record_id, str) or not record_id:
            return None
        hits = self.index.get([record_id])
        if not hits or hits[0].metadata.get("scope") != scope.key:
            return None
        return record_from_hit(hits[0])

    def count(self, scope: Scope) -> int:
        return self.index.count(scope.key)
