"""Recall across languages: facts a user stated in English, Spanish, French, German and Chinese, asked
about in other words, through ``conversation_search``'s own path, on each candidate embedding.

    python benchmarks/multilingual.py                  # every candidate; writes benchmarks/RESULTS.md
    python benchmarks/multilingual.py --embeddings offline --no-write

The set (``benchmarks/data/multilingual_recall.json``) was written for this check: ten facts per language,
each with a question that names it in other words. All fifty facts are one user's messages on one
thread (``RecallIndex.add``, what the recall writer runs for a turn); each question is searched with
``RecallIndex.search`` (what ``conversation_search`` calls, hybrid BM25 + dense), and, as baselines,
BM25 alone and dense alone over the same texts and vectors. A question counts as answered at k when its
own fact is among the first k hits. The embeddings are ``benchmarks/embedding_candidates.py``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402
from embedding_candidates import NAMES, choice  # noqa: E402
from locomo import Baselines  # noqa: E402
from results_md import write_section  # noqa: E402

from pagefault import open_embedded  # noqa: E402
from pagefault.stores import MemoryServices, Scope  # noqa: E402

NAME = "multilingual"
SET = ROOT / "benchmarks" / "data" / "multilingual_recall.json"
KS = (1, 3, 5)
LANGS = ("en", "es", "fr", "de", "zh")
USER = "polyglot"
THREAD = "facts"


def load() -> list[dict[str, str]]:
    return list(json.loads(SET.read_text())["facts"])


def run(embeddings: str) -> dict[str, Any]:
    """Recall at ``KS`` per language and method, for one candidate embedding."""
    from langchain_core.messages import HumanMessage

    facts = load()
    hits: dict[str, dict[str, list[dict[int, bool]]]] = defaultdict(lambda: defaultdict(list))
    took: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pagefault-multilingual-") as tmp:
        data_dir = os.path.join(tmp, "d")
        with open_embedded(data_dir, embeddings=choice(embeddings)):
            svc = MemoryServices.open(data_dir)
            scope = Scope(USER)
            messages = [HumanMessage(f["fact"], id=f"fact-{i}") for i, f in enumerate(facts)]
            svc.recall.add(scope, THREAD, list(enumerate(messages)), "cp-facts", turns={i: i for i in range(len(facts))})
            svc.recall.writer.flush()
            stored = svc.recall.index.collection.get(where={"scope": scope.key}, include=["embeddings", "metadatas"])
            by_id = {m["message_id"]: v for m, v in zip(stored["metadatas"], stored["embeddings"])}
            base = Baselines(tmp, svc.embeddings.embed_query_array)
            ids = [str(i) for i in range(len(facts))]
            vectors = np.array([by_id[f"fact-{i}"] for i in range(len(facts))], dtype=np.float32)
            base.load(USER, ids, [f["fact"] for f in facts], vectors)

            def hybrid(q: str) -> list[str]:
                t0 = time.perf_counter()
                found = svc.recall.search(scope, q, top_k=max(KS), thread_id=THREAD)
                took.append(time.perf_counter() - t0)
                return [str(h.message_index) for h in found]

            methods: dict[str, Callable[[str], list[str]]] = {"pagefault": hybrid, "BM25 only": base.bm25,
                                                              "dense only": base.dense}
            for i, f in enumerate(facts):
                for name, search in methods.items():
                    ranked = search(f["question"])
                    row = {k: str(i) in ranked[:k] for k in KS}
                    hits[name][f["lang"]].append(row)
                    hits[name]["all"].append(row)
    table = {name: {lang: {k: 100.0 * sum(r[k] for r in rows) / len(rows) for k in KS} for lang, rows in by.items()}
             for name, by in hits.items()}
    return {"embeddings": embeddings, "table": table, "search_ms_p50": 1000 * float(np.median(took)), "facts": len(facts)}


def render(results: list[dict[str, Any]], command: str) -> str:
    lines = [
        f"`{command}` — {results[0]['facts']} facts ({len(LANGS)} languages, ten each: {', '.join(LANGS)}), each asked "
        "about once in other words, in the language it was stated in; one user, one thread. Recall @1 / @3 / @5 "
        "(%): the question's own fact among the first k hits.",
        "",
        "| embedding | method | " + " | ".join(LANGS) + " | all |",
        "|---|---|" + "---:|" * (len(LANGS) + 1),
    ]
    for res in results:
        for method, by in res["table"].items():
            cells = " | ".join(" / ".join(f"{by[lang][k]:.0f}" for k in KS) for lang in (*LANGS, "all"))
            lines.append(f"| `{res['embeddings']}` | {method} | {cells} |")
    lines += ["", "pagefault's search p50 (ms, query embedding included): "
              + ", ".join(f"`{r['embeddings']}` {r['search_ms_p50']:.1f}" for r in results) + "."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embeddings", default=",".join(NAMES), help=f"comma-separated, of {', '.join(NAMES)}")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    names = [n for n in args.embeddings.split(",") if n]
    results = [run(n) for n in names]
    command = "python benchmarks/multilingual.py" + ("" if names == list(NAMES) else f" --embeddings {','.join(names)}")
    body = "## Recall across languages (issue 26)\n\n" + render(results, command)
    print(body)
    if not args.no_write:
        write_section(ROOT / "benchmarks" / "RESULTS.md", NAME, body)


if __name__ == "__main__":
    main()
