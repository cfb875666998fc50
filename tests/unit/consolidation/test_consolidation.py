"""Consolidation: restatements and near duplicates merged with every provenance kept, contradictions
settled, configured expiry, full core blocks shortened without losing a fact; safe under concurrent
writes; run every N turns off the user's turn, and from the CLI."""

from __future__ import annotations

import json
import threading
import time

from langchain_core.messages import HumanMessage

from pagefault import Context, open_embedded
from pagefault.cli.main import main
from pagefault.consolidation.consolidate import ConsolidationPolicy, consolidate, merged_from, shorten_by_rules
from pagefault.consolidation.sleeptime import SLEEP_TIME
from pagefault.stores import MemoryServices, Scope
from pagefault.stores.archival import archival_id
from pagefault.stores.core import CoreMemory
from pagefault.stores.index.hybrid import IndexedText
from pagefault.stores.provenance import Provenance
from pagefault.stores.validity import OPEN, Validity
from pagefault.text.facts import parse_date, parse_fact

D = parse_date


def _ids(svc, scope):
    chroma = set(svc.archival.index.collection.get(where={"scope": scope.key}, include=[])["ids"])
    return chroma, svc.archival.index.lexical.ids(scope.key)


def test_restatements_merge_keeping_every_provenance(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    a = svc.archival.insert(scope, "As of 2024-01-10, Ana's city is Paris.", provenance=Provenance("t1", 0, "m0", "user"))
    b = svc.archival.insert(scope, "As of 2024-02-10, Ana's city is still Paris.", provenance=Provenance("t2", 4, "m4", "user"))
    c = svc.archival.insert(scope, "As of 2024-05-03, Ana's city is Berlin.", provenance=Provenance("t3", 2, "m2", "user"))
    d = svc.archival.insert(scope, "As of 2024-06-01, Ana's city remains Berlin.", provenance=Provenance("t4", 6, "m6", "user"))
    report = consolidate(svc.archival, scope)
    assert (report.records_before, report.records_after, report.merged) == (4, 2, 2)
    timeline = svc.archival.timeline(scope, "ana|city")
    assert [r.id for r in timeline] == [a.id, c.id]
    paris, berlin = timeline
    assert (paris.validity.valid_from, paris.validity.valid_to, paris.validity.superseded_by) == (
        D("2024-01-10"), D("2024-05-03"), c.id)
    assert berlin.validity.current and berlin.validity.valid_to == OPEN and berlin.merged_from == 1
    folded = merged_from(svc.archival.index.get([c.id])[0].metadata)
    assert [(e["id"], e["thread_id"], e["turn"], e["message_id"], e["source"]) for e in folded] == [
        (d.id, "t4", 6, "m6", "user")]
    assert merged_from(svc.archival.index.get([a.id])[0].metadata)[0]["id"] == b.id
    assert [r.text for r, _ in svc.archival.search(scope, "Ana city", 3, as_of=D("2024-03-01"))][:1] == [paris.text]
    assert _ids(svc, scope) == ({a.id, c.id}, {a.id, c.id})
    assert consolidate(svc.archival, scope).merged == 0  # a second pass finds nothing more


def test_a_contradiction_left_unsettled_is_superseded(data_dir):
    """Two current values for one key (a crash between an insert's two writes, or two replicas at once)."""
    svc, scope = MemoryServices.open(data_dir), Scope("kai")
    old = svc.archival.insert(scope, "As of 2024-01-10, Kai's job is nurse.")
    text = "As of 2024-04-01, Kai's job is pilot."
    fact = parse_fact(text)
    raw = IndexedText(archival_id(scope, text), text, scope.key, created_at=time.time(),
                      metadata={"kind": "archival", **Provenance().metadata(),
                                **Validity(D("2024-04-01"), recorded_at=time.time()).metadata(), **fact.metadata()})
    svc.archival.index.upsert([raw])  # written without settling the timeline
    assert [r.validity.current for r in svc.archival.timeline(scope, "kai|job")] == [True, True]
    report = consolidate(svc.archival, scope)
    assert report.superseded == 1 and report.merged == 0
    got = svc.archival.get(scope, old.id).validity
    assert (got.current, got.superseded_by, got.valid_to) == (False, raw.id, D("2024-04-01"))
    assert [r.text for r, _ in svc.archival.search(scope, "Kai job", 5)] == [text]


def test_near_duplicates_without_a_fact_key(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("bo")
    first = svc.archival.insert(scope, "We met Kai at the harbour cafe on Monday.", provenance=Provenance("t1", 1))
    svc.archival.insert(scope, "we met kai at the harbour cafe on monday!", provenance=Provenance("t2", 3))
    svc.archival.insert(scope, "We met Kai at the harbour café on Monday", provenance=Provenance("t3", 5))
    kept = svc.archival.insert(scope, "We met Lea at the harbour cafe on Friday.")
    other = svc.archival.insert(scope, "The harbour cafe closes at nine.")
    tagged = svc.archival.insert(scope, "We met Kai at the harbour cafe, Monday.", tags=["trip"])
    room4 = svc.archival.insert(scope, "The project review is in meeting room 4 on the second floor of the east wing.")
    room5 = svc.archival.insert(scope, "The project review is in meeting room 5 on the second floor of the east wing.")
    report = consolidate(svc.archival, scope)
    assert report.merged == 2
    # different tags stay apart, and so do texts that differ only in a number
    assert _ids(svc, scope)[0] == {first.id, kept.id, other.id, tagged.id, room4.id, room5.id}
    assert [e["thread_id"] for e in merged_from(svc.archival.index.get([first.id])[0].metadata)] == ["t2", "t3"]


def test_configured_expiry(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("cy")
    old = svc.archival.insert(scope, "Parked on level 3 today.", ["ephemeral"], valid_from=time.time() - 3 * 86_400)
    new = svc.archival.insert(scope, "Parked on level 5 now.", ["ephemeral"])
    keep = svc.archival.insert(scope, "Parked the bike at home.")
    report = consolidate(svc.archival, scope, policy=ConsolidationPolicy(expire_after={"ephemeral": 86_400}))
    assert report.expired == 1
    v = svc.archival.get(scope, old.id).validity
    assert v.expired and not v.current and v.valid_to == v.valid_from + 86_400
    assert {r.id for r, _ in svc.archival.search(scope, "parked", 5)} == {new.id, keep.id}
    assert [r.id for r, _ in svc.archival.search(scope, "parked level", 5, as_of=v.valid_from + 60)] == [old.id]


def test_a_full_core_block_is_shortened_without_losing_a_fact(embedded, data_dir):
    scope = Scope("dee")
    core = CoreMemory(embedded.store, scope, block_limit=200)
    lines = ["Name: Dee", "Likes: tea", "Likes: jazz", "Name: Dee", "Pets: a cat called Tom", "Likes: tea",
             "Likes: long walks by the sea", "Pets: a dog called Rex", "Works: at the port"]
    core.set_block("human", "\n".join(lines), limit=200)
    assert len(core.get("human").value) >= 0.9 * 200 * 0.5
    report = consolidate(MemoryServices.open(data_dir).archival, scope, core, ConsolidationPolicy(core_fill=0.5))
    value = core.get("human").value
    assert value == ("Name: Dee\nLikes: tea; jazz; long walks by the sea\nPets: a cat called Tom; a dog called Rex\n"
                     "Works: at the port")
    assert report.core_shortened["human"] == (len("\n".join(lines)), len(value))
    assert core.get("human").log[-1]["op"] == "set" and core.get("human").log[-1]["source"] == "system"
    assert shorten_by_rules(value) == value


def test_consolidation_is_safe_while_turns_write(data_dir, embedded):
    """A writer thread inserts new facts, contradictions, restatements and core lines while a pass runs."""
    svc, scope = MemoryServices.open(data_dir), Scope("eve")
    core = CoreMemory(embedded.store, scope, block_limit=4000)
    for s in range(40):
        for month in (1, 2, 3):  # restated: two duplicates per subject to merge
            svc.archival.insert(scope, f"As of 2024-0{month}-01, Subject{s}'s city is Town{s}.")
        svc.archival.insert(scope, f"Note {s}: the weather was fine.")
        svc.archival.insert(scope, f"note {s} - the weather was fine")  # a near duplicate
    core.set_block("human", "\n".join(f"Likes: thing {i}" for i in range(60)), limit=4000)
    started, wrote_two_subjects, written = threading.Event(), threading.Event(), []

    def writer():
        started.wait(30)
        for s in range(40):
            if s % 2:  # contradiction for odd subjects, later in event time
                written.append(svc.archival.insert(scope, f"As of 2024-06-01, Subject{s}'s city is Moved{s}.").id)
            else:  # a restatement for even ones
                written.append(svc.archival.insert(scope, f"As of 2024-06-01, Subject{s}'s city is still Town{s}.").id)
            written.append(svc.archival.insert(scope, f"New note {s} written during the pass.").id)
            core.append("human", f"Concurrent line {s}")
            if s == 1:
                wrote_two_subjects.set()

    t = threading.Thread(target=writer)
    t.start()
    original_run = svc.archival.settle
    inside: list[bool] = []

    def settle_and_signal(scope_, key):
        started.set()  # the writer starts once the pass is under way
        if key == "subject12|city" and not inside:  # a key the writer's first two subjects do not hold: the pass waits
            inside.append(wrote_two_subjects.wait(60))  # here, inside, while the writer writes
        return original_run(scope_, key)

    svc.archival.settle = settle_and_signal
    try:
        report = consolidate(svc.archival, scope, core, ConsolidationPolicy(core_fill=0.2))
        during = len(written)
    finally:
        del svc.archival.settle
    t.join(60)
    assert not t.is_alive() and report.merged >= 40
    assert inside == [True] and during >= 4, "the writer must have written while the pass ran"
    consolidate(svc.archival, scope)  # what arrived during the first pass is settled by the next
    chroma, lexical = _ids(svc, scope)
    assert chroma == lexical, "both sides of the hybrid index agree"
    survivors = {h.id: h for h, _ in svc.archival.index.find(scope.key)}
    folded = {e["id"] for h in survivors.values() for e in merged_from(h.metadata)}
    assert all(i in survivors or i in folded for i in written), "no write was lost"
    for s in range(40):
        current = [r for r in svc.archival.timeline(scope, f"subject{s}|city") if r.validity.current]
        assert [parse_fact(r.text).value for r in current] == [f"moved{s}" if s % 2 else f"town{s}"], s
        assert len(svc.archival.timeline(scope, f"subject{s}|city")) == (2 if s % 2 else 1)
    value = core.get("human").value
    assert all(f"Concurrent line {s}" in value for s in range(40))
    assert all(f"thing {i}" in value for i in range(60))


def test_a_background_pass_every_n_turns(data_dir):
    ctx = Context(user_id="fay", data_dir=data_dir, consolidate_every=3)
    with open_embedded(data_dir) as p:
        g = p.graph()
        cfg = {"configurable": {"thread_id": "t"}}
        for text in ["As of 2024-01-01, Fay's tea is mint.", "As of 2024-02-01, Fay's tea is still mint.",
                     "As of 2024-03-01, Fay's tea remains mint."]:
            g.invoke({"messages": [HumanMessage(text)]}, cfg, context=ctx)
        SLEEP_TIME.wait(60)
    report = SLEEP_TIME.reports[-1]
    assert report.scope == Scope("fay").key and report.thread.startswith("pagefault-sleeptime-")
    # It starts as turn 3 begins, beside that turn's insert: it merges what it finds; a next pass does the rest.
    assert report.merged >= 1
    svc = MemoryServices.open(data_dir)
    consolidate(svc.archival, Scope("fay"))
    assert len(svc.archival.timeline(Scope("fay"), "fay|tea")) == 1


def test_cli_consolidate(data_dir, capsys):
    svc, scope = MemoryServices.open(data_dir), Scope("gus")
    svc.archival.insert(scope, "As of 2024-01-01, Gus's car is red.")
    svc.archival.insert(scope, "As of 2024-02-01, Gus's car is still red.")
    svc.archival.insert(scope, "Parked on level 3.", ["ephemeral"], valid_from=time.time() - 5 * 86_400)
    assert main(["consolidate", "--user", "gus", "--expire", "ephemeral=1", "--data-dir", data_dir]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["records_before"], report["records_after"], report["merged"], report["expired"]) == (3, 2, 1, 1)


def test_a_model_rewrite_that_loses_a_fact_falls_back_to_the_rules():
    """ModelJudge keeps a model's rewrite only if every value survives; the offline model (not an LLM)
    cannot rewrite, so the rules' lossless form is used."""
    from pagefault import OfflineChatModel
    from pagefault.consolidation.consolidate import ModelJudge, facts_kept
    from pagefault.stores.core import CoreBlock

    block = CoreBlock("human", "Likes: tea\nLikes: jazz\nLikes: tea\nName: Dee", 60)
    assert ModelJudge(OfflineChatModel()).shorten(block) == "Likes: tea; jazz\nName: Dee"
    assert facts_kept(block.value, "Likes: tea; jazz\nName: Dee")
    assert not facts_kept(block.value, "Likes: tea\nName: Dee")
