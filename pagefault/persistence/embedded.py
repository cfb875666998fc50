"""Embedded persistence: everything in one local directory, nothing to run.

``.pagefault/`` (configurable) holds ``checkpoints.sqlite`` (LangGraph SqliteSaver: the thread
history and the source of truth for recall), ``store.sqlite`` (LangGraph SqliteStore: core
memory), ``chroma/`` (archival and recall vectors) and ``lexical.sqlite`` (their BM25 shadow).
Stop the process, start it again: everything is still there.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from pagefault.graph.graph import PagefaultGraph, build_graph


@dataclass
class EmbeddedPersistence:
    """The SQLite checkpointer and store of one data directory: ``data_dir`` (absolute),
    ``checkpointer`` (``checkpoints.sqlite``: threads, and so recall) and ``store``
    (``store.sqlite``: core memory). ``open_embedded`` and ``open_embedded_async`` make one; the sync
    one is a context manager that closes its connections."""

    data_dir: str
    checkpointer: SqliteSaver | AsyncSqliteSaver
    store: SqliteStore | AsyncSqliteStore

    def graph(self, *, tools: Sequence[BaseTool] = (), model: BaseChatModel | None = None) -> PagefaultGraph:
        """A pagefault graph persisted here (``build_graph`` with this checkpointer and store), with the
        app's ``tools`` and an explicit chat ``model`` (else the one the run's ``Context`` names)."""
        return build_graph(checkpointer=self.checkpointer, store=self.store, tools=tools, model=model)

    def close(self) -> None:
        """Close the sync connections (the async variant closes itself on exit)."""
        self.checkpointer.conn.close()
        self.store.conn.close()

    def __enter__(self) -> "EmbeddedPersistence":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def open_embedded(data_dir: str = ".pagefault") -> EmbeddedPersistence:
    """Open (creating if needed) the SQLite checkpointer and store under ``data_dir``."""
    path = os.path.abspath(os.path.expanduser(data_dir))
    os.makedirs(path, exist_ok=True)
    saver = SqliteSaver(_connect(os.path.join(path, "checkpoints.sqlite")))
    saver.setup()
    store = SqliteStore(_connect(os.path.join(path, "store.sqlite")))
    store.setup()
    return EmbeddedPersistence(path, saver, store)


@asynccontextmanager
async def open_embedded_async(data_dir: str = ".pagefault") -> AsyncIterator[EmbeddedPersistence]:
    """The same files under ``data_dir`` through LangGraph's async SQLite savers, for ``ainvoke`` and
    ``astream``: ``async with open_embedded_async(path) as p: ...``."""
    path = os.path.abspath(os.path.expanduser(data_dir))
    os.makedirs(path, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(os.path.join(path, "checkpoints.sqlite")) as saver, \
            AsyncSqliteStore.from_conn_string(os.path.join(path, "store.sqlite")) as store:
        await saver.setup()
        await store.setup()
        yield EmbeddedPersistence(path, saver, store)
