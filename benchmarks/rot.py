"""Memory rot: do searches still return what is true after facts change again and again?

    python benchmarks/rot.py                    # 500 subjects + LoCoMo (10 conversations), writes RESULTS.md
    python benchmarks/rot.py --subjects 40 --locomo 0 --no-write

The conversation (fixed seed, ``SEED``): 500 subjects (``First Last`` names), each with two of five
attributes (city, employer, car, favourite colour, doctor). Every attribute is mentioned 1 to 10
times (uniform), dated on increasing days over about six years; after the first mention each
further one changes the value (60 %) or restates the current one in other words (40 %: "is still",
"remains", or "is" again with the new date). One subject in five also gets a note said twice with
different punctuation (no fact key: a near duplicate for the embedding rule). All mentions, sorted
by date, are user utterances sent through the real graph with the offline model (one thread per 25
turns; each message carries its date), so the model decides what to store.

Measured on the stored archival memory, in one run:

- **current-value accuracy@1**: top-1 of ``What is <name>'s <attribute>?`` states the latest value;
- **as-of accuracy@1**: for each attribute mentioned twice or more, a random moment between its
  first mention and 30 days after its last (midday, so never on a mention): top-1 of ``What was
  <name>'s <attribute>?`` searched ``as_of`` that moment states the value in effect then (the
  baseline, which has no ``as_of``, asks ``... on <date>?``);
- archival records before and after a consolidation pass, the pass's time, and the share of planted
  duplicates (restatements and repeated notes) no longer stored as records of their own.

Columns: **baseline** searches every record (``include_superseded=True``: what search returned before
validity existed; the as-of question is asked with the date in its words, since there is no
``as_of``); **validity** is default search and ``as_of`` search; **validity + consolidation** is the
same after one pass. A LoCoMo check follows: conversation_search evidence recall@10 (overall and the
temporal category) after import, then again after a consolidation pass of the same memory, to show
that neither the validity filter nor consolidation costs recall.

**Model-worded facts** (``--judge N`` subjects, 100 by default; 0 skips): the same kind of scenario
worded as a model words its own inserts ("Ana Berg switched car to Volvo.", "Ana Berg has a new
doctor: Dr Chen."), which no pattern reads. Each mention is inserted as ``archival_memory_insert``
inserts it (``ArchivalStore.insert`` with its date as ``valid_from``), once judged by the patterns
alone and once by ``ModelSupersedeJudge``: a real ``ChatOpenAI`` against the tests' scripted loopback
server (``tests/support/scripted_openai.py``), whose structured answer is an **oracle** that reads the
scenario's own wordings. So that column is the ceiling of the model-judge path (what the candidate
search lets a perfect model reach, and what it costs in calls and time), not any real model's accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_md import write_section  # noqa: E402

from pagefault import Context, open_embedded  # noqa: E402
from pagefault.consolidation.consolidate import consolidate  # noqa: E402
from pagefault.consolidation.supersede import ModelSupersedeJudge  # noqa: E402
from pagefault.stores import CoreMemory, MemoryServices, Scope  # noqa: E402
from pagefault.stores.provenance import Provenance  # noqa: E402
from pagefault.stores.superseding import PATTERNS, SupersedeJudge  # noqa: E402
from pagefault.text.facts import parse_fact  # noqa: E402

SEED = 20_240_503
FIRST = ("Ana Ben Cleo Dev Eli Fay Gus Hana Ivo Jon Kai Lea Max Nia Oto Pia Quin Rae Sam Tia Uma Vic Wen Xia Yann "
         "Zoe").split()
LAST = ("Berg Costa Dahl Eng Falk Grau Holm Ito Jung Kern Lund Mora Nagy Ortiz Park Quast Ruiz Sato Toth Vogel").split()
VALUES = {
    "city": "Oslo Lisbon Berlin Paris Rome Vienna Prague Dublin Madrid Porto Lyon Turin Krakow Riga Tallinn Ghent "
            "Bergen Utrecht Seville Bologna Graz Basel Malmo Aarhus Leeds Bristol Cork Nantes Bilbao Split".split(),
    "employer": "Acme Globex Initech Umbrella Hooli Vandelay Wonka Stark Wayne Tyrell Cyberdyne Soylent Aperture "
                "Monarch Oscorp Nakatomi Gringotts Pendant Virtucon Zorg".split(),
    "car": "Volvo Saab Fiat Skoda Renault Peugeot Toyota Honda Mazda Kia Dacia Seat Opel Tesla Subaru".split(),
    "favourite colour": "teal crimson amber olive navy coral ochre violet indigo mint ivory scarlet".split(),
    "doctor": ["Dr " + n for n in "Abel Brandt Chen Duval Egan Fischer Greco Hale Iqbal Janssen Kaur Lopez".split()],
}
RESTATE = ("{n}'s {a} is still {v}.", "{n}'s {a} remains {v}.", "{n}'s {a} is {v}.")
CHANGE = ("{n}'s {a} is now {v}.", "{n}'s {a} changed to {v}.", "{n}'s {a} is {v}.")
FIRST_TEMPLATE = "{n}'s {a} is {v}."
#: The same statements as a model words its inserts: no pattern reads any of them.
MODEL_RESTATE = ("{n} still has {v} as {a}.",)
MODEL_CHANGE = ("{n} has a new {a}: {v}.", "{n} switched {a} to {v}.")
MODEL_FIRST = "{n} has {v} as {a}."
_MODEL_WORDED = re.compile(r"^(?:As of [\d-]+, )?(?P<n>[A-Z]\w+ [A-Z]\w+) (?:has a new (?P<a1>[a-z ]+): (?P<v1>.+)"
                           r"|switched (?P<a2>[a-z ]+) to (?P<v2>.+)|(?:still )?has (?P<v3>.+?) as (?P<a3>[a-z ]+))\.$")
START = datetime(2020, 1, 1, tzinfo=timezone.utc)
SESSION = 25


@dataclass
class Mention:
    at: float
    name: str
    attribute: str
    value: str
    restated: bool
    text: str


@dataclass
class Scenario:
    mentions: list[Mention]
    notes: list[tuple[float, str, str]] = field(default_factory=list)  # (time, text, near-duplicate text)

    def timeline(self) -> dict[tuple[str, str], list[Mention]]:
        out: dict[tuple[str, str], list[Mention]] = {}
        for m in self.mentions:
            out.setdefault((m.name, m.attribute), []).append(m)
        return out


def _day(i: int) -> datetime:
    return START + timedelta(days=i)


def generate(subjects: int = 500, seed: int = SEED, *, wording: str = "patterns") -> Scenario:
    """The dated mentions (see module docs); the same seed gives the same conversation. ``wording``:
    "patterns" (statements the patterns read) or "model" (as a model words them; ``model_worded``)."""
    if wording not in ("patterns", "model"):
        raise ValueError(f"wording must be 'patterns' or 'model', got {wording!r}")
    restate, change, first = (RESTATE, CHANGE, FIRST_TEMPLATE) if wording == "patterns" else (
        MODEL_RESTATE, MODEL_CHANGE, MODEL_FIRST)
    rng = random.Random(seed)
    names = [f"{first} {last}" for last in LAST for first in FIRST]
    rng.shuffle(names)
    if subjects > len(names):
        raise ValueError(f"at most {len(names)} subjects")
    events: list[tuple[str, str, int]] = []  # (name, attribute, k-th mention)
    for name in names[:subjects]:
        for attribute in rng.sample(sorted(VALUES), 2):
            events += [(name, attribute, k) for k in range(rng.randint(1, 10))]
    rng.shuffle(events)
    # Order each attribute's mentions by their k while keeping the global shuffle otherwise.
    seen: dict[tuple[str, str], int] = {}
    ordered = []
    for name, attribute, _ in events:
        k = seen[(name, attribute)] = seen.get((name, attribute), -1) + 1
        ordered.append((name, attribute, k))
    per_day = max(1, len(ordered) // 2000)  # about 2,000 days (some six years) whatever the size
    current: dict[tuple[str, str], str] = {}
    mentions = []
    for i, (name, attribute, k) in enumerate(ordered):
        day = _day(i // per_day)
        key = (name, attribute)
        restated = k > 0 and rng.random() < 0.4
        if restated:
            value = current[key]
            template = rng.choice(restate)
        else:
            value = rng.choice([v for v in VALUES[attribute] if v != current.get(key)])
            template = rng.choice(change) if k else first
        current[key] = value
        sentence = template.format(n=name, a=attribute, v=value)
        mentions.append(Mention(day.timestamp(), name, attribute, value, restated,
                                f"As of {day.date().isoformat()}, {sentence}"))
    notes = []
    for j, name in enumerate(names[:subjects:5]):
        at = rng.choice(mentions).at
        notes.append((at, f"Remember that the {name} file is in the blue cabinet.",
                      f"remember that the {name} file is in the blue cabinet!"))
    return Scenario(mentions, notes)


def utterances(s: Scenario) -> list[tuple[float, str]]:
    out = [(m.at, m.text) for m in s.mentions]
    for at, a, b in s.notes:
        out += [(at, a), (at + 1, b)]
    return sorted(out, key=lambda x: x[0])


def ingest(data_dir: str, user: str, s: Scenario, progress: bool = True) -> dict[str, float]:
    """Every utterance through the graph (offline model), one thread per ``SESSION`` turns."""
    ctx = Context(user_id=user, data_dir=data_dir, model="offline")
    said = utterances(s)
    t0 = time.perf_counter()
    with open_embedded(data_dir) as memory:
        graph = memory.graph()
        for i, (at, text) in enumerate(tqdm(said, desc="turns", disable=not progress, file=sys.stderr, unit="turn")):
            msg = HumanMessage(text, additional_kwargs={"pagefault": {"timestamp": at}})
            graph.invoke({"messages": [msg]}, {"configurable": {"thread_id": f"rot-{i // SESSION}"}}, context=ctx)
    return {"turns": len(said), "seconds": time.perf_counter() - t0}


def model_worded(text: str) -> tuple[str, str, str] | None:
    """(name, attribute, value) of a model-worded mention (``MODEL_*``), else None."""
    m = _MODEL_WORDED.match(text)
    if m is None:
        return None
    attribute, value = next((m.group(f"a{i}"), m.group(f"v{i}")) for i in (1, 2, 3) if m.group(f"a{i}"))
    return m.group("n"), attribute, value


def _value_of(text: str, name: str, attribute: str) -> str | None:
    f = parse_fact(text)
    if f is None:
        said = model_worded(text)
        return said[2].lower() if said and said[0] == name and said[1] == attribute else None
    if f.subject != " ".join(name.lower().split()) or f.attribute != attribute:
        return None
    return f.value


def questions(s: Scenario, seed: int = SEED) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, float, str]]]:
    """(name, attribute, latest value) and (name, attribute, moment, value then) questions."""
    rng = random.Random(seed + 1)
    current, as_of = [], []
    for (name, attribute), ms in sorted(s.timeline().items()):
        current.append((name, attribute, ms[-1].value))
        if len({m.value for m in ms}) < 2 and len(ms) < 2:
            continue
        lo, hi = ms[0].at, ms[-1].at + 30 * 86_400
        t = START.timestamp() + 86_400 * rng.randint(int((lo - START.timestamp()) // 86_400),
                                                      int((hi - START.timestamp()) // 86_400)) + 43_200
        then = [m for m in ms if m.at <= t][-1].value
        as_of.append((name, attribute, t, then))
    return current, as_of


def accuracy(svc: MemoryServices, scope: Scope, s: Scenario, *, validity: bool) -> dict[str, float]:
    current, as_of = questions(s)
    hits = 0
    for name, attribute, value in current:
        top = svc.archival.search(scope, f"What is {name}'s {attribute}?", 1, include_superseded=not validity)
        hits += bool(top) and _value_of(top[0][0].text, name, attribute) == value.lower()
    dated = 0
    for name, attribute, t, value in as_of:
        day = datetime.fromtimestamp(t, timezone.utc).date().isoformat()
        if validity:  # the date travels as as_of, as a model calling archival_memory_search would pass it
            top = svc.archival.search(scope, f"What was {name}'s {attribute}?", 1, as_of=t)
        else:  # no as_of before validity: the date can only be in the question's words
            top = svc.archival.search(scope, f"What was {name}'s {attribute} on {day}?", 1, include_superseded=True)
        dated += bool(top) and _value_of(top[0][0].text, name, attribute) == value.lower()
    return {"current": 100 * hits / len(current), "as_of": 100 * dated / len(as_of),
            "current_n": len(current), "as_of_n": len(as_of)}


def locomo_check(conversations: int, progress: bool = True) -> dict[str, Any]:
    """conversation_search recall@10 (overall, temporal) after import, then after a consolidation pass."""
    import locomo  # benchmarks/locomo.py: the data loader and the paper's metric

    from pagefault.maintenance.history_import import import_history
    from pagefault.tools.handlers import MemoryCall, run_memory_tool

    data = locomo.load()[:conversations]
    scores: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    passes = []
    with tempfile.TemporaryDirectory(prefix="pagefault-rot-locomo-") as tmp:
        for conv in tqdm(data, desc="locomo", disable=not progress, file=sys.stderr):
            data_dir = os.path.join(tmp, conv["id"])
            ctx = Context(user_id=conv["id"], data_dir=data_dir, context_window=2048, model="offline")
            with open_embedded(data_dir) as memory:
                import_history(memory.graph(), conv["dialog"], ctx, progress=False)
                svc, scope = MemoryServices.open(data_dir), Scope(conv["id"])
                call = MemoryCall(scope, "benchmark", -1, "", CoreMemory(memory.store, scope), svc.archival, svc.recall)
                for phase in ("before", "after"):
                    if phase == "after":
                        passes.append(consolidate(svc.archival, scope, CoreMemory(memory.store, scope)).seconds)
                    for q in conv["questions"]:
                        hits = run_memory_tool(call, "conversation_search", {"query": q["question"], "top_k": 50})
                        r = locomo.recall_at([h.get("external_id", "") for h in hits.artifact["hits"]], q["evidence"])[10]
                        scores[phase].setdefault("overall", []).append(r)
                        scores[phase].setdefault(q["category_name"], []).append(r)
    return {phase: {cat: 100 * statistics.fmean(v) for cat, v in cats.items()} for phase, cats in scores.items()} | {
        "conversations": len(data), "questions": len(scores["before"].get("overall", [])),
        "temporal_questions": len(scores["before"].get("temporal", [])), "pass_s": sum(passes)}


def oracle(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted server's answer to a supersede judge's structured call (``Replaced``): the records of
    the same name and attribute, replaced when their value differs, restated when it is the same. Other
    chat calls are not expected here."""
    data = json.loads(body["messages"][-1]["content"])
    new = model_worded(data["new_statement"])
    said = [] if new is None else [(r["id"], old) for r in data["records"]
                                   if (old := model_worded(r["text"])) is not None and old[:2] == new[:2]]
    return {"content": json.dumps({"replaces": [i for i, old in said if new and old[2] != new[2]],
                                   "restates": [i for i, old in said if new and old[2] == new[2]]})}


