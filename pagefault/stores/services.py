"""The external memory of one data directory: Chroma, the BM25 shadow and the embedding.

Opened once per process and shared by every graph and thread that uses the directory. With a
Chroma server URL the vectors live on that server, and with a database URL as well the BM25
shadow lives in Postgres, so replicas share both (see ``pagefault.backends``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import chromadb
from chromadb.config import Settings

from pagefault import backends
from pagefault.embeddings import OfflineEmbeddings
from pagefault.stores.archival import ArchivalStore
from pagefault.stores.hybrid import HybridIndex
from pagefault.stores.lexical import LexicalIndex
from pagefault.stores.pg_lexical import PostgresLexicalIndex
from pagefault.stores.recall import RecallIndex

_open: dict[tuple[str, str, str], "MemoryServices"] = {}
_lock = threading.Lock()


@dataclass
class MemoryServices:
    data_dir: str
    embeddings: OfflineEmbeddings
    archival: ArchivalStore
    recall: RecallIndex
    client: object
    chroma_url: str = ""
    database_url: str = ""  # set when the BM25 shadow is in Postgres

    @classmethod
    def open(cls, data_dir: str, *, chroma_url: str | None = None, database_url: str | None = None
             ) -> "MemoryServices":
        """The services for ``data_dir``, created on first use (the directory is made if missing).

        ``chroma_url`` and ``database_url`` default to ``PAGEFAULT_CHROMA_URL`` and ``PAGEFAULT_DATABASE_URL``.
        """
        path = os.path.abspath(os.path.expanduser(data_dir))
        server = backends.chroma_url(chroma_url)
        # The BM25 shadow goes where the vectors go: beside a local Chroma, or shared beside a server.
        shared = backends.database_url(database_url) if server else ""
        key = (path, server, shared)
        with _lock:
            if key not in _open:
                if not (server and shared):
                    os.makedirs(path, exist_ok=True)
                client = backends.chroma_client(server) if server else chromadb.PersistentClient(
                    path=os.path.join(path, "chroma"),
                    settings=Settings(anonymized_telemetry=False, allow_reset=False),
                )
                emb = OfflineEmbeddings()
                index_path = os.path.join(path, "lexical.sqlite")

                def hybrid(kind: str) -> HybridIndex:
                    def make(c: object) -> object:
                        return c.get_or_create_collection(  # type: ignore[attr-defined]
                            f"pagefault_{kind}", embedding_function=emb,
                            configuration={"hnsw": {"space": "cosine"}},
                        )

                    col = backends.server_collection(client, server, kind, make) if server else make(client)
                    lexical = PostgresLexicalIndex(shared, kind) if shared else LexicalIndex(index_path, kind)
                    # A Chroma server with the BM25 file here: other hosts may write what this file lacks.
                    return HybridIndex(col, lexical, emb, shadow_is_complete=not (server and not shared))

                recall = RecallIndex(hybrid("recall"), hybrid("recall_unit"))
                # One process owns an embedded directory, so it may write archival inserts behind the turn.
                archival = ArchivalStore(hybrid("archival"), journal_path=None if server else index_path)
                _open[key] = cls(path, emb, archival, recall, client, server, shared)
            return _open[key]
