"""Which embedding a process gives archival and recall: ``EmbeddingModel``.

Three ways to choose it, the same everywhere a choice is taken (``Context.embeddings``,
``PAGEFAULT_EMBEDDINGS``, ``open_embedded(..., embeddings=...)``, ``MemoryServices.open``,
``pagefault reindex --embeddings``):

- ``"offline-joint"`` (the default): both built-in models below, their vectors joined
  (``models.joint``), 896 dimensions, nothing downloaded; English and 15 other languages;
- ``"offline"``: the built-in all-MiniLM-L6-v2 (``models.embeddings``), 384 dimensions, nothing
  downloaded; English. It was the default before ``"offline-joint"``: a store it made is opened with it
  by a process left at the default, until ``pagefault reindex`` moves the store (``opens_as``);
- ``"offline-multilingual"``: the built-in Universal Sentence Encoder Multilingual v3
  (``models.multilingual``), 512 dimensions, nothing downloaded; 16 languages;
- a LangChain ``init_embeddings`` id, ``"provider:model"`` (``"openai:text-embedding-3-small"``,
  ``"ollama:nomic-embed-text"``): the id is the name its collections record;
- any LangChain ``Embeddings`` instance, wrapped with the name its collections record:
  ``EmbeddingModel("e5-small-v2", my_embeddings)``. The name is what tells two models apart (two
  instances of one class can be different models), so an instance always comes with one.

Each collection records the name and dimensions of the model that made its vectors
(``pagefault.stores.index.embedding_record``). What is stored is embedded with the model's
``embed_documents``, and a search's query with its ``embed_query`` (LangChain's two sides: the same thing
for symmetric models such as OpenAI's and MiniLM, a ``query:`` / ``passage:`` prefix for E5-style ones).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Protocol, Sequence, Union

import numpy as np
from langchain_core.embeddings import Embeddings

from pagefault.models.embeddings import DIMENSION as OFFLINE_DIMENSIONS
from pagefault.models.embeddings import OfflineEmbeddings, remember, text_key
from pagefault.models.joint import DIMENSION as JOINT_DIMENSIONS
from pagefault.models.joint import NAME as JOINT
from pagefault.models.joint import JointEmbeddings
from pagefault.models.multilingual import DIMENSION as MULTILINGUAL_DIMENSIONS
from pagefault.models.multilingual import NAME as MULTILINGUAL
from pagefault.models.multilingual import MultilingualEmbeddings

#: The built-in MiniLM's name, and what a collection without a record holds.
OFFLINE = "offline"
#: The default choice: the built-in joint model.
DEFAULT = JOINT
#: The default before ``DEFAULT``: a store it made opens with it when the default is asked for (``opens_as``).
FORMER_DEFAULT = OFFLINE
#: The environment variable that chooses the process's embedding when nothing else does.
ENV = "PAGEFAULT_EMBEDDINGS"
#: Vectors of recently embedded texts kept per model (by hash), as the offline model keeps its own:
#: a query searched in archival and then recall, or a batch embedded ahead of its inserts, is embedded once.
CACHE_SIZE = 4096
#: Longest model name a collection records.
MAX_NAME = 200
#: The text embedded once to learn how many dimensions a model's vectors have, when it is not given.
PROBE_TEXT = "dimensions"


class ArrayEmbedding(Protocol):
    """What the search indexes need of an embedding: vectors of texts as one float32 array, a row each
    (``EmbeddingModel`` and ``OfflineEmbeddings`` both give them), for what is stored and for queries."""

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text of ``texts`` (texts to store), as rows of a float32 array."""
        ...

    def embed_query_array(self, queries: Sequence[str]) -> np.ndarray:
        """One vector per search query of ``queries``, as rows of a float32 array."""
        ...


class EmbeddingsError(ValueError):
    """An embedding that cannot be used: an unknown id, a provider whose package is missing, a model that
    returned vectors of the wrong shape. The message names the choice."""


