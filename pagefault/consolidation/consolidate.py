"""Consolidation: the pass that keeps memory true and small (Letta's sleep-time idea, done offline).

One pass over one user's memory:

1. **Contradictions.** Every fact key (subject + attribute, ``stores.validity``) gets its timeline
   recomputed: each value holds until a different one begins. This settles what concurrent writers or a
   crash between the two writes of an insert left with two current values.
2. **Duplicates.** Consecutive records of one fact key with the same value (a restatement) are merged
   into the earliest; records without a fact key are merged when their normalised text is equal, or
   when their embeddings are near (cosine >= ``similarity``) *and* their content words overlap
   (Jaccard >= ``overlap``) and their tags are equal. The survivor keeps the provenance of every
   record folded into it (``merged_from``) and the widest validity window; the others are deleted.
3. **Expiry.** Records tagged with a tag in ``expire_after`` stop being current that long after they
   became true (kept for ``as_of`` searches, like a superseded fact).
4. **Core blocks** filled past ``core_fill`` of their limit are rewritten shorter without losing a
   listed fact: repeated lines are dropped and lines with the same ``Label:`` are joined
   (``Label: a; b``). Typed blocks are canonical already and are left alone.

Limits of the offline rules: a fact key comes only from the statement patterns of
``stores.validity`` (a contradiction phrased otherwise is not seen); near duplicates need both a close
embedding and nearly the same words (paraphrases with different words stay apart); the core rewrite
only removes repetition. With a real chat model (``ModelJudge``) the core rewrite is asked of the model
and kept only if every value of the old block is still in the new one; otherwise the rules apply.

It is safe while turns write: every fact key is rewritten under the same lock inserts take
(``archival.fact_lock``), each core block under its edit lock, and a record written after the pass
read the scope is left for the next pass. It never runs on the user's turn: ``SleepTime`` runs it on a
background thread every N turns.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pagefault.engines.locks import edit_lock
from pagefault.stores.archival import ArchivalStore, fact_lock
from pagefault.stores.core import CoreBlock, CoreMemory
from pagefault.stores.index.hybrid import TAG_PREFIX, Hit
from pagefault.stores.provenance import Provenance, shown_log_entry
from pagefault.stores.scope import Scope
from pagefault.stores.validity import OPEN, Validity
from pagefault.text.terms import query_terms

log = logging.getLogger(__name__)

#: Provenance entries kept per merged record (the count keeps going past it).
MAX_MERGED_FROM = 50


@dataclass
class ConsolidationPolicy:
    """What a pass may do; every threshold is documented in the module docs."""

    similarity: float = 0.95
    overlap: float = 0.8
    expire_after: dict[str, float] = field(default_factory=dict)  # tag -> seconds after valid_from
    core_fill: float = 0.9


@dataclass
class ConsolidationReport:
    scope: str
    records_before: int = 0
    records_after: int = 0
    merged: int = 0  # records folded into another
    superseded: int = 0  # validity windows closed or moved by the timeline pass
    expired: int = 0
    core_shortened: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (chars before, after)
    seconds: float = 0.0
    thread: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class Judge(Protocol):
    """Where a model can stand in for the rules (see ``ModelJudge``)."""

    def shorten(self, block: CoreBlock) -> str: ...


def _fold(text: str) -> str:
    """Lower case without accents (café and cafe are one word here)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


