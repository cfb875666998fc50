"""Hybrid search: a Chroma vector index and a BM25 index, fused by reciprocal rank.

Both sides apply the same filters (scope, thread, tags, time) *before* their limit, so a
filtered search never comes back short because unfiltered hits used up the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pagefault.embeddings import OfflineEmbeddings
from pagefault.stores.lexical import LexicalDoc, LexicalIndex

#: Reciprocal-rank-fusion constant (Cormack et al.); dampens the weight of top ranks.
RRF_K = 60
#: How many candidates each side contributes, relative to the requested k.
CANDIDATE_FACTOR = 4
MIN_CANDIDATES = 40
TAG_PREFIX = "tag__"


@dataclass
class IndexedText:
    """One unit of searchable text with flat metadata (str/int/float/bool values)."""

    id: str
    text: str
    scope: str
    thread_id: str = ""
    created_at: float = 0.0
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def chroma_metadata(self) -> dict[str, Any]:
        meta = {k: v for k, v in self.metadata.items() if v is not None}
        meta.update(scope=self.scope, thread_id=self.thread_id, created_at=float(self.created_at))
        for t in self.tags:
            meta[TAG_PREFIX + t] = True
        return meta


@dataclass
class Hit:
    """A search result: id, text, fused score and the stored metadata."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any]


def chroma_where(
    scope: str,
    *,
    thread_id: str | None = None,
    tags: Sequence[str] = (),
    start: float | None = None,
    end: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    clauses: list[dict[str, Any]] = [{"scope": scope}]
    if thread_id is not None:
        clauses.append({"thread_id": thread_id})
    clauses += [{TAG_PREFIX + t: True} for t in tags]
    if start is not None:
        clauses.append({"created_at": {"$gte": float(start)}})
    if end is not None:
        clauses.append({"created_at": {"$lte": float(end)}})
    clauses += [{k: v} for k, v in (extra or {}).items()]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class HybridIndex:
    """A Chroma collection plus its BM25 shadow; Chroma is written first and is authoritative."""

    def __init__(self, collection: Any, lexical: LexicalIndex, embeddings: OfflineEmbeddings) -> None:
        self.collection = collection
        self.lexical = lexical
        self.embeddings = embeddings

    def upsert(self, items: Sequence[IndexedText]) -> None:
        if not items:
            return
        vectors = self.embeddings.embed_array([i.text for i in items])
        self.collection.upsert(
            ids=[i.id for i in items],
            documents=[i.text for i in items],
            embeddings=vectors,
            metadatas=[i.chroma_metadata() for i in items],
        )
        self.lexical.upsert(
            LexicalDoc(i.id, i.scope, i.text, i.thread_id, i.created_at, tuple(i.tags)) for i in items
        )

    def get(self, ids: Sequence[str]) -> list[Hit]:
        if not ids:
            return []
        got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        by_id = {i: Hit(i, d, 0.0, dict(m or {})) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}
        return [by_id[i] for i in ids if i in by_id]

    def search(
        self,
        query: str,
        scope: str,
        k: int,
        *,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
    ) -> list[Hit]:
        n = max(MIN_CANDIDATES, k * CANDIDATE_FACTOR)
        where = chroma_where(scope, thread_id=thread_id, tags=tags, start=start, end=end)
        qvec = self.embeddings.embed_array([query])
        dense = self.collection.query(
            query_embeddings=qvec, n_results=n, where=where, include=["documents", "metadatas"]
        )
        lexical = self.lexical.search(
            query, scope, n, thread_id=thread_id, tags=tags, start=start, end=end
        )
        scores: dict[str, float] = {}
        docs: dict[str, tuple[str, dict[str, Any]]] = {}
        for rank, (id_, doc, meta) in enumerate(zip(dense["ids"][0], dense["documents"][0], dense["metadatas"][0])):
            scores[id_] = scores.get(id_, 0.0) + 1.0 / (RRF_K + rank + 1)
            docs[id_] = (doc, dict(meta or {}))
        for rank, (id_, _) in enumerate(lexical):
            scores[id_] = scores.get(id_, 0.0) + 1.0 / (RRF_K + rank + 1)
        ranked = sorted(scores, key=lambda i: scores[i], reverse=True)[:k]
        missing = [i for i in ranked if i not in docs]
        for hit in self.get(missing):
            docs[hit.id] = (hit.text, hit.metadata)
        return [Hit(i, docs[i][0], scores[i], docs[i][1]) for i in ranked if i in docs]

    def count(self, scope: str) -> int:
        return self.lexical.count(scope)