def _insert_all(s: Scenario, judge: SupersedeJudge, label: str, progress: bool) -> dict[str, Any]:
    """Every utterance of ``s`` inserted as ``archival_memory_insert`` inserts it, judged by ``judge``."""
    with tempfile.TemporaryDirectory(prefix=f"pagefault-rot-{label}-") as tmp:
        svc, scope = MemoryServices.open(os.path.join(tmp, "data")), Scope("rot")
        t0 = time.perf_counter()
        for at, text in tqdm(utterances(s), desc=label, disable=not progress, file=sys.stderr, unit="insert"):
            svc.archival.insert(scope, text, provenance=Provenance(thread_id="rot", created_at=at), valid_from=at,
                                judge=judge)
        seconds = time.perf_counter() - t0
        return {**accuracy(svc, scope, s, validity=True), "insert_s": seconds, "records": svc.archival.count(scope)}


def judge_check(subjects: int, seed: int = SEED, progress: bool = True) -> dict[str, Any]:
    """Model-worded facts (see module docs) judged by the patterns alone, then by the model judge over HTTP."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.scripted_openai import ScriptedOpenAI

    s = generate(subjects, seed, wording="model")
    with ScriptedOpenAI(oracle) as api:
        patterns = _insert_all(s, PATTERNS, "patterns", progress)
        model = _insert_all(s, ModelSupersedeJudge(api.chat_model()), "model-judge", progress)
        calls = len(api.chat_requests)
    return {"subjects": subjects, "mentions": len(s.mentions), "inserts": len(utterances(s)), "patterns": patterns,
            "model": model, "judge_calls": calls}


def run(subjects: int = 500, seed: int = SEED, locomo_conversations: int = 10, progress: bool = True,
        judge_subjects: int = 0) -> dict[str, Any]:
    s = generate(subjects, seed)
    planted = sum(m.restated for m in s.mentions) + len(s.notes)
    with tempfile.TemporaryDirectory(prefix="pagefault-rot-") as tmp:
        data_dir = os.path.join(tmp, "data")
        ingested = ingest(data_dir, "rot", s, progress)
        svc, scope = MemoryServices.open(data_dir), Scope("rot")
        baseline = accuracy(svc, scope, s, validity=False)
        validity = accuracy(svc, scope, s, validity=True)
        before = svc.archival.count(scope)
        with open_embedded(data_dir) as memory:
            report = consolidate(svc.archival, scope, CoreMemory(memory.store, scope))
        after_count = svc.archival.count(scope)
        consolidated = accuracy(svc, scope, s, validity=True)
        # Planted duplicates still stored as records of their own: restatements whose text is still a record,
        # and second copies of notes still stored.
        stored = {h.text for h, _ in svc.archival.index.find(scope.key)}
        left = sum(m.restated and m.text in stored for m in s.mentions) + sum(b in stored for _, _, b in s.notes)
    result = {
        "subjects": subjects, "seed": seed, "turns": ingested["turns"], "ingest_s": ingested["seconds"],
        "mentions": len(s.mentions), "planted": planted, "merged_pct": 100 * (planted - left) / planted if planted else 0.0,
        "records_before": before, "records_after": after_count, "consolidation_s": report.seconds,
        "superseded_in_pass": report.superseded, "merged_in_pass": report.merged,
        "baseline": baseline, "validity": validity, "consolidated": consolidated,
    }
    if locomo_conversations:
        result["locomo"] = locomo_check(locomo_conversations, progress)
    if judge_subjects:
        result["judge"] = judge_check(judge_subjects, seed, progress)
    return result


def render(r: dict[str, Any], command: str) -> str:
    b, v, c = r["baseline"], r["validity"], r["consolidated"]
    lines = [
        "## Memory rot: facts that change (benchmarks/rot.py)", "",
        f"`{command}` — seed {r['seed']}, {r['subjects']} subjects, {r['mentions']} dated mentions "
        f"({r['planted']} planted duplicates), {r['turns']} user turns through the graph with the offline model "
        f"in {r['ingest_s'] / 60:.1f} min. {b['current_n']} current-value and {b['as_of_n']} as-of questions "
        "(top-1 of archival search).", "",
        "| | baseline (all records, no as_of) | validity | validity + consolidation |",
        "|---|---|---|---|",
        f"| current-value accuracy@1 | {b['current']:.1f} % | {v['current']:.1f} % | {c['current']:.1f} % |",
        f"| as-of accuracy@1 | {b['as_of']:.1f} % | {v['as_of']:.1f} % | {c['as_of']:.1f} % |",
        f"| archival records | {r['records_before']} | {r['records_before']} | {r['records_after']} |",
        f"| planted duplicates merged | 0 % | 0 % | {r['merged_pct']:.1f} % |",
        f"| consolidation pass | - | - | {r['consolidation_s']:.2f} s ({r['merged_in_pass']} merged, "
        f"{r['superseded_in_pass']} newly superseded) |", "",
        "Baseline is what search returned before validity: every record, the date only in the question's words. "
        "Contradictions are superseded when written, so the validity column needs no consolidation; the pass "
        "shrinks the store and keeps every folded record's provenance.",
    ]
    if "locomo" in r:
        lo = r["locomo"]
        lines += ["", f"LoCoMo conversation_search evidence recall@10, {lo['conversations']} conversations, "
                      f"{lo['questions']} questions ({lo['temporal_questions']} temporal), same run, before and after "
                      f"a consolidation pass of each conversation's memory ({lo['pass_s']:.1f} s in all):", "",
                  "| | overall | temporal |", "|---|---|---|",
                  f"| after import | {lo['before']['overall']:.1f} | {lo['before'].get('temporal', 0):.1f} |",
                  f"| after consolidation | {lo['after']['overall']:.1f} | {lo['after'].get('temporal', 0):.1f} |"]
    if "judge" in r:
        lines += ["", render_judge(r["judge"])]
    return "\n".join(lines)


def render_judge(j: dict[str, Any]) -> str:
    """The model-worded facts table (see module docs)."""
    p, m = j["patterns"], j["model"]
    return "\n".join([
        f"Model-worded facts (no pattern reads them): {j['subjects']} subjects, {j['mentions']} dated mentions, "
        f"{j['inserts']} inserts through `ArchivalStore.insert`; {p['current_n']} current-value and {p['as_of_n']} "
        "as-of questions. The model judge is a real `ChatOpenAI` against the scripted loopback server, whose "
        "structured answers are an oracle reading the scenario's wordings: a ceiling for the path, not a model's "
        "accuracy.", "",
        "| | patterns only | model judge (oracle over HTTP) |", "|---|---|---|",
        f"| current-value accuracy@1 | {p['current']:.1f} % | {m['current']:.1f} % |",
        f"| as-of accuracy@1 | {p['as_of']:.1f} % | {m['as_of']:.1f} % |",
        f"| judge calls | 0 | {j['judge_calls']} |",
        f"| inserting all | {p['insert_s']:.1f} s | {m['insert_s']:.1f} s |",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subjects", type=int, default=500)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--locomo", type=int, default=10, help="LoCoMo conversations for the recall check (0: skip)")
    ap.add_argument("--judge", type=int, default=100, help="subjects of the model-worded facts check (0: skip)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not update benchmarks/RESULTS.md")
    args = ap.parse_args()
    result = run(args.subjects, args.seed, args.locomo, judge_subjects=args.judge)
    command = "python benchmarks/rot.py" + ("" if args.subjects == 500 else f" --subjects {args.subjects}") + (
        "" if args.locomo == 10 else f" --locomo {args.locomo}") + ("" if args.judge == 100 else f" --judge {args.judge}")
    body = render(result, command)
    print(body)
    if not args.no_write:
        write_section(ROOT / "benchmarks" / "RESULTS.md", "rot", body)


if __name__ == "__main__":
    main()
