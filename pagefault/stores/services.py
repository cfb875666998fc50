"""The external memory of one data directory: Chroma, the BM25 shadow and the embedding.

Opened once per process and shared by every graph and thread that uses the directory. With a
Chroma server URL the vectors live on that server, and with a database URL as well the BM25
shadow lives in Postgres, so replicas share both (see ``pagefault.engines.connections``).

The embedding is the process's choice (``models.embedding_choice``: the offline joint model unless told;
a store the former default, MiniLM, made keeps MiniLM until ``pagefault reindex`` moves it).
Each tier's vector collection records the model that made it (``stores.index.embedding_record``), and
is opened only by that model: a store another model made is refused before anything is written.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.collection_configuration import UpdateHNSWConfiguration
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings

from pagefault.engines import connections as backends
from pagefault.engines.directory_use import hold_shared, release
from pagefault.engines.file_locks import file_locks
from pagefault.models.embedding_choice import (
    DEFAULT,
    FORMER_DEFAULT,
    ArrayEmbedding,
    EmbeddingChoice,
    EmbeddingModel,
    EmbeddingsError,
    choice_name,
    embedding_model,
    opens_as,
)
from pagefault.stores.archival import ArchivalStore
from pagefault.stores.index.batched_writes import BatchedCollection, write_limit
from pagefault.stores.index.embedding_record import (
    KINDS,
    ChromaCatalog,
    EmbeddingMismatch,
    Opening,
    RecordedCollections,
    TieredCatalog,
    chroma_function,
    legacy_name,
    opened,
    opening,
)
from pagefault.stores.index.hybrid import HybridIndex
from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
from pagefault.stores.index.lexical_sqlite import LexicalIndex
from pagefault.stores.index.protocols import LexicalBackend, VectorCollection
from pagefault.stores.index.resident_vectors import ResidentCatalog, ResidentCollection
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
    process's ``EmbeddingModel``, the offline joint model unless chosen), the ``archival`` store and the
    ``recall`` index, the Chroma ``client`` they use, and where they live (``data_dir``; ``chroma_url``
    for a Chroma server, ``database_url`` for a Postgres BM25 shadow, each '' when embedded);
    ``collections``: the vector collection each tier uses, by kind (``embedding_record``). Get one with
    ``MemoryServices.open``."""

    data_dir: str
    embeddings: EmbeddingModel
    archival: ArchivalStore
    recall: RecallIndex
    client: ClientAPI
    chroma_url: str = ""
    database_url: str = ""  # set when the BM25 shadow is in Postgres
    collections: dict[str, str] = field(default_factory=dict)

    def turn_over(self) -> None:
        """The turn's answer is out: the write-behind threads (recall's writer, archival's journal) stop
        lingering for more of it and write now, in the pause before the next turn, instead of when that
        turn's search or compaction has to wait for them."""
        self.recall.writer.hurry()
        if self.archival.journal is not None:
            self.archival.journal.hurry()

    @classmethod
    def open(cls, data_dir: str, *, chroma_url: str | None = None, database_url: str | None = None,
             embeddings: EmbeddingChoice | None = None) -> "MemoryServices":
        """The services for ``data_dir``, created on first use (the directory is made if missing).

        ``chroma_url`` and ``database_url`` default to ``PAGEFAULT_CHROMA_URL`` and ``PAGEFAULT_DATABASE_URL``.
        ``embeddings`` (``models.embedding_choice``): the model of archival and recall's vectors; None
        takes the one the directory is already open with in this process, else ``PAGEFAULT_EMBEDDINGS``,
        else the default, ``"offline-joint"`` (which opens a store the former default, MiniLM, made with
        MiniLM, and logs a warning saying to reindex). The store's collections must have been made by that model
        (``EmbeddingMismatch`` otherwise, which says to run ``pagefault reindex``); a directory open in
        this process with one model is not opened with another (``EmbeddingsError``).
        """
        path = os.path.abspath(os.path.expanduser(data_dir))
        server = backends.chroma_url(chroma_url)
        # The BM25 shadow goes where the vectors go: beside a local Chroma, or shared beside a server.
        shared = backends.database_url(database_url) if server else ""
        key = (path, server, shared)
        with _lock, _first_open(path, key, embedded=not (server and shared)):
            found = _open.get(key)
            if found is None:
                found = _open[key] = cls._made(path, server, shared, embedding_model(embeddings))
            elif embeddings is not None and not opens_as(choice_name(embeddings), found.embeddings.name):
                raise EmbeddingsError(
                    f"{server or path} is open in this process with embeddings {found.embeddings.name!r}; it is not "
                    f"opened with {choice_name(embeddings)!r} as well (one embedding per store and process)")
            return found

    @classmethod
    def _made(cls, path: str, server: str, shared: str, model: EmbeddingModel) -> "MemoryServices":
        """The services of a directory this process has not opened yet (``open`` holds the locks)."""
        if not (server and shared):
            os.makedirs(path, exist_ok=True)
        client = backends.chroma_client(server) if server else chromadb.PersistentClient(
            path=os.path.join(path, "chroma"),
            settings=Settings(anonymized_telemetry=False, allow_reset=False),
        )
        try:
            chroma, names = _opened_tiers(client, path, server, model)
        except EmbeddingMismatch as e:
            if e.recorded.model == model.name or not opens_as(model.name, e.recorded.model):
                raise  # another model, or this one's name with other dimensions
            # A store the former default made keeps it until a reindex moves it (``FORMER_DEFAULT``).
            log.warning("%s was embedded by %r, pagefault's default before %r: it is searched with %r until "
                        "`pagefault reindex --embeddings %s` moves it to the default", e.where, FORMER_DEFAULT,
                        DEFAULT, FORMER_DEFAULT, DEFAULT)
            model = EmbeddingModel.offline()
            chroma, names = _opened_tiers(client, path, server, model)
        index_path = os.path.join(path, "lexical.sqlite")
        limit = write_limit(client)  # the most records one Chroma write takes (``batched_writes``)

        def hybrid(kind: str, name: str) -> HybridIndex:
            col: VectorCollection = BatchedCollection(
                backends.server_collection(client, server, name, lambda _: chroma.collection(name))
                if server else chroma.collection(name), limit)
            lexical: LexicalBackend = PostgresLexicalIndex(shared, kind) if shared else LexicalIndex(index_path, kind)
            # A Chroma server with the BM25 file here: other hosts may write what this file lacks.
            return HybridIndex(col, lexical, model, shadow_is_complete=not (server and not shared))

        if server:
            recall = RecallIndex(hybrid("recall", names["recall"]), hybrid("recall_unit", names["recall_unit"]))
        else:  # recall's many writes stay off Chroma's GIL-holding writer (``resident_vectors``)
            recall = RecallIndex(*(resident_hybrid(client, path, kind, model, name=names[kind])
                                   for kind in ("recall", "recall_unit")))
        # One process owns an embedded directory, so it may write archival inserts behind the turn from a
        # journal in that directory, and keep its small writes off Chroma's GIL-holding writer until they
        # are many (``tiered``). Replicas sharing a server and a database journal in that database, where
        # any of them (or the next to start) writes what a killed one left (``shared_journal``).
        archival_index = hybrid("archival", names["archival"])
        if not server:
            archival_index.collection = TieredCollection(
                archival_index.collection, ResidentCollection(os.path.join(path, ARCHIVAL_RECENT_FILE), names["archival"]))
        archival = ArchivalStore(archival_index, journal_path=None if server else index_path,
                                 shared_journal=bool(server and shared))
        return cls(path, model, archival, recall, client, server, shared, names)

    @classmethod
    def forget(cls, data_dir: str) -> None:
        """Drop this process's services of ``data_dir`` (every setup), after their write-behind threads
        have written what they hold, and stop holding the directory's use (``directory_use``): the next
        ``open`` reads the directory afresh (after a reindex), and meanwhile a reindex may run."""
        path = os.path.abspath(os.path.expanduser(data_dir))
        with _lock:
            for key in [k for k in _open if k[0] == path]:
                svc = _open.pop(key)
                svc.recall.writer.flush()
                if svc.archival.journal is not None:
                    svc.archival.journal.flush()
            release(path)


