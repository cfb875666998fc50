"""Postgres persistence: threads and core memory in one database that every replica shares.

``open_postgres(url)`` is ``open_embedded``'s counterpart: LangGraph's own ``PostgresSaver`` (the
thread history, the source of truth for recall) and ``PostgresStore`` (core memory), over one
connection pool, their tables made on first use. Setup is idempotent and takes an advisory lock,
so replicas starting together do not race on it. The saver and store are bound to the database's
advisory locks (``engines.locks.bind_locks``), which every replica opened on the same URL shares. Graphs
it builds are ``SerializedGraph``: runs on one thread take turns across replicas, and every step is
checkpointed before the next.

``open_persistence()`` picks Postgres when ``PAGEFAULT_DATABASE_URL`` is set, else the embedded
SQLite files. ``checkpointer`` and ``store`` are for a LangGraph server's ``langgraph.json``
(``langgraph.postgres.json`` in the repository): the server runs the graph on Postgres too.

Archival and recall vectors are set apart, by ``PAGEFAULT_CHROMA_URL`` (``pagefault.engines.connections``).
Without a Chroma server they live in the run's ``Context.data_dir``; ``embeddings`` chooses their model
for the process, as ``open_embedded``'s does.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Sequence, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from pagefault.engines import connections as backends
from pagefault.engines.connections import CONNECT_TIMEOUT, Home, bind_home, is_postgres_down, postgres_unavailable
from pagefault.engines.langgraph_private import set_delta_page_size
from pagefault.engines.locks import AdvisoryLocks, bind_locks, locks_for
from pagefault.engines.thread_lock import THREAD_WAIT, SerializedGraph, serialized
from pagefault.graph.delta_memo import RememberingAsyncPostgresSaver, RememberingPostgresSaver
from pagefault.graph.graph import build_graph
from pagefault.models.embedding_choice import EmbeddingChoice, embedding_model
from pagefault.persistence.compression import checkpoint_serializer
from pagefault.persistence.embedded import EmbeddedPersistence, open_embedded
from pagefault.stores.services import MemoryServices

#: Connections per process for the checkpointer and the store together.
POOL_SIZE = 8
_POOL_KWARGS = {"autocommit": True, "prepare_threshold": 0, "connect_timeout": int(CONNECT_TIMEOUT)}
#: Checkpoints LangGraph's Postgres savers read per query when they rebuild delta channels (theirs:
#: 1,024). A read walks back to the channels' last full values, about fifty checkpoints
#: (``graph.state.DeltaSpec``), but each page is read whole, so on a thread past 1,024 checkpoints
#: (about 200 turns) every turn read 1,024 rows for fifty: 73 ms here, against 19 at 128 rows. The
#: page size changes how many rows a query asks for, never what a read gives back.
DELTA_PAGE_ROWS = 128


def lean_delta_reads() -> None:
    """Have LangGraph's Postgres savers, sync and async, read ``DELTA_PAGE_ROWS`` checkpoints a page.
    (A private module constant of theirs, set in ``engines.langgraph_private``: the savers take no such
    setting. It holds for the whole process.)"""
    set_delta_page_size(DELTA_PAGE_ROWS)


def _bind_advisory(url: str, *holders: Any) -> AdvisoryLocks:
    """The advisory locks of the database at ``url``, bound to the saver and store opened on it: what they
    keep is guarded by those locks (``engines.locks.locks_of``), in every process opened on that URL."""
    locks = locks_for(url)
    for holder in holders:
        bind_locks(holder, locks)
    return locks


def _required(url: str | None) -> str:
    found = backends.database_url(url)
    if not found:
        raise ValueError("no database URL: pass one or set PAGEFAULT_DATABASE_URL=postgresql://user@host:5432/db")
    return found


@dataclass
class PostgresPersistence:
    """The Postgres checkpointer and store of one database (sync or async, as opened)."""

    database_url: str
    checkpointer: Any
    store: Any
    pool: Any
    data_dir: str = field(default_factory=lambda: os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"))

    def graph(self, *, tools: Sequence[BaseTool] = (), model: BaseChatModel | None = None,
              wait: float = THREAD_WAIT) -> SerializedGraph:
        """A pagefault graph persisted here, whose runs on one thread take turns across replicas."""
        compiled = build_graph(checkpointer=self.checkpointer, store=self.store, tools=tools, model=model)
        return serialized(compiled, wait=wait, locks=locks_for(self.database_url))

    def close(self) -> None:
        """Close the sync pool (the async variant closes itself on exit)."""
        self.pool.close()

    def __enter__(self) -> "PostgresPersistence":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_postgres(url: str | None = None, *, data_dir: str | None = None,
                  embeddings: EmbeddingChoice | None = None) -> PostgresPersistence:
    """Open the Postgres checkpointer and store at ``url`` (default ``PAGEFAULT_DATABASE_URL``), making
    their tables if needed; ``ServiceUnavailable`` if the database cannot be reached. ``data_dir``: where
    the vectors live without a Chroma server (for the CLI: a run's ``Context.data_dir`` says it for the
    run); ``embeddings``: their model for this process (the tiers of ``data_dir`` are then opened at once,
    so a store another model made is refused here, and the runs on this store embed with it)."""
    from langgraph.store.postgres import PostgresStore
    from psycopg import Connection
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import ConnectionPool

    url = _required(url)
    # row_factory=dict_row makes every connection a Connection[DictRow]; the pool's type cannot follow
    # its kwargs, so it would say Connection[TupleRow].
    pool = cast("ConnectionPool[Connection[DictRow]]", ConnectionPool(
        url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT, open=True,
        check=backends.check_pooled, name="pagefault-langgraph",
        kwargs={**_POOL_KWARGS, "row_factory": dict_row}))
    lean_delta_reads()
    saver, store = RememberingPostgresSaver(pool, serde=checkpoint_serializer()), PostgresStore(pool)
    locks = _bind_advisory(url, saver, store)
    try:
        with locks.hold("setup", "langgraph", timeout=60):
            saver.setup()
            store.setup()
    except Exception as e:
        pool.close()
        if is_postgres_down(e):
            raise postgres_unavailable(url, e) from e
        raise
    p = PostgresPersistence(url, saver, store, pool)
    if data_dir is not None:
        p.data_dir = data_dir
    if embeddings is not None:
        model = embedding_model(embeddings)
        MemoryServices.open(p.data_dir, database_url=url, embeddings=model)
        for holder in (saver, store):
            bind_home(holder, Home(None, model))
    return p


def open_persistence(data_dir: str = ".pagefault", database_url: str | None = None, *,
                     embeddings: EmbeddingChoice | None = None) -> EmbeddedPersistence | PostgresPersistence:
    """Postgres when a database URL is given or ``PAGEFAULT_DATABASE_URL`` is set, else the embedded
    SQLite files under ``data_dir``; ``embeddings`` as ``open_embedded``'s."""
    url = backends.database_url(database_url)
    return open_postgres(url, data_dir=data_dir, embeddings=embeddings) if url else \
        open_embedded(data_dir, embeddings=embeddings)


