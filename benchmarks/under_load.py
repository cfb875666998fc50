"""The timing-sensitive test files, run again and again while a CPU hog keeps every core busy.

A test that passes on an idle machine and fails on a loaded one asserts a speed, not a behaviour.
This runs the multi-process and timing-sensitive files (replicas, consolidation, crash, killed
turns, several processes, and the `langgraph dev` ones) ``--times`` times in a row, each time in a
fresh pytest process, while one busy loop per core runs beside them, and writes how many rounds
passed to ``benchmarks/RESULTS.md``:

    .venv/bin/python benchmarks/under_load.py --times 10

It stops at the first failing round (``--keep-going`` runs them all) and prints that round's
failures. The hog is plain Python (one process per core, spinning), so nothing beyond the test
extra is needed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from results_md import write_section

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    "tests/integration/test_replicas.py",
    "tests/integration/test_postgres.py",
    "tests/unit/consolidation",
    "tests/integration/test_crash.py",
    "tests/integration/test_multiprocess.py",
    "tests/integration/test_killed_turn.py",
    "tests/server",
]


def _spin(stop: "multiprocessing.synchronize.Event") -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=int, default=10, help="rounds of the whole set (default 10)")
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy loops (default: one per core)")
    ap.add_argument("--keep-going", action="store_true", help="run every round even after a failure")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    ap.add_argument("files", nargs="*", help="test files or folders (default: the timing-sensitive set)")
    args = ap.parse_args()
    files = [f for f in (args.files or FILES) if (ROOT / f).exists()]
    missing = sorted(set(args.files or FILES) - set(files))
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    rounds: list[tuple[int, bool, float, str]] = []
    try:
        for i in range(1, args.times + 1):
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                                  cwd=ROOT, capture_output=True, text=True)
            took = time.monotonic() - started
            summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
            ok = proc.returncode == 0
            rounds.append((i, ok, took, summary))
            print(f"round {i}/{args.times}: {'pass' if ok else 'FAIL'} in {took:.0f}s: {summary}", flush=True)
            _report(args, files, missing, rounds, final=False)  # the table so far, should the run be stopped
            if not ok:
                print(proc.stdout[-6000:], proc.stderr[-2000:], sep="\n")
                if not args.keep_going:
                    break
    finally:
        stop.set()
        for h in hogs:
            h.join(timeout=5)
    passed = _report(args, files, missing, rounds, final=True)
    return 0 if passed == args.times else 1


def _report(args: argparse.Namespace, files: list[str], missing: list[str],
            rounds: list[tuple[int, bool, float, str]], *, final: bool) -> int:
    """Write (unless ``--no-write``) and, when ``final``, print the table of the rounds so far; returns
    how many passed."""
    passed = sum(ok for _, ok, _, _ in rounds)
    lines = [
        "## Timing-sensitive tests under a CPU hog (issue 22)",
        "",
        f"`.venv/bin/python benchmarks/under_load.py --times {args.times}`: {args.hogs} busy loops (one per core) "
        "beside each round; each round is one fresh pytest process over:",
        "",
        *[f"- `{f}`" for f in files],
        *([""] + [f"Not present, left out: {', '.join(missing)}"] if missing else []),
        "",
        "| round | result | wall time (s, loaded) | pytest summary |",
        "|---|---|---|---|",
        *[f"| {i} | {'pass' if ok else 'FAIL'} | {took:.0f} | {summary} |" for i, ok, took, summary in rounds],
        "",
        f"**{passed} of {args.times} rounds passed in a row**" if passed == args.times == len(rounds)
        else f"**{passed} of {len(rounds)} rounds run passed** (of {args.times} asked)",
    ]
    table = "\n".join(lines)
    if final:
        print(table)
    if not args.no_write:
        write_section(ROOT / "benchmarks" / "RESULTS.md", "under-load", table)
    return passed


if __name__ == "__main__":
    raise SystemExit(main())
