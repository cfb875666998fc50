"""The external memory of one data directory: Chroma, the BM25 shadow and the embedding.

Opened once per process and shared by every graph and thread that uses the directory. With a
Chroma server URL the vectors live on that server, and with a database URL as well the BM25
shadow lives in Postgres, so replicas share both (see ``pagefault.engines.connections``).
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.collection_configuration import UpdateHNSWConfiguration
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings

from pagefault.engines import connections as backends
from pagefault.engines.file_locks import file_locks
from pagefault.models.embeddings import OfflineEmbeddings
from pagefault.stores.archival import ArchivalStore
from pagefault.stores.index.hybrid import HybridIndex
from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
from pagefault.stores.index.lexical_sqlite import LexicalIndex
from pagefault.stores.index.protocols import LexicalBackend, VectorCollection
from pagefault.stores.index.resident_vectors import ResidentCollection
from pagefault.stores.index.tiered_vectors import TieredCollection
from pagefault.stores.recall import RecallIndex

#: Chroma keeps writes in a log and folds them into its HNSW index every ``sync_threshold`` records
#: (default 1,000); each write costs more the longer that log is (1 record into 100k: 7 ms just after a
#: fold, 15 ms before the next), while a fold of 100 costs one write ~50 ms. So fold every 100.
HNSW_WRITES: UpdateHNSWConfiguration = {"sync_threshold": 100, "batch_size": 100}
#: Where recall's vectors live on the embedded setup (``resident_vectors``), beside ``lexical.sqlite``.
RECALL_FILE = "recall.sqlite"
#: Where archival's recent small writes wait to move to Chroma on the embedded setup (``tiered``).
ARCHIVAL_RECENT_FILE = "archival_recent.sqlite"

log = logging.getLogger(__name__)
_open: dict[tuple[str, str, str], "MemoryServices"] = {}
_lock = threading.Lock()


@dataclass
class MemoryServices:
    """The external memory of one data directory (see the module docstring): ``embeddings`` (the
    local MiniLM), the ``archival`` store and the ``recall`` index, the Chroma ``client`` they use,
    and where they live (``data_dir``; ``chroma_url`` for a Chroma server, ``database_url`` for a
    Postgres BM25 shadow, each '' when embedded). Get one with ``MemoryServices.open``."""

    data_dir: str
    embeddings: OfflineEmbeddings
    archival: ArchivalStore
    recall: RecallIndex
    client: ClientAPI
    chroma_url: str = ""
    database_url: str = ""  # set when the BM25 shadow is in Postgres

    def turn_over(self) -> None:
        """The turn's answer is out: the write-behind threads (recall's writer, archival's journal) stop
        lingering for more of it and write now, in the pause before the next turn, instead of when that
        turn's search or compaction has to wait for them."""
        self.recall.writer.hurry()
        if self.archival.journal is not None:
            self.archival.journal.hurry()

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
        with _lock, _first_open(path, key, embedded=not (server and shared)):
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
                    def make(c: ClientAPI) -> Collection:
                        col = c.get_or_create_collection(
                            # chromadb wants an EmbeddingFunction of documents or images, whose ``embed_query``
                            # clashes with LangChain's: this one embeds text, as a LangChain ``Embeddings``.
                            f"pagefault_{kind}", embedding_function=emb,  # type: ignore[arg-type]
                            configuration={"hnsw": {"space": "cosine", **HNSW_WRITES}},
                        )
                        return with_short_write_log(col)

                    col: VectorCollection = backends.server_collection(client, server, kind, make) if server \
                        else make(client)
                    lexical: LexicalBackend = PostgresLexicalIndex(shared, kind) if shared \
                        else LexicalIndex(index_path, kind)
                    # A Chroma server with the BM25 file here: other hosts may write what this file lacks.
                    return HybridIndex(col, lexical, emb, shadow_is_complete=not (server and not shared))

                if server:
                    recall = RecallIndex(hybrid("recall"), hybrid("recall_unit"))
                else:  # recall's many writes stay off Chroma's GIL-holding writer (``resident_vectors``)
                    recall = RecallIndex(*(resident_hybrid(client, path, kind, emb) for kind in ("recall", "recall_unit")))
                # One process owns an embedded directory, so it may write archival inserts behind the turn,
                # and keep its small writes off Chroma's GIL-holding writer until they are many (``tiered``).
                archival_index = hybrid("archival")
                if not server:
                    archival_index.collection = TieredCollection(
                        archival_index.collection, ResidentCollection(os.path.join(path, ARCHIVAL_RECENT_FILE),
                                                                      "pagefault_archival"))
                archival = ArchivalStore(archival_index, journal_path=None if server else index_path)
                _open[key] = cls(path, emb, archival, recall, client, server, shared)
            return _open[key]


@contextmanager
def _first_open(path: str, key: tuple[str, str, str], *, embedded: bool) -> Iterator[None]:
    """The directory's setup lock while this process first opens it (``open`` holds ``_lock``): two
    processes making a fresh directory's Chroma and SQLite files at once would race on them."""
    if key in _open or not embedded:
        yield
        return
    os.makedirs(path, exist_ok=True)
    with file_locks(path).hold("setup", timeout=120.0):
        yield


def resident_hybrid(client: ClientAPI, path: str, kind: str, emb: OfflineEmbeddings, *, page: int = 2_000) -> HybridIndex:
    """A recall index on the embedded setup: vectors in ``recall.sqlite``, BM25 in ``lexical.sqlite``.

    A directory written before recall left Chroma has its records in Chroma's ``pagefault_<kind>``;
    those not here yet are copied over when it is opened (so a copy cut short resumes; the Chroma
    collection is left as it was)."""
    name = f"pagefault_{kind}"
    col = ResidentCollection(os.path.join(path, RECALL_FILE), name)
    if not col.noted("copied from chroma") and name in {
            c if isinstance(c, str) else c.name for c in client.list_collections()}:
        old: VectorCollection = client.get_collection(name)
        offset = 0
        while True:
            got = old.get(include=["documents", "metadatas", "embeddings"], limit=page, offset=offset)
            have = set(col.get(ids=list(got["ids"]), include=[])["ids"])
            new = [n for n, i in enumerate(got["ids"]) if i not in have]
            if new:
                col.upsert(ids=[got["ids"][n] for n in new], embeddings=[got["embeddings"][n] for n in new],
                           metadatas=[got["metadatas"][n] for n in new], documents=[got["documents"][n] for n in new])
            if len(got["ids"]) < page:
                break
            offset += page
        col.note("copied from chroma")
    return HybridIndex(col, LexicalIndex(os.path.join(path, "lexical.sqlite"), kind), emb)


def with_short_write_log(col: Collection) -> Collection:
    """A collection made before ``HNSW_WRITES`` is changed to it (the setting persists in Chroma)."""
    try:
        hnsw = (col.configuration or {}).get("hnsw") or {}
        if hnsw.get("sync_threshold", HNSW_WRITES["sync_threshold"]) > HNSW_WRITES["sync_threshold"]:
            col.modify(configuration={"hnsw": HNSW_WRITES.copy()})
    except Exception as exc:  # only a speed setting: an older server may refuse it
        log.warning("could not shorten Chroma's write log of %s: %s", col.name, exc)
    return col