def _opened_tiers(client: ClientAPI, path: str, server: str, model: EmbeddingModel) -> tuple[ChromaCatalog, dict[str, str]]:
    """The Chroma catalog for ``model`` and the collection each tier uses. Every tier is checked against
    the model before any is made or written (``EmbeddingMismatch`` if another model made one)."""
    chroma = chroma_catalog(client, path, server, model)
    if server:
        plans: list[tuple[RecordedCollections, str, Opening]] = [
            (chroma, kind, opening(chroma, kind, model)) for kind in KINDS]
        return chroma, {kind: opened(place, plan) for place, kind, plan in plans}
    with local_catalogs(chroma, path) as (tiered, recall_file):
        plans = [(tiered, "archival", opening(tiered, "archival", model)),
                 *((recall_file, kind, opening(recall_file, kind, model)) for kind in ("recall", "recall_unit"))]
        return chroma, {kind: opened(place, plan) for place, kind, plan in plans}


def chroma_catalog(client: ClientAPI, path: str, server: str, model: EmbeddingModel) -> ChromaCatalog:
    """The pagefault collections of ``client`` (the directory's Chroma at ``path``, or the ``server``'s),
    opened for ``model`` as ``open`` opens them."""
    return ChromaCatalog(client, server or path, url=server, configuration={"hnsw": {"space": "cosine", **HNSW_WRITES}},
                         function=chroma_function(model), prepare=with_short_write_log)


