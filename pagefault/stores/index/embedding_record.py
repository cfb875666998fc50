"""Which model made a collection's vectors, kept with the collection: the refusal to mix two.

Every vector collection (a Chroma collection, embedded or on a server, and each collection of the
resident SQLite files ``recall.sqlite`` and ``archival_recent.sqlite``) records the name and the
dimensions of the embedding that made its vectors (``EmbeddingRecord``): in a Chroma collection's
metadata, in a resident file's ``embedding_records`` table. A collection from before records were
kept has none and holds what made it then, the offline MiniLM (``LEGACY``).

A tier's collections are named after their model (``collection_name``): the offline model's keep the
names they always had (``pagefault_archival``), another model's add a slug of its name. Opening a
tier with a model (``opening``) finds its *active* collection, the complete one of the highest
generation: the model that made it opens it; another model is refused (``EmbeddingMismatch``), with a
message naming both and ``pagefault reindex``. A reindex writes a new collection of the next
generation, marked incomplete until every record is in it; completing it is what switches the tier
(the old collection is then dropped). So a reindex killed at any point leaves the old collection
active and whole, and the next reindex resumes into the incomplete one.

The places that hold collections answer one protocol, ``RecordedCollections``: ``ChromaCatalog``
here, ``ResidentCatalog`` (``resident_vectors``) and ``TieredCatalog`` (archival's two tiers, one name).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import httpx

from pagefault.engines import connections as backends
from pagefault.models.embedding_choice import OFFLINE, OFFLINE_DIMENSIONS, EmbeddingModel
from pagefault.models.embeddings import UnitVectorSpaces

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

#: The tiers that hold vectors: archival records, recall's messages, recall's units (a message between its neighbours).
KINDS: tuple[str, ...] = ("archival", "recall", "recall_unit")
PREFIX = "pagefault_"
#: Chroma metadata keys of a record.
MODEL_KEY, DIMENSIONS_KEY, GENERATION_KEY, COMPLETE_KEY = (
    "pagefault_embeddings", "pagefault_dimensions", "pagefault_generation", "pagefault_complete")


@dataclass(frozen=True)
class EmbeddingRecord:
    """What a collection says about its vectors: the ``model`` (its name, see ``EmbeddingModel``) and
    ``dimensions`` that made them, its ``generation`` (each reindex writes the next one) and whether it
    is ``complete`` (False while a reindex is filling it). ``stored``: False for a collection that has
    no record yet (one made before records were kept, taken as ``LEGACY``)."""

    model: str
    dimensions: int
    generation: int = 0
    complete: bool = True
    stored: bool = field(default=True, compare=False)

    def metadata(self) -> dict[str, Any]:
        """The record as a Chroma collection's metadata."""
        return {MODEL_KEY: self.model, DIMENSIONS_KEY: self.dimensions, GENERATION_KEY: self.generation,
                COMPLETE_KEY: self.complete}

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any] | None) -> "EmbeddingRecord | None":
        """The record in a Chroma collection's metadata, or None if it has none."""
        meta = meta or {}
        if not isinstance(meta.get(MODEL_KEY), str) or not isinstance(meta.get(DIMENSIONS_KEY), int):
            return None
        return cls(meta[MODEL_KEY], meta[DIMENSIONS_KEY], int(meta.get(GENERATION_KEY, 0) or 0),
                   bool(meta.get(COMPLETE_KEY, True)))

    def describe(self) -> str:
        """``'model' (N dimensions)``, for messages."""
        return f"{self.model!r} ({self.dimensions} dimensions)"


LEGACY = EmbeddingRecord(OFFLINE, OFFLINE_DIMENSIONS, 0, True, stored=False)
"""What a collection without a record holds: it was written before records were kept, by the offline MiniLM."""
#: A collection named after no model's slug and without a record: a reindex's target whose record was
#: never written (it holds nothing the store relies on).
UNKNOWN = EmbeddingRecord("", 0, -1, False, stored=False)


def collection_name(kind: str, model: str) -> str:
    """The name of ``kind``'s collection of ``model``: ``pagefault_<kind>`` for the offline model (the
    names collections always had), ``pagefault_<kind>.<slug>-<hash>`` for another."""
    base = f"{PREFIX}{kind}"
    if model == OFFLINE:
        return base
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", model).strip("-")[:48].strip("-") or "model"
    return f"{base}.{slug}-{hashlib.sha256(model.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def of_kind(name: str, kind: str) -> bool:
    """Whether ``name`` is a collection of ``kind`` (``pagefault_recall`` is not one of ``recall_unit``)."""
    base = f"{PREFIX}{kind}"
    return name == base or name.startswith(base + ".")


def legacy_name(kind: str) -> str:
    """The name ``kind``'s collection had before records were kept (the offline model's)."""
    return f"{PREFIX}{kind}"


