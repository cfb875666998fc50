"""Does a Chroma call let other Python threads run? Writes (upsert) against reads (query, get).

    python benchmarks/chroma_gil.py                      # 20k records; writes benchmarks/RESULTS.md
    python benchmarks/chroma_gil.py --records 500 --calls 5 --no-write      # smoke

pagefault writes Chroma from background threads (the recall writer, the archival journal) so that a
turn does not wait for it. That only helps if the call lets the turn's thread run meanwhile. A
ticker thread wakes every 0.5 ms and notes the time; for each timed call this reports how long the
ticker was stopped during it (its longest gap between ticks that falls inside the call). A call that
holds the GIL throughout stops the ticker for about its whole duration; one that releases it stops
the ticker for well under a millisecond. Records are random unit vectors (384 dimensions) with a
scope, a time and a short document, in a persistent collection on this disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402

NAME = "chroma_gil"
DIM = 384


class Ticker:
    """A thread that records a timestamp every ``interval`` seconds while it can get the GIL."""

    def __init__(self, interval: float = 0.0005) -> None:
        self.interval = interval
        self.ticks: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ticks.append(time.perf_counter())
            time.sleep(self.interval)

    def __enter__(self) -> "Ticker":
        self._thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def stopped(self, t0: float, t1: float) -> float:
        """The longest time inside [t0, t1] between two consecutive ticks (or a call edge)."""
        inside = [t for t in self.ticks if t0 <= t <= t1]
        edges = [t0, *inside, t1]
        return max(b - a for a, b in zip(edges, edges[1:]))


def _records(rng: np.random.Generator, start: int, n: int) -> dict[str, Any]:
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return dict(ids=[f"r{i}" for i in range(start, start + n)], embeddings=vecs,
                metadatas=[{"scope": "bench", "created_at": float(i)} for i in range(start, start + n)],
                documents=[f"record {i} about the shed near the river" for i in range(start, start + n)])


def measure(records: int, calls: int, batches: tuple[int, ...]) -> list[tuple[str, float, float]]:
    """(operation, median call ms, median longest stop of the ticker ms) per operation."""
    import chromadb
    from chromadb.config import Settings

    rng = np.random.default_rng(7)
    work = Path(tempfile.mkdtemp(prefix="pagefault-gil-"))
    try:
        client = chromadb.PersistentClient(str(work), settings=Settings(anonymized_telemetry=False))
        col = client.get_or_create_collection("gil-probe", metadata={"hnsw:space": "cosine"})
        for i in range(0, records, 1000):
            col.upsert(**_records(rng, i, min(1000, records - i)))
        next_id = [records]

        def upsert(n: int) -> Callable[[], object]:
            def call() -> object:
                kw = _records(rng, next_id[0], n)
                next_id[0] += n
                return col.upsert(**kw)
            return call

        q = rng.standard_normal((1, DIM)).astype(np.float32)
        ops: list[tuple[str, Callable[[], object]]] = [(f"upsert, {n} record(s)", upsert(n)) for n in batches]
        ops += [("query, 100 neighbours, scope filter, documents and metadata",
                 lambda: col.query(query_embeddings=q, n_results=100, where={"scope": "bench"},
                                   include=["documents", "metadatas", "distances"])),
                ("get, 20 ids, documents and metadata",
                 lambda: col.get(ids=[f"r{i}" for i in range(20)], include=["documents", "metadatas"]))]
        out = []
        with Ticker() as ticker:
            for name, call in ops:
                took, stops = [], []
                for _ in range(calls):
                    time.sleep(0.005)  # let the ticker run between calls
                    t0 = time.perf_counter()
                    call()
                    t1 = time.perf_counter()
                    took.append(t1 - t0)
                    stops.append(ticker.stopped(t0, t1))
                out.append((name, 1000 * float(np.median(took)), 1000 * float(np.median(stops))))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(rows: list[tuple[str, float, float]], records: int, calls: int, cmd: str) -> str:
    import chromadb
    import perf_data

    lines = [
        "## Chroma calls and the GIL (issue 4)",
        "",
        f"Command: `{cmd}`. Machine: {perf_data.machine()}. chromadb {chromadb.__version__}, a persistent "
        f"collection of {records:,} records; {calls} calls of each operation; medians.",
        "",
        "| operation | call (ms) | other Python threads stopped, longest (ms) | share of the call |",
        "|---|---:|---:|---:|",
    ]
    for name, ms, stop in rows:
        lines.append(f"| {name} | {ms:.1f} | {stop:.1f} | {min(stop / ms, 1.0) * 100:.0f} % |")
    lines += ["", "The ticker wakes every 0.5 ms, so a call of about a millisecond shows a stop of that order whether "
                  "or not it holds the GIL; the long calls tell: the writes stop every other Python thread for their "
                  "whole duration, the filtered query for about a millisecond of it."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.records < 1 or args.calls < 1:
        ap.error("--records and --calls must be at least 1")
    rows = measure(args.records, args.calls, (1, 4, 16, 64))
    cmd = "python benchmarks/chroma_gil.py" + ("" if argv is None or not argv else " " + " ".join(argv))
    body = table(rows, args.records, args.calls, cmd)
    print(body)
    if not args.no_write:
        from results_md import write_section

        write_section(Path(args.results), NAME, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
