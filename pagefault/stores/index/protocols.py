"""The two seams of the search indexes: where vectors live and where BM25 lives.

``VectorCollection`` is the part of Chroma's ``Collection`` API that pagefault calls. A Chroma
collection (embedded or, through ``engines.connections.ServerCollection``, on a server; either one
behind ``batched_writes.BatchedCollection``), recall's ``ResidentCollection`` and archival's
``TieredCollection`` all offer it, so ``HybridIndex`` and the stores around it do not know which one
they have. Every method is called with keywords only: the
implementations order their parameters differently.

``LexicalBackend`` is the BM25 shadow beside it: ``LexicalIndex`` (SQLite FTS5, one host) and
``PostgresLexicalIndex`` (shared by replicas). What only one of them can do is still a member of
both; the other answers with a documented "not supported" value (None, or False for ``can_match``),
so callers ask instead of probing for attributes.

The implementations are checked against these protocols by mypy (see the end of this module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Protocol, Sequence, TypedDict

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from pagefault.stores.index.lexical_sqlite import LexicalDoc
    from pagefault.stores.validity import ValidityFilter

#: A field a read may include. Chroma's own list (``chromadb.api.types.Include``): a collection is
#: asked only for the first four; ``uris`` and ``data`` are here because the list type must match.
IncludeField = Literal["documents", "embeddings", "metadatas", "distances", "uris", "data"]
Include = list[IncludeField]
#: A metadata filter in Chroma's ``where`` syntax (``$and``, ``$or``, ``$eq``, ``$in``, ...).
Where = dict[str, Any]
#: Flat metadata of one record (str, int, float or bool values).
Metadata = Mapping[str, Any]
#: Vectors, one row per record (or per query).
Vectors = npt.NDArray[np.float32]
#: A read's result in Chroma's shapes: ``ids``, ``documents``, ``metadatas``, ``embeddings`` (``get``),
#: each a list per query vector and ``distances`` as well (``query``); a field not included is None.
Result = Mapping[str, Any]


class VectorCollection(Protocol):
    """Records with a vector, a document and flat metadata each, searched by cosine distance."""

    @property
    def name(self) -> str: ...

    def count(self) -> int: ...

    def get(self, *, ids: list[str] | None = ..., where: Where | None = ..., limit: int | None = ...,
            offset: int | None = ..., include: Include = ...) -> Result:
        """Records by id and/or filter (every record if neither), paged by ``limit``/``offset``."""
        ...

    def query(self, *, query_embeddings: Vectors, n_results: int = ..., where: Where | None = ...,
              include: Include = ...) -> Result:
        """The ``n_results`` nearest records passing ``where``, nearest first, for each query vector."""
        ...

    def upsert(self, *, ids: list[str], embeddings: Vectors, metadatas: list[Metadata] | None = ...,
               documents: list[str] | None = ...) -> None: ...

    def update(self, *, ids: list[str], metadatas: list[Metadata] | None = ...,
               documents: list[str] | None = ...) -> None:
        """Replace the given fields of stored records; unknown ids are ignored."""
        ...

    def delete(self, *, ids: list[str] | None = ..., where: Where | None = ...) -> object:
        """Remove records by id and/or filter (what it returns differs between implementations: unused)."""
        ...


class SearchFilters(TypedDict, total=False):
    """The filters a lexical search and a vector search share (keyword arguments of ``search``)."""

    thread_id: str | None
    tags: Sequence[str]
    start: float | None
    end: float | None


class LexicalBackend(Protocol):
    """A BM25 index of record text by scope; derived data, written after the vectors it shadows."""

    @property
    def url(self) -> str | None:
        """The database the index lives in when other processes share it (replicas take their locks
        there); None when it is this host's own file."""
        ...

    @property
    def can_match(self) -> bool:
        """Whether ``matching`` is answered here, from an index on this host, cheaply enough to filter
        a vector search's neighbours through; if False, ``matching`` returns None."""
        ...

    def upsert(self, docs: Iterable[LexicalDoc]) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def search(self, query: str, scope: str, limit: int, *, thread_id: str | None = ..., tags: Sequence[str] = ...,
               start: float | None = ..., end: float | None = ...,
               validity: ValidityFilter | None = ...) -> list[tuple[str, float]]:
        """(id, BM25 score; higher is better) of records of ``scope`` matching any query term, filters first."""
        ...

    def matching(self, ids: Sequence[str], scope: str, *, thread_id: str | None = ..., tags: Sequence[str] = ...,
                 start: float | None = ..., end: float | None = ...,
                 validity: ValidityFilter | None = ...) -> set[str] | None:
        """Those of ``ids`` that pass the filters ``search`` applies; None if not supported (``can_match``)."""
        ...

    def fact_keys_complete(self) -> bool | None:
        """Whether every row carries its fact key (False: rows from before fact keys were kept lack
        theirs; ``fill_fact_keys`` them). None: this backend keeps no fact keys."""
        ...

    def fill_fact_keys(self, keys: Mapping[str, str]) -> None:
        """Record the fact key of rows written without one (id -> key)."""
        ...

    def fact_records(self, scope: str, fact_key: str, since: float) -> list[str] | None:
        """Ids of the records of one fact whose validity a value beginning at ``since`` can change; None
        when the index cannot tell (no fact keys, or not all of them): the caller reads the vectors."""
        ...

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored text by id (missing ids are left out)."""
        ...

    def ids(self, scope: str | None = ...) -> set[str]: ...

    def count(self, scope: str) -> int: ...

    def count_with(self, scope: str, ids: Sequence[str]) -> int:
        """``count(scope)`` plus how many of ``ids`` are not stored yet, read at one moment: a writer
        storing one of them between two separate reads would otherwise have it counted never or twice."""
        ...

    def close(self) -> None: ...


if TYPE_CHECKING:  # each implementation satisfies its protocol (checked by mypy, never run)
    from chromadb.api.models.Collection import Collection

    from pagefault.engines.connections import ServerCollection
    from pagefault.stores.index.batched_writes import BatchedCollection
    from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
    from pagefault.stores.index.lexical_sqlite import LexicalIndex
    from pagefault.stores.index.resident_vectors import ResidentCollection
    from pagefault.stores.index.tiered_vectors import TieredCollection

    def _conforming(chroma: Collection, server: ServerCollection, resident: ResidentCollection,
                    tiered: TieredCollection, batched: BatchedCollection, sqlite: LexicalIndex,
                    postgres: PostgresLexicalIndex) -> tuple[list[VectorCollection], list[LexicalBackend]]:
        return [chroma, server, resident, tiered, batched], [sqlite, postgres]
