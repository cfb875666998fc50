"""Embedded persistence: everything in one local directory, nothing to run.

``.pagefault/`` (configurable) holds ``checkpoints.sqlite`` (LangGraph SqliteSaver: the thread
history and the source of truth for recall), ``store.sqlite`` (LangGraph SqliteStore: core
memory), ``chroma/`` (archival and recall vectors) and ``lexical.sqlite`` (their BM25 shadow).
Stop the process, start it again: everything is still there.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.sqlite import SqliteStore

from pagefault.graph.graph import build_graph


@dataclass
class EmbeddedPersistence:
    """The SQLite checkpointer and store of one data directory."""

    data_dir: str
    checkpointer: SqliteSaver
    store: SqliteStore

    def graph(self, *, tools: Sequence[BaseTool] = (), model: BaseChatModel | None = None) -> CompiledStateGraph:
        """A pagefault graph persisted here."""
        return build_graph(checkpointer=self.checkpointer, store=self.store, tools=tools, model=model)

    def close(self) -> None:
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
