"""Deterministic synthetic archival passages and their embeddings, cached on disk.

The performance benchmarks need up to 100,000 passages. Their text comes from a fixed seed (so every
run and every system sees the same corpus), and their vectors (of the default embedding, unless asked
for another built-in one) are computed once and kept in
``benchmarks/.cache/`` (gitignored) in chunks, so a rerun, or a run cut short, does not embed again.
Every system under test is fed these same vectors: only search is timed.

    python benchmarks/perf_data.py --passages 100000     # fill the cache (slow the first time: ~40 min on 2 cores)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pagefault.models.embedding_choice import DEFAULT, MULTILINGUAL, OFFLINE  # noqa: E402
from pagefault.models.embeddings import OfflineEmbeddings  # noqa: E402
from pagefault.models.joint import NAME as JOINT  # noqa: E402
from pagefault.models.joint import JointEmbeddings  # noqa: E402
from pagefault.models.multilingual import MultilingualEmbeddings  # noqa: E402

CACHE = ROOT / "benchmarks" / ".cache"
SEED = 20261129
CHUNK = 5_000

NAMES = ("Ana Marta Yusuf Lucia Bruno Ines Tomas Sofia Rui Helena Omar Clara Diego Nadia Pedro Ivo Lena Hugo "
         "Mira Joao Rosa Felix Aiko Tariq Elsa Noor Pablo Greta Kofi Vera").split()
VERBS = ("repaired painted sold bought measured photographed mapped catalogued borrowed returned inspected "
         "delivered planted harvested restored shipped weighed sketched").split()
ADJS = ("copper violet ancient narrow silver crooked salted quiet amber hollow northern woollen painted "
        "heavy brittle gilded").split()
NOUNS = ("lantern ledger bicycle orchard telescope harbour bridge kiln loom astrolabe canoe greenhouse "
         "windmill archive compass piano vineyard quarry").split()
PLACES = ("Lisbon Porto Valencia Tangier Bergen Trieste Cork Gdansk Split Tallinn Bari Nantes Leiden Malmo "
          "Oviedo Riga Aarhus Ghent").split()
MONTHS = "January February March April May June July August September October November December".split()
CLAUSES = ("the invoice was settled in cash", "a neighbour helped with the heavy lifting",
           "the weather turned cold that evening", "the work took longer than planned",
           "nobody else was told about it", "the receipt is in the blue folder",
           "it cost less than the first estimate", "the old owner sent a thank-you note",
           "a second visit is booked for spring", "the photos are on the shared drive")


def passage(rng: random.Random, i: int) -> str:
    return (f"{rng.choice(NAMES)} {rng.choice(VERBS)} the {rng.choice(ADJS)} {rng.choice(NOUNS)} in "
            f"{rng.choice(PLACES)} on {rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(1990, 2026)}; "
            f"{rng.choice(CLAUSES)} (record {i}).")


def passages(n: int, seed: int = SEED) -> list[str]:
    """The first ``n`` passages of the corpus (a prefix of any larger corpus from the same seed)."""
    rng = random.Random(seed)
    return [passage(rng, i) for i in range(n)]


def queries(n: int, seed: int = SEED + 1) -> list[str]:
    """Questions in the corpus's vocabulary, none of them a passage (so no embedding cache hit)."""
    rng = random.Random(seed)
    return [f"When was the {rng.choice(ADJS)} {rng.choice(NOUNS)} in {rng.choice(PLACES)} {rng.choice(VERBS)} "
            f"by {rng.choice(NAMES)}? (question {i})" for i in range(n)]


def vectors(n: int, model: str = DEFAULT, *, progress: bool = True) -> np.ndarray:
    """Unit vectors of ``passages(n)`` by the built-in embedding ``model`` (``"offline-joint"``, the default;
    ``"offline"``, MiniLM; ``"offline-multilingual"``, USE), from the on-disk cache (computing missing chunks).
    The joint model's are joined from the other two's, so each of those is computed once."""
    if model == JOINT:
        return JointEmbeddings().join(vectors(n, OFFLINE, progress=progress), vectors(n, MULTILINGUAL, progress=progress))
    if model == OFFLINE:
        from pagefault.models.embeddings import _Model

        tag, dims, embed = OfflineEmbeddings.model_id, 384, lambda texts: _Model.get().embed(texts)
    elif model == MULTILINGUAL:
        tag, dims, embed = "use-m3-0.2.1", 512, MultilingualEmbeddings().embed_array
    else:
        raise ValueError(f"no cached vectors of {model!r}: one of {JOINT!r}, {OFFLINE!r}, {MULTILINGUAL!r}")
    CACHE.mkdir(parents=True, exist_ok=True)
    texts = passages(n)
    out = []
    for k in range(0, n, CHUNK):
        path = CACHE / f"passages-s{SEED}-{tag}-{k // CHUNK:03d}.npy"
        want = min(CHUNK, n - k)
        if path.exists():
            chunk = np.load(path)
            if len(chunk) >= want:
                out.append(chunk[:want])
                continue
        t0 = time.perf_counter()
        full = passages(k + CHUNK)[k:k + CHUNK] if want < CHUNK else texts[k:k + CHUNK]
        chunk = embed(full)
        np.save(path, chunk)
        if progress:
            print(f"{model}: embedded passages {k}-{k + len(full) - 1} ({len(full) / (time.perf_counter() - t0):.0f}/s)",
                  file=sys.stderr, flush=True)
        out.append(chunk[:want])
    return np.concatenate(out) if out else np.zeros((0, dims), dtype=np.float32)


def load_archival(archival, scope, texts: list[str], vecs: np.ndarray, *, name: str = "synthetic") -> None:
    """Bulk-load passages into a pagefault ``ArchivalStore`` with precomputed vectors.

    Each record is what ``ArchivalStore.insert`` writes for a document passage that states no fact (same
    id, provenance and validity metadata, BM25 row); only the per-record embedding is skipped, since the
    vectors are given.
    """
    from pagefault.stores.archival import archival_id
    from pagefault.stores.index.hybrid import IndexedText
    from pagefault.stores.provenance import Provenance
    from pagefault.stores.validity import Validity

    step = 4_000  # under Chroma's largest batch
    for k in range(0, len(texts), step):
        items = []
        for i in range(k, min(k + step, len(texts))):
            prov = Provenance(source="document", message_id=f"{name}#p{i}")
            items.append(IndexedText(id=archival_id(scope, texts[i]), text=texts[i], scope=scope.key,
                                     created_at=prov.created_at,
                                     metadata={"kind": "archival", **prov.metadata(),
                                               **Validity(prov.created_at, recorded_at=prov.created_at).metadata()}))
        archival.index.upsert(items, vecs[k:k + len(items)])


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds of samples in seconds."""
    a = np.asarray(samples) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def machine() -> str:
    import os
    import platform

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average at start {load}"

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=100_000)
    v = vectors(ap.parse_args().passages)
    print(v.shape)
