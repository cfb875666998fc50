"""The default embedding's two halves: run side by side for a query, one after the other behind a turn,
the same vectors either way; and USE's forward pass on one BLAS thread."""

from __future__ import annotations

import threading

import numpy as np

from pagefault.models.embeddings import background_embedding
from pagefault.models.joint import JointEmbeddings
from pagefault.models.multilingual import MultilingualEmbeddings

TEXTS = ["Alice moved to Lisbon in May.", "¿Dónde vive Alice ahora?", "爱丽丝住在哪里？", "Der Hafen ist alt."]


def test_a_query_and_a_writer_get_the_same_joint_vectors():
    joint = JointEmbeddings()
    foreground = joint.embed_array(TEXTS)
    got: dict[str, np.ndarray] = {}

    def writer() -> None:
        background_embedding()
        got["background"] = joint.embed_array(TEXTS)

    t = threading.Thread(target=writer)
    t.start()
    t.join()
    assert foreground.shape == (4, 896)
    np.testing.assert_allclose(foreground, got["background"], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(foreground, axis=1), 1.0, atol=1e-5)
    # each half is the model's own unit vector, scaled by its share
    np.testing.assert_allclose(foreground[:, 384:] / np.sqrt(0.4), MultilingualEmbeddings().embed_array(TEXTS),
                               atol=1e-5)


def test_use_runs_its_matrix_products_on_a_limited_blas_thread_pool():
    # Without threadpoolctl (a dependency for this) the backend leaves OpenBLAS at its default thread
    # count, whose idle workers spin after each small product: about twice the CPU per text on 2 cores.
    backend = MultilingualEmbeddings._loaded()._model
    assert backend._threadpool is not None
    assert backend.threads == 1
