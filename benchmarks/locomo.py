"""LoCoMo evidence recall through pagefault's real memory path, beside three baselines.

    python benchmarks/locomo.py                 # all 10 conversations, writes benchmarks/RESULTS.md
    python benchmarks/locomo.py --conversations 1 --no-write

Each conversation is imported with ``import_history`` (one thread per session, a 2,048-token
window so compaction fires again and again), then every question is answered with the agent's
own ``conversation_search`` tool call (top 50), and scored with the paper's metric: the fraction
of a question's evidence turns among the top k, averaged over questions with evidence. The same
run measures BM25 only, dense only (same embedding) and the seed lesson's token-overlap store.
Nothing here is tuned per conversation or keyed on LoCoMo's categories, speakers or phrasing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from embedding_candidates import NAMES, choice  # noqa: E402
from results_md import write_section  # noqa: E402
from shared_data import require  # noqa: E402

from pagefault import Context, open_embedded  # noqa: E402
from pagefault.maintenance.history_import import import_history  # noqa: E402
from pagefault.models.embedding_choice import DEFAULT  # noqa: E402
from pagefault.stores import CoreMemory, MemoryServices, Scope  # noqa: E402
from pagefault.stores.index.lexical_sqlite import LexicalDoc, LexicalIndex  # noqa: E402
from pagefault.tools.handlers import MemoryCall, run_memory_tool  # noqa: E402

#: The read-only LoCoMo files: ../shared/data/locomo beside the repo (override with PAGEFAULT_LOCOMO_DIR).
DATA = Path(os.environ.get("PAGEFAULT_LOCOMO_DIR", ROOT.parent / "shared" / "data" / "locomo"))
KS = (5, 10, 25, 50)
ANCHORS = {
    "LoCoMo paper, DRAGON (published)": (56.7, 66.2, 76.7, 82.7),
    "Plain BM25 (published)": (45.7, 53.3, 62.6, 70.4),
}
CATEGORY_ORDER = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]
_WORD = re.compile(r"\w+")


#: The held-out set written for issue 26 (in the repository), in ``load``'s shape.
HELDOUT = ROOT / "benchmarks" / "data" / "heldout_conversations.json"


def load_heldout(path: Path = HELDOUT) -> list[dict[str, Any]]:
    """The held-out conversations, with their questions, as ``load`` gives LoCoMo's."""
    return list(json.loads(path.read_text())["conversations"])