class EmbeddingMismatch(ValueError):
    """A tier holds vectors of one model and this process uses another: never mixed, so refused.
    ``recorded`` says what made them, ``wanted`` the model of this process."""

    def __init__(self, where: str, kind: str, recorded: EmbeddingRecord, wanted: EmbeddingModel) -> None:
        self.where, self.kind, self.recorded, self.wanted = where, kind, recorded, wanted
        if recorded.model == wanted.name:
            said = (f"{where}: {kind} holds {recorded.dimensions}-dimension vectors of {recorded.model!r}, but "
                    f"{wanted.name!r} now makes {wanted.known_dimensions}-dimension ones")
        else:
            said = (f"{where}: {kind} was embedded by {recorded.describe()}, and this process uses "
                    f"{wanted.describe()}")
        super().__init__(f"{said}; vectors of two models are never mixed: run `pagefault reindex --embeddings "
                         f"{wanted.name}` to re-embed the store, or set PAGEFAULT_EMBEDDINGS={recorded.model}")


class RecordedCollections(Protocol):
    """A place that holds vector collections, each with its ``EmbeddingRecord``."""

    @property
    def where(self) -> str:
        """Where the collections are, for messages (a directory, a file, a server's URL)."""
        ...

    def records(self, kind: str) -> dict[str, EmbeddingRecord]:
        """Every collection of ``kind`` here, by name, with its record (``LEGACY`` for an old one without)."""
        ...

    def write_record(self, name: str, record: EmbeddingRecord) -> None:
        """Make the collection ``name`` if needed, with ``record`` as its record."""
        ...

    def count(self, name: str) -> int:
        """How many records the collection ``name`` holds (0 if there is none)."""
        ...

    def drop(self, name: str) -> None:
        """Remove the collection ``name`` and its record, if there are."""
        ...


def active(records: Mapping[str, EmbeddingRecord]) -> tuple[str, EmbeddingRecord] | None:
    """The collection a tier's searches use: the complete one of the highest generation, if any."""
    done = [(r.generation, n) for n, r in records.items() if r.complete]
    if not done:
        return None
    _, name = max(done)
    return name, records[name]


@dataclass(frozen=True)
class Opening:
    """What opening one tier with a model found (``opening``): the collection ``name`` it uses, and the
    ``record`` to write there first (None when the collection already says it)."""

    name: str
    record: EmbeddingRecord | None


def opening(place: RecordedCollections, kind: str, model: EmbeddingModel) -> Opening:
    """The collection of ``kind`` that ``model`` opens in ``place`` (see the module docstring): its active
    one when ``model`` made it; on a store with none, a new one to record as ``model``'s. Nothing is
    written (a store is checked whole before any tier is made): ``EmbeddingMismatch`` when another model,
    or the same name with other dimensions, made the active one."""
    records = place.records(kind)
    found = active(records)
    if found is None:
        generation = max((r.generation for r in records.values()), default=-1) + 1
        return Opening(collection_name(kind, model.name), EmbeddingRecord(model.name, model.dimensions, generation, True))
    name, record = found
    if record.model != model.name or record.dimensions != model.dimensions:
        raise EmbeddingMismatch(place.where, kind, record, model)
    # An old collection without a record says from now on what made it.
    return Opening(name, None if record.stored else EmbeddingRecord(record.model, record.dimensions, record.generation))


def opened(place: RecordedCollections, opened: Opening) -> str:
    """Write what ``opening`` found to write; the collection's name."""
    if opened.record is not None:
        place.write_record(opened.name, opened.record)
    return opened.name


class ChromaFunction(UnitVectorSpaces):
    """Chroma's embedding-function protocol for a model other than the offline one (whose
    ``OfflineEmbeddings`` Chroma is given itself): it names the ``model`` in the collection's
    configuration. Chroma never embeds with it: pagefault hands over every vector."""

    def __init__(self, model: str) -> None:
        self.model = model

    def __call__(self, input: Any) -> Any:  # noqa: A002 (Chroma's name)
        raise ValueError(f"Chroma was asked to embed with {self.model!r}; pagefault gives Chroma every vector itself")

    @staticmethod
    def name() -> str:
        """Chroma's protocol: the name a collection records for this function."""
        return "pagefault-embeddings"

    def get_config(self) -> dict[str, Any]:
        """Chroma's protocol: the function's settings, the model's name."""
        return {"model": self.model}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "ChromaFunction":
        """Chroma's protocol: the function from a collection's stored ``config``."""
        return ChromaFunction(str(config.get("model", "")))


def chroma_function(model: EmbeddingModel) -> Any:
    """What Chroma is told embeds a collection of ``model``: the offline model itself, as collections
    always were, else a ``ChromaFunction`` naming the model (registered with Chroma, so a collection's
    configuration reads back)."""
    if model.name == OFFLINE:
        return model.embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    if ChromaFunction.name() not in _registered:
        register_embedding_function(ChromaFunction)
        _registered.add(ChromaFunction.name())
    return ChromaFunction(model.name)


