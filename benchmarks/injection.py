"""Detection benchmark of the poisoning guard (``pagefault.guard.scan``).

    python benchmarks/injection.py            # print the table
    python benchmarks/injection.py --write    # also write it into benchmarks/RESULTS.md
    python benchmarks/injection.py --misses   # list what the guard gets wrong on the tuning split

Injection corpora (public, shipped in PyPI packages, installed by the ``test`` extra):

- ``bastioncorpus`` 0.6.0 (MIT): prompt-injection rows labelled malicious, plus benign
  "false-positive traps" that look like injections but are ordinary requests;
- ``jailbreak-corpus-mini-py`` 0.1.0 (MIT) and ``nullsec-promptinject`` 0.1.0 (MIT): small
  payload libraries, never looked at while writing the rules (fully held out).

Benign corpus: LoCoMo (``../shared/data/locomo/locomo10.json``): every dialogue turn, every
observation (short personal facts) and every session summary (document text).

Honesty: the rules were written and tuned looking only at the *tuning* split. Each corpus is
split deterministically: bastioncorpus rows within each (label, category) alternately by the
sha256 of their id; LoCoMo by conversation, alternately by the sha256 of its sample id. The
reported figures are those of the *held-out* split; the full-corpus figures are shown beside them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pagefault.guard import scan  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Poisoning guard: injection detection"
TARGET_DETECTION, TARGET_FP = 0.95, 0.01
PLURAL = {"session summary": "session summaries"}


@dataclass(frozen=True)
class Sample:
    corpus: str
    key: str
    text: str
    malicious: bool
    split: str  # "tune" or "held-out"
    kind: str = ""


def _h(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def _alternate(items: list, key: Callable[[object], str]) -> Iterable[tuple[object, str]]:
    for i, item in enumerate(sorted(items, key=lambda x: _h(key(x)))):
        yield item, "tune" if i % 2 == 0 else "held-out"


def bastion() -> list[Sample]:
    from bastioncorpus import load_corpus

    groups = defaultdict(list)
    for r in load_corpus():
        groups[(r.label, r.category)].append(r)
    out = []
    for rows in groups.values():
        for r, split in _alternate(rows, lambda r: "bastioncorpus:" + r.id):
            out.append(Sample("bastioncorpus", r.id, r.stripped(), r.is_malicious, split, r.category))
    return out


def jailbreak_mini() -> list[Sample]:
    from jailbreak_corpus_mini import load_corpus

    return [Sample("jailbreak-corpus-mini-py", f.id, f.prompt, True, "held-out", f.category) for f in load_corpus()]


def nullsec() -> list[Sample]:
    from nullsec_promptinject.payloads import PAYLOADS

    return [Sample("nullsec-promptinject", str(i), p.text, True, "held-out", p.category) for i, p in enumerate(PAYLOADS)]


def locomo(path: Path = LOCOMO) -> list[Sample]:
    convs = json.loads(path.read_text())
    out = []
    for conv, split in _alternate(convs, lambda c: "locomo:" + c["sample_id"]):
        sid = conv["sample_id"]
        for k, turns in conv["conversation"].items():
            if k.startswith("session_") and isinstance(turns, list):
                out += [Sample("locomo", f"{sid}:{t['dia_id']}", t["text"], False, split, "turn") for t in turns]
        for sess, by_speaker in (conv.get("observation") or {}).items():
            for speaker, facts in by_speaker.items():
                out += [Sample("locomo", f"{sid}:{sess}:{speaker}:{i}", f[0], False, split, "observation")
                        for i, f in enumerate(facts)]
        for sess, summary in (conv.get("session_summary") or {}).items():
            out.append(Sample("locomo", f"{sid}:{sess}", summary, False, split, "session summary"))
    return out


def all_samples() -> list[Sample]:
    return bastion() + jailbreak_mini() + nullsec() + locomo()


def _rate(hits: int, n: int) -> str:
    return f"{100 * hits / n:.2f} % ({hits}/{n})" if n else "-"


def evaluate(samples: list[Sample]) -> tuple[list[dict], dict[Sample, bool], float]:
    t0 = time.perf_counter()
    flagged = {s: scan(s.text).flagged for s in samples}
    elapsed = time.perf_counter() - t0
    rows = []
    groups: dict[tuple[str, bool, str], list[Sample]] = defaultdict(list)
    for s in samples:
        kind = "" if s.corpus != "locomo" else s.kind
        groups[(s.corpus, s.malicious, kind)].append(s)
    for (corpus, malicious, kind), group in sorted(groups.items(), key=lambda g: (not g[0][1], g[0][0], g[0][2])):
        held = [s for s in group if s.split == "held-out"]
        rows.append({
            "corpus": corpus + (f" {PLURAL.get(kind, kind + 's')}" if kind else "") + ("" if malicious else (" (benign traps)" if corpus != "locomo" else "")),
            "label": "injection" if malicious else "benign",
            "metric": "detection" if malicious else "false positives",
            "held": (sum(flagged[s] for s in held), len(held)),
            "all": (sum(flagged[s] for s in group), len(group)),
            "tuned_on": any(s.split == "tune" for s in group),
        })
    return rows, flagged, elapsed


def table(rows: list[dict], samples: list[Sample], elapsed: float) -> str:
    lines = ["| corpus | label | metric | held-out split | whole corpus |", "|---|---|---|---|---|"]
    for r in rows:
        corpus = r["corpus"] + ("" if r["tuned_on"] else " (never tuned on)")
        lines.append(f"| {corpus} | {r['label']} | {r['metric']} | {_rate(*r['held'])} | {_rate(*r['all'])} |")
    primary_det = next(r for r in rows if r["corpus"] == "bastioncorpus" and r["label"] == "injection")["held"]
    locomo_rows = [r for r in rows if r["corpus"].startswith("locomo")]
    fp = (sum(r["held"][0] for r in locomo_rows), sum(r["held"][1] for r in locomo_rows))
    det_ok = primary_det[0] / primary_det[1] >= TARGET_DETECTION
    fp_ok = fp[0] / fp[1] <= TARGET_FP
    lines += [
        "",
        f"Targets on the held-out split: detection on bastioncorpus {_rate(*primary_det)} (target ≥ 95 %: "
        f"{'met' if det_ok else 'NOT met'}); false positives on LoCoMo {_rate(*fp)} (target ≤ 1 %: "
        f"{'met' if fp_ok else 'NOT met'}).",
        f"{len(samples)} texts scanned in {elapsed:.1f} s.",
    ]
    return "\n".join(lines)


def section(body: str) -> str:
    return f"""{SECTION}