class EmbeddingModel(Embeddings):
    """A LangChain ``embeddings`` (any ``Embeddings`` instance) with the ``name`` its collections record
    (see the module docstring).

    ``dimensions``: the length of its vectors, if known; otherwise it is learned by embedding one short
    text the first time it is needed. ``embed_array`` gives unit-length float32 vectors, one row per text.
    """

    def __init__(self, name: str, embeddings: Embeddings, *, dimensions: int | None = None) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or \
                any(ord(c) < 32 or c == "\x7f" for c in name):
            raise EmbeddingsError(f"an embedding's name must be 1 to {MAX_NAME} printable characters, got {name!r}")
        if not isinstance(embeddings, Embeddings):
            raise EmbeddingsError(f"embedding {name!r}: expected a LangChain Embeddings, got {type(embeddings).__name__}")
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise EmbeddingsError(f"embedding {name!r}: dimensions must be a positive integer, got {dimensions!r}")
        self.name = name.strip()
        self.embeddings = embeddings
        self._dimensions = dimensions
        # The offline model has its own cache and background session: its arrays are used as they come.
        self._offline = embeddings if isinstance(embeddings, OfflineEmbeddings) else None
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def offline(cls) -> "EmbeddingModel":
        """The built-in all-MiniLM-L6-v2 (384 dimensions), named ``"offline"``."""
        return cls(OFFLINE, OfflineEmbeddings(), dimensions=OFFLINE_DIMENSIONS)

    @classmethod
    def multilingual(cls) -> "EmbeddingModel":
        """The built-in USE Multilingual v3 (512 dimensions), named ``"offline-multilingual"``."""
        return cls(MULTILINGUAL, MultilingualEmbeddings(), dimensions=MULTILINGUAL_DIMENSIONS)

    @classmethod
    def joint(cls) -> "EmbeddingModel":
        """The built-in MiniLM and USE Multilingual v3, joined (896 dimensions), named ``"offline-joint"``: the default."""
        return cls(JOINT, JointEmbeddings(), dimensions=JOINT_DIMENSIONS)

    @property
    def known_dimensions(self) -> int | None:
        """The length of this model's vectors if known without embedding anything, else None."""
        return self._dimensions

    @property
    def dimensions(self) -> int:
        """The length of this model's vectors (embedding one short text to learn it, the first time)."""
        if self._dimensions is None:
            self._embed([PROBE_TEXT])
        assert self._dimensions is not None  # set by the first embedding
        return self._dimensions

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (texts to store: the model's ``embed_documents``), one float32 row each
        (shape ``(len(texts), dimensions)``)."""
        texts = list(texts)
        if self._offline is not None and texts:
            return self._offline.embed_array(texts)
        return self._cached(texts, query=False)

    def embed_query_array(self, queries: Sequence[str]) -> np.ndarray:
        """Unit vectors of search ``queries`` (the model's ``embed_query``, one call per query), one float32
        row each. For a symmetric model these equal ``embed_array``'s; they are cached apart all the same."""
        queries = list(queries)
        if self._offline is not None and queries:
            return self._offline.embed_query_array(queries)
        return self._cached(queries, query=True)

    def prime(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep ``vectors`` (unit rows, one per text) as the stored-text vectors of ``texts``, so the next
        ``embed_array`` of them finds them instead of embedding: a caller that has them already (a
        benchmark writing precomputed vectors through the real write paths). At most ``CACHE_SIZE`` are kept."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(texts), self.dimensions):
            raise EmbeddingsError(f"embedding {self.name!r}: {vectors.shape} vectors for {len(texts)} texts of "
                                  f"{self.dimensions} dimensions")
        if self._offline is not None:
            self._offline.prime(texts, vectors)
            return
        with self._lock:
            remember(self._cache, ((b"d" + text_key(t), v) for t, v in zip(texts, vectors)), CACHE_SIZE)

    def forget_cached(self) -> None:
        """Drop the vectors this model keeps of recent texts, and the built-in MiniLM's own (benchmarks that
        time an uncached embedding)."""
        with self._lock:
            self._cache.clear()
        if self._offline is not None or isinstance(self.embeddings, JointEmbeddings):
            OfflineEmbeddings().forget_cached()

    def _cached(self, texts: list[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        side = b"q" if query else b"d"
        keys = [side + text_key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for k in keys:
                v = self._cache.get(k)
                if v is not None:
                    self._cache.move_to_end(k)
                    found[k] = v
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts))
            fresh = self._embed([text_of[k] for k in missing], query=query)
            found.update(zip(missing, fresh))
            with self._lock:
                remember(self._cache, zip(missing, fresh), CACHE_SIZE)
        return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """The model's vectors of ``texts`` (as queries if ``query``), checked for shape and scaled to unit
        length."""
        raw: np.ndarray | list[list[float]]
        try:
            if isinstance(self.embeddings, (JointEmbeddings, MultilingualEmbeddings)):  # symmetric, arrays already
                raw = self.embeddings.embed_array(texts)
            elif query:
                raw = [self.embeddings.embed_query(t or " ") for t in texts]
            else:
                raw = self.embeddings.embed_documents([t or " " for t in texts])
        except Exception as e:
            detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise EmbeddingsError(f"embedding {self.name!r} failed: {detail}") from e
        arr = np.asarray(raw, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] == 0:
            raise EmbeddingsError(f"embedding {self.name!r} returned vectors of shape {arr.shape} for {len(texts)} texts")
        if not np.isfinite(arr).all():
            raise EmbeddingsError(f"embedding {self.name!r} returned vectors that are not finite numbers")
        if self._dimensions is None:
            self._dimensions = int(arr.shape[1])
        elif arr.shape[1] != self._dimensions:
            raise EmbeddingsError(f"embedding {self.name!r} returned {arr.shape[1]}-dimension vectors; "
                                  f"it made {self._dimensions}-dimension ones before")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / np.clip(norms, 1e-12, None)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain's ``Embeddings``: the vector of each of ``texts`` (unit length)."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain's ``Embeddings``: the vector of one query ``text`` (unit length)."""
        return self.embed_query_array([text])[0].tolist()

    def describe(self) -> str:
        """``'name' (N dimensions)`` when the dimensions are known, else ``'name'``, for messages."""
        return f"{self.name!r}" + (f" ({self._dimensions} dimensions)" if self._dimensions is not None else "")

    def __repr__(self) -> str:
        return f"EmbeddingModel({self.name!r}, {type(self.embeddings).__name__})"


EmbeddingChoice = Union[str, EmbeddingModel]
"""What a process may choose its embedding with: ``"offline-joint"``, ``"offline"``, ``"offline-multilingual"``,
an ``init_embeddings`` id, or an
``EmbeddingModel`` (an instance with its name)."""


def choice_name(choice: EmbeddingChoice | None) -> str:
    """The name ``choice`` records, without building the model (None: ``PAGEFAULT_EMBEDDINGS``, else the default)."""
    if choice is None:
        choice = os.environ.get(ENV, "").strip() or DEFAULT
    if isinstance(choice, EmbeddingModel):
        return choice.name
    if isinstance(choice, str):
        return choice.strip()
    raise EmbeddingsError(_not_a_choice(choice))


def opens_as(asked: str, made_by: str) -> bool:
    """Whether a process that asks for the embedding named ``asked`` opens a store whose vectors the model
    named ``made_by`` made: the same model, or the default asked of a store the former default made (it
    keeps its model until ``pagefault reindex --embeddings offline-joint`` moves it)."""
    return asked == made_by or (asked == DEFAULT and made_by == FORMER_DEFAULT)


def _not_a_choice(choice: object) -> str:
    what = "a LangChain Embeddings" if isinstance(choice, Embeddings) else type(choice).__name__
    return (f"embeddings must be '{JOINT}', 'offline', '{MULTILINGUAL}', an init_embeddings id such as "
            "'openai:text-embedding-3-small', or "
            f"EmbeddingModel(name, embeddings); got {what} (an instance needs the name its collections record: "
            "EmbeddingModel('my-model', embeddings))")


def embedding_model(choice: EmbeddingChoice | None = None) -> EmbeddingModel:
    """The model ``choice`` names (see the module docstring; None: ``PAGEFAULT_EMBEDDINGS``, else
    the default). ``EmbeddingsError`` names the choice when it cannot be used."""
    if isinstance(choice, EmbeddingModel):
        return choice
    name = choice_name(choice)
    if name == JOINT:
        return EmbeddingModel.joint()
    if name == OFFLINE:
        return EmbeddingModel.offline()
    if name == MULTILINGUAL:
        return EmbeddingModel.multilingual()
    where = f" ({ENV})" if choice is None else ""
    if ":" not in name or not name.split(":", 1)[0].strip() or not name.split(":", 1)[1].strip():
        raise EmbeddingsError(f"embeddings {name!r}{where}: expected '{JOINT}', 'offline', '{MULTILINGUAL}' or a LangChain "
                              "init_embeddings id 'provider:model', such as 'openai:text-embedding-3-small'")
    from langchain.embeddings import init_embeddings

    try:
        made = init_embeddings(name)
    except Exception as e:  # an unknown provider, its package missing, or its client refusing its settings
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        providers = [line[2:].split(":", 1)[0] for line in lines[1:] if line.startswith("- ")]
        detail = (lines[0] if lines else type(e).__name__) + (f" (known: {', '.join(providers)})" if providers else "")
        raise EmbeddingsError(f"embeddings {name!r}{where}: {detail}") from e
    return EmbeddingModel(name, made)
