"""Archival search latency at 1k / 10k / 100k passages, query embedding included, side by side with
a raw Chroma query, LangGraph ``InMemoryStore`` semantic search and Mem0 (open source), all fed the
same precomputed passage vectors and the same query embedding (pagefault's default, ``offline-joint``,
computed per query, uncached).

    python benchmarks/perf_archival.py                       # 1k, 10k, 100k; writes benchmarks/RESULTS.md
    python benchmarks/perf_archival.py --sizes 300 --queries 5 --no-write     # smoke

Passages and vectors come from ``perf_data`` (fixed seed, vectors cached in ``benchmarks/.cache``).
Each query is new text, and pagefault's embedding cache is emptied before each timed pagefault
query, so every system pays for one real query embedding. Every system returns the top 5.

- pagefault: ``ArchivalStore.search`` (dense candidates from Chroma with the scope filter, BM25 from
  SQLite FTS5, score fusion, hits with provenance).
- raw Chroma: ``collection.query`` of the same vectors, no filter, 5 results: the floor.
- raw Chroma, pagefault's request: the same query with the scope filter and 100 candidates with
  documents and metadata, which is what pagefault's dense side asks for.
- InMemoryStore: ``store.search(namespace, query=...)`` with an index over the same vectors.
- Mem0: ``Memory.search`` on Chroma with our embedding (through its ``langchain`` embedder) and no
  LLM; its records are written in the shape ``Memory.add(..., infer=False)`` writes.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("MEM0_TELEMETRY", "False")

import numpy as np  # noqa: E402
import perf_data  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from results_md import write_section  # noqa: E402

NAME = "perf_archival"
TOP_K = 5
WARMUP = 5
INMEMORY_QUERIES_100K = 50


def model() -> Any:
    """The embedding every system is fed: pagefault's default (the one ``perf_data.vectors`` embeds with)."""
    from pagefault.models.embedding_choice import embedding_model

    return embedding_model(perf_data.DEFAULT)


def uncached(model: Any, texts: list[str]) -> np.ndarray:
    """``model``'s query vectors of ``texts``, its caches emptied first: one real embedding each time."""
    model.forget_cached()
    return model.embed_query_array(texts)


class SameVectors(Embeddings):
    """The benchmark's embedding for peers: stored passages get their precomputed vector, and any other
    text (a query) is embedded by the real model, uncached."""

    def __init__(self, texts: list[str], vecs: np.ndarray) -> None:
        self.model = model()
        self.known = {t: v for t, v in zip(texts, vecs)}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.known]
        fresh = dict(zip(missing, uncached(self.model, missing))) if missing else {}
        return [(self.known.get(t) if t in self.known else fresh[t]).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return uncached(self.model, [text])[0].tolist()


def timed(run: Callable[[str], Any], queries: list[str], before: Callable[[], None] = lambda: None) -> list[float]:
    for q in queries[:WARMUP]:
        before()
        run(q + " (warm-up)")
    out = []
    for q in queries:
        before()
        t0 = time.perf_counter()
        run(q)
        out.append(time.perf_counter() - t0)
    return out


def bench_pagefault(work: Path, texts: list[str], vecs: np.ndarray, queries: list[str]) -> list[float]:
    from pagefault.stores.scope import Scope
    from pagefault.stores.services import MemoryServices

    svc = MemoryServices.open(str(work / "pagefault"), embeddings=perf_data.DEFAULT)
    scope = Scope("bench")
    perf_data.load_archival(svc.archival, scope, texts, vecs)
    assert svc.archival.count(scope) == len(texts)

    def run(q: str) -> None:
        hits = svc.archival.search(scope, q, TOP_K)
        assert len(hits) == min(TOP_K, len(texts))

    return timed(run, queries, before=svc.embeddings.forget_cached)


def _raw_collection(work: Path, texts: list[str], vecs: np.ndarray):
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(work / "raw"), settings=Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("raw_bench", configuration={"hnsw": {"space": "cosine"}})
    for k in range(0, len(texts), 4_000):
        col.add(ids=[f"p{i}" for i in range(k, min(k + 4_000, len(texts)))], documents=texts[k:k + 4_000],
                embeddings=vecs[k:k + 4_000], metadatas=[{"scope": "bench"}] * len(texts[k:k + 4_000]))
    return col


def bench_raw_chroma(col, embedder, queries: list[str], *, like_pagefault: bool) -> list[float]:
    n = min(100, col.count()) if like_pagefault else TOP_K

    def run(q: str) -> None:
        v = uncached(embedder, [q])
        if like_pagefault:
            col.query(query_embeddings=v, n_results=n, where={"scope": "bench"},
                      include=["documents", "metadatas", "distances"])
        else:
            col.query(query_embeddings=v, n_results=n, include=["distances"])

    return timed(run, queries)


def bench_inmemory(texts: list[str], vecs: np.ndarray, queries: list[str]) -> list[float]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index={"dims": vecs.shape[1], "embed": SameVectors(texts, vecs), "fields": ["text"]})
    ns = ("bench", "archival")
    for k in range(0, len(texts), 2_000):
        store.batch([PutOp(ns, f"p{i}", {"text": texts[i]}) for i in range(k, min(k + 2_000, len(texts)))])

    def run(q: str) -> None:
        assert len(store.search(ns, query=q, limit=TOP_K)) == min(TOP_K, len(texts))

    return timed(run, queries)


