"""The production path against its own floor: the same scripted conversation on a bare LangGraph loop,
on embedded pagefault and on pagefault over Postgres + a Chroma server, interleaved in one run.

    python benchmarks/production_path.py                          # 200 turns per path, writes benchmarks/RESULTS.md
    python benchmarks/production_path.py --turns 6 --warmup 2 --no-write              # smoke: prints the table
    python benchmarks/production_path.py --turns 60 --no-write --profile              # + where path (3)'s turns go
    python benchmarks/production_path.py --turns 60 --no-write --profile --sample     # the same, every thread, by kind

The paths, each in its own OS process, each on one long thread of the same user messages
(``perf_turns.script``: a statement, a question, an acknowledgement, a statement with a core fact,
and again), with the same stand-in for the LLM (pagefault's rule-based offline model, not an LLM):

1. bare loop on Postgres: a plain ``StateGraph`` with a messages channel and one model node
   (``perf_turns.bare_graph``: no memory, no tools, a sliding window fitting 4,096 tokens), on
   LangGraph's ``PostgresSaver`` (``from_conn_string``: one connection) in a fresh database;
   1b. the same loop on LangGraph's ``SqliteSaver`` in a local file, the floor of path 2;
2. pagefault embedded, the default: ``open_embedded`` (SQLite checkpointer and store, Chroma,
   recall vectors and BM25 under a local data directory), window 4,096 tokens;
3. pagefault on Postgres + a Chroma server: ``open_postgres`` (``PostgresSaver`` / ``PostgresStore``) in
   a second fresh database, BM25 in that database's ``pagefault_lexical_*`` tables, vectors on a
   ``chroma run`` server started on a free loopback port.

The databases are made on the machine's PostgreSQL (``--admin-url``, default
``postgresql://postgres@127.0.0.1:5432/test``) and dropped at the end; data directories live in a
temporary directory that is removed; the Chroma server is stopped, on errors too.

Each path first runs ``--warmup`` turns on a thread of its own (not timed). Then the turns run in
rounds: each path in turn runs a block of ``--block`` consecutive turns of its thread (the order
rotates every round), so whatever else the machine does falls on all paths alike, and only one path
runs at a time. A turn's time is the wall time of one ``invoke`` with one user message. Pagefault's
write-behind threads (recall's writer, archival's journal) keep working beside the next turn within a
block, as they do in a fast conversation; at the end of each block they are drained, untimed, so none
of their work falls into another path's block (``--settle-each-turn`` drains them after every turn
instead: a user who pauses between messages). The bare loops run with LangGraph's default
durability (``--bare-durability``); pagefault's graphs checkpoint every step before the next and take
the thread's lock.

``--profile`` runs ``--profile-turns`` further turns of path 3's thread under cProfile after the
timed rounds (so the table is not skewed by it) and prints the top 25 pagefault functions by
cumulative time, then the top functions anywhere by own time (``--profile embedded`` profiles path 2;
``--profile-out FILE`` keeps the pstats file). With ``--sample`` the profiled turns are sampled instead,
on every thread, by kind of turn (``wall_sampler``: the write-behind threads and the Postgres calls a
turn waits on, which cProfile does not see).
cProfile sees the turn's own thread only, not the write-behind threads. ``--times-out FILE`` keeps
every path's turn times (seconds, in script order) as JSON, to tell the script's kinds of turn apart.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TextIO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import perf_data  # noqa: E402
import perf_turns  # noqa: E402
from results_md import write_section  # noqa: E402
from wall_sampler import WallSampler  # noqa: E402

NAME = "production-path"
USER = "bench"
WINDOW = perf_turns.WINDOW
DEFAULT_TURNS = 200
#: The script's kinds of turn, in its order (``perf_turns.script``: turn i is of kind i % 4).
KINDS = ("statement", "question", "acknowledgement", "statement with a core fact")
#: The paths in the table's order: key -> (label, what holds its state).
PATHS = {
    "bare-pg": ("(1) bare LangGraph loop", "`PostgresSaver`"),
    "bare-sqlite": ("(1b) bare LangGraph loop", "`SqliteSaver`"),
    "embedded": ("(2) pagefault embedded (default)", "SQLite + local data dir"),
    "pg-chroma": ("(3) pagefault on Postgres + Chroma server", "`PostgresSaver` + BM25 in Postgres + `chroma run`"),
}
PAGEFAULT_SRC = str(ROOT / "pagefault") + os.sep


# --- the worker: one path in its own process --------------------------------------------------------

def open_path(kind: str, args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[Callable[[str, str], None],
                                                                                        Callable[[], float],
                                                                                        Callable[[], float]]:
    """(say(text, thread), settle() -> seconds draining write-behind, busy() -> seconds writers worked)."""
    from langchain_core.messages import HumanMessage

    data_dir = str(Path(args.work) / kind)
    os.makedirs(data_dir, exist_ok=True)
    if kind.startswith("bare"):
        if kind == "bare-pg":
            from langgraph.checkpoint.postgres import PostgresSaver

            saver: Any = stack.enter_context(PostgresSaver.from_conn_string(args.database_url))
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = perf_turns._connect(Path(data_dir) / "bare.sqlite")
            stack.callback(conn.close)
            saver = SqliteSaver(conn)
        saver.setup()
        bare = perf_turns.bare_graph(saver)

        def say_bare(text: str, thread: str) -> None:
            bare.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}},
                        durability=args.bare_durability)

        return say_bare, lambda: 0.0, lambda: 0.0

    from pagefault import Context, open_embedded
    from pagefault.persistence.postgres import open_postgres
    from pagefault.stores.services import MemoryServices

    if kind == "embedded":
        persistence: Any = open_embedded(data_dir)
        ctx = Context(user_id=USER, data_dir=data_dir, context_window=WINDOW, model="offline",
                      chroma_url="", database_url="")
    else:
        persistence = open_postgres(args.database_url, data_dir=data_dir)
        ctx = Context(user_id=USER, data_dir=data_dir, context_window=WINDOW, model="offline",
                      chroma_url=args.chroma_url, database_url=args.database_url)
    stack.callback(persistence.close)
    graph = persistence.graph()
    svc = MemoryServices.open(data_dir, chroma_url=ctx.chroma_url, database_url=ctx.database_url)

    def say(text: str, thread: str) -> None:
        graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)

    def settle() -> float:
        t0 = time.perf_counter()
        svc.recall.writer.flush()
        if svc.archival.journal is not None:
            svc.archival.journal.flush()
        return time.perf_counter() - t0

    def busy() -> float:
        return svc.recall.writer.busy_seconds + (svc.archival.journal.busy_seconds if svc.archival.journal else 0.0)

    stack.callback(settle)  # nothing left half-written when the worker closes
    return say, settle, busy


def worker(args: argparse.Namespace) -> int:
    """Run commands from stdin (one JSON object a line), answer on the original stdout; everything the
    libraries print goes to stderr (the parent's log file)."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def send(**msg: Any) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    try:
        with contextlib.ExitStack() as stack:
            say, settle, busy = open_path(args.worker, args, stack)
            for text in perf_turns.script(args.warmup, seed=8) if args.warmup else ["Hello"]:
                say(text, "warm")
            settle()
            busy0 = busy()
            send(ready=True)
            for raw in sys.stdin:
                cmd = json.loads(raw)
                if cmd["cmd"] == "quit":
                    break
                profile = cProfile.Profile() if cmd["cmd"] == "profile" else None
                sampler = WallSampler() if cmd["cmd"] == "sample" else None
                settled = 0.0
                with sampler or contextlib.nullcontext():
                    for i, text in enumerate(cmd["lines"]):
                        t0 = time.perf_counter()
                        if profile is not None:
                            profile.enable()
                        if sampler is not None:
                            sampler.label = KINDS[(cmd.get("first", 0) + i) % len(KINDS)]
                        say(text, cmd["thread"])
                        t1 = time.perf_counter()
                        if profile is not None:
                            profile.disable()
                        if sampler is not None:
                            sampler.label = None
                            sampler.turn(KINDS[(cmd.get("first", 0) + i) % len(KINDS)], t0, t1)
                        send(t=t1 - t0)
                        if args.settle_each_turn:
                            settled += settle()
                settled += settle()
                if profile is not None:
                    profile.dump_stats(cmd["out"])
                if sampler is not None:
                    with open(cmd["out"], "w") as report:
                        sampler.report(report)
                send(done=True, settle=settled, busy=busy() - busy0)
        return 0
    except BaseException:
        with contextlib.suppress(OSError, ValueError):  # the parent may be gone
            send(error=traceback.format_exc())
        return 1


# --- the parent: engines, workers, rounds, table -----------------------------------------------------

class Worker:
    """One path's process, driven a block at a time."""

    def __init__(self, kind: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.kind, self.log = kind, log
        self.times: list[float] = []
        self.settle = self.busy = 0.0
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, __file__, "--worker", kind, *argv], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise SystemExit(f"{self.kind} worker exited with {self.proc.returncode}:\n{self.tail()}")
        msg = json.loads(line)
        if "error" in msg:
            raise SystemExit(f"{self.kind} worker failed:\n{msg['error']}\n--- its stderr ---\n{self.tail()}")
        return msg

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def ready(self) -> None:
        self._read()

    def run(self, lines: list[str], thread: str, tick: Callable[[], None], *, profile_to: str | None = None,
            sample: bool = False, first: int = 0) -> list[float]:
        """Run ``lines`` (turns ``first``... of the script) on ``thread``; with ``profile_to``, under cProfile
        (or, with ``sample``, the wall sampler), its report written there."""
        assert self.proc.stdin is not None
        cmd = {"cmd": ("sample" if sample else "profile") if profile_to else "run", "lines": lines, "thread": thread,
               "out": profile_to, "first": first}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        times = []
        while True:
            msg = self._read()
            if msg.get("done"):
                if not profile_to:
                    self.settle += msg["settle"]
                    self.busy = msg["busy"]
                return times
            times.append(msg["t"])
            tick()

    def stop(self) -> None:
        """Ask it to close its engines and exit; kill it if it does not."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)


def _create_database(admin_url: str, name: str) -> str:
    import psycopg
    from support.engines import with_database

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as e:
        raise SystemExit(f"PostgreSQL is unreachable at {admin_url}: {e}") from e
    return with_database(admin_url, name)


def _drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _profile_report(path: str, title: str, out: TextIO, top: int = 25) -> None:
    """pagefault's functions by cumulative time, then the top functions anywhere by their own time."""
    stats = pstats.Stats(path).stats
    rows = [(ct, tt, nc, f"{file}:{line}({func})") for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.items()]
    total = max((ct for ct, *_ in rows), default=0.0)
    print(f"\n{title}: {total:.2f} s in the profiled turns' own thread", file=out)
    print(f"\ntop {top} pagefault functions by cumulative time:", file=out)
    print(f"{'cum s':>8} {'cum %':>6} {'own s':>7} {'calls':>8}  function", file=out)
    ours = sorted((r for r in rows if r[3].startswith(PAGEFAULT_SRC)), reverse=True)[:top]
    for ct, tt, nc, name in ours:
        print(f"{ct:8.3f} {100 * ct / total if total else 0:5.1f}% {tt:7.3f} {nc:8d}  {name.removeprefix(str(ROOT) + os.sep)}",
              file=out)
    print("\ntop 15 functions anywhere by own time:", file=out)
    print(f"{'own s':>8} {'own %':>6} {'cum s':>7} {'calls':>8}  function", file=out)
    for ct, tt, nc, name in sorted(rows, key=lambda r: r[1], reverse=True)[:15]:
        short = name.removeprefix(str(ROOT) + os.sep).replace(str(ROOT / ".venv") + os.sep, ".venv/")
        print(f"{tt:8.3f} {100 * tt / total if total else 0:5.1f}% {ct:7.3f} {nc:8d}  {short}", file=out)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from support.engines import ChromaServer, child_env
    from tqdm import tqdm

    kinds = list(PATHS)
    lines = perf_turns.script(args.turns + (args.profile_turns if args.profile else 0))
    measured, extra = lines[:args.turns], lines[args.turns:]
    work = Path(tempfile.mkdtemp(prefix="pf-production-path-"))
    tag = secrets.token_hex(5)
    names = {"bare-pg": f"pf_prodpath_{tag}_bare", "pg-chroma": f"pf_prodpath_{tag}_pf"}
    made: list[str] = []
    chroma: ChromaServer | None = None
    workers: list[Worker] = []
    try:
        urls = {}
        for kind, name in names.items():
            urls[kind] = _create_database(args.admin_url, name)
            made.append(name)
        print(f"databases {', '.join(made)} made; starting chroma run ...", file=sys.stderr, flush=True)
        chroma = ChromaServer(work / "chroma").start()
        env = child_env()
        for kind in kinds:
            argv = ["--work", str(work), "--warmup", str(args.warmup), "--bare-durability", args.bare_durability,
                    "--database-url", urls.get(kind, ""), "--chroma-url", chroma.url if kind == "pg-chroma" else ""]
            if args.settle_each_turn:
                argv.append("--settle-each-turn")
            workers.append(Worker(kind, argv, env, work / f"{kind}.log"))
        with tqdm(total=len(workers), desc=f"starting the paths ({args.warmup} warmup turns each)", unit="path",
                  file=sys.stderr) as bar:
            for w in workers:
                w.ready()
                bar.update()
        load_start = os.getloadavg()
        started = datetime.now(timezone.utc)
        blocks = [measured[i:i + args.block] for i in range(0, len(measured), args.block)]
        with tqdm(total=len(measured) * len(workers), desc="turns", unit="turn", file=sys.stderr) as bar:
            for r, block in enumerate(blocks):
                for w in workers[r % len(workers):] + workers[:r % len(workers)]:
                    bar.set_postfix_str(w.kind)
                    w.times += w.run(block, "main", bar.update)
        load_end = os.getloadavg()
        profile_out = None
        if args.profile:
            target = next(w for w in workers if w.kind == ("embedded" if args.profile == "embedded" else "pg-chroma"))
            dump = args.profile_out or str(work / ("samples.txt" if args.sample else "profile.pstats"))
            with tqdm(total=len(extra), desc=f"profiling {target.kind}", unit="turn", file=sys.stderr) as bar:
                target.run(extra, "main", bar.update, profile_to=dump, sample=args.sample, first=args.turns)
            buf = io.StringIO()
            if args.sample:
                print(f"\nWall-clock samples of {len(extra)} turns of {PATHS[target.kind][0]} (after the timed ones), "
                      "ms per turn of each kind:", file=buf)
                buf.write(Path(dump).read_text())
            else:
                _profile_report(dump, f"cProfile of {len(extra)} turns of {PATHS[target.kind][0]} (after the timed ones)",
                                buf)
            profile_out = buf.getvalue()
        for w in workers:
            w.stop()
        return {"times": {w.kind: w.times for w in workers}, "settle": {w.kind: w.settle for w in workers},
                "busy": {w.kind: w.busy for w in workers}, "load_start": load_start, "load_end": load_end,
                "started": started, "profile": profile_out}
    finally:
        for w in workers:
            with contextlib.suppress(Exception):
                w.stop()
        if chroma is not None:
            chroma.kill()
        for name in made:
            try:
                _drop_database(args.admin_url, name)
            except Exception as e:  # say so, and go on cleaning up
                print(f"could not drop database {name}: {e}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


def render(res: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    stats = {k: perf_data.percentiles(t) for k, t in res["times"].items()}
    n = len(res["times"]["bare-pg"])
    pg, lite = stats["bare-pg"], stats["bare-sqlite"]
    load = lambda v: ", ".join(f"{x:.1f}" for x in v)  # noqa: E731
    settle = "after every turn" if args.settle_each_turn else "at the end of each block"
    lines = [
        "## The production path against its own floor",
        "",
        f"`{command}` — {n} turns per path on one long thread each, interleaved in rounds of {min(args.block, n)}-turn blocks "
        f"(the order rotating every round), after {args.warmup} untimed warmup turns per path on a thread of its own; "
        f"window {WINDOW:,} tokens, offline model (not an LLM). Run {res['started']:%Y-%m-%d %H:%M} UTC on "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores shared with PostgreSQL, the Chroma "
        f"server and the four path processes ({platform.python_implementation()} {platform.python_version()}); load "
        f"average {load(res['load_start'])} (1, 5, 15 min) when the timed turns started, {load(res['load_end'])} when "
        "they ended. Times in ms per turn (one `invoke` of one user message).",
        "",
        "| path | holds its state in | p50 | p95 | added p50 vs (1) | added p95 vs (1) | added p50 vs (1b) | added p95 vs (1b) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, (label, where) in PATHS.items():
        p50, p95 = stats[kind]
        vs_pg = ["-", "-"] if kind == "bare-pg" else [f"{p50 - pg[0]:+.1f}", f"{p95 - pg[1]:+.1f}"]
        vs_lite = ["-", "-"] if kind == "bare-sqlite" else [f"{p50 - lite[0]:+.1f}", f"{p95 - lite[1]:+.1f}"]
        lines.append(f"| {label} | {where} | {p50:.1f} | {p95:.1f} | {' | '.join(vs_pg)} | {' | '.join(vs_lite)} |")

    # The script's turns come in four kinds (``perf_turns.script``), and the p50 of a path falls where two
    # kinds meet: each kind's own p50 says where the time goes.
    kinds = KINDS
    by_kind = {k: [perf_data.percentiles(t[i::len(kinds)])[0] for i in range(len(kinds))] for k, t in res["times"].items()}
    lines += ["", "p50 by kind of turn (the script's turns take the four kinds in turn), and added vs (1) on the same kind:",
              "", "| path | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for kind, (label, _where) in PATHS.items():
        cells = [f"{v:.1f}" if kind == "bare-pg" else f"{v:.1f} ({v - b:+.1f})"
                 for v, b in zip(by_kind[kind], by_kind["bare-pg"])]
        lines.append(f"| {label} | {' | '.join(cells)} |")

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b > 0 else "n/a (the embedded path added nothing)"

    add3, add2, add2_own = stats["pg-chroma"][0] - pg[0], stats["embedded"][0] - pg[0], stats["embedded"][0] - lite[0]
    behind = ", ".join(
        f"{PATHS[k][0].split(' ', 1)[0]} {1000 * res['busy'][k] / n:.1f} ms/turn busy, {1000 * res['settle'][k] / n:.1f} ms/turn "
        "left to drain" for k in ("embedded", "pg-chroma"))
    lines += [
        "",
        f"Added p50 of (3) over added p50 of (2), both against the bare loop on Postgres (1): **{ratio(add3, add2)}** "
        f"(target at most 1.50x). Each against the bare loop on its own checkpointer ((3) vs (1), (2) vs (1b)): "
        f"{ratio(add3, add2_own)}.",
        "",
        f"Pagefault's write-behind threads (recall's writer, archival's journal), beside the turns: {behind} "
        f"(drained {settle}, outside the turn times). The bare loops run with LangGraph's default durability "
        f"(`{args.bare_durability}`); pagefault's graphs checkpoint every step before the next (`sync`) and take the "
        "thread's lock (a file lock embedded, an advisory lock on Postgres).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=DEFAULT_TURNS, help="timed turns per path")
    ap.add_argument("--warmup", type=int, default=5,
                    help="untimed turns per path first, on a thread of their own (0: one 'Hello')")
    ap.add_argument("--block", type=int, default=10, help="consecutive turns a path runs before the next path's block")
    ap.add_argument("--bare-durability", choices=("async", "sync", "exit"), default="async",
                    help="the bare loops' LangGraph durability (LangGraph's default: async)")
    ap.add_argument("--settle-each-turn", action="store_true",
                    help="drain pagefault's write-behind after every turn (untimed), not only after each block")
    ap.add_argument("--profile", nargs="?", const="pg-chroma", choices=("pg-chroma", "embedded"), default=None,
                    help="after the timed turns, cProfile --profile-turns more turns of path 3 (or 'embedded': path 2)")
    ap.add_argument("--profile-turns", type=int, default=40)
    ap.add_argument("--profile-out", default="", help="keep the profile's pstats file here (for pstats or snakeviz)")
    ap.add_argument("--sample", action="store_true",
                    help="with --profile: sample every thread's wall time by kind of turn instead of cProfile")
    ap.add_argument("--admin-url", default=os.environ.get("PAGEFAULT_TEST_POSTGRES",
                                                          "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--times-out", default="", help="keep each path's turn times (seconds, in script order) as JSON here")
    ap.add_argument("--no-write", action="store_true", help="print the table, do not touch RESULTS.md")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--worker", choices=list(PATHS), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default="", help=argparse.SUPPRESS)
    ap.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    ap.add_argument("--chroma-url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.turns < 1 or args.block < 1 or args.warmup < 0 or args.profile_turns < 1:
        ap.error("--turns, --block and --profile-turns must be at least 1, --warmup at least 0")
    if args.sample and not args.profile:
        ap.error("--sample samples the --profile turns: give --profile as well")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the cleanup runs
    raw = argv if argv is not None else sys.argv[1:]
    command = "python benchmarks/production_path.py" + "".join(" " + shlex.quote(a) for a in raw)
    res = run(args)
    body = render(res, args, command)
    if args.times_out:
        Path(args.times_out).write_text(json.dumps(res["times"]))
    print(body)
    if res["profile"]:
        print(res["profile"])
    if not args.no_write:
        write_section(Path(args.results), NAME, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
