"""Archival's vectors on the embedded setup: recent small writes resident, the rest in Chroma.

Chroma's embedded client holds the GIL for the whole of a write (``benchmarks/chroma_gil.py``): one
record into 100k records costs 5-15 ms during which no other Python thread runs, and a fact costs
three such writes (its record, the restamp of the one it supersedes, the plain record beside it). A
question right after a statement waited for them: about 45 ms of a 120 ms question turn at 20k
passages. So writes of a few records go to a resident collection (SQLite on disk and a numpy matrix,
``resident_vectors``; SQLite lets go of the GIL) and move to Chroma ``MOVE_CHUNK`` at a time once
``MOVE_AT`` have gathered: one Chroma write per hundred records. Batches of ``DIRECT`` or more (a
document's passages, a bulk load) go to Chroma at once, as before.

Reads see both tiers: a query asks both and merges by distance; a get returns each id once. A move
writes Chroma first and then removes the records from the resident tier, under the lock every call
takes; a crash between the two leaves records in both, which the next open removes from the resident
tier (Chroma then holds the same version).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from pagefault.stores.index.protocols import Include, IncludeField, Metadata, Result, VectorCollection, Vectors, Where
from pagefault.stores.index.resident_vectors import ResidentCollection

#: A write of this many records or more goes straight to Chroma.
DIRECT = 32
#: The resident tier moves its oldest ``MOVE_CHUNK`` records to Chroma once it holds ``MOVE_AT``.
MOVE_AT = 200
MOVE_CHUNK = 100
_ALL: tuple[IncludeField, ...] = ("documents", "metadatas", "embeddings")


class TieredCollection:
    """The part of Chroma's ``Collection`` API that ``HybridIndex`` uses (``VectorCollection``), over two collections."""

    def __init__(self, cold: VectorCollection, hot: ResidentCollection) -> None:
        self.cold, self.hot = cold, hot
        self.name = cold.name
        self._lock = threading.RLock()
        with self._lock:
            both = self._in_cold(self.hot.get(include=[])["ids"])
            if both:  # a move cut short by a crash: Chroma already holds these
                self.hot.delete(ids=both)

    def _in_cold(self, ids: Sequence[str]) -> list[str]:
        return list(self.cold.get(ids=list(ids), include=[])["ids"]) if ids else []

    # -- writes ---------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], embeddings: Vectors, metadatas: list[Metadata] | None = None,
               documents: list[str] | None = None) -> None:
        ids = list(ids)
        with self._lock:
            if len(ids) >= DIRECT:
                self.cold.upsert(ids=ids, embeddings=embeddings, metadatas=metadatas, documents=documents)
                stale = self.hot.get(ids=ids, include=[])["ids"]
                if stale:
                    self.hot.delete(ids=stale)
                return
            self.hot.upsert(ids=ids, embeddings=embeddings, metadatas=metadatas, documents=documents)
            stale = self._in_cold(ids)  # rewritten: the resident copy is the one now
            if stale:
                self.cold.delete(ids=stale)
            if self.hot.count() >= MOVE_AT:
                self.move(MOVE_CHUNK)

    def update(self, ids: Sequence[str], metadatas: Sequence[Metadata] | None = None,
               documents: Sequence[str] | None = None) -> None:
        ids = list(ids)
        with self._lock:
            resident = set(self.hot.get(ids=ids, include=[])["ids"])
            for tier, keep in ((self.hot, True), (self.cold, False)):
                picked = [n for n, i in enumerate(ids) if (i in resident) == keep]
                if picked:
                    tier.update(ids=[ids[n] for n in picked],
                                metadatas=None if metadatas is None else [metadatas[n] for n in picked],
                                documents=None if documents is None else [documents[n] for n in picked])

    def delete(self, ids: Sequence[str] | None = None, where: Where | None = None) -> None:
        with self._lock:
            self.cold.delete(ids=list(ids) if ids is not None else None, where=where)
            self.hot.delete(ids=list(ids) if ids is not None else None, where=where)

    def move(self, n: int = MOVE_CHUNK) -> int:
        """Move the ``n`` oldest resident records to Chroma; returns how many moved."""
        with self._lock:
            ids = self.hot.get(include=[], limit=n)["ids"]
            if not ids:
                return 0
            got = self.hot.get(ids=ids, include=list(_ALL))
            self.cold.upsert(ids=got["ids"], embeddings=got["embeddings"], metadatas=got["metadatas"],
                             documents=got["documents"])
            self.hot.delete(ids=got["ids"])
            return len(got["ids"])

    # -- reads ----------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            return self.cold.count() + self.hot.count()

    def get(self, ids: Sequence[str] | None = None, where: Where | None = None,
            limit: int | None = None, offset: int | None = None,
            include: Sequence[IncludeField] = ("documents", "metadatas")) -> dict[str, Any]:
        """Resident records first, then Chroma's (``limit``/``offset`` page through both in that order)."""
        include = list(include)
        with self._lock:
            if ids is not None:
                ids = list(ids)
                hot = self.hot.get(ids=ids, where=where, include=include)
                seen = set(hot["ids"])
                rest = [i for i in ids if i not in seen]
                cold = self.cold.get(ids=rest, where=where, include=include) if rest else None
                merged = _concat(hot, cold, include)
                order = {i: n for n, i in enumerate(ids)}
                picked = sorted(range(len(merged["ids"])), key=lambda n: order[merged["ids"][n]])
                merged = _pick(merged, picked, include)
                return _pick(merged, list(range(len(merged["ids"])))[int(offset or 0):][:limit], include) \
                    if (limit is not None or offset) else merged
            hot = self.hot.get(where=where, include=include)
            first = int(offset or 0)
            part = _pick(hot, list(range(len(hot["ids"])))[first:][:limit], include)
            want = None if limit is None else int(limit) - len(part["ids"])
            if want is not None and want <= 0:
                return part
            cold = self.cold.get(where=where, limit=want, offset=max(0, first - len(hot["ids"])), include=include)
            return _concat(part, cold, include)

    def query(self, query_embeddings: Vectors, n_results: int = 10, where: Where | None = None,
              include: Sequence[IncludeField] = ("documents", "metadatas", "distances")) -> Result:
        """The ``n_results`` nearest of both tiers, nearest first, per query vector."""
        include = list(include)
        asked: Include = list(dict.fromkeys([*include, "distances"]))
        with self._lock:
            cold = self.cold.query(query_embeddings=query_embeddings, n_results=n_results, where=where, include=asked)
            if not self.hot.count():
                return cold if "distances" in include else {**cold, "distances": None}
            hot = self.hot.query(query_embeddings=query_embeddings, n_results=n_results, where=where, include=asked)
        out: dict[str, Any] = {"ids": [], **{k: ([] if k in include else None)
                                             for k in ("documents", "metadatas", "distances")}}
        for q in range(len(cold["ids"])):
            # Another process on the directory may be mid-move: an id in both tiers counts once.
            rows = [(d, tier, n) for tier in (hot, cold) for n, d in enumerate(tier["distances"][q])]
            rows.sort(key=lambda r: r[0])
            seen: set[str] = set()
            first = []
            for r in rows:
                if r[1]["ids"][q][r[2]] not in seen:
                    seen.add(r[1]["ids"][q][r[2]])
                    first.append(r)
            rows = first[:n_results]
            out["ids"].append([t["ids"][q][n] for _, t, n in rows])
            for key in ("documents", "metadatas", "distances"):
                if key in include:
                    out[key].append([t[key][q][n] for _, t, n in rows])
        return out


def _pick(got: Result, rows: list[int], include: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"ids": [got["ids"][n] for n in rows], "documents": None, "metadatas": None,
                           "embeddings": None, "included": list(include)}
    for key in ("documents", "metadatas"):
        if key in include:
            out[key] = [got[key][n] for n in rows]
    if "embeddings" in include:
        out["embeddings"] = np.asarray(got["embeddings"])[rows] if rows else np.zeros((0, 0), dtype=np.float32)
    return out


def _concat(a: Result, b: Result | None, include: Sequence[str]) -> dict[str, Any]:
    if b is None or not len(b["ids"]):
        return _pick(a, list(range(len(a["ids"]))), include)
    if not len(a["ids"]):
        return _pick(b, list(range(len(b["ids"]))), include)
    out: dict[str, Any] = {"ids": [*a["ids"], *b["ids"]], "documents": None, "metadatas": None,
                           "embeddings": None, "included": list(include)}
    for key in ("documents", "metadatas"):
        if key in include:
            out[key] = [*a[key], *b[key]]
    if "embeddings" in include:
        out["embeddings"] = np.vstack([np.asarray(a["embeddings"], dtype=np.float32),
                                       np.asarray(b["embeddings"], dtype=np.float32)])
    return out
