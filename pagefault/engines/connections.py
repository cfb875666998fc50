"""Which engines hold the memory, and one clear error when one of them is down.

- embedded (the default): SQLite files and a Chroma directory under ``data_dir``; one process.
- ``PAGEFAULT_DATABASE_URL=postgresql://...``: threads (the checkpointer) and core memory (the store)
  in Postgres, through LangGraph's own Postgres implementations (``pagefault.persistence.postgres``).
- ``PAGEFAULT_CHROMA_URL=http://host:port``: archival and recall vectors on a Chroma server. With a
  database URL as well, their BM25 shadow lives in Postgres too, so every replica searches the same
  index; without one it stays in ``lexical.sqlite`` beside the process.

A connection that fails surfaces as ``ServiceUnavailable``, naming the service and where it was
looked for (never a password), so whoever runs the agent knows which engine to bring back.
"""

from __future__ import annotations

import os
import select
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from pagefault.models.embedding_choice import DEFAULT, EmbeddingChoice, EmbeddingModel
from pagefault.models.embedding_choice import ENV as EMBEDDINGS_ENV

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import (
        ID,
        Document,
        Embedding,
        GetResult,
        IDs,
        Include,
        Metadata,
        OneOrMany,
        PyEmbedding,
        QueryResult,
        Where,
    )

T = TypeVar("T")

POSTGRES = "PostgreSQL"
CHROMA = "Chroma server"
#: Seconds a caller waits for a database connection before the database counts as down.
CONNECT_TIMEOUT = 5.0


class ServiceUnavailable(ConnectionError):
    """An engine pagefault needs could not be reached; ``service`` names it, ``where`` says where."""

    def __init__(self, service: str, where: str, detail: str) -> None:
        self.service, self.where, self.detail = service, where, detail
        super().__init__(f"{service} at {where} is unreachable: {detail}")


def database_url(explicit: str | None = None) -> str:
    """The Postgres URL to use: ``explicit`` if given, else ``PAGEFAULT_DATABASE_URL``, else '' (embedded)."""
    url = (os.environ.get("PAGEFAULT_DATABASE_URL", "") if explicit is None else explicit).strip()
    if url and urlsplit(url).scheme not in ("postgresql", "postgres"):
        raise ValueError(f"database URL must start with postgresql://, got {public_url(url)!r}")
    return url


def chroma_url(explicit: str | None = None) -> str:
    """The Chroma server URL to use: ``explicit`` if given, else ``PAGEFAULT_CHROMA_URL``, else '' (embedded)."""
    url = (os.environ.get("PAGEFAULT_CHROMA_URL", "") if explicit is None else explicit).strip().rstrip("/")
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"Chroma URL must look like http://host:port, got {public_url(url)!r}")
    return url


#: The data directory when nothing says another: ``Context.data_dir``'s built-in default.
DEFAULT_DATA_DIR = ".pagefault"


@dataclass(frozen=True)
class Home:
    """Where a store or checkpointer was opened (``open_embedded``): its ``data_dir`` (absolute; None for
    a database's store, whose runs' settings say where their vectors live), and the ``embeddings`` it was
    opened with when the code gave one (an ``EmbeddingModel``)."""

    data_dir: str | None
    embeddings: EmbeddingModel | None = None


# store or checkpointer -> where it was opened; weak, so a closed store's entry goes with it
_homes: "weakref.WeakKeyDictionary[Any, Home]" = weakref.WeakKeyDictionary()


def bind_home(holder: Any, home: Home) -> None:
    """Say that ``holder`` (a store or checkpointer) was opened in ``home``: a run on it keeps every tier there."""
    _homes[holder] = home


def home_of(holder: Any) -> Home | None:
    """Where ``holder`` was opened (``bind_home``), or None when nothing was said (a server's store)."""
    try:
        return _homes.get(holder)
    except TypeError:  # not weakly referenceable: nothing was bound to it
        return None


class SplitStorage(ValueError):
    """A run's settings name another data directory (or embedding) than the one its store was opened
    with: every tier of a process lives in the directory it opened, never split."""


@dataclass(frozen=True)
class Engines:
    """Where the memory lives, and the embedding of its vectors. A process setting: its environment, or
    the code that runs the graph (``Context``'s engine fields, ``open_embedded``), never a client of a
    served graph."""

    data_dir: str = DEFAULT_DATA_DIR
    chroma_url: str = ""
    database_url: str = ""
    embeddings: EmbeddingChoice = DEFAULT

    @classmethod
    def from_env(cls) -> "Engines":
        """``PAGEFAULT_DATA_DIR``, ``PAGEFAULT_CHROMA_URL``, ``PAGEFAULT_DATABASE_URL`` (unset: embedded)
        and ``PAGEFAULT_EMBEDDINGS`` (unset: the default, offline-joint)."""
        return cls(os.environ.get("PAGEFAULT_DATA_DIR", DEFAULT_DATA_DIR), chroma_url(), database_url(),
                   os.environ.get(EMBEDDINGS_ENV, "").strip() or DEFAULT)

    @classmethod
    def of(cls, ctx: Any, store: Any = None) -> "Engines":
        """A run's engines (on a served graph its ``Context`` holds the server's, from the environment).

        ``store``: the run's store. One that ``open_embedded`` opened keeps every tier in its directory:
        a ``ctx.data_dir`` left at its default follows it, one that names another directory is refused
        (``SplitStorage``, naming both); likewise the embedding it was opened with, against a
        ``ctx.embeddings`` that names another."""
        home = home_of(store) if store is not None else None
        data_dir, embeddings = ctx.data_dir, ctx.embeddings
        if home is not None:
            if home.data_dir is not None:
                data_dir = _same_directory(ctx.data_dir, home.data_dir)
            if home.embeddings is not None:
                embeddings = _same_embeddings(ctx.embeddings, home.embeddings)
        return cls(data_dir, ctx.chroma_url, ctx.database_url, embeddings)


