"""One long thread with a window too big to compact, on each checkpointer: does a turn's cost stay flat?

    python benchmarks/long_thread.py                                   # 250 turns, window 200,000 tokens
    python benchmarks/long_thread.py --turns 40 --no-write             # smoke: prints the table
    python benchmarks/long_thread.py --json-out before.json --no-write # keep the figures (from another checkout)
    python benchmarks/long_thread.py --before before.json              # and show them beside this run's

Each turn of a graph with delta channels starts by rebuilding them: the saver walks back from the
latest checkpoint to each channel's last full value and replays the writes since. The walk must stay
short however long the thread is. With a big window nothing compacts, so the summary (written at
compactions) is never written again: this benchmark is the case where a rarely written channel's last
full value drifts back towards the thread's first checkpoint.

Per checkpointer (SQLite, the embedded default; the machine's PostgreSQL, ``PAGEFAULT_TEST_POSTGRES``
as the tests use it, in a fresh database dropped at the end), one pagefault graph on one thread of
``perf_turns.script`` (the offline model, not an LLM), archival and recall under a temporary data
directory. Reported: the per-turn p50 of the first and the last 40 turns, the saver's
``get_delta_channel_history`` at the latest checkpoint (median of 10), and how many writes each delta
channel replays from its full value.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import perf_turns  # noqa: E402
from results_md import write_section  # noqa: E402

NAME = "long-thread"
SPAN = 40


def one(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run the thread on ``backend``; its figures."""
    from langchain_core.messages import HumanMessage
    from support.engines import fresh_database
    from tqdm import tqdm

    from pagefault import Context, open_embedded
    from pagefault.graph.state import DELTA_CHANNELS
    from pagefault.persistence.postgres import open_postgres
    from pagefault.stores.services import MemoryServices

    with ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="pf-long-thread-"))
        data = str(Path(work) / backend)
        url = stack.enter_context(fresh_database("pf_long_thread")) if backend == "postgres" else ""
        persistence: Any = stack.enter_context(open_postgres(url, data_dir=data) if url else open_embedded(data))
        ctx = Context(user_id="bench", data_dir=data, context_window=args.window, model="offline",
                      chroma_url="", database_url=url)
        graph = persistence.graph()
        config = {"configurable": {"thread_id": "long"}}
        times = []
        for text in tqdm(perf_turns.script(args.turns), desc=backend, unit="turn", file=sys.stderr):
            t0 = time.perf_counter()
            graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx)
            times.append(time.perf_counter() - t0)
        svc = MemoryServices.open(data, chroma_url="", database_url=url)
        svc.recall.writer.flush()
        values = graph.get_state(config).values
        saver = persistence.checkpointer
        head = saver.get_tuple({"configurable": {"thread_id": "long", "checkpoint_ns": ""}}).config
        reads, history = [], {}
        for _ in range(10):
            t0 = time.perf_counter()
            history = saver.get_delta_channel_history(config=head, channels=list(DELTA_CHANNELS))
            reads.append(time.perf_counter() - t0)
        checkpoints = sum(1 for _ in saver.list({"configurable": {"thread_id": "long", "checkpoint_ns": ""}}))
        return {
            "backend": backend, "turns": args.turns, "compactions": int(values.get("compactions", 0)),
            "first": 1000 * statistics.median(times[:SPAN]), "last": 1000 * statistics.median(times[-SPAN:]),
            "read": 1000 * statistics.median(reads), "checkpoints": checkpoints,
            "replayed": {ch: (len(h["writes"]), "seed" in h) for ch, h in history.items()},
        }


def render(rows: list[dict[str, Any]], before: dict[str, Any] | None, args: argparse.Namespace, command: str,
           started: datetime, load: tuple[float, ...]) -> str:
    lines = [
        "## One long thread that never compacts",
        "",
        f"`{command}` — {args.turns} turns on one thread per checkpointer, window {args.window:,} tokens (too big to "
        f"compact), offline model (not an LLM). Run {started:%Y-%m-%d %H:%M} UTC, 2 CPU cores shared with PostgreSQL; "
        f"load average {', '.join(f'{x:.1f}' for x in load)} at the start. `delta read` is the saver's "
        "`get_delta_channel_history` at the latest checkpoint (median of 10); `replayed` is how many writes each delta "
        "channel replays from its last full value (messages / summary / tokens / system_prompt; `*`: no full value, "
        "replayed from the thread's first checkpoint).",
        "",
        "| code | checkpointer | compactions | checkpoints | turn p50, first 40 (ms) | turn p50, last 40 (ms) | "
        "delta read (ms) | replayed |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    runs = [(before["label"], r) for r in before["rows"]] if before else []
    runs += [(args.label, r) for r in rows]
    for label, r in runs:
        replayed = " / ".join(f"{n}{'' if seeded else '*'}" for n, seeded in r["replayed"].values())
        lines.append(f"| {label} | {r['backend']} | {r['compactions']} | {r['checkpoints']:,} | {r['first']:.1f} | "
                     f"{r['last']:.1f} | {r['read']:.1f} | {replayed} |")
    if before:
        lines += ["", f"The `{before['label']}` rows are another run of this script ({before['started']}), from a "
                  "checkout of that commit, on the same machine minutes apart: figures of two runs, not one."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=250)
    ap.add_argument("--window", type=int, default=200_000, help="context window in tokens (big: nothing compacts)")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--label", default="", help="what the table calls this run's code (default: git HEAD)")
    ap.add_argument("--json-out", default="", help="keep this run's figures as JSON here")
    ap.add_argument("--before", default="", help="a --json-out file of another run, shown above this run's rows")
    ap.add_argument("--no-write", action="store_true", help="print the table, do not touch RESULTS.md")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args(argv)
    if args.turns < SPAN or args.window < 256:
        ap.error(f"--turns must be at least {SPAN}, --window at least 256")
    if not args.label:
        import subprocess

        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        args.label = head.stdout.strip() or "this checkout"
    raw = argv if argv is not None else sys.argv[1:]
    command = "python benchmarks/long_thread.py" + "".join(" " + shlex.quote(a) for a in raw)
    started, load = datetime.now(timezone.utc), os.getloadavg()
    rows = [one(b.strip(), args) for b in args.backends.split(",") if b.strip()]
    before = json.loads(Path(args.before).read_text()) if args.before else None
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"label": args.label, "started": f"{started:%Y-%m-%d %H:%M} UTC",
                                                   "rows": rows}))
    body = render(rows, before, args, command, started, load)
    print(body)
    if not args.no_write:
        write_section(Path(args.results), NAME, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
