"""Throughput with 1 and 2 replicas on one Postgres + Chroma server, and per-turn latency against the
embedded default.

    python benchmarks/replicas.py                  # 40 turns per replica, writes benchmarks/RESULTS.md
    python benchmarks/replicas.py --turns 10 --no-write

It makes a fresh database on the machine's PostgreSQL (``--admin-url``, default
``postgresql://postgres@127.0.0.1:5432/test``; dropped at the end) and starts ``chroma run`` on a
free loopback port. Each replica is its own OS process, serving the same user on threads of its
own with the offline model: statements (archival insert, core append) and questions (archival and
conversation search), alternating, 4 turns per thread. Replicas start together behind a barrier;
throughput is all turns over the wall time from the barrier to the last replica's end. The
embedded run is one process on SQLite and a local Chroma directory, the same turns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_md import write_section  # noqa: E402

TURNS_PER_THREAD = 4
NAME = "replicas"


def turn_text(replica: int, i: int) -> str:
    if i % 2 == 0:
        return f"Replica {replica} note {i}: the ferry to island {i} leaves from pier {replica * 100 + i}."
    return f"Which pier does the ferry to island {i - 1} leave from?"


def worker(args: argparse.Namespace) -> None:
    """One replica: wait at the barrier, run the turns, print latencies as JSON."""
    from langchain_core.messages import HumanMessage

    from pagefault import Context, open_embedded
    from pagefault.persistence.postgres import open_postgres
    from pagefault.stores import MemoryServices

    ctx = Context(user_id="bench")  # engines and data dir from the environment
    persistence = open_postgres() if os.environ.get("PAGEFAULT_DATABASE_URL") else open_embedded(ctx.data_dir)
    graph = persistence.graph()
    MemoryServices.open(ctx.data_dir, chroma_url=ctx.chroma_url, database_url=ctx.database_url)
    graph.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": f"warm-{args.replica}"}},
                 context=ctx)  # model, embedding and connections warm before the clock starts
    if args.barrier:
        folder, n = args.barrier.rsplit(":", 1)
        Path(folder, f"ready-{os.getpid()}").touch()
        while len(os.listdir(folder)) < int(n):
            time.sleep(0.005)
    start = time.time()
    latencies = []
    for i in range(args.turns):
        config = {"configurable": {"thread_id": f"{args.tag}-r{args.replica}-t{i // TURNS_PER_THREAD}"}}
        t0 = time.perf_counter()
        graph.invoke({"messages": [HumanMessage(turn_text(args.replica, i))]}, config, context=ctx)
        latencies.append(time.perf_counter() - t0)
    print(json.dumps({"start": start, "end": time.time(), "latencies": latencies}), flush=True)
    persistence.close()


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEFAULT_")}
    env.update({"ANONYMIZED_TELEMETRY": "False", "PYTHONUNBUFFERED": "1", **settings})
    return env


def run_replicas(n: int, turns: int, env: dict[str, str], tag: str) -> dict:
    barrier = tempfile.mkdtemp(prefix="pf-barrier-")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", "--replica", str(r), "--turns", str(turns),
                               "--barrier", f"{barrier}:{n}", "--tag", tag], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(n)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"replica failed:\n{err[-4000:]}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    lat = [x for r in reports for x in r["latencies"]]
    return {"replicas": n, "turns": len(lat), "wall": wall, "tps": len(lat) / wall,
            "p50": statistics.median(lat), "p95": sorted(lat)[int(0.95 * (len(lat) - 1))]}


def _database(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def run(turns: int, admin_url: str) -> dict:
    import psycopg
    from support.engines import ChromaServer

    work = Path(tempfile.mkdtemp(prefix="pf-bench-"))
    name = f"pf_bench_{secrets.token_hex(6)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    chroma = ChromaServer(work / "chroma").start()
    try:
        results = {"embedded": run_replicas(1, turns, _env(PAGEFAULT_DATA_DIR=str(work / "embedded")), "emb")}
        env = _env(PAGEFAULT_DATABASE_URL=_database(admin_url, name), PAGEFAULT_CHROMA_URL=chroma.url,
                   PAGEFAULT_DATA_DIR=str(work / "d"))
        for n in (1, 2):
            results[f"shared-{n}"] = run_replicas(n, turns, env, f"n{n}")
    finally:
        chroma.kill()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return results


def render(results: dict, command: str, turns: int) -> str:
    emb, one, two = results["embedded"], results["shared-1"], results["shared-2"]
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    lines = [
        "## Replicas: Postgres + Chroma server",
        "",
        f"`{command}` — {turns} turns per replica (offline model; statements and questions alternating, "
        f"{TURNS_PER_THREAD} turns per thread), on {os.cpu_count()} CPU cores shared with the database, the "
        f"Chroma server and the replicas ({platform.python_implementation()} {platform.python_version()}; "
        f"load average {results['load']:.1f} when it started: other work shared the machine).",
        "",
        "| setup | replicas | turns | turns/s | per-turn p50 | per-turn p95 |",
        "|---|---|---|---|---|---|",
        f"| embedded (SQLite + local Chroma) | 1 | {emb['turns']} | {emb['tps']:.2f} | {ms(emb['p50'])} | {ms(emb['p95'])} |",
        f"| Postgres + Chroma server | 1 | {one['turns']} | {one['tps']:.2f} | {ms(one['p50'])} | {ms(one['p95'])} |",
        f"| Postgres + Chroma server | 2 | {two['turns']} | {two['tps']:.2f} | {ms(two['p50'])} | {ms(two['p95'])} |",
        "",
        f"Per-turn p50 on Postgres + Chroma server is {one['p50'] / emb['p50']:.2f}x the embedded default's; "
        f"2 replicas give {two['tps'] / one['tps']:.2f}x the turns per second of 1. Every step is "
        "checkpointed before the next (durability \"sync\") and each run takes its thread's advisory lock; "
        "the embedded run uses LangGraph's default durability.",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=40, help="turns per replica")
    ap.add_argument("--admin-url", default=os.environ.get("PAGEFAULT_TEST_POSTGRES",
                                                          "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--no-write", action="store_true", help="print the table, do not touch RESULTS.md")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--replica", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tag", default="run", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    load = os.getloadavg()[0]
    results = run(args.turns, args.admin_url)
    results["load"] = load
    command = "python benchmarks/replicas.py" + (f" --turns {args.turns}" if args.turns != 40 else "")
    body = render(results, command, args.turns)
    print(body)
    if not args.no_write:
        write_section(Path(args.results), NAME, body)


if __name__ == "__main__":
    main()
