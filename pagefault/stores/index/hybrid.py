"""Hybrid search: a Chroma vector index and a BM25 index, fused by normalized score.

Both sides apply the same filters (scope, thread, tags, time) *before* their limit, so a
filtered search never comes back short because unfiltered hits used up the limit. Each side's
scores are min-max normalized over its candidates and summed with a weight: unlike rank fusion,
a confident BM25 match on a rare name is not flattened to the level of a weak dense neighbour.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Unpack

import numpy as np

from pagefault.models.embedding_choice import ArrayEmbedding
from pagefault.stores.index.lexical_sqlite import LexicalDoc
from pagefault.stores.index.protocols import Include, LexicalBackend, Metadata, SearchFilters, VectorCollection
from pagefault.stores.validity import ValidityFilter

#: How many candidates each side contributes, relative to the requested k.
CANDIDATE_FACTOR = 4
MIN_CANDIDATES = 100
#: Unfiltered nearest neighbours fetched per wanted candidate before filtering them locally.
OVERFETCH = 4
TAG_PREFIX = "tag__"
#: Runs the BM25 side of searches beside the query's embedding (``HybridIndex.start_lexical``).
_SEARCH_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pagefault-bm25-search")
#: Runs one index's ``signals`` beside another's (``HybridIndex.start_signals``): a search of two indexes
#: scores both vector matrices at once. Apart from ``_SEARCH_POOL``, whose BM25 jobs these wait for.
_SIGNALS_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pagefault-dense-search")


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
class Signals:
    """Candidate scores of one index for one query, by id."""

    dense: dict[str, float] = field(default_factory=dict)
    lexical: dict[str, float] = field(default_factory=dict)
    docs: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)


def normalized(scores: Mapping[str, float]) -> dict[str, float]:
    """Min-max scale to [0, 1]; a single candidate (or a tie) scores 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo < 1e-12:
        return {i: 1.0 for i in scores}
    return {i: (v - lo) / (hi - lo) for i, v in scores.items()}


def lexical_confidence(signals: Sequence[Mapping[str, float]], full_at: float) -> float:
    """How much say BM25 gets in a fusion, from 0 to 1: its best raw score among ``signals`` over
    ``full_at`` (1 from there on). Min-max scaling gives any query's best BM25 match the same top score, so
    a match on common words alone (a low raw score: a paraphrased question, or a language whose function
    words the stemmer does not drop) would outrank the vectors; this keeps that score's size."""
    top = max((max(s.values()) for s in signals if s), default=0.0)
    return min(1.0, max(0.0, top) / full_at) if full_at > 0 else 1.0


def fuse(weighted: Sequence[tuple[float, Mapping[str, float]]]) -> dict[str, float]:
    """Weighted sum of normalized signals; a candidate a signal did not return scores 0 there."""
    total: dict[str, float] = {}
    for weight, scores in weighted:
        for i, v in normalized(scores).items():
            total[i] = total.get(i, 0.0) + weight * v
    return total


@dataclass(frozen=True)
class ScoreParts:
    """How a hybrid search scored one hit: each side's raw score (``bm25``, and ``dense``, the cosine
    similarity; None where that side did not return the hit) and its min-max normalized share of the
    fused score (``bm25_share``, ``dense_share``; 0 where absent). The fused score is their sum."""

    bm25: float | None
    dense: float | None
    bm25_share: float
    dense_share: float