def load(data_dir: Path = DATA) -> list[dict[str, Any]]:
    """LoCoMo conversations as pagefault dialogs, with their scorable questions."""
    convs = json.loads(require(data_dir / "locomo10.json", "LoCoMo (locomo10.json)").read_text())
    questions = [json.loads(line) for line in (data_dir / "locomo10_qa_retrieval.jsonl").read_text().splitlines()]
    out = []
    for index, conv in enumerate(convs):
        c = conv["conversation"]
        sessions = []
        n = 1
        while f"session_{n}" in c:
            when = datetime.strptime(c[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
            messages = []
            for turn in c[f"session_{n}"]:
                text = turn["text"] + (f" and shared {turn['blip_caption']}" if turn.get("blip_caption") else "")
                messages.append({"speaker": turn["speaker"], "text": text, "id": turn["dia_id"]})
            sessions.append({"id": f"session_{n}", "timestamp": when.isoformat(), "messages": messages})
            n += 1
        qs = [q for q in questions if q["conv_index"] == index and q["evidence"]]
        out.append({"id": conv["sample_id"], "dialog": {"sessions": sessions}, "questions": qs})
    return out


def recall_at(ranked: list[str], evidence: list[str]) -> dict[int, float]:
    ev = set(evidence)
    return {k: len(ev & set(ranked[:k])) / len(ev) for k in KS}


class Baselines:
    """BM25 only, dense only and token overlap, over the same turn texts recall indexes."""

    def __init__(self, workdir: str, embed: Callable[[list[str]], np.ndarray]) -> None:
        self.lexical = LexicalIndex(os.path.join(workdir, "baseline.sqlite"), "baseline")
        self.embed = embed

    def load(self, scope: str, ids: list[str], texts: list[str], vectors: np.ndarray) -> None:
        """Turn ids and texts, and the turn vectors recall already computed (same embedding)."""
        self.scope, self.ids, self.texts, self.vectors = scope, ids, texts, vectors
        self.lexical.upsert(LexicalDoc(f"{scope}|{i}", scope, t) for i, t in zip(ids, texts))
        self.tokens = [set(w.lower() for w in _WORD.findall(t)) for t in texts]

    def bm25(self, q: str) -> list[str]:
        return [i.split("|", 1)[1] for i, _ in self.lexical.search(q, self.scope, 50)]

    def dense(self, q: str) -> list[str]:
        sims = self.vectors @ self.embed([q])[0]
        return [self.ids[i] for i in np.argsort(-sims)[:50]]

    def token_overlap(self, q: str) -> list[str]:
        """The seed lesson's store: score = how many query tokens a record contains."""
        qt = set(w.lower() for w in _WORD.findall(q))
        scores = [len(qt & t) for t in self.tokens]
        return [self.ids[i] for i in sorted(range(len(scores)), key=lambda i: -scores[i])[:50]]


def run(conversations: int | None = None, window: int = 2048, progress: bool = True,
        embeddings: str = DEFAULT) -> dict[str, Any]:
    """The first ``conversations`` conversations (all by default)."""
    data = load()
    return run_subset(range(len(data))[:conversations] if conversations else range(len(data)), window, progress,
                      embeddings)


@dataclass
class Imported:
    """One conversation imported into its own embedded store, ready to be searched: ``methods`` maps each
    method's name to a search (question -> turn ids, best first)."""

    report: Any
    import_s: float
    compactions: int
    methods: dict[str, Callable[[str], list[str]]]


@contextlib.contextmanager
def imported(conv: dict[str, Any], tmp: str, window: int, model: Any) -> Iterator[Imported]:
    """Import ``conv`` (``load``'s shape) with ``import_history`` into ``tmp/<id>`` on embedding ``model``
    (None: pagefault's default), and give its searches: pagefault's ``conversation_search`` (top 50) and
    the baselines over the same turn texts and vectors."""
    data_dir = os.path.join(tmp, conv["id"])
    ctx = Context(user_id=conv["id"], data_dir=data_dir, context_window=window, model="offline")
    with open_embedded(data_dir, embeddings=model) as memory:
        graph = memory.graph()
        t0 = time.perf_counter()
        report = import_history(graph, conv["dialog"], ctx, progress=False)
        import_s = time.perf_counter() - t0
        compactions = sum(graph.get_state({"configurable": {"thread_id": t}}).values.get("compactions", 0)
                          for t in report.threads)
        svc = MemoryServices.open(data_dir)
        svc.recall.writer.flush()  # the import's last turns are indexed behind it; read below directly
        scope = Scope(conv["id"])
        call = MemoryCall(scope, "benchmark", -1, "", CoreMemory(memory.store, scope), svc.archival, svc.recall)
        base = Baselines(data_dir, svc.embeddings.embed_query_array)
        turns = [(m["id"], f"{m['speaker']}: {m['text']}") for s in conv["dialog"]["sessions"] for m in s["messages"]]
        stored = svc.recall.index.collection.get(where={"scope": scope.key}, include=["embeddings", "metadatas"])
        by_external = {m["external_id"]: v for m, v in zip(stored["metadatas"], stored["embeddings"])}
        base.load(conv["id"], [i for i, _ in turns], [t for _, t in turns],
                  np.array([by_external[i] for i, _ in turns], dtype=np.float32))
        methods: dict[str, Callable[[str], list[str]]] = {
            "pagefault": lambda q: [h.get("external_id", "") for h in run_memory_tool(
                call, "conversation_search", {"query": q, "top_k": 50}).artifact["hits"]],
            "BM25 only": base.bm25,
            "dense only": base.dense,
            "seed token overlap": base.token_overlap,
        }
        yield Imported(report, import_s, compactions, methods)


def run_subset(indexes: Any, window: int = 2048, progress: bool = True, embeddings: str = DEFAULT) -> dict[str, Any]:
    """The conversations at ``indexes``; ``embeddings``: one of ``embedding_candidates.NAMES`` (pagefault's
    offline default, or a candidate of issue 26), the model of recall's vectors and of the dense baseline."""
    model = choice(embeddings)
    all_data = load()
    data = [all_data[i] for i in indexes]
    scores: dict[str, dict[str, list[dict[int, float]]]] = defaultdict(lambda: defaultdict(list))
    latency: dict[str, list[float]] = defaultdict(list)
    timings = {"import_s": 0.0, "turns": 0, "compactions": 0}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pagefault-locomo-") as tmp:
        for conv in tqdm(data, desc="conversations", disable=not progress, file=sys.stderr):
            with imported(conv, tmp, window, model) as conv_run:
                timings["import_s"] += conv_run.import_s
                timings["turns"] += conv_run.report.imported
                timings["compactions"] += conv_run.compactions
                for q in conv["questions"]:
                    for name, search in conv_run.methods.items():
                        t0 = time.perf_counter()
                        ranked = search(q["question"])
                        latency[name].append((time.perf_counter() - t0) * 1000)
                        r = recall_at(ranked, q["evidence"])
                        scores[name]["overall"].append(r)
                        scores[name][q["category_name"]].append(r)
    timings["total_s"] = time.perf_counter() - started

    def mean(rows: list[dict[int, float]]) -> list[float]:
        return [100 * statistics.fmean(r[k] for r in rows) for k in KS]

    table = {m: {cat: mean(rows) for cat, rows in cats.items()} for m, cats in scores.items()}
    counts = {cat: len(rows) for cat, rows in scores["pagefault"].items()}
    lat = {m: (statistics.median(v), float(np.percentile(v, 95))) for m, v in latency.items()}
    return {"table": table, "counts": counts, "latency_ms": lat, "timings": timings,
            "conversations": len(data), "window": window, "embeddings": embeddings}


def render(result: dict[str, Any], command: str) -> str:
    t = result["table"]
    fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)  # noqa: E731
    lines = [
        "## LoCoMo evidence recall (issue 3)" if result["embeddings"] == DEFAULT else
        f"## LoCoMo evidence recall, embedding `{result['embeddings']}` (issue 26)",
        "",
        f"Command: `{command}` — {result['conversations']} conversation(s), {result['counts']['overall']} questions "
        f"with evidence, {result['timings']['turns']} turns imported through the graph with a "
        f"{result['window']}-token window ({result['timings']['compactions']} compactions), "
        f"`{result['embeddings']}` embedding{' (the default)' if result['embeddings'] == DEFAULT else ''}, CPU. "
        f"Whole run {result['timings']['total_s'] / 60:.1f} min (import {result['timings']['import_s'] / 60:.1f} min).",
        "",
        "Turn-level evidence recall @5 / @10 / @25 / @50, overall:",
        "",
        "| method | recall @5 / @10 / @25 / @50 | search p50 / p95 (ms) |",
        "|---|---|---|",
    ]
    for name, anchor in ANCHORS.items():
        lines.append(f"| {name} | {fmt(anchor)} | – |")
    for name in ("pagefault", "BM25 only", "dense only", "seed token overlap"):
        p50, p95 = result["latency_ms"][name]
        label = "**pagefault `conversation_search`**" if name == "pagefault" else name + " (same run)"
        lines.append(f"| {label} | {fmt(t[name]['overall'])} | {p50:.1f} / {p95:.1f} |")
    lines += ["", "By category (pagefault / BM25 only / dense only), recall @5 / @10 / @25 / @50:", "",
              "| category | questions | pagefault | BM25 only | dense only |", "|---|---|---|---|---|"]
    for cat in CATEGORY_ORDER:
        if cat in t["pagefault"]:
            lines.append(f"| {cat} | {result['counts'][cat]} | {fmt(t['pagefault'][cat])} | "
                         f"{fmt(t['BM25 only'][cat])} | {fmt(t['dense only'][cat])} |")
    lines += ["", "Search latency includes embedding the query. Latency of the baselines is an in-memory numpy "
              "or single-index query, shown for scale only.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--embeddings", default=DEFAULT, choices=NAMES,
                        help="the embedding of recall's vectors (issue 26's candidates: benchmarks/embedding_candidates.py)")
    parser.add_argument("--no-write", action="store_true", help="print the table, do not touch RESULTS.md")
    args = parser.parse_args()
    result = run(args.conversations, args.window, embeddings=args.embeddings)
    command = "python benchmarks/locomo.py" + (f" --conversations {args.conversations}" if args.conversations else "") \
        + (f" --embeddings {args.embeddings}" if args.embeddings != DEFAULT else "")
    body = render(result, command)
    print(body)
    if not args.no_write:
        section = "locomo" if args.embeddings == DEFAULT else f"locomo-{args.embeddings}"
        write_section(ROOT / "benchmarks" / "RESULTS.md", section, body)


if __name__ == "__main__":
    main()