def _same_directory(asked: str, home: str) -> str:
    """``home``, when the run's ``data_dir`` (``asked``) is it or was left at its default; else ``SplitStorage``."""
    if asked == DEFAULT_DATA_DIR or os.path.abspath(os.path.expanduser(asked)) == home:
        return home
    source = " (PAGEFAULT_DATA_DIR)" if os.environ.get("PAGEFAULT_DATA_DIR") == asked else ""
    raise SplitStorage(f"data_dir {asked!r}{source} is {os.path.abspath(os.path.expanduser(asked))}, but this run's "
                       f"store was opened in {home}: every tier lives in the directory that was opened; leave "
                       f"data_dir unset or set it to {home}")


def _same_embeddings(asked: str, home: EmbeddingModel) -> EmbeddingModel:
    """``home``, when the run's ``embeddings`` (``asked``) names it or was left at the default; else ``SplitStorage``."""
    if asked.strip() in (DEFAULT, home.name):
        return home
    source = f" ({EMBEDDINGS_ENV})" if os.environ.get(EMBEDDINGS_ENV, "").strip() == asked.strip() else ""
    raise SplitStorage(f"embeddings {asked!r}{source}: this run's store was opened with embeddings {home.name!r}; "
                       "a process embeds one store with one model")


def public_url(url: str) -> str:
    """``url`` without its password, for messages and ``pagefault doctor``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparseable URL)"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


# --- Postgres -------------------------------------------------------------------------------------


def is_postgres_down(exc: BaseException) -> bool:
    """Whether ``exc`` means the database could not be reached (not a bad query)."""
    import psycopg
    from psycopg_pool import PoolTimeout

    return isinstance(exc, (psycopg.OperationalError, PoolTimeout))


def postgres_unavailable(url: str, exc: BaseException) -> ServiceUnavailable:
    """The error to raise for ``exc``; a pool timeout is replaced by the server's own reason when one can be had."""
    from psycopg_pool import PoolTimeout

    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, PoolTimeout):
        import psycopg

        try:
            psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT)).close()
        except Exception as e:  # the real reason (refused, auth, unknown host) says more than a timeout
            detail = str(e).strip().splitlines()[0] if str(e).strip() else detail
    return ServiceUnavailable(POSTGRES, public_url(url), detail)


#: A pooled connection last lent longer ago than this is checked with a round trip before it is lent
#: again (a database host that rebooted answers an old connection with a reset only when asked).
CHECK_IDLE_SECONDS = 10.0
_LENT = "_pagefault_lent"  # monotonic time a connection was last lent by a pool's check


def _needs_round_trip(conn: Any) -> bool:
    """Whether a pooled connection must be checked by a round trip before it is lent: it has been idle
    longer than ``CHECK_IDLE_SECONDS``, or its socket has something to read. An idle autocommit
    connection is sent nothing unasked, so anything there is a server that restarted or terminated it
    (its FATAL notice, or the end of the stream: a proxy or the network closed it)."""
    # The clock decides only whether to spend a round trip checking the connection; a dead one that
    # passes raises on use and the pool reconnects: no stored or returned value depends on it.
    now = time.monotonic()
    last = getattr(conn, _LENT, None)
    setattr(conn, _LENT, now)
    if last is None or now - last > CHECK_IDLE_SECONDS or conn.closed:
        return True
    try:
        poller = select.poll()  # not select(): a busy process may hold descriptors past its limit of 1024
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):  # no socket any more
        return True


def check_pooled(conn: Any) -> None:
    """A pool's ``check`` that costs no round trip for a connection in use a moment ago whose socket is
    quiet (``_needs_round_trip``), else ``ConnectionPool.check_connection``: a dead connection raises,
    and the pool lends another (reconnecting), so a database that restarted is reconnected to."""
    from psycopg_pool import ConnectionPool

    if _needs_round_trip(conn):
        try:
            ConnectionPool.check_connection(conn)
        except BaseException:
            setattr(conn, _LENT, None)
            raise


async def check_pooled_async(conn: Any) -> None:
    """``check_pooled`` for an ``AsyncConnectionPool``."""
    from psycopg_pool import AsyncConnectionPool

    if _needs_round_trip(conn):
        try:
            await AsyncConnectionPool.check_connection(conn)
        except BaseException:
            setattr(conn, _LENT, None)
            raise