@dataclass
class Hit:
    """A search result: id, text, fused score and the stored metadata; ``parts``, how a search scored
    it (None for a read by id)."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any]
    parts: ScoreParts | None = None


def chroma_where(
    scope: str,
    *,
    thread_id: str | None = None,
    tags: Sequence[str] = (),
    start: float | None = None,
    end: float | None = None,
    extra: Mapping[str, Any] | None = None,
    validity: ValidityFilter | None = None,
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
    clauses += validity.chroma_clauses() if validity is not None else []
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def lexical_doc(id_: str, text: str, meta: Mapping[str, Any]) -> LexicalDoc:
    """The BM25 shadow of a record from its Chroma metadata (tags and validity included)."""
    tags = tuple(sorted(k[len(TAG_PREFIX):] for k, v in meta.items() if k.startswith(TAG_PREFIX) and v))
    vf, vt = meta.get("valid_from"), meta.get("valid_to")
    return LexicalDoc(id_, str(meta.get("scope", "")), text, str(meta.get("thread_id", "")),
                      float(meta.get("created_at", 0.0)), tags, None if vf is None else float(vf),
                      None if vt is None else float(vt), bool(meta.get("superseded", False)),
                      str(meta.get("fact_key", "") or ""))


class HybridIndex:
    """A Chroma collection plus its BM25 shadow; Chroma is written first and is authoritative."""

    def __init__(self, collection: VectorCollection, lexical: LexicalBackend, embeddings: ArrayEmbedding, *,
                 shadow_is_complete: bool = True) -> None:
        self.collection = collection
        self.lexical = lexical
        self.embeddings = embeddings
        #: False when other hosts may write the collection past this shadow (a Chroma server with a
        #: BM25 file beside this process): the dense side must not filter through the shadow then.
        self.shadow_is_complete = shadow_is_complete

    def upsert(self, items: Sequence[IndexedText], vectors: np.ndarray | None = None) -> np.ndarray:
        """Write items (embedding them unless ``vectors`` are given); returns the vectors written."""
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        if vectors is None:
            vectors = self.embeddings.embed_array([i.text for i in items])
        self.collection.upsert(
            ids=[i.id for i in items],
            documents=[i.text for i in items],
            embeddings=vectors,
            metadatas=[i.chroma_metadata() for i in items],
        )
        self.lexical.upsert(lexical_doc(i.id, i.text, i.chroma_metadata()) for i in items)
        return vectors

    def restamp(self, changes: Mapping[str, Mapping[str, Any]], *, read: Sequence[Hit] | None = None) -> None:
        """Merge new metadata into stored records (Chroma first, then the BM25 shadow), keeping text and vectors.
        ``read``: the records as the caller has just read them, under a lock that keeps them as read (they
        are then not read again: on a Chroma server that is a round trip); those of other ids are ignored."""
        if read is None:
            hits = self.get(list(changes))
        else:
            known = {h.id: h for h in read}
            hits = [known[i] for i in changes if i in known]
        if not hits:
            return
        merged: list[Metadata] = [{**h.metadata, **changes[h.id]} for h in hits]
        self.collection.update(ids=[h.id for h in hits], metadatas=merged)
        self.lexical.upsert(lexical_doc(h.id, h.text, m) for h, m in zip(hits, merged))

    def delete(self, ids: Sequence[str]) -> None:
        """Remove records from both sides (Chroma first: it is authoritative)."""
        if ids:
            self.collection.delete(ids=list(ids))
            self.lexical.delete(list(ids))

    def find(self, scope: str, *, extra: Mapping[str, Any] | None = None, embeddings: bool = False,
             page: int = 2_000) -> list[tuple[Hit, np.ndarray | None]]:
        """Every record of ``scope`` matching the equality filters in ``extra`` (paged; no ranking)."""
        where = chroma_where(scope, extra=extra)
        if extra and len(extra) == 1:
            # Chroma answers one equality from its metadata index (~8 ms at 100k records) but an $and
            # with the scope by scanning (~0.1 s): ask for the one key, check the scope here.
            where = dict(extra)
        include: Include = ["documents", "metadatas", "embeddings"] if embeddings else ["documents", "metadatas"]
        out: list[tuple[Hit, np.ndarray | None]] = []
        offset = 0
        while True:
            got = self.collection.get(where=where, include=include, limit=page, offset=offset)
            vecs: Any = got.get("embeddings") if embeddings else None  # an array, or a list of them
            for j, (i, d, m) in enumerate(zip(got["ids"], got["documents"], got["metadatas"])):
                if (m or {}).get("scope") != scope:
                    continue
                out.append((Hit(i, d, 0.0, dict(m or {})), np.asarray(vecs[j], dtype=np.float32) if embeddings else None))
            if len(got["ids"]) < page:
                return out
            offset += page

    def get(self, ids: Sequence[str]) -> list[Hit]:
        if not ids:
            return []
        got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        by_id = {i: Hit(i, d, 0.0, dict(m or {})) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}
        return [by_id[i] for i in ids if i in by_id]

    def signals(
        self,
        query: str,
        query_vector: np.ndarray,
        scope: str,
        n: int,
        *,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
        with_docs: bool = True,
        validity: ValidityFilter | None = None,
        lexical: "Future[list[tuple[str, float]]] | None" = None,
    ) -> "Signals":
        """Raw candidate scores from both sides: cosine similarity and BM25, filters applied first.
        ``lexical``: the BM25 side already started (``start_lexical``), to collect instead of running."""
        out = Signals()
        filters = SearchFilters(thread_id=thread_id, tags=tags, start=start, end=end)
        if lexical is None:
            lexical = self.start_lexical(query, scope, n, validity=validity, inline=True, **filters)
        near = self.unfiltered_neighbours(query_vector, scope, n, validity=validity, **filters)
        if near is not None:
            out.dense = near
            if with_docs:
                self.resolve(list(near), out.docs)
        else:
            where = chroma_where(scope, validity=validity, **filters)
            dense = self.collection.query(
                query_embeddings=query_vector.reshape(1, -1), n_results=n, where=where,
                include=["documents", "metadatas", "distances"] if with_docs else ["distances"],
            )
            for j, (id_, dist) in enumerate(zip(dense["ids"][0], dense["distances"][0])):
                out.dense[id_] = 1.0 - float(dist)
                if with_docs:
                    out.docs[id_] = (dense["documents"][0][j], dict(dense["metadatas"][0][j] or {}))
        out.lexical = dict(lexical.result())
        return out

    def start_signals(self, query: str, query_vector: np.ndarray, scope: str, n: int, **options: Any
                      ) -> "Future[Signals]":
        """``signals`` on another thread (same arguments), for a caller that searches a second index
        meanwhile: the vector scoring lets go of the GIL, so the two run side by side."""
        return _SIGNALS_POOL.submit(self.signals, query, query_vector, scope, n, **options)

    def start_lexical(self, query: str, scope: str, n: int, *, thread_id: str | None = None, tags: Sequence[str] = (),
                      start: float | None = None, end: float | None = None, validity: ValidityFilter | None = None,
                      inline: bool = False) -> "Future[list[tuple[str, float]]]":
        """The BM25 side of ``signals``, on a worker thread: it needs no query vector, so it runs while
        the query is embedded (ONNX lets go of the GIL). ``inline``: run it here and now."""
        filters = SearchFilters(thread_id=thread_id, tags=tags, start=start, end=end)
        if not inline:
            return _SEARCH_POOL.submit(self.lexical.search, query, scope, n, validity=validity, **filters)
        done: Future[list[tuple[str, float]]] = Future()
        done.set_result(self.lexical.search(query, scope, n, validity=validity, **filters))
        return done

    def unfiltered_neighbours(self, query_vector: np.ndarray, scope: str, n: int, *,
                               validity: ValidityFilter | None, **filters: Unpack[SearchFilters]
                               ) -> dict[str, float] | None:
        """The ``n`` nearest records passing the filters, found without Chroma's metadata filter (which
        scans every record's metadata: ~0.3 s at 100k records, against ~2 ms unfiltered): the ``n``
        nearest of all (then the ``OVERFETCH * n`` nearest, if some did not pass), kept when the BM25
        shadow says they pass. Exact whenever ``n`` pass (a passing record nearer than the last kept is
        among them) or the collection holds fewer than were asked for; otherwise None, and the caller
        runs the filtered query."""
        if not (self.shadow_is_complete and self.lexical.can_match) or (validity is not None
                                                                         and validity.as_of is not None):
            return None  # no (complete) local shadow to filter with, or a point-in-time filter: Chroma's own
        for want in (n, OVERFETCH * n):  # most records pass: ask for n first, for more only if some did not
            got = self.collection.query(query_embeddings=query_vector.reshape(1, -1), n_results=want,
                                        include=["distances"])
            ids, dists = got["ids"][0], got["distances"][0]
            keep = self.lexical.matching(ids, scope, validity=validity, **filters)
            if keep is None:  # the shadow could not tell after all: Chroma's own filter
                return None
            near = {i: 1.0 - float(d) for i, d in zip(ids, dists) if i in keep}
            if len(near) >= n or len(ids) < want:
                return dict(list(near.items())[:n])
        return None

    def resolve(self, ids: Sequence[str], docs: dict[str, tuple[str, dict[str, Any]]]) -> None:
        """Fill in text and metadata for ids that only the lexical side returned."""
        for hit in self.get([i for i in ids if i not in docs]):
            docs[hit.id] = (hit.text, hit.metadata)

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
        validity: ValidityFilter | None = None,
    ) -> list[Hit]:
        n = max(MIN_CANDIDATES, k * CANDIDATE_FACTOR)
        filters = SearchFilters(thread_id=thread_id, tags=tags, start=start, end=end)
        lexical = self.start_lexical(query, scope, n, validity=validity, **filters)
        qvec = self.embeddings.embed_query_array([query])[0]
        sig = self.signals(query, qvec, scope, n, with_docs=False, lexical=lexical, validity=validity, **filters)
        scores = fuse([(1.0, sig.lexical), (1.0, sig.dense)])
        ranked = sorted(scores, key=lambda i: scores[i], reverse=True)[:k]
        self.resolve(ranked, sig.docs)
        lexical_share, dense_share = normalized(sig.lexical), normalized(sig.dense)
        return [Hit(i, sig.docs[i][0], scores[i], sig.docs[i][1],
                    ScoreParts(sig.lexical.get(i), sig.dense.get(i), lexical_share.get(i, 0.0), dense_share.get(i, 0.0)))
                for i in ranked if i in sig.docs]

    def count(self, scope: str) -> int:
        return self.lexical.count(scope)
