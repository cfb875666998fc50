"""Embedded persistence: everything in one local directory, nothing to run.

``.pagefault/`` (configurable) holds ``checkpoints.sqlite`` (LangGraph SqliteSaver: the thread
history and the source of truth for recall), ``store.sqlite`` (LangGraph SqliteStore: core
memory), ``chroma/`` and the resident files (archival and recall vectors) and ``lexical.sqlite``
(their BM25 shadow). Stop the process, start it again: everything is still there.

The directory ``open_embedded`` opens is where every tier of the runs on its store lives: the store is
bound to it (``engines.connections.Home``), so a run whose ``Context.data_dir`` is left at its
default keeps archival, recall and BM25 there too, and one whose ``data_dir`` names another
directory is refused (``SplitStorage``), never split silently. ``embeddings`` chooses the model of
the vectors for the process (``models.embedding_choice``); given, the tiers are opened at once, so
a store made by another model is refused here (``EmbeddingMismatch``) rather than at the first run.

Several processes may open one directory at once. Its ``locks`` file (``pagefault.engines.file_locks``)
makes them take turns: runs on one thread (a graph of these files is a ``SerializedGraph``), edits of
one core block, and the first-time setup of the files, which two processes starting together on a
fresh directory would otherwise race on.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Sequence

import aiosqlite
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from pagefault.engines.connections import Home, bind_home
from pagefault.engines.file_locks import FileLocks, file_locks
from pagefault.engines.locks import bind_locks
from pagefault.engines.thread_lock import THREAD_WAIT, SerializedGraph, serialized
from pagefault.graph.delta_memo import RememberingAsyncSqliteSaver, RememberingSqliteSaver
from pagefault.graph.graph import build_graph
from pagefault.models.embedding_choice import EmbeddingChoice, EmbeddingModel, embedding_model
from pagefault.persistence.compression import checkpoint_serializer
from pagefault.stores.services import MemoryServices
from pagefault.text.prompts import Prompts
from pagefault.tools.handlers import MemoryToolChoice

#: Seconds a process waits for another one's first-time setup of the directory.
SETUP_WAIT = 120.0


@dataclass
class EmbeddedPersistence:
    """The SQLite checkpointer and store of one data directory: ``data_dir`` (absolute),
    ``checkpointer`` (``checkpoints.sqlite``: threads, and so recall) and ``store``
    (``store.sqlite``: core memory). ``open_embedded`` and ``open_embedded_async`` make one; the sync
    one is a context manager that closes its connections."""

    data_dir: str
    checkpointer: SqliteSaver | AsyncSqliteSaver
    store: SqliteStore | AsyncSqliteStore

    def graph(self, *, tools: Sequence[BaseTool] = (), model: BaseChatModel | None = None,
              wait: float = THREAD_WAIT, memory_tools: MemoryToolChoice = None,
              prompts: Prompts | None = None) -> SerializedGraph:
        """A pagefault graph persisted here (``build_graph`` with this checkpointer and store), with the
        app's ``tools`` and an explicit chat ``model`` (else the one the run's ``Context`` names), and
        ``build_graph``'s ``memory_tools`` (which memory tools, how described) and ``prompts``. Its
        runs on one thread take turns with every process on this directory, waiting at most ``wait``
        seconds (then ``ThreadBusy``)."""
        return serialized(build_graph(checkpointer=self.checkpointer, store=self.store, tools=tools, model=model,
                                      memory_tools=memory_tools, prompts=prompts),
                          wait=wait, locks=self.locks)

    def serialized(self, agent: CompiledStateGraph[Any, Any, Any, Any], *, wait: float = THREAD_WAIT) -> SerializedGraph:
        """``agent`` (a graph compiled with this checkpointer, e.g. a ``create_agent`` app with
        ``PagefaultMiddleware``) with its runs on one thread taking turns with every process on this
        directory, as ``graph()``'s do; ``wait``: seconds a run waits for the thread."""
        return serialized(agent, wait=wait, locks=self.locks)

    @property
    def locks(self) -> FileLocks:
        """The directory's locks, shared by every process that opens it."""
        return file_locks(self.data_dir)

    def close(self) -> None:
        """Close the sync connections (the async variant closes itself on exit)."""
        self.checkpointer.conn.close()
        self.store.conn.close()

    def __enter__(self) -> "EmbeddedPersistence":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _connect(path: str, *, transactions: bool = False) -> sqlite3.Connection:
    """A WAL connection to ``path``. ``transactions``: Python's own transactions (each saver call commits
    once, so a process killed inside it leaves none of its rows: the checkpointer, whose step writes must
    land together); else autocommit, row by row (the store)."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level="DEFERRED" if transactions else None,
                           timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def _bound(p: EmbeddedPersistence, embeddings: EmbeddingModel | None = None) -> EmbeddedPersistence:
    """``p`` with its checkpointer and store guarded by the directory's locks (``locks_of`` finds them)
    and bound to the directory (and ``embeddings``, if given) that every tier of their runs uses."""
    for holder in (p.checkpointer, p.store):
        bind_locks(holder, p.locks)
        bind_home(holder, Home(p.data_dir, embeddings))
    return p


def _tiers(path: str, embeddings: EmbeddingChoice | None) -> EmbeddingModel | None:
    """The model of an explicit ``embeddings``, with the directory's tiers opened with it (so a store
    another model made is refused now); None when none was given (the runs' settings choose)."""
    if embeddings is None:
        return None
    model = embedding_model(embeddings)
    MemoryServices.open(path, embeddings=model)
    return model


def open_embedded(data_dir: str = ".pagefault", *, embeddings: EmbeddingChoice | None = None) -> EmbeddedPersistence:
    """Open (creating if needed) the SQLite checkpointer and store under ``data_dir``, the directory of
    every tier of their runs (see the module docstring). ``embeddings``: the model of archival and
    recall's vectors for this process (``"offline"``, an ``init_embeddings`` id, or an
    ``EmbeddingModel``); None leaves it to the runs' ``Context.embeddings``."""
    path = os.path.abspath(os.path.expanduser(data_dir))
    model = _tiers(path, embeddings)
    os.makedirs(path, exist_ok=True)
    opened: list[sqlite3.Connection] = []
    try:
        with file_locks(path).hold("setup", timeout=SETUP_WAIT):  # one process at a time makes the files
            opened.append(_connect(os.path.join(path, "checkpoints.sqlite"), transactions=True))
            opened.append(_connect(os.path.join(path, "store.sqlite")))
            saver, store = RememberingSqliteSaver(opened[0], serde=checkpoint_serializer()), SqliteStore(opened[1])
            saver.setup()
            store.setup()
    except BaseException:
        for conn in opened:
            conn.close()
        raise
    return _bound(EmbeddedPersistence(path, saver, store), model)


@asynccontextmanager
async def open_embedded_async(data_dir: str = ".pagefault", *, embeddings: EmbeddingChoice | None = None
                              ) -> AsyncIterator[EmbeddedPersistence]:
    """The same files under ``data_dir`` through LangGraph's async SQLite savers, for ``ainvoke`` and
    ``astream``: ``async with open_embedded_async(path) as p: ...`` (``embeddings`` as ``open_embedded``'s)."""
    path = os.path.abspath(os.path.expanduser(data_dir))
    os.makedirs(path, exist_ok=True)
    model = await asyncio.to_thread(_tiers, path, embeddings)
    locks = file_locks(path)
    async with aiosqlite.connect(os.path.join(path, "checkpoints.sqlite")) as conn, \
            AsyncSqliteStore.from_conn_string(os.path.join(path, "store.sqlite")) as store:
        saver = RememberingAsyncSqliteSaver(conn, serde=checkpoint_serializer())
        await asyncio.to_thread(locks.acquire, "setup", timeout=SETUP_WAIT)
        try:
            await saver.setup()
            await store.setup()
        finally:
            await asyncio.to_thread(locks.release, "setup")
        yield _bound(EmbeddedPersistence(path, saver, store), model)