@asynccontextmanager
async def open_postgres_async(url: str | None = None) -> AsyncIterator[PostgresPersistence]:
    """The same database through LangGraph's async Postgres saver and store, for ``ainvoke``/``astream``."""
    async with _async_pool(_required(url)) as (found, pool):
        saver, store = await _async_setup(found, pool)
        yield PostgresPersistence(found, saver, store, pool)


@asynccontextmanager
async def _async_pool(url: str) -> AsyncIterator[tuple[str, Any]]:
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT, open=False,
                               check=backends.check_pooled_async, name="pagefault-langgraph",
                               kwargs={**_POOL_KWARGS, "row_factory": dict_row})
    await pool.open()
    try:
        yield url, pool
    finally:
        await pool.close()


async def _async_setup(url: str, pool: Any) -> tuple[Any, Any]:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    lean_delta_reads()
    saver, store = RememberingAsyncPostgresSaver(pool, serde=checkpoint_serializer()), AsyncPostgresStore(pool)
    locks = _bind_advisory(url, saver, store)
    await asyncio.to_thread(locks.acquire, "setup", "langgraph", timeout=60)
    try:
        await saver.setup()
        await store.setup()
    except Exception as e:
        if is_postgres_down(e):
            raise postgres_unavailable(url, e) from e
        raise
    finally:
        await asyncio.to_thread(locks.release, "setup", "langgraph")
    return saver, store


@asynccontextmanager
async def checkpointer() -> AsyncIterator[Any]:
    """The LangGraph server's checkpointer on ``PAGEFAULT_DATABASE_URL`` (``langgraph.json``:
    ``"checkpointer": {"backend": "custom", "path": "pagefault.persistence.postgres.checkpointer"}``)."""
    async with open_postgres_async() as p:
        yield p.checkpointer


@asynccontextmanager
async def store() -> AsyncIterator[Any]:
    """The LangGraph server's store on ``PAGEFAULT_DATABASE_URL`` (``langgraph.json``:
    ``"store": {"path": "pagefault.persistence.postgres.store"}``): core memory lives there."""
    async with open_postgres_async() as p:
        yield p.store
