"""Resident memory of an embedded pagefault process against the records it stores: N archival passages
and N recall entries, at 10k / 100k / 300k / 1M each.

    python benchmarks/rss_scale.py                                # 10k, 100k, 300k, 1M; writes benchmarks/RESULTS.md
    python benchmarks/rss_scale.py --sizes 2000 --no-write        # smoke

Every size is measured in a fresh process (so a smaller size's memory does not stay in a larger one's),
and so is an empty data directory, the baseline the per-record figures are taken from. That process
opens the directory with ``MemoryServices.open`` (the embedded default: archival in Chroma plus
``archival_recent.sqlite``, recall in ``recall.sqlite``, BM25 in ``lexical.sqlite``), and reports:

- RSS cold: just after the open, once the BM25 postings the open starts loading on background threads
  are loaded (recall's vectors are read by the open itself), after ``gc.collect()``;
- RSS after searches: after one ``ArchivalStore.search`` and one ``RecallIndex.search`` (what the
  ``archival_memory_search`` and ``conversation_search`` tools call), which load the rest: the embedding
  models for the query and Chroma's HNSW index;
- peak: ``ru_maxrss`` at the end (the loads' transient copies included);
- search p50: ``--queries`` timed searches of each kind, top 5, each paying for one real query
  embedding (the embedding cache is emptied before each).

The data is built once per size into ``benchmarks/.cache/rss-scale/n<N>`` (gitignored; ``--cache``),
by a child process, starting from a copy of the largest smaller size already built. A build cut short
resumes where its records stop (``n<N>.partial``): record ids are deterministic and writes are
upserts, so a batch written twice is stored once. Vectors are precomputed: seeded random unit vectors
of the default embedding's dimensions (896, ``offline-joint``'s), not its vectors (1M embeddings would
take hours, and memory does not depend on the values). They go in through pagefault's own write
paths, found in the embedding cache as ``pagefault ingest`` finds the batch it embedded ahead: archival passages through
``ArchivalStore.insert_many`` (a document's passages: guard, redaction, provenance, Chroma and BM25),
recall entries through ``RecallIndex.add`` (what the recall writer runs for a turn: each message
and its unit, vectors in ``recall.sqlite``, BM25 rows). All records belong to one user.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import perf_data  # noqa: E402
from results_md import write_section  # noqa: E402

#: Its RESULTS section: one per embedding, the vectors' dimensions being part of what is measured ("rss-scale"
#: holds the run on MiniLM's 384 dimensions, the default then, to 1M records).
NAME = f"rss-scale-{perf_data.DEFAULT}"
#: Built directories are kept per embedding: the vectors' dimensions are part of what is measured.
CACHE = perf_data.CACHE / "rss-scale" / perf_data.DEFAULT
SEED = 20261201
#: The default embedding's (``offline-joint``: 896).
DIMENSIONS = 896
USER = "rss-bench"
#: Records per write call (under the embedding cache's 4,096 vectors, so one batch fits in it).
BATCH = 1_000
#: Messages per recall thread, and the epoch second the synthetic history starts at.
THREAD_LEN = 1_000
T0 = 1_700_000_000.0
DONE = "built.json"
TOP_K = 5
WARMUP = 3
MB = 1024 * 1024


# --- the data ---------------------------------------------------------------------------------------


def unit_vectors(kind: int, batch: int, n: int):
    """``n`` seeded random unit vectors, the same for the same (kind, batch) in every run."""
    import numpy as np

    v = np.random.default_rng([SEED, kind, batch]).standard_normal((n, DIMENSIONS), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def passages(batch: int) -> list[str]:
    """The archival passages of one batch (records ``batch * BATCH`` on), in perf_data's vocabulary."""
    rng = random.Random(SEED * 1_000_003 + batch)
    return [perf_data.passage(rng, batch * BATCH + j) for j in range(BATCH)]


def messages(batch: int) -> list[Any]:
    """The recall messages of one batch: a user line and the assistant's answer, in turn."""
    from langchain_core.messages import AIMessage, HumanMessage

    rng = random.Random(SEED * 2_000_003 + batch)
    out: list[Any] = []
    for j in range(BATCH):
        i = batch * BATCH + j
        said = perf_data.passage(rng, i).replace("(record", "(message")
        out.append(HumanMessage(f"Remember this: {said}") if i % 2 == 0 else AIMessage(f"Understood. {said}"))
    return out