def bench_mem0(work: Path, texts: list[str], vecs: np.ndarray, queries: list[str]) -> list[float] | str:
    """Mem0's search, or the reason it cannot run here."""
    try:
        import mem0
        from mem0 import Memory
    except ImportError as e:
        return f"mem0ai is not installed ({e}); `pip install mem0ai` from the registry, then rerun"
    import hashlib
    import logging
    from datetime import datetime, timezone

    logging.getLogger("mem0").setLevel(logging.ERROR)
    os.environ.setdefault("OPENAI_API_KEY", "unused-offline")  # Memory() builds an LLM client it never calls here
    embedder = SameVectors(texts, vecs)
    m = Memory.from_config({
        "vector_store": {"provider": "chroma", "config": {"collection_name": "mem0_bench", "path": str(work / "mem0")}},
        "embedder": {"provider": "langchain", "config": {"model": embedder, "embedding_dims": int(vecs.shape[1])}},
        "history_db_path": str(work / "mem0_history.db"),
    })
    first = min(20, len(texts))
    for t in texts[:first]:  # the library's own write path
        m.add(t, user_id="bench", infer=False)
    # The rest in the payload shape add(infer=False) writes, in bulk (100k one-by-one adds take hours).
    now = datetime.now(timezone.utc).isoformat()
    for k in range(first, len(texts), 4_000):
        chunk = range(k, min(k + 4_000, len(texts)))
        m.vector_store.insert(
            vectors=[vecs[i].tolist() for i in chunk],
            payloads=[{"data": texts[i], "text_lemmatized": texts[i], "hash": hashlib.md5(texts[i].encode()).hexdigest(),
                       "created_at": now, "updated_at": now, "role": "user", "user_id": "bench"} for i in chunk],
            ids=[f"m{i}" for i in chunk])

    def run(q: str) -> None:
        m.search(q, filters={"user_id": "bench"}, top_k=TOP_K)

    out = timed(run, queries)
    globals()["MEM0_VERSION"] = getattr(mem0, "__version__", "?")
    return out


