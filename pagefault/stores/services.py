"""The external memory of one data directory: Chroma, the BM25 shadow and the embedding.

Opened once per process and shared by every graph and thread that uses the directory.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import chromadb
from chromadb.config import Settings

from pagefault.embeddings import OfflineEmbeddings
from pagefault.stores.archival import ArchivalStore
from pagefault.stores.hybrid import HybridIndex
from pagefault.stores.lexical import LexicalIndex
from pagefault.stores.recall import RecallIndex

_open: dict[str, "MemoryServices"] = {}
_lock = threading.Lock()


@dataclass
class MemoryServices:
    data_dir: str
    embeddings: OfflineEmbeddings
    archival: ArchivalStore
    recall: RecallIndex
    client: object

    @classmethod
    def open(cls, data_dir: str) -> "MemoryServices":
        """The services for ``data_dir``, created on first use (the directory is made if missing)."""
        path = os.path.abspath(os.path.expanduser(data_dir))
        with _lock:
            if path not in _open:
                os.makedirs(path, exist_ok=True)
                client = chromadb.PersistentClient(
                    path=os.path.join(path, "chroma"),
                    settings=Settings(anonymized_telemetry=False, allow_reset=False),
                )
                emb = OfflineEmbeddings()
                index_path = os.path.join(path, "lexical.sqlite")

                def hybrid(kind: str) -> HybridIndex:
                    col = client.get_or_create_collection(
                        f"pagefault_{kind}", embedding_function=emb,
                        configuration={"hnsw": {"space": "cosine"}},
                    )
                    return HybridIndex(col, LexicalIndex(index_path, kind), emb)

                recall = RecallIndex(hybrid("recall"), hybrid("recall_unit"))
                _open[path] = cls(path, emb, ArchivalStore(hybrid("archival")), recall, client)
            return _open[path]
