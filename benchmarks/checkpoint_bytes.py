"""Checkpoint bytes per turn of one long thread, on pagefault's SQLite and Postgres checkpointers.

    python benchmarks/checkpoint_bytes.py                       # 10,000 turns each; writes benchmarks/RESULTS.md
    python benchmarks/checkpoint_bytes.py --turns 60 --no-write  # smoke

The conversation is ``perf_turns.script`` (statements, questions, acknowledgements, core facts) on one
thread, window 4,096 tokens, pagefault's offline model (not an LLM), through the graph ``open_embedded``
gives (``checkpoints.sqlite``) and the one ``open_postgres`` gives (LangGraph's ``PostgresSaver`` in a
fresh database on the machine's PostgreSQL, ``--admin-url``; dropped at the end). The two run side by
side, each in its own process.

Bytes are what the checkpointer's tables store for the thread (``tests/support/checkpoint_bytes.py``):
SQLite's checkpoint, metadata and write values; Postgres's checkpoint and metadata (``pg_column_size``,
after TOAST), channel blobs and writes. They are read before the first and after the last turn of each
reported range.

Then, as a check that nothing was lost, every checkpoint of the thread is read back straight from the
saver in one pass (``graph.saved_state.saved_history``, what export and recall rebuild read) and the
last ``--verify`` of them are compared with the graph's own ``get_state_history``; the thread's export
(``maintenance.transfer.thread_history``) must hold every message (evicted ones too).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import perf_data  # noqa: E402
import perf_turns  # noqa: E402
from results_md import write_section  # noqa: E402

NAME = "checkpoint-bytes"
USER = "bench"
THREAD = "long"
KINDS = ("sqlite", "postgres")
TARGET = 10_500
BEFORE_SQLITE = 105_840  # perf_turns, turns 9,900-10,000, before delta channels and compression


def ranges(turns: int) -> list[range]:
    """The reported turn ranges: 100 turns early, in the middle and at the end (fewer on short runs)."""
    w = min(100, max(turns // 10, 2))
    return [range(w, 2 * w), range(turns // 2, turns // 2 + w), range(turns - w, turns)]


def worker(kind: str, turns: int, verify: int, admin_url: str, out: str) -> int:
    from langchain_core.messages import HumanMessage
    from support.checkpoint_bytes import postgres_bytes, sqlite_bytes
    from support.engines import fresh_database

    from pagefault import Context, open_embedded
    from pagefault.graph.saved_state import saved_history
    from pagefault.maintenance.transfer import thread_history
    from pagefault.persistence.postgres import open_postgres

    os.environ["PAGEFAULT_TEST_POSTGRES"] = admin_url
    lines = perf_turns.script(turns)
    marks = {m for r in ranges(turns) for m in (r.start, r.stop)}
    config = {"configurable": {"thread_id": THREAD}}
    res: dict[str, Any] = {"kind": kind, "bytes_at": {}, "times": []}
    with tempfile.TemporaryDirectory(prefix="pf-ckpt-") as tmp:
        data = str(Path(tmp) / "d")
        ctx = Context(user_id=USER, data_dir=data, context_window=perf_turns.WINDOW, model="offline")
        with (fresh_database("pf_bench_ckpt") if kind == "postgres" else _nothing()) as url:
            with (open_postgres(url, data_dir=data) if url else open_embedded(data)) as p:

                def size() -> int:
                    return postgres_bytes(url, THREAD) if url else sqlite_bytes(Path(data) / "checkpoints.sqlite", THREAD)

                graph = p.graph()
                reads = _timed(p.checkpointer, "get_delta_channel_history")
                for i, line in enumerate(lines):
                    if i in marks:
                        res["bytes_at"][i] = size()
                    t0 = time.perf_counter()
                    graph.invoke({"messages": [HumanMessage(line)]}, config, context=ctx)
                    res["times"].append(time.perf_counter() - t0)
                    if (i + 1) % 500 == 0:
                        print(f"  {kind}: turn {i + 1:,} of {turns:,}, {size() / (i + 1):,.0f} bytes/turn so far",
                              file=sys.stderr, flush=True)
                res["bytes_at"][turns] = size()
                res["delta_reads"], res["delta_read_s"] = reads.calls, reads.seconds
                t0 = time.perf_counter()
                read = saved_history(p.checkpointer, {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}})
                res["read_all_s"] = time.perf_counter() - t0
                res["checkpoints"] = len(read)
                mismatched = 0
                by_id = {t.checkpoint["id"]: t.checkpoint["channel_values"] for t in read[-verify:]}
                checked = 0
                for snap in graph.get_state_history(config, limit=verify):
                    got = by_id[snap.config["configurable"]["checkpoint_id"]]
                    want = snap.values
                    same = [(m.id, m.content) for m in got.get("messages", [])] == \
                        [(m.id, m.content) for m in want.get("messages", [])]
                    same = same and all(got.get(k) == want.get(k) for k in ("summary", "system_prompt", "tokens"))
                    mismatched += not same
                    checked += 1
                res["verified"], res["mismatched"] = checked, mismatched
                history = thread_history(p.checkpointer, THREAD)
                assert history is not None
                messages, latest = history
                res["messages"] = len(messages)
                res["evicted"] = int(latest.get("evicted_count", 0))
                res["compactions"] = int(latest.get("compactions", 0))
                res["export_complete"] = len(messages) == res["evicted"] + len(latest.get("messages", []))
    Path(out).write_text(json.dumps(res))
    return 0


class _Timed:
    calls = 0
    seconds = 0.0


def _timed(saver: Any, name: str) -> _Timed:
    """Count the calls of ``saver.<name>`` and the time spent in them, from now on."""
    tally, inner = _Timed(), getattr(saver, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            tally.calls += 1
            tally.seconds += time.perf_counter() - t0

    setattr(saver, name, timed)
    return tally


class _nothing:
    def __enter__(self) -> str:
        return ""

    def __exit__(self, *exc: Any) -> None:
        return None


def render(results: list[dict[str, Any]], turns: int, command: str, started: str, seconds: float) -> str:
    rs = ranges(turns)
    head = " | ".join(f"bytes/turn, turns {r.start:,}-{r.stop:,}" for r in rs)
    lines = [
        f"`{command}` — {turns:,} turns on one thread per checkpointer, window {perf_turns.WINDOW:,} tokens, offline "
        f"model (not an LLM), both checkpointers side by side. Machine: {started}. Took {seconds / 60:.0f} min.",
        "",
        f"| checkpointer | {head} | all checkpoint data | checkpoints | per-turn p50 / p95 (ms, last range) "
        "| delta-channel reads per turn (calls, ms) |",
        "|---|" + "---:|" * (len(rs) + 4),
    ]
    for res in results:
        at = {int(k): v for k, v in res["bytes_at"].items()}
        cells = " | ".join(f"{(at[r.stop] - at[r.start]) / len(r):,.0f}" for r in rs)
        p50, p95 = perf_data.percentiles(res["times"][rs[-1].start:rs[-1].stop])
        reads = f"{res['delta_reads'] / turns:.1f}, {1000 * res['delta_read_s'] / turns:.1f}"
        lines.append(f"| {res['kind']} | {cells} | {at[turns] / 1e6:,.1f} MB | {res['checkpoints']:,} | {p50:.1f} / {p95:.1f} "
                     f"| {reads} |")
    sqlite = next((r for r in results if r["kind"] == "sqlite"), None)
    lines.append("")
    if sqlite:
        at = {int(k): v for k, v in sqlite["bytes_at"].items()}
        late = (at[rs[-1].stop] - at[rs[-1].start]) / len(rs[-1])
        lines.append(f"Before (delta channels and compression), `perf_turns.py` measured {BEFORE_SQLITE:,} bytes per turn "
                     f"on SQLite at turns 9,900-10,000: now {late:,.0f}, {BEFORE_SQLITE / late:.1f}x less "
                     f"(target at most {TARGET:,}).")
    for res in results:
        lines.append(
            f"- {res['kind']}: every one of the {res['checkpoints']:,} checkpoints read back from the saver in one pass in "
            f"{res['read_all_s']:.1f} s; the last {res['verified']} compared with `get_state_history`: "
            f"{res['mismatched']} differ. Export holds {res['messages']:,} messages ({res['evicted']:,} evicted, "
            f"{res['compactions']} compactions): {'complete' if res['export_complete'] else 'INCOMPLETE'}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--checkpointers", default=",".join(KINDS), help="comma-separated: sqlite, postgres")
    ap.add_argument("--verify", type=int, default=200, help="checkpoints compared with get_state_history")
    ap.add_argument("--admin-url", default=os.environ.get("PAGEFAULT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.turns, args.verify, args.admin_url, args.out)
    kinds = [k for k in args.checkpointers.split(",") if k]
    started, t0 = perf_data.machine(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pf-ckpt-results-") as tmp:
        procs = {k: subprocess.Popen([sys.executable, __file__, "--worker", k, "--turns", str(args.turns),
                                      "--verify", str(args.verify), "--admin-url", args.admin_url,
                                      "--out", str(Path(tmp) / f"{k}.json")]) for k in kinds}
        failed = [k for k, proc in procs.items() if proc.wait() != 0]
        if failed:
            raise SystemExit(f"checkpoint_bytes: the {', '.join(failed)} run failed")
        results = [json.loads((Path(tmp) / f"{k}.json").read_text()) for k in kinds]
    command = "python benchmarks/checkpoint_bytes.py" + (f" {shlex.join(argv)}" if argv else
                                                         f" {shlex.join(sys.argv[1:])}" if sys.argv[1:] else "")
    table = render(results, args.turns, command.strip(), started, time.perf_counter() - t0)
    print(table)
    if not args.no_write:
        write_section(Path(args.results), NAME, "## Checkpoint bytes per turn\n\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
