"""Nothing lost under load (issue 43): imports of a chat log beside busy processes, counting those that lost messages.

    .venv/bin/python benchmarks/nothing_lost.py                               # 30 runs beside 3 busy processes
    .venv/bin/python benchmarks/nothing_lost.py --runs 3 --hogs 3 --no-write  # a short look, RESULTS.md untouched
    .venv/bin/python benchmarks/nothing_lost.py --locomo 2     # then locomo.py --conversations 2 beside the same hogs

The first writes its section of benchmarks/RESULTS.md.

The import is the one ../shared/tools/import_under_load.py makes, which found the fault: a log of 25 sessions (10
to 162 messages of 4 to 90 words each, 1,511 in all; seed 1), imported with ``import_history`` in batches of 16
into a fresh embedded data directory per run, on a 2,048-token window and the offline model, while ``--hogs``
processes spin on the CPU. A run lost messages when ``import_history`` raised (``HistoryConflict``: "N of M messages
landed"; or any other error, such as a thread whose saved history no longer replays) or imported fewer messages than
the log holds. ``--locomo N`` then runs ``benchmarks/locomo.py --conversations N --no-write`` in a subprocess
beside the same hogs (it imports each conversation the same way, and stops at a loss) and reports whether it
completed. Exit status 1 if anything lost messages.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_md import write_section  # noqa: E402

#: Messages in each session of the log (import_under_load.py's).
SESSION_SIZES = [130, 137, 162, 109, 81, 116, 56, 22, 12, 27, 22, 25, 28, 40, 42, 42, 64, 66, 36, 47, 112, 10, 27, 69,
                 29]
WORDS = ("game league rank gold skin champion esports tournament breakfast eggs youtube seafood urchin "
         "restaurant plane flight trip friends weekend movie music guitar recipe garden dog cat school work "
         "project").split()
WINDOW = 2048
BATCH = 16


def spin() -> None:
    """Burn CPU until terminated."""
    n = 0
    while True:
        n = (n + 1) % 1_000_003


def chat_log(seed: int) -> dict[str, Any]:
    """The log, drawn from ``random.Random(seed)`` in import_under_load.py's order (seed 1 gives its log)."""
    rng = random.Random(seed)

    def line() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 90))).capitalize() + "."

    return {"sessions": [
        {"id": f"session_{n}", "timestamp": f"2023-05-{n:02d}T10:00:00",
         "messages": [{"speaker": rng.choice(["Sam", "Alex"]), "text": line(), "id": f"D{n}:{i + 1}"}
                      for i in range(count)]}
        for n, count in enumerate(SESSION_SIZES, 1)]}


def import_once(log: dict[str, Any], run: int) -> tuple[int, str]:
    """One loaded import into a fresh data directory: (messages imported, "" or what was lost)."""
    from pagefault import Context, open_embedded
    from pagefault.maintenance.history_import import HistoryConflict, import_history

    data_dir = tempfile.mkdtemp(prefix="pf-nothing-lost-")
    ctx = Context(user_id=f"u{run}", context_window=WINDOW, model="offline")
    total = sum(SESSION_SIZES)
    with open_embedded(data_dir) as memory:
        try:
            report = import_history(memory.graph(), log, ctx, batch_size=BATCH, progress=False)
        except HistoryConflict as e:
            return 0, f"LOST: {e}"
        except Exception as e:  # a thread whose saved history no longer replays lost messages too
            return 0, f"FAILED: {type(e).__name__}: {e}"
    if report.imported != total:
        return report.imported, f"LOST: {report.imported} of {total} messages imported"
    return report.imported, ""


def run_locomo(conversations: int) -> tuple[bool, str]:
    """``benchmarks/locomo.py --conversations N --no-write`` to its end: (completed, its last line of output)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "locomo.py"), "--conversations", str(conversations),
                           "--no-write"], cwd=ROOT, capture_output=True, text=True)
    lines = (done.stderr if done.returncode else done.stdout).strip().splitlines() or ["(no output)"]
    return done.returncode == 0, lines[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="loaded imports (default 30)")
    ap.add_argument("--hogs", type=int, default=3, help="busy processes beside them (default 3; 0: none)")
    ap.add_argument("--seed", type=int, default=1, help="the log's seed (1: import_under_load.py's log)")
    ap.add_argument("--locomo", type=int, default=0, metavar="N",
                    help="also run benchmarks/locomo.py --conversations N beside the same hogs (default: not)")
    ap.add_argument("--no-write", action="store_true", help="print the table, do not touch RESULTS.md")
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "RESULTS.md", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.runs < 1 or args.hogs < 0 or args.locomo < 0:
        ap.error("--runs must be at least 1, --hogs and --locomo at least 0")

    log = chat_log(args.seed)
    spawn = mp.get_context("spawn")  # the hogs import this module only, not pagefault
    hogs = [spawn.Process(target=spin, daemon=True) for _ in range(args.hogs)]
    lost, imported, locomo = 0, 0, None
    started = time.monotonic()
    try:
        for h in hogs:
            h.start()
        for r in range(args.runs):
            count, loss = import_once(log, r)
            imported += count
            lost += bool(loss)
            print(f"run {r + 1}/{args.runs}: {loss or f'ok, {count} messages'}", flush=True)
        if args.locomo:
            locomo = run_locomo(args.locomo)
            print(f"locomo --conversations {args.locomo}: {'completed' if locomo[0] else 'FAILED'}: {locomo[1]}")
    finally:
        for h in hogs:
            h.terminate()
        for h in hogs:
            h.join(10)
    took = time.monotonic() - started

    rows = [f"| {args.runs} | {args.hogs} | {lost} | {imported:,} of {args.runs * sum(SESSION_SIZES):,} |"]
    lines = [
        "## Nothing lost under load (issue 43)",
        "",
        f"`.venv/bin/python benchmarks/nothing_lost.py --runs {args.runs} --hogs {args.hogs}"
        f"{f' --locomo {args.locomo}' if args.locomo else ''}`: each run imports a generated log of "
        f"{len(SESSION_SIZES)} sessions ({sum(SESSION_SIZES):,} messages, seed {args.seed}) with `import_history` "
        f"into a fresh embedded data directory ({WINDOW:,}-token window, batches of {BATCH}, the offline model) "
        f"while {args.hogs} processes spin on the 2 cores; a run lost messages if the import raised or imported "
        f"fewer messages than the log holds. {took / 60:.0f} min in all.",
        "",
        "| runs | hogs | runs that lost messages | messages imported |",
        "|---|---|---|---|",
        *rows,
    ]
    if locomo is not None:
        lines += ["", f"`benchmarks/locomo.py --conversations {args.locomo}` beside the same hogs: "
                  f"{'completed (nothing lost)' if locomo[0] else 'did not complete'}; its last line: `{locomo[1]}`"]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section(args.results, "nothing-lost", table)
    return 1 if lost or (locomo is not None and not locomo[0]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
