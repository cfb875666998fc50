"""Per-turn cost over a long conversation, storage growth and ingestion throughput.

    python benchmarks/perf_turns.py                               # 10,000 turns, 100k passages; writes RESULTS.md
    python benchmarks/perf_turns.py --turns 40 --passages 500 --ingest-tokens 20000 --no-write   # smoke

One scripted conversation (a cycle of a statement, a question, an acknowledgement and a statement
with a core fact; the offline model turns statements into ``archival_memory_insert`` and core
appends, and questions into ``archival_memory_search`` + ``conversation_search``) runs through:

- pagefault: ``build_graph`` on SQLite (``open_embedded``), window 4,096 tokens, ``--passages``
  archival passages preloaded for the same user (vectors from ``perf_data``'s cache);
- bare: a LangGraph loop with the same offline model and no memory and no tools, on the same
  SqliteSaver, keeping a sliding window of messages (oldest removed past 75 % of 4,096 tokens, down
  to 50 %), so its model input fits the same window;
- create_agent: LangChain ``create_agent`` with the same model, no tools and
  ``SummarizationMiddleware`` (trigger 3,072 tokens, keep 20 messages), on a SqliteSaver.

Per-turn wall time is one ``invoke`` of one user message. Checkpoint bytes are the summed sizes of
the checkpoint, metadata and pending-write blobs in the SQLite checkpointer, read at the edges of each
turn range. Ingestion compares ``ingest_document`` on a generated document of ``--ingest-tokens``
cl100k tokens with embedding the same passages alone (uncached).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shlex
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402
import perf_data  # noqa: E402
import psutil  # noqa: E402
from results_md import write_section  # noqa: E402

NAME = "perf_turns"
INGEST_NAME = "perf_ingest"
WINDOW = 4_096
USER = "bench"


def script(turns: int, seed: int = 7) -> list[str]:
    """The user's side of the conversation, deterministic."""
    rng = random.Random(seed)
    N, A, NOUN, P = perf_data.NAMES, perf_data.ADJS, perf_data.NOUNS, perf_data.PLACES
    out = []
    for i in range(turns):
        name, adj, noun, place = rng.choice(N), rng.choice(A), rng.choice(NOUN), rng.choice(P)
        kind = i % 4
        if kind == 0:
            out.append(f"Note {i}: {name} keeps the {adj} {noun} in a shed near {place}.")
        elif kind == 1:
            out.append(f"Where does {name} keep the {adj} {noun}?")
        elif kind == 2:
            out.append(rng.choice(["Thanks!", "OK", "Thank you", "Hello"]))
        else:
            out.append(f"I live in {place} these days, and on turn {i} I bought a {adj} {noun}.")
    return out