def run_size(n: int, n_queries: int, skip_mem0: bool) -> list[tuple[str, Any]]:
    texts = perf_data.passages(n)
    vecs = perf_data.vectors(n)
    queries = perf_data.queries(n_queries + WARMUP)[WARMUP:]
    work = Path(tempfile.mkdtemp(prefix=f"pf-perf-archival-{n}-"))
    try:
        rows: list[tuple[str, Any]] = [("pagefault ArchivalStore.search (hybrid)", bench_pagefault(work, texts, vecs, queries))]
        col = _raw_collection(work, texts, vecs)
        rows.append(("raw Chroma query, top 5", bench_raw_chroma(col, model(), queries, like_pagefault=False)))
        rows.append(("raw Chroma, pagefault's request (filter, 100 candidates, docs)",
                     bench_raw_chroma(col, model(), queries, like_pagefault=True)))
        del col
        # A brute-force scan in Python: at 100k each query takes seconds, so it gets fewer of them.
        rows.append(("LangGraph InMemoryStore semantic search",
                     bench_inmemory(texts, vecs, queries if n <= 10_000 else queries[:INMEMORY_QUERIES_100K])))
        rows.append(("Mem0 OSS Memory.search (Chroma)",
                     "skipped (--no-mem0)" if skip_mem0 else bench_mem0(work, texts, vecs, queries)))
        return rows
    finally:
        gc.collect()
        shutil.rmtree(work, ignore_errors=True)


def embedding_only(n_queries: int) -> list[float]:
    embedder = model()
    return timed(lambda q: uncached(embedder, [q]), perf_data.queries(n_queries + 2 * WARMUP, seed=99)[WARMUP:])


def table(results: dict[int, list[tuple[str, Any]]], embed: list[float], n_queries: int, args_line: str) -> str:
    lines = [
        f"Command: `{args_line}`. Machine: {perf_data.machine()}. {n_queries} queries per size, top {TOP_K}, "
        f"times in ms per query including the query's embedding (`{perf_data.DEFAULT}`, pagefault's default, uncached: "
        "MiniLM int8 and USE Multilingual v3 each run once); passage vectors "
        "precomputed and fed to every system.",
        "",
        "| passages | system | p50 ms | p95 ms | p50 / raw Chroma | p95 / raw Chroma |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    e50, e95 = perf_data.percentiles(embed)
    for n, rows in results.items():
        raw = dict(rows)["raw Chroma query, top 5"]
        r50, r95 = perf_data.percentiles(raw)
        for system, samples in rows:
            if isinstance(samples, str):
                lines.append(f"| {n:,} | {system} | - | - | - | - |")
                continue
            p50, p95 = perf_data.percentiles(samples)
            lines.append(f"| {n:,} | {system} | {p50:.1f} | {p95:.1f} | {p50 / r50:.2f}x | {p95 / r95:.2f}x |")
    lines += ["", f"Query embedding alone: p50 {e50:.1f} ms, p95 {e95:.1f} ms."]
    if any(n > 10_000 for n in results):
        lines.append(f"InMemoryStore above 10k passages: the first {INMEMORY_QUERIES_100K} queries only (a Python "
                     "scan of every vector; each query takes seconds).")
    notes = {s for rows in results.values() for name, s in rows if isinstance(s, str)}
    for note in sorted(notes):
        lines.append(f"Mem0: {note}")
    if "MEM0_VERSION" in globals():
        lines.append(f"Mem0 {globals()['MEM0_VERSION']} ran offline: Chroma vector store, our embedding through its "
                     "`langchain` embedder, no LLM (search needs none). On Chroma it has no keyword (BM25) side, and "
                     "without spaCy installed its entity boosts are off; its first 20 records went through "
                     "`Memory.add(infer=False)`, the rest were written in that payload shape in bulk.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated passage counts")
    ap.add_argument("--queries", type=int, default=200, help="timed queries per size and system")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--no-mem0", action="store_true", help="leave Mem0 out")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = {}
    for n in sizes:
        t0 = time.perf_counter()
        results[n] = run_size(n, args.queries, args.no_mem0)
        print(f"{n} passages done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    embed = embedding_only(args.queries)
    given = argv if argv is not None else sys.argv[1:]
    cmd = "python benchmarks/perf_archival.py" + ("" if argv is None and len(sys.argv) == 1 else " " + " ".join(given))
    body = "## Archival search at scale\n\n" + table(results, embed, args.queries, cmd)
    print(body)
    if not args.no_write:
        write_section(Path(args.results), NAME, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