_registered: set[str] = set()


class ChromaCatalog:
    """The pagefault collections of one Chroma client (a directory's, or a server's at ``url``).

    ``configuration``: what a collection is made with (its HNSW settings); ``function``: the embedding
    function Chroma is given for the collections opened (``chroma_function``; None for reads only);
    ``prepare``: applied to each collection opened (``services.with_short_write_log``)."""

    def __init__(self, client: ClientAPI, where: str, *, url: str = "",
                 configuration: Mapping[str, Any] | None = None, function: Any = None,
                 prepare: Callable[[Collection], Collection] = lambda c: c) -> None:
        self.client = client
        self._where = where
        self.url = url
        self.configuration = dict(configuration or {})
        self.function = function
        self.prepare = prepare

    @property
    def where(self) -> str:
        """The data directory's Chroma, or the server's URL (without a password)."""
        return backends.public_url(self.url) if self.url else self._where

    def _guarded(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except httpx.TransportError as e:
            raise backends.ServiceUnavailable(backends.CHROMA, backends.public_url(self.url),
                                              str(e) or type(e).__name__) from e

    def _listed(self) -> dict[str, Mapping[str, Any] | None]:
        return {c.name: c.metadata for c in self._guarded(self.client.list_collections)}

    def records(self, kind: str) -> dict[str, EmbeddingRecord]:
        """Every collection of ``kind``, with its record from its metadata."""
        out = {}
        for name, meta in self._listed().items():
            if of_kind(name, kind):
                out[name] = EmbeddingRecord.from_metadata(meta) or (LEGACY if name == legacy_name(kind) else UNKNOWN)
        return out

    def names(self) -> set[str]:
        """The names of every collection of the client."""
        return set(self._listed())

    def collection(self, name: str, record: EmbeddingRecord | None = None) -> Collection:
        """The collection ``name``, made (with ``record`` in its metadata) if it is not there. Chroma never
        embeds with its ``function``: pagefault hands it every vector."""
        col = self._guarded(lambda: self.client.get_or_create_collection(
            name, embedding_function=self.function, configuration=self.configuration,  # type: ignore[arg-type]
            metadata=record.metadata() if record is not None else None))
        return self.prepare(col)

    def write_record(self, name: str, record: EmbeddingRecord) -> None:
        """Make the collection if needed and set its record (other metadata kept; Chroma's own ``hnsw:``
        keys cannot be written again, so they are left out of the change)."""
        col = self.collection(name, record)
        meta = dict(col.metadata or {})
        if EmbeddingRecord.from_metadata(meta) == record:
            return
        kept = {k: v for k, v in meta.items() if not k.startswith("hnsw:") and not k.startswith(PREFIX)}
        self._guarded(lambda: col.modify(metadata={**kept, **record.metadata()}))

    def count(self, name: str) -> int:
        """Records in ``name`` (0 if there is no such collection)."""
        if name not in self.names():
            return 0
        return int(self._guarded(lambda: self.client.get_collection(name, embedding_function=None).count()))

    def drop(self, name: str) -> None:
        """Delete the collection ``name`` if it is there."""
        if name in self.names():
            self._guarded(lambda: self.client.delete_collection(name))


class TieredCatalog:
    """Archival on the embedded setup: each collection is a Chroma one (``cold``, whose record decides)
    and the resident one of the same name (``hot``, its recent writes), recorded alike."""

    def __init__(self, cold: RecordedCollections, hot: RecordedCollections) -> None:
        self.cold, self.hot = cold, hot

    @property
    def where(self) -> str:
        """Where the Chroma side is."""
        return self.cold.where

    def records(self, kind: str) -> dict[str, EmbeddingRecord]:
        """The Chroma side's records; a name only the resident side knows counts as its record says."""
        out = dict(self.hot.records(kind))
        out.update(self.cold.records(kind))
        return out

    def write_record(self, name: str, record: EmbeddingRecord) -> None:
        """Record both sides (the resident one first: the Chroma one is what decides)."""
        self.hot.write_record(name, record)
        self.cold.write_record(name, record)

    def count(self, name: str) -> int:
        """Records on both sides."""
        return self.cold.count(name) + self.hot.count(name)

    def drop(self, name: str) -> None:
        """Drop both sides (Chroma's last: until then the resident side's record still names the tier)."""
        self.hot.drop(name)
        self.cold.drop(name)


if TYPE_CHECKING:  # each place satisfies the protocol (checked by mypy, never run)
    from pagefault.stores.index.resident_vectors import ResidentCatalog

    def _conforming(chroma: ChromaCatalog, resident: ResidentCatalog, tiered: TieredCatalog) -> list[RecordedCollections]:
        return [chroma, resident, tiered]