`python benchmarks/injection.py --write` (one run; rules in `pagefault/guard.py`). Injection corpora from PyPI
packages: `bastioncorpus` 0.6.0 (MIT; 118 injections in 7 categories and 5 languages, plus 63 benign
look-alike traps), `jailbreak-corpus-mini-py` 0.1.0 (MIT) and `nullsec-promptinject` 0.1.0 (MIT). Benign
corpus: LoCoMo (`locomo10.json`): dialogue turns, observations (personal facts) and session summaries.
The rules were written from the tuning half of bastioncorpus and of LoCoMo (split by conversation)
and from example phrasings written for `tests/test_guard.py`; no held-out text was read. The held-out
column is the honest figure (computed several times during development, for three versions of the rules, only as
totals). The two small payload libraries were never looked at while tuning. The detection target is
not met: the rules fit the tuning half (100 %) much better than the held-out half, so a rule set
like this one misses paraphrases it has not seen; the false-positive target is met with room to spare.

{body}
"""


def write_results(text: str) -> None:
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = old.find(SECTION)
    if start == -1:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        nxt = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + ("" if nxt == -1 else old[nxt + 1:])
    RESULTS.write_text(new.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into benchmarks/RESULTS.md")
    ap.add_argument("--misses", action="store_true", help="list misses and false positives of the tuning split")
    args = ap.parse_args(argv)
    samples = all_samples()
    rows, flagged, elapsed = evaluate(samples)
    body = table(rows, samples, elapsed)
    print(body)
    if args.misses:
        for s in samples:
            if s.split == "tune" and flagged[s] != s.malicious:
                what = "MISS" if s.malicious else "FP  "
                extra = "" if s.malicious else " " + scan(s.text).reason()
                print(f"{what} {s.corpus}:{s.key} {s.text[:160]!r}{extra}")
    if args.write:
        write_results(section(body))
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