@contextmanager
def local_catalogs(chroma: ChromaCatalog, path: str) -> Iterator[tuple[TieredCatalog, ResidentCatalog]]:
    """An embedded directory's places of vectors: archival (Chroma and ``archival_recent.sqlite``) and
    recall's file (whose old collections may still be in Chroma, not yet copied)."""
    listed = chroma.names()
    recent = ResidentCatalog(os.path.join(path, ARCHIVAL_RECENT_FILE))
    recall_file = ResidentCatalog(os.path.join(path, RECALL_FILE), elsewhere=frozenset(
        legacy_name(kind) for kind in ("recall", "recall_unit") if legacy_name(kind) in listed))
    try:
        yield TieredCatalog(chroma, recent), recall_file
    finally:
        recent.close()
        recall_file.close()


@contextmanager
def _first_open(path: str, key: tuple[str, str, str], *, embedded: bool) -> Iterator[None]:
    """The directory's setup lock while this process first opens it (``open`` holds ``_lock``): two
    processes making a fresh directory's Chroma and SQLite files at once would race on them. The
    process then holds the directory's use (``directory_use``) until it exits."""
    if key in _open or not embedded:
        yield
        return
    os.makedirs(path, exist_ok=True)
    with file_locks(path).hold("setup", timeout=120.0):
        hold_shared(path)
        yield


def resident_hybrid(client: ClientAPI, path: str, kind: str, emb: ArrayEmbedding, *, name: str | None = None,
                    page: int = 2_000) -> HybridIndex:
    """A recall index on the embedded setup: vectors in ``recall.sqlite`` (collection ``name``, by default
    the offline model's ``pagefault_<kind>``), BM25 in ``lexical.sqlite``."""
    name = name or legacy_name(kind)
    col = ResidentCollection(os.path.join(path, RECALL_FILE), name)
    if name == legacy_name(kind):
        copy_from_chroma(client, col, page=page)
    return HybridIndex(col, LexicalIndex(os.path.join(path, "lexical.sqlite"), kind), emb)


def copy_from_chroma(client: ClientAPI, col: ResidentCollection, *, page: int = 2_000) -> None:
    """A directory written before recall left Chroma has its records in Chroma's collection of the same
    name (the offline model's); those not in ``col`` yet are copied over (so a copy cut short resumes;
    the Chroma collection is left as it was), and the copy is noted done."""
    name = col.name
    if not col.noted("copied from chroma") and name in {
            c if isinstance(c, str) else c.name for c in client.list_collections()}:
        old: VectorCollection = client.get_collection(name, embedding_function=None)
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


def with_short_write_log(col: Collection) -> Collection:
    """A collection made before ``HNSW_WRITES`` is changed to it (the setting persists in Chroma)."""
    try:
        hnsw = (col.configuration or {}).get("hnsw") or {}
        if hnsw.get("sync_threshold", HNSW_WRITES["sync_threshold"]) > HNSW_WRITES["sync_threshold"]:
            col.modify(configuration={"hnsw": HNSW_WRITES.copy()})
    except Exception as exc:  # only a speed setting: an older server may refuse it
        log.warning("could not shorten Chroma's write log of %s: %s", col.name, exc)
    return col