_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def postgres_pool(url: str, *, max_size: int = 8) -> Any:
    """A connection pool for ``url``, one per process, that checks a connection before lending it
    (``check_pooled``: so a database that restarted is reconnected to, not failed on)."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    with _pools_lock:
        pool = _pools.get(url)
        if pool is None or pool.closed:
            pool = ConnectionPool(
                url, min_size=1, max_size=max_size, timeout=CONNECT_TIMEOUT, open=True,
                check=check_pooled, name="pagefault",
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
                        "connect_timeout": int(CONNECT_TIMEOUT)},
            )
            _pools[url] = pool
        return pool


@contextmanager
def postgres_connection(url: str) -> Iterator[Any]:
    """A pooled connection; a failure to reach the database becomes ``ServiceUnavailable``."""
    try:
        with postgres_pool(url).connection() as conn:
            yield conn
    except ServiceUnavailable:
        raise
    except Exception as e:
        if is_postgres_down(e):
            raise postgres_unavailable(url, e) from e
        raise


# --- Chroma server --------------------------------------------------------------------------------


def chroma_client(url: str) -> ClientAPI:
    """A client of the Chroma server at ``url`` (``ServiceUnavailable`` if it does not answer)."""
    import chromadb
    from chromadb.config import Settings

    parts = urlsplit(url)
    if not parts.hostname:  # ``chroma_url`` refuses such a URL; one given directly gets the same error class
        raise ServiceUnavailable(CHROMA, public_url(url), "the URL names no host")
    port = parts.port or (443 if parts.scheme == "https" else 8000)
    try:
        return chromadb.HttpClient(host=parts.hostname, port=port, ssl=parts.scheme == "https",
                                   settings=Settings(anonymized_telemetry=False, allow_reset=False))
    except (ValueError, httpx.TransportError) as e:  # chromadb says "Could not connect ..." as a ValueError
        raise ServiceUnavailable(CHROMA, public_url(url), str(e) or type(e).__name__) from e


class ServerCollection:
    """A Chroma collection on a server; a lost connection becomes ``ServiceUnavailable``, not an
    ``httpx`` error that a caller could mistake for a bad argument.

    The methods the stores call (``stores.index.protocols.VectorCollection``) are its own, typed as
    Chroma's; anything else of Chroma's ``Collection`` is passed through by ``__getattr__``, guarded
    the same way. ``include`` None: Chroma's default."""

    def __init__(self, collection: Collection, url: str) -> None:
        self._collection = collection
        self._url = url

    def _guarded(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except httpx.TransportError as e:
            raise ServiceUnavailable(CHROMA, public_url(self._url), str(e) or type(e).__name__) from e

    @property
    def name(self) -> str:
        return self._collection.name

    def count(self) -> int:
        return self._guarded(lambda: self._collection.count())

    def get(self, ids: OneOrMany[ID] | None = None, where: Where | None = None, limit: int | None = None,
            offset: int | None = None, *, include: Include | None = None) -> GetResult:
        if include is None:
            return self._guarded(lambda: self._collection.get(ids=ids, where=where, limit=limit, offset=offset))
        return self._guarded(lambda: self._collection.get(ids=ids, where=where, limit=limit, offset=offset,
                                                          include=include))

    def query(self, query_embeddings: OneOrMany[Embedding] | OneOrMany[PyEmbedding] | None = None, *,
              n_results: int = 10, where: Where | None = None, include: Include | None = None) -> QueryResult:
        if include is None:
            return self._guarded(lambda: self._collection.query(query_embeddings=query_embeddings,
                                                                n_results=n_results, where=where))
        return self._guarded(lambda: self._collection.query(query_embeddings=query_embeddings, n_results=n_results,
                                                            where=where, include=include))

    def upsert(self, ids: OneOrMany[ID], embeddings: OneOrMany[Embedding] | OneOrMany[PyEmbedding] | None = None,
               metadatas: OneOrMany[Metadata] | None = None, documents: OneOrMany[Document] | None = None) -> None:
        self._guarded(lambda: self._collection.upsert(ids=ids, embeddings=embeddings, metadatas=metadatas,
                                                      documents=documents))

    def update(self, ids: OneOrMany[ID], embeddings: OneOrMany[Embedding] | OneOrMany[PyEmbedding] | None = None,
               metadatas: OneOrMany[Metadata] | None = None, documents: OneOrMany[Document] | None = None) -> None:
        self._guarded(lambda: self._collection.update(ids=ids, embeddings=embeddings, metadatas=metadatas,
                                                      documents=documents))

    def delete(self, ids: IDs | None = None, where: Where | None = None) -> object:
        return self._guarded(lambda: self._collection.delete(ids=ids, where=where))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: attr(*args, **kwargs))

        return call


def server_collection(client: ClientAPI, url: str, name: str, make: Callable[[ClientAPI], Collection]
                      ) -> ServerCollection:
    """``make(client)`` (a get-or-create of collection ``name``) on the server, guarded as above."""
    try:
        return ServerCollection(make(client), url)
    except httpx.TransportError as e:
        raise ServiceUnavailable(CHROMA, public_url(url), f"{e or type(e).__name__} (opening {name})") from e