def prefill(model: Any, texts: list[str], vecs) -> None:
    """Put ``vecs`` in the store's embedding ``model``'s cache as the vectors of ``texts``
    (``EmbeddingModel.prime``), as ``ingest_document`` does with the batch it embedded ahead: the write
    path then finds them there."""
    model.forget_cached()
    model.prime(texts, vecs)
    got = model.embed_array(texts[:1])  # a hit, or the cache is keyed differently now: say so, not embed 1M
    if not (got[0] == vecs[0]).all():
        raise SystemExit("rss_scale: the embedding cache did not return the precomputed vector (its key changed?)")


def fill_archival(svc: Any, n: int) -> None:
    from tqdm import tqdm

    from pagefault.stores.provenance import Provenance
    from pagefault.stores.scope import Scope

    scope = Scope(USER)
    have = svc.archival.count(scope)
    if have >= n:
        return
    first = max(0, have // BATCH - 1)  # the last batch may be half written: again (upserts)
    with tqdm(total=n, initial=first * BATCH, desc=f"archival passages, n={n:,}", unit="rec", file=sys.stderr,
              smoothing=0.05, mininterval=2) as bar:
        for b in range(first, -(-n // BATCH)):
            texts = passages(b)[:n - b * BATCH]
            prefill(svc.embeddings, texts, unit_vectors(1, b, len(texts)))
            got = svc.archival.insert_many(scope, [(t, Provenance(source="document", message_id=f"rss#p{b * BATCH + j}"))
                                                   for j, t in enumerate(texts)])
            if any(r.fact_key for r in got):
                raise SystemExit("rss_scale: a synthetic passage stated a fact (slow path); change the corpus")
            bar.update(len(texts))
    assert svc.archival.count(scope) == n, (svc.archival.count(scope), n)


def fill_recall(svc: Any, n: int) -> None:
    from tqdm import tqdm

    from pagefault.stores.recall import conversation_turns, dense_text, recall_text
    from pagefault.stores.scope import Scope

    scope = Scope(USER)
    have = svc.recall.count(scope)
    if have >= n:
        return
    first = max(0, have // BATCH - 1)
    with tqdm(total=n, initial=first * BATCH, desc=f"recall entries, n={n:,}", unit="rec", file=sys.stderr,
              smoothing=0.05, mininterval=2) as bar:
        for b in range(first, -(-n // BATCH)):
            msgs = messages(b)[:n - b * BATCH]
            prefill(svc.embeddings, [dense_text(recall_text(m)) for m in msgs], unit_vectors(2, b, len(msgs)))
            start = b * BATCH
            # A batch never spans two threads (THREAD_LEN is a multiple of BATCH).
            thread, at = f"thread-{start // THREAD_LEN:05d}", start % THREAD_LEN
            entries = list(enumerate(msgs, at))
            turns = dict(zip(range(at, at + len(msgs)), conversation_turns(msgs, at // 2)))
            svc.recall.add(scope, thread, entries, f"cp-{thread}-{at}", created_at=T0 + start, turns=turns)
            bar.update(len(msgs))
    assert svc.recall.count(scope) == n, (svc.recall.count(scope), n)


def _done(path: Path) -> dict[str, Any] | None:
    marker = path / DONE
    return json.loads(marker.read_text()) if marker.exists() else None


def build(n: int, cache: Path) -> None:
    """Make ``cache/n<n>`` (once): a copy of the largest smaller size built, topped up to ``n``."""
    final = cache / f"n{n}"
    if _done(final):
        return
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / f"n{n}.partial"
    if not work.exists():
        smaller = sorted((int(p.name[1:]), p) for p in cache.glob("n*") if p.name[1:].isdigit()
                         and int(p.name[1:]) < n and _done(p))
        if smaller:
            copying = cache / f"n{n}.copying"
            shutil.rmtree(copying, ignore_errors=True)
            print(f"rss_scale: copying the {smaller[-1][0]:,}-record directory to start {n:,}", file=sys.stderr, flush=True)
            shutil.copytree(smaller[-1][1], copying, ignore=shutil.ignore_patterns(DONE))
            copying.rename(work)
        else:
            work.mkdir()
    from pagefault.stores.services import MemoryServices

    t0 = time.perf_counter()
    svc = MemoryServices.open(str(work))
    fill_archival(svc, n)
    fill_recall(svc, n)
    MemoryServices.forget(str(work))
    import resource

    took, peak = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    (work / DONE).write_text(json.dumps({"archival": n, "recall": n, "user": USER, "vectors": "seeded random unit",
                                         "last build seconds": round(took), "last build peak bytes": peak}))
    work.rename(final)
    print(f"rss_scale: built {n:,} records of each kind in {took / 60:,.1f} min (this build's peak RSS {peak / MB:,.0f} MiB)",
          file=sys.stderr, flush=True)


# --- one measurement, in its own process --------------------------------------------------------------


def measure(data_dir: Path, n_queries: int) -> dict[str, Any]:
    import resource

    import numpy as np
    import psutil

    proc = psutil.Process()

    def rss() -> int:
        gc.collect()
        return int(proc.memory_info().rss)

    from pagefault.stores.scope import Scope
    from pagefault.stores.services import MemoryServices

    out: dict[str, Any] = {"rss_imported": rss()}
    scope = Scope(USER)
    t0 = time.perf_counter()
    svc = MemoryServices.open(str(data_dir))
    lexical = [svc.archival.index.lexical, svc.recall.index.lexical, svc.recall.units.lexical]
    for lex in lexical:  # the postings the open began loading on its threads
        wait = getattr(lex, "wait_resident", None)
        if wait is not None and not wait(3_600):
            raise SystemExit(f"rss_scale: the {lex.kind} BM25 postings did not load")
    out["open_s"] = time.perf_counter() - t0
    out["rss_cold"] = rss()
    out["archival"], out["recall"] = svc.archival.count(scope), svc.recall.count(scope)
    queries = perf_data.queries(2 * (n_queries + WARMUP) + 1, seed=SEED + 7)
    svc.archival.search(scope, queries[-1], TOP_K)
    out["rss_after_archival_search"] = rss()
    svc.recall.search(scope, queries[-1], TOP_K)
    svc.archival.index.embeddings.embed_array(queries[-1:])  # the model is loaded in every row (an empty store's search skips it)
    out["rss_after_searches"] = rss()
    for key, search, qs in (("archival_ms", svc.archival.search, queries[:n_queries + WARMUP]),
                            ("recall_ms", svc.recall.search, queries[n_queries + WARMUP:-1])):
        samples = []
        for k, q in enumerate(qs):
            svc.embeddings.forget_cached()
            t = time.perf_counter()
            hits = search(scope, q, TOP_K)
            if k >= WARMUP:
                samples.append(time.perf_counter() - t)
            assert len(hits) == min(TOP_K, out["archival" if key == "archival_ms" else "recall"]), (key, len(hits))
        out[key] = float(np.percentile(np.asarray(samples) * 1000, 50)) if samples else float("nan")
    out["rss_end"] = rss()
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    out["disk"] = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file())
    return out


def _child(args: list[str]) -> str:
    """Run this script with ``args`` in a fresh process; its stdout (stderr passes through)."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"rss_scale: {' '.join(args)} failed (exit {done.returncode})")
    return done.stdout


def run_size(n: int, cache: Path, n_queries: int) -> dict[str, Any]:
    if n:
        _child(["--build", str(n), "--cache", str(cache)])
        data_dir = cache / f"n{n}"
    else:
        data_dir = cache / "empty"
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    got = json.loads(_child(["--measure", str(data_dir), "--queries", str(n_queries)]).strip().splitlines()[-1])
    print(f"rss_scale: measured {n:,} records in {time.perf_counter() - t0:.0f} s: "
          + ", ".join(f"{k} {v / MB:,.0f} MiB" if k.startswith(("rss", "peak", "disk")) else f"{k} {v:,.1f}"
                      for k, v in got.items()), file=sys.stderr, flush=True)
    if not n:
        shutil.rmtree(data_dir, ignore_errors=True)
    return got


# --- the table -----------------------------------------------------------------------------------------


def fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """Least squares (intercept bytes, bytes per N) of (N, RSS) points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def table(results: dict[int, dict[str, Any]], n_queries: int, cmd: str, machine: str) -> str:
    base = results[0]
    lines = [
        f"Command: `{cmd}`. Machine: {machine}. One embedded process per row (a fresh one for each size), "
        f"N archival passages and N recall entries of one user; RSS after `gc.collect()`, peak is `ru_maxrss`; "
        f"search p50 over {n_queries} queries of each kind, top {TOP_K}, query embedding (`offline-joint`, uncached) included.",
        "",
        "| records (each kind) | RSS cold MiB | RSS after searches MiB | peak MiB | archival search p50 ms "
        "| conversation_search p50 ms | on disk MiB | bytes / record over empty |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, r in results.items():
        per = f"{(r['rss_after_searches'] - base['rss_after_searches']) / (2 * n):,.0f}" if n else "-"
        lines.append(f"| {n:,} | {r['rss_cold'] / MB:,.0f} | {r['rss_after_searches'] / MB:,.0f} | {r['peak'] / MB:,.0f} "
                     f"| {r['archival_ms']:.1f} | {r['recall_ms']:.1f} | {r['disk'] / MB:,.0f} | {per} |")
    a, b = fit([(n, r["rss_after_searches"]) for n, r in results.items()])
    pa, pb = fit([(n, r["peak"]) for n, r in results.items()])
    lines += [
        "",
        f"Fit (least squares over the rows, empty directory included): RSS after searches = {a / MB:,.0f} MiB + "
        f"{b:,.0f} bytes x N, i.e. **{b / 2:,.0f} bytes per stored record** (archival passage or recall entry, "
        f"averaged); peak = {pa / MB:,.0f} MiB + {pb:,.0f} bytes x N. At that rate 1M of each would hold "
        f"{(a + b * 1_000_000) / 2**30:,.1f} GiB resident"
        + (f" (peak {(pa + pb * 1_000_000) / 2**30:,.1f} GiB)" if pb > 0 else " (the peak does not grow measurably "
           "over these sizes)") + ", and "
        + ", ".join(f"{g} GiB is reached at N = {max(0.0, (g * 2**30 - a) / b):,.0f}" for g in (2, 4, 8) if b > 0)
        + ".",
        "Cold is the directory just opened: recall's vectors (a numpy matrix per recall collection, `recall` and "
        "`recall_unit`) and the BM25 postings (archival, recall, recall units) are read at open; the first searches "
        "add the embedding models and Chroma's HNSW index of archival. Vectors are seeded random unit vectors written "
        "through `ArchivalStore.insert_many` and `RecallIndex.add` (see the script's docstring).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,300000,1000000", help="comma-separated record counts (each kind)")
    ap.add_argument("--queries", type=int, default=30, help="timed searches of each kind per size")
    ap.add_argument("--cache", default=str(CACHE), help="where the built data directories are kept")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--build", type=int, help=argparse.SUPPRESS)  # child: build one size
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # child: measure one data directory
    args = ap.parse_args(argv)
    if args.build is not None:
        build(args.build, Path(args.cache))
        return 0
    if args.measure is not None:
        print(json.dumps(measure(Path(args.measure), args.queries)))
        return 0
    sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    if not sizes or sizes[0] <= 0:
        ap.error("--sizes: positive record counts")
    machine = perf_data.machine()
    results = {0: run_size(0, Path(args.cache), args.queries)}
    for n in sizes:
        results[n] = run_size(n, Path(args.cache), args.queries)
    given = argv if argv is not None else sys.argv[1:]
    cmd = "python benchmarks/rss_scale.py" + (" " + " ".join(given) if given else "")
    body = "## Resident memory against stored records (embedded)\n\n" + table(results, args.queries, cmd, machine)
    print(body)
    if not args.no_write:
        write_section(Path(args.results), NAME, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