def _norm_text(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", _fold(text)).split())


def _content(text: str) -> set[str]:
    return set(query_terms(_fold(text)))


_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_LABELLED = re.compile(r"^([^:\n]{1,40}):\s*(.+)$")


def shorten_by_rules(text: str) -> str:
    """Drop repeated lines; join lines that share a ``Label:`` into one (``Label: a; b``). Lossless."""
    out: list[str] = []
    labelled: dict[str, int] = {}
    seen: set[str] = set()
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or _norm_text(line) in seen:
            continue
        seen.add(_norm_text(line))
        m = _LABELLED.match(line)
        if m and m.group(1).strip().lower() in labelled:
            i = labelled[m.group(1).strip().lower()]
            values = out[i].split(": ", 1)[1].split("; ")
            if m.group(2) not in values:
                out[i] = f"{out[i]}; {m.group(2)}"
            continue
        if m:
            labelled[m.group(1).strip().lower()] = len(out)
        out.append(line)
    return "\n".join(out)


def facts_kept(old: str, new: str) -> bool:
    """Whether every value of every line of ``old`` still appears in ``new`` (case and spacing aside)."""
    target = _norm_text(new)
    for raw in old.splitlines():
        m = _LABELLED.match(raw.strip())
        value = m.group(2) if m else raw
        if _norm_text(value) and _norm_text(value) not in target:
            return False
    return True


class RulesJudge:
    """The offline judge: deterministic rules only."""

    def shorten(self, block: CoreBlock) -> str:
        return shorten_by_rules(block.value)


class ModelJudge:
    """A chat model rewrites a full core block; the rules check it kept every fact (else they apply)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def shorten(self, block: CoreBlock) -> str:
        prompt = (f"Rewrite this memory section in at most {int(block.limit * 0.7)} characters. Keep every fact "
                  f"and value; merge repeated labels; no commentary.\n\n{block.value}")
        try:
            text = str(self.model.invoke(prompt).content).strip()
        except Exception as e:  # a model outage must not stop the pass
            log.warning("consolidation: the model could not rewrite %s (%s); using the rules", block.label, e)
            text = ""
        if text and len(text) < len(block.value) and facts_kept(block.value, text):
            return text
        return shorten_by_rules(block.value)


def _merged_entry(h: Hit) -> dict[str, Any]:
    m, p = h.metadata, Provenance.from_metadata(h.metadata)
    return {"id": h.id, "text": h.text[:500], "thread_id": m.get("thread_id", ""), "turn": p.turn,
            "message_index": p.message_index, "message_id": m.get("message_id", ""), "source": m.get("source", "agent"),
            "created_at": m.get("created_at", 0.0), "valid_from": m.get("valid_from", m.get("created_at", 0.0))}


def merged_from(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The provenance of every record folded into this one (``turn`` and ``message_index`` as in an
    edit log: an entry folded before turns were counted has its message index as ``turn``, read so)."""
    try:
        got = json.loads(str(metadata.get("merged_from") or "[]"))
    except json.JSONDecodeError:
        return []
    return [shown_log_entry(e) if isinstance(e, dict) else e for e in got] if isinstance(got, list) else []


class Consolidator:
    """One consolidation pass over a scope's archival (and core, when given) memory."""

    def __init__(self, archival: ArchivalStore, core: CoreMemory | None = None,
                 policy: ConsolidationPolicy | None = None, judge: Judge | None = None) -> None:
        self.archival = archival
        self.index = archival.index
        self.core = core
        self.policy = policy or ConsolidationPolicy()
        self.judge = judge or RulesJudge()

    def run(self, scope: Scope) -> ConsolidationReport:
        start = time.perf_counter()
        report = ConsolidationReport(scope.key, thread=threading.current_thread().name)
        rows = self.index.find(scope.key, embeddings=True)
        report.records_before = len(rows)
        keys = sorted({str(h.metadata["fact_key"]) for h, _ in rows if h.metadata.get("fact_key")})
        for key in keys:
            self._fact(scope, key, report)
        self._near_duplicates(scope, [(h, v) for h, v in rows if not h.metadata.get("fact_key")], report)
        self._expire(scope, report)
        if self.core is not None:
            self._core(report)
        report.records_after = self.archival.count(scope)
        report.seconds = time.perf_counter() - start
        return report

    # -- facts: contradictions and restatements ---------------------------------------------------

    def _fact(self, scope: Scope, key: str, report: ConsolidationReport) -> None:
        with fact_lock(self.index, scope, key):  # inserts of this key wait; other keys go on
            before = {h.id: Validity.from_metadata(h.metadata) for h, _ in self.index.find(scope.key, extra={"fact_key": key})}
            self.archival.settle(scope, key)  # contradictions first: runs are read from a settled timeline
            hits = [h for h, _ in self.index.find(scope.key, extra={"fact_key": key})]
            hits.sort(key=lambda h: (float(h.metadata.get("valid_from", 0.0)), float(h.metadata.get("recorded_at", 0.0)), h.id))
            runs: list[list[Hit]] = []
            for h in hits:
                if h.metadata.get("expired"):
                    continue
                same = runs and str(runs[-1][-1].metadata.get("fact_value")) == str(h.metadata.get("fact_value"))
                if same:
                    runs[-1].append(h)
                else:
                    runs.append([h])
            for run in runs:
                if len(run) > 1:
                    self._merge(run[0], run[1:], report)
            after = self.archival.settle(scope, key)
            report.superseded += sum(1 for i, v in after.items() if i in before and before[i].current and not v.current)

    def _merge(self, survivor: Hit, others: list[Hit], report: ConsolidationReport) -> None:
        """Fold ``others`` into ``survivor``: their provenance is kept, their validity window joined."""
        m = survivor.metadata
        entries = merged_from(m) + [e for o in others for e in [_merged_entry(o), *merged_from(o.metadata)]]
        count = int(m.get("merged_count", 0)) + sum(1 + int(o.metadata.get("merged_count", 0)) for o in others)
        valid_from = min(float(x.metadata.get("valid_from", x.metadata.get("created_at", 0.0))) for x in [survivor, *others])
        valid_to = max(float(x.metadata.get("valid_to", OPEN)) for x in [survivor, *others])
        tags = {k: True for o in others for k, v in o.metadata.items() if k.startswith(TAG_PREFIX) and v}
        change = {"merged_from": json.dumps(entries[:MAX_MERGED_FROM], ensure_ascii=False), "merged_count": count,
                  "valid_from": valid_from, "valid_to": valid_to, **tags}
        self.index.restamp({survivor.id: change})  # the survivor first: a crash here loses nothing
        self.index.delete([o.id for o in others])
        report.merged += len(others)

    # -- records without a fact key ---------------------------------------------------------------

    def _near_duplicates(self, scope: Scope, found: list[tuple[Hit, np.ndarray | None]], report: ConsolidationReport) -> None:
        rows: list[tuple[Hit, np.ndarray]] = [(h, v) for h, v in found if not h.metadata.get("superseded") and v is not None]
        if len(rows) < 2:
            return
        rows.sort(key=lambda r: (float(r[0].metadata.get("created_at", 0.0)), r[0].id))
        tags = [tuple(sorted(k for k, v in h.metadata.items() if k.startswith(TAG_PREFIX) and v)) for h, _ in rows]
        norm = [_norm_text(h.text) for h, _ in rows]
        words = [_content(h.text) for h, _ in rows]
        numbers = [_NUMBER.findall(h.text) for h, _ in rows]  # "room 4" and "room 5" are different facts
        vecs = np.stack([v for _, v in rows]).astype(np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        parent = list(range(len(rows)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for start in range(0, len(rows), 512):
            sims = vecs[start:start + 512] @ vecs.T
            for a, b in zip(*np.nonzero(sims >= self.policy.similarity)):
                i, j = start + int(a), int(b)
                if j <= i or tags[i] != tags[j] or numbers[i] != numbers[j]:
                    continue
                union = words[i] | words[j]
                jaccard = len(words[i] & words[j]) / len(union) if union else 1.0
                if norm[i] == norm[j] or jaccard >= self.policy.overlap:
                    parent[root(j)] = root(i)
        # Exact normalised duplicates even when their vectors differ (e.g. punctuation only).
        first: dict[tuple[str, tuple[str, ...]], int] = {}
        for i, key in enumerate(zip(norm, tags)):
            if key in first:
                parent[root(i)] = root(first[key])
            else:
                first[key] = i
        groups: dict[int, list[int]] = {}
        for i in range(len(rows)):
            groups.setdefault(root(i), []).append(i)
        for members in groups.values():
            if len(members) > 1:
                members.sort()
                live = {h.id for h in self.index.get([rows[i][0].id for i in members])}  # skip what vanished meanwhile
                keep = [rows[i][0] for i in members if rows[i][0].id in live]
                if len(keep) > 1:
                    self._merge(keep[0], keep[1:], report)

    # -- expiry -----------------------------------------------------------------------------------

    def _expire(self, scope: Scope, report: ConsolidationReport) -> None:
        now = time.time()
        for tag, ttl in self.policy.expire_after.items():
            changes = {}
            for h, _ in self.index.find(scope.key, extra={TAG_PREFIX + tag: True}):
                v = Validity.from_metadata(h.metadata)
                if v.expired or v.valid_from + ttl > now:
                    continue
                end = min(v.valid_to, v.valid_from + ttl)
                changes[h.id] = Validity(v.valid_from, end, v.recorded_at, now, v.superseded_by, True).metadata()
            if changes:
                self.index.restamp(changes)
                report.expired += len(changes)

    # -- core blocks ------------------------------------------------------------------------------

    def _core(self, report: ConsolidationReport) -> None:
        core = self.core
        assert core is not None
        for block in core.blocks():
            if block.schema or len(block.value) < self.policy.core_fill * block.limit:
                continue
            with edit_lock(core.store, *core.namespace, block.label):
                current = core.get(block.label)  # re-read under the lock: an append may have landed
                shorter = self.judge.shorten(current)
                if len(shorter) >= len(current.value) or not facts_kept(current.value, shorter):
                    continue
                core._set_block(current.label, shorter, None, "", Provenance(source="system"))
                report.core_shortened[current.label] = (len(current.value), len(shorter))


def consolidate(archival: ArchivalStore, scope: Scope, core: CoreMemory | None = None,
                policy: ConsolidationPolicy | None = None, judge: Judge | None = None) -> ConsolidationReport:
    """Run one pass (see module docs)."""
    return Consolidator(archival, core, policy, judge).run(scope)
