"""A vector collection whose writes go to the engine in batches it accepts: ``BatchedCollection``.

Chroma refuses an ``upsert`` or ``update`` of more records than its ``max_batch_size`` (5,461 on the
embedded engine of chromadb 1.5; a server says its own), with an ``InternalError`` that names neither
the records nor the limit. A write-behind that had gathered more than that (10,000 quick inserts, or
a journal that grew while a store was down) failed as a whole, every time, and every read of the store
waited for it. The limit is the engine's, asked of its client once (``write_limit``), never assumed.

Each batch is one write of the engine; a failure part way leaves the batches before it written. The
stores write records under ids of their own (a retried write lands on the same records) and write the
BM25 shadow only after the vectors, as a crash between two batches would leave them too.
"""

from __future__ import annotations

from typing import Any, Sequence

from pagefault.stores.index.protocols import Include, Metadata, Result, VectorCollection, Vectors, Where


def write_limit(client: Any) -> int:
    """The most records one write of ``client``'s engine takes (``ClientAPI.get_max_batch_size``: the
    embedded engine's own, or the one a server answers its pre-flight check with)."""
    limit = int(client.get_max_batch_size())
    if limit < 1:
        raise ValueError(f"the Chroma engine reports a maximum batch size of {limit}; expected a positive number")
    return limit


class BatchedCollection:
    """``collection`` with its ``upsert`` and ``update`` cut into writes of at most ``limit`` records, in
    order; its reads and deletes as they are (Chroma takes a delete of any number of ids)."""

    def __init__(self, collection: VectorCollection, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a batch holds at least one record, got {limit}")
        self.inner, self.limit = collection, limit

    @property
    def name(self) -> str:
        return self.inner.name

    def count(self) -> int:
        return self.inner.count()

    def get(self, *, ids: list[str] | None = None, where: Where | None = None, limit: int | None = None,
            offset: int | None = None, include: Include = ["documents", "metadatas"]) -> Result:
        return self.inner.get(ids=ids, where=where, limit=limit, offset=offset, include=include)

    def query(self, *, query_embeddings: Vectors, n_results: int = 10, where: Where | None = None,
              include: Include = ["documents", "metadatas", "distances"]) -> Result:
        return self.inner.query(query_embeddings=query_embeddings, n_results=n_results, where=where, include=include)

    def upsert(self, *, ids: list[str], embeddings: Vectors, metadatas: list[Metadata] | None = None,
               documents: list[str] | None = None) -> None:
        ids = list(ids)
        for start in range(0, len(ids), self.limit):
            end = start + self.limit
            self.inner.upsert(ids=ids[start:end], embeddings=embeddings[start:end],
                              metadatas=_part(metadatas, start, end), documents=_part(documents, start, end))

    def update(self, *, ids: list[str], metadatas: list[Metadata] | None = None,
               documents: list[str] | None = None) -> None:
        ids = list(ids)
        for start in range(0, len(ids), self.limit):
            end = start + self.limit
            self.inner.update(ids=ids[start:end], metadatas=_part(metadatas, start, end),
                              documents=_part(documents, start, end))

    def delete(self, *, ids: list[str] | None = None, where: Where | None = None) -> object:
        return self.inner.delete(ids=ids, where=where)


def _part(values: Sequence[Any] | None, start: int, end: int) -> Any:
    return None if values is None else list(values[start:end])