def ranges(turns: int) -> tuple[range, range]:
    """The early and late turn ranges reported: 100-200 and the last 100 at full scale."""
    if turns >= 400:
        return range(100, 200), range(turns - 100, turns)
    w = max(turns // 10, 3)
    return range(w, 2 * w), range(turns - w, turns)


def checkpoint_bytes(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        a = conn.execute("SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints").fetchone()[0]
        b = conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()[0]
        return int(a + b)
    finally:
        conn.close()


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Run:
    """One system's per-turn times and checkpoint sizes at the edges of the reported ranges."""

    def __init__(self, name: str, db: Path) -> None:
        self.name, self.db = name, db
        self.times: list[float] = []
        self.bytes_at: dict[int, int] = {}

    def drive(self, say: Callable[[str], Any], lines: list[str], marks: set[int], progress: bool) -> "Run":
        for i, line in enumerate(lines):
            if i in marks:
                self.bytes_at[i] = checkpoint_bytes(self.db)
            t0 = time.perf_counter()
            say(line)
            self.times.append(time.perf_counter() - t0)
            if progress and (i + 1) % 500 == 0:
                print(f"  {self.name}: turn {i + 1}, last 500 p50 {np.median(self.times[-500:]) * 1000:.1f} ms",
                      file=sys.stderr, flush=True)
        self.bytes_at[len(lines)] = checkpoint_bytes(self.db)
        return self

    def stats(self, r: range) -> tuple[float, float]:
        return perf_data.percentiles(self.times[r.start:r.stop])

    def bytes_per_turn(self, r: range) -> float:
        return (self.bytes_at[r.stop] - self.bytes_at[r.start]) / len(r)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def run_pagefault(work: Path, lines: list[str], n_passages: int, marks: set[int], progress: bool) -> tuple[Run, dict]:
    from langchain_core.messages import HumanMessage

    from pagefault import Context, open_embedded
    from pagefault.stores import CoreMemory
    from pagefault.stores.scope import Scope
    from pagefault.stores.services import MemoryServices

    data = work / "pagefault"
    rss0 = psutil.Process().memory_info().rss
    svc = MemoryServices.open(str(data))
    t0 = time.perf_counter()
    perf_data.load_archival(svc.archival, Scope(USER), perf_data.passages(n_passages), perf_data.vectors(n_passages))
    load_s = time.perf_counter() - t0
    ctx = Context(user_id=USER, data_dir=str(data), context_window=WINDOW, model="offline")
    config = {"configurable": {"thread_id": "long"}}
    with open_embedded(str(data)) as persistence:
        graph = persistence.graph()
        graph.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "warm"}}, context=ctx)
        info = {"rss_loaded": psutil.Process().memory_info().rss, "rss_before": rss0, "load_s": load_s}
        run = Run("pagefault", data / "checkpoints.sqlite").drive(
            lambda text: graph.invoke({"messages": [HumanMessage(text)]}, config, context=ctx), lines, marks, progress)
        t0 = time.perf_counter()  # what the writers still had to do after the last turn
        svc.recall.writer.flush()
        if svc.archival.journal is not None:
            svc.archival.journal.flush()
        info["drain_s"] = time.perf_counter() - t0
        info["behind_ms"] = 1000 * (svc.recall.writer.busy_seconds
                                    + (svc.archival.journal.busy_seconds if svc.archival.journal else 0.0)) / len(lines)
        info["search_ms"] = time_conversation_search(svc, CoreMemory(persistence.store, Scope(USER)), Scope(USER), lines)
        state = graph.get_state(config).values
        info.update(rss_end=psutil.Process().memory_info().rss, compactions=state.get("compactions", 0),
                    evicted=state.get("evicted_count", 0), window_messages=len(state.get("messages", [])),
                    archival=svc.archival.count(Scope(USER)), recall=svc.recall.count(Scope(USER)))
    info["checkpoint_db"] = sum(p.stat().st_size for p in data.glob("checkpoints.sqlite*"))
    info["data_dir"] = dir_bytes(data)
    return run, info


#: conversation_search calls timed after the conversation, each a question of the script not yet asked.
SEARCHES = 200


def time_conversation_search(svc: Any, core: Any, scope: Any, lines: list[str]) -> list[float]:
    """Milliseconds of ``SEARCHES`` ``conversation_search`` calls (top 50, the tool's own handler) over the
    whole conversation's recall, each query's embedding uncached (a question of the script, reworded)."""
    from pagefault.tools.handlers import MemoryCall, run_memory_tool

    call = MemoryCall(scope, "benchmark", -1, "", core, svc.archival, svc.recall)
    questions = [q for q in dict.fromkeys(lines) if q.endswith("?")][:SEARCHES]
    out = []
    for i, q in enumerate((questions * (1 + SEARCHES // max(1, len(questions))))[:SEARCHES]):
        svc.embeddings.forget_cached()
        t0 = time.perf_counter()
        hits = run_memory_tool(call, "conversation_search", {"query": f"{q} (asked again, {i})", "top_k": 50})
        out.append((time.perf_counter() - t0) * 1000)
        assert hits.artifact["hits"], q
    return out


def bare_graph(checkpointer: Any):
    """The same offline model, no memory, no tools: a sliding window of messages fitting 4,096 tokens."""
    from langchain_core.messages import RemoveMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from pagefault.models.offline import OfflineChatModel
    from pagefault.models.tokens import token_counter

    model, counter = OfflineChatModel(), token_counter("offline")  # the counter the model and pagefault share

    def call(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        reply = model.invoke(messages)
        costs = [counter.count_message(m) for m in [*messages, reply]]
        drop, total = [], sum(costs)
        if total > 0.75 * WINDOW:
            for m, c in zip(messages[:-1], costs):
                if total <= 0.5 * WINDOW:
                    break
                drop.append(RemoveMessage(id=m.id))
                total -= c
        return {"messages": [*drop, reply]}

    b = StateGraph(MessagesState)
    b.add_node("model", call)
    b.add_edge(START, "model")
    b.add_edge("model", END)
    return b.compile(checkpointer=checkpointer)


def run_bare(work: Path, lines: list[str], marks: set[int], progress: bool) -> Run:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = work / "bare.sqlite"
    saver = SqliteSaver(_connect(db))
    saver.setup()
    graph = bare_graph(saver)
    config = {"configurable": {"thread_id": "long"}}
    graph.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "warm"}})
    try:
        return Run("bare", db).drive(lambda t: graph.invoke({"messages": [HumanMessage(t)]}, config),
                                     lines, marks, progress)
    finally:
        saver.conn.close()


def run_create_agent(work: Path, lines: list[str], marks: set[int], progress: bool) -> Run:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    from pagefault.models.offline import OfflineChatModel

    db = work / "agent.sqlite"
    saver = SqliteSaver(_connect(db))
    saver.setup()
    model = OfflineChatModel()
    agent = create_agent(model, tools=[], checkpointer=saver, middleware=[
        SummarizationMiddleware(model, trigger=("tokens", int(0.75 * WINDOW)), keep=("messages", 20))])
    config = {"configurable": {"thread_id": "long"}}
    agent.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "warm"}})
    try:
        return Run("create_agent + SummarizationMiddleware", db).drive(
            lambda t: agent.invoke({"messages": [HumanMessage(t)]}, config), lines, marks, progress)
    finally:
        saver.conn.close()


