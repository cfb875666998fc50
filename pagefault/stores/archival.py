"""Archival memory: an unbounded, searchable store of facts and documents, in Chroma.

Record ids are a hash of scope and normalised text, so a retried insert (or the same fact
written twice) lands on the same record instead of duplicating it.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from pagefault.stores.hybrid import TAG_PREFIX, Hit, HybridIndex, IndexedText
from pagefault.stores.scope import Scope

MAX_TEXT_CHARS = 20_000
MAX_TAGS = 16
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


@dataclass
class Provenance:
    """Where a memory came from: thread, turn, source message, time and kind of source."""

    thread_id: str = ""
    turn: int = -1
    message_id: str = ""
    source: str = "agent"
    created_at: float = field(default_factory=time.time)


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
                "created_at": p.created_at}


def record_from_hit(hit: Hit) -> ArchivalRecord:
    m = hit.metadata
    tags = tuple(sorted(k[len(TAG_PREFIX):] for k in m if k.startswith(TAG_PREFIX)))
    prov = Provenance(
        thread_id=m.get("thread_id", ""), turn=int(m.get("turn", -1)), message_id=m.get("message_id", ""),
        source=m.get("source", "agent"), created_at=float(m.get("created_at", 0.0)),
    )
    return ArchivalRecord(hit.id, hit.text, tags, prov, created=False)


class ArchivalStore:
    """Insert and hybrid-search archival records of one or many scopes."""

    def __init__(self, index: HybridIndex) -> None:
        self.index = index

    def insert(
        self, scope: Scope, text: str, tags: Sequence[str] = (), provenance: Provenance | None = None
    ) -> ArchivalRecord:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"text is {len(text)} characters; archival records hold at most {MAX_TEXT_CHARS}"
                             " (split it, or ingest it as a document)")
        tags = check_tags(tags)
        prov = provenance or Provenance()
        rid = archival_id(scope, text)
        existing = self.index.get([rid])
        if existing:
            return record_from_hit(existing[0])
        item = IndexedText(
            id=rid, text=text, scope=scope.key, thread_id=prov.thread_id, created_at=prov.created_at,
            tags=tags, metadata={"kind": "archival", "turn": prov.turn, "message_id": prov.message_id,
                                 "source": prov.source},
        )
        self.index.upsert([item])
        return ArchivalRecord(rid, text, tags, prov, created=True)

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
        hits = self.index.search(query, scope.key, top_k, tags=check_tags(tags), start=start, end=end)
        return [(record_from_hit(h), h.score) for h in hits]

    def get(self, scope: Scope, record_id: str) -> ArchivalRecord | None:
        hits = self.index.get([record_id])
        if not hits or hits[0].metadata.get("scope") != scope.key:
            return None
        return record_from_hit(hits[0])

    def count(self, scope: Scope) -> int:
        return self.index.count(scope.key)