def document(tokens: int, seed: int = 11) -> str:
    """A generated document of about ``tokens`` cl100k tokens: paragraphs of synthetic records."""
    from pagefault.models.tokens import TokenCounter

    rng = random.Random(seed)
    paras, n, i = [], 0, 0
    counter = TokenCounter("offline")
    while n < tokens:
        para = " ".join(perf_data.passage(rng, i + j) for j in range(rng.randint(3, 8)))
        paras.append(para)
        n += counter.count_text(para) + 1
        i += 8
    return "\n\n".join(paras)


def run_ingest(work: Path, tokens: int) -> dict[str, float]:
    from pagefault.maintenance.documents import ingest_document, split_passages
    from pagefault.models.embedding_choice import embedding_model
    from pagefault.models.tokens import TokenCounter
    from pagefault.stores.scope import Scope
    from pagefault.stores.services import MemoryServices

    text = document(tokens)
    n_tokens = TokenCounter("offline").count_text(text)
    passages = split_passages(text)
    model = embedding_model(perf_data.DEFAULT)  # a model of its own: the store's cache stays cold
    model.embed_array(passages[:8])  # warm
    model.forget_cached()
    t0 = time.perf_counter()
    model.embed_array(passages)
    embed_s = time.perf_counter() - t0
    model.forget_cached()
    archival = MemoryServices.open(str(work / "ingest")).archival
    t0 = time.perf_counter()
    records = ingest_document(archival, Scope("reader"), text, name="generated.txt", progress=False)
    ingest_s = time.perf_counter() - t0
    assert len(records) == len(passages) == archival.count(Scope("reader"))
    return {"tokens": n_tokens, "passages": len(passages), "embed_s": embed_s, "ingest_s": ingest_s}


def turns_table(runs: list[Run], info: dict, early: range, late: range, turns: int, passages: int, cmd: str) -> str:
    bare = next(r for r in runs if r.name == "bare")
    b_e, b_l = bare.stats(early), bare.stats(late)
    lines = [
        f"Command: `{cmd}`. Machine: {perf_data.machine()}. {turns:,} scripted turns, window {WINDOW:,} tokens, "
        f"{passages:,} archival passages preloaded for pagefault. Times in ms per turn (one `invoke`).",
        "",
        f"| system | p50 turns {early.start}-{early.stop} | p95 | p50 turns {late.start}-{late.stop} | p95 "
        "| late/early p50 | added p50 vs bare (late) | added p95 vs bare (late) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        (e50, e95), (l50, l95) = r.stats(early), r.stats(late)
        added = "-" if r is bare else f"{l50 - b_l[0]:+.1f}"
        added95 = "-" if r is bare else f"{l95 - b_l[1]:+.1f}"
        lines.append(f"| {r.name} | {e50:.1f} | {e95:.1f} | {l50:.1f} | {l95:.1f} | {l50 / e50:.2f}x | {added} | {added95} |")
    if "behind_ms" in info:
        lines += ["", f"Work behind the turns (pagefault): the recall writer and the archival journal's writer were busy "
                      f"{info['behind_ms']:.1f} ms per turn on their own threads, beside the turns that followed (a search "
                      f"or compaction waits for them); {info['drain_s']:.2f} s was left to write after the last turn."]
    if info.get("search_ms"):
        s50, s95 = (float(np.percentile(info["search_ms"], p)) for p in (50, 95))
        lines += ["", f"`conversation_search` after the last turn, over its {info['recall']:,} recall entries (top 50, "
                      f"the tool's handler, the in-memory embedded path, each query embedded uncached by "
                      f"`{perf_data.DEFAULT}`): p50 {s50:.1f} ms, p95 {s95:.1f} ms over {len(info['search_ms'])} "
                      "questions of the script, reworded."]
    lines += [
        "",
        "Added latency vs bare, early range: "
        + ", ".join(f"{r.name} p50 {r.stats(early)[0] - b_e[0]:+.1f} / p95 {r.stats(early)[1] - b_e[1]:+.1f} ms"
                    for r in runs if r is not bare) + ".",
        "",
        f"| system | checkpoint bytes/turn, turns {early.start}-{early.stop} | turns {late.start}-{late.stop} | late/early "
        f"| checkpoint data after {turns:,} turns |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in runs:
        be, bl = r.bytes_per_turn(early), r.bytes_per_turn(late)
        lines.append(f"| {r.name} | {be:,.0f} | {bl:,.0f} | {bl / be:.2f}x | {r.bytes_at[turns] / 1e6:,.1f} MB |")
    mb = 1024 * 1024
    lines += [
        "",
        f"pagefault after {turns:,} turns: checkpoints.sqlite {info['checkpoint_db'] / mb:,.1f} MiB, whole data directory "
        f"(checkpoints, core store, archival Chroma, recall vectors, BM25) {info['data_dir'] / mb:,.1f} MiB; "
        f"{info['archival']:,} archival records, "
        f"{info['recall']:,} recall entries, {info['compactions']} compactions, {info['evicted']:,} messages evicted, "
        f"{info['window_messages']} in the window at the end. "
        f"RSS {info['rss_before'] / mb:,.0f} MiB before loading, {info['rss_loaded'] / mb:,.0f} MiB with {passages:,} "
        f"passages loaded, {info['rss_end'] / mb:,.0f} MiB after the conversation (one process, all three systems "
        f"run after pagefault). Loading the passages (precomputed vectors) took {info['load_s']:.0f} s.",
    ]
    return "\n".join(lines)


def ingest_table(ing: dict[str, float], cmd: str) -> str:
    et, it = ing["tokens"] / ing["embed_s"], ing["tokens"] / ing["ingest_s"]
    return "\n".join([
        f"Command: `{cmd}`. Machine: {perf_data.machine()}. A generated document of {ing['tokens']:,.0f} cl100k "
        f"tokens, {ing['passages']:,.0f} passages of at most 1,500 characters.",
        "",
        "| path | seconds | tokens/s | passages/s | share of embedding-only |",
        "|---|---:|---:|---:|---:|",
        f"| embedding the passages only (uncached) | {ing['embed_s']:.1f} | {et:,.0f} | "
        f"{ing['passages'] / ing['embed_s']:.1f} | 100 % |",
        f"| `ingest_document` (split, embed, insert into Chroma + BM25) | {ing['ingest_s']:.1f} | {it:,.0f} | "
        f"{ing['passages'] / ing['ingest_s']:.1f} | {100 * it / et:.1f} % |",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--ingest-tokens", type=int, default=1_000_000, help="0 skips the ingestion measurement")
    ap.add_argument("--systems", default="pagefault,bare,create_agent", help="'' for ingestion only")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    raw = argv if argv is not None else sys.argv[1:]
    cmd = "python benchmarks/perf_turns.py" + "".join(" " + shlex.quote(a) for a in raw)
    lines = script(args.turns)
    early, late = ranges(args.turns)
    marks = {early.start, early.stop, late.start}
    systems = args.systems.split(",")
    work = Path(tempfile.mkdtemp(prefix="pf-perf-turns-"))
    progress = not args.quiet
    try:
        runs, info = [], {}
        if "pagefault" in systems:
            t0 = time.perf_counter()
            run, info = run_pagefault(work, lines, args.passages, marks, progress)
            runs.append(run)
            print(f"pagefault done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        for name, fn in (("bare", run_bare), ("create_agent", run_create_agent)):
            if name in systems:
                t0 = time.perf_counter()
                runs.append(fn(work, lines, marks, progress))
                print(f"{name} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        gc.collect()
        body = ""  # no systems (--systems ''): ingestion only
        if runs:
            body = "## Per-turn cost and storage growth\n\n" + turns_table(runs, info, early, late, args.turns,
                                                                            args.passages, cmd)
            print(body)
        if args.ingest_tokens:
            ing = run_ingest(work, args.ingest_tokens)
            ingest_body = "## Ingestion throughput\n\n" + ingest_table(ing, cmd)
            print(ingest_body)
        if not args.no_write:
            if body:
                write_section(Path(args.results), NAME, body)
            if args.ingest_tokens:
                write_section(Path(args.results), INGEST_NAME, ingest_body)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
