"""A turn's archival inserts are journalled and written behind it on the embedded setup
(``pagefault.stores.writers.archival_journal``): the turn gets the record's id at once, every read waits for
the write, a failed write stays journalled and is retried (``tests/integration/test_journal_survives_kill.py``:
a killed process loses nothing)."""

from __future__ import annotations

import threading
import time

import pytest

from pagefault import MemoryServices, Scope


def _hold(journal):
    """Stop the writer before it writes anything; returns the gate that lets it go on."""
    gate = threading.Event()
    apply = journal.apply

    def held(*args):
        gate.wait(30)
        return apply(*args)

    journal.apply = held
    return gate


def test_the_turn_gets_the_id_at_once_and_reads_wait_for_the_write(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    gate = _hold(svc.archival.journal)
    rec = svc.archival.insert(scope, "Ana's sister Lucia studies octopuses in Valencia.", defer=True)
    assert rec.created and svc.archival.journal.is_pending(rec.id)
    again = svc.archival.insert(scope, "Ana's sister Lucia studies octopuses in Valencia.", defer=True)
    assert again.id == rec.id and not again.created, "the same words while journalled: already stored"
    assert svc.archival.count(scope) == 1, "the prompt's count includes what is journalled"
    threading.Timer(0.3, gate.set).start()
    hits = svc.archival.search(scope, "Lucia octopuses", 3)  # waits for the writer
    assert [r.id for r, _ in hits] == [rec.id]
    assert svc.archival.count(scope) == 1 and not svc.archival.journal.is_pending(rec.id)


def test_a_failed_write_stays_journalled_and_is_retried(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    journal = svc.archival.journal
    apply = journal.apply
    calls = []

    def flaky(*args):
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk full")
        return apply(*args)

    journal.apply = flaky
    rec = svc.archival.insert(scope, "The spare key is under the blue pot.", defer=True)
    with pytest.raises(OSError, match="disk full"):
        svc.archival.get(scope, rec.id)
    assert journal.is_pending(rec.id)
    assert svc.archival.get(scope, rec.id).text == "The spare key is under the blue pot."  # retried
    assert len(calls) == 2 and not journal.is_pending(rec.id)


def test_a_fact_written_behind_settles_its_timeline(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    paris = svc.archival.insert(scope, "As of 2024-01-10, Ana's city is Paris.", defer=True)
    berlin = svc.archival.insert(scope, "As of 2024-05-03, Ana's city is Berlin.", defer=True)
    assert svc.archival.get(scope, paris.id).validity.superseded_by == berlin.id
    assert svc.archival.get(scope, berlin.id).validity.current


def test_rows_another_process_wrote_are_not_waited_for(data_dir):
    """A CLI opened on the same directory replays the journal too; this process must not wait forever
    for rows that are no longer there."""
    import sqlite3

    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    gate = _hold(svc.archival.journal)
    first = svc.archival.insert(scope, "The red bike is in the garage.", defer=True)
    second = svc.archival.insert(scope, "The blue bike is at the office.", defer=True)
    db = sqlite3.connect(f"{svc.data_dir}/lexical.sqlite")
    with db:  # as if another process had written the second insert and removed its row
        db.execute("DELETE FROM archival_journal WHERE rid=?", (second.id,))
    db.close()
    gate.set()
    svc.archival.journal.flush(timeout=20)  # returns: nothing it waits for is left
    assert not svc.archival.journal.is_pending(first.id) and not svc.archival.journal.is_pending(second.id)
    assert svc.archival.get(scope, first.id) is not None


def test_a_coming_search_stops_the_writer_lingering_without_waiting(data_dir):
    svc, scope = MemoryServices.open(data_dir), Scope("ana")
    journal = svc.archival.journal
    assert journal.hurry() is False, "nothing pending: nothing to hurry"
    journal.linger = 30.0  # left alone, the writer would wait this long for more inserts
    rec = svc.archival.insert(scope, "The red bicycle is chained behind the bakery.", defer=True)
    assert journal.hurry() is True  # returns at once; the writer writes without a read waiting
    deadline = time.monotonic() + 20
    while journal.is_pending(rec.id) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not journal.is_pending(rec.id)
    assert [r.id for r, _ in svc.archival.search(scope, "red bicycle bakery", 1)] == [rec.id]


def test_an_insert_refused_alone_is_set_aside_on_its_second_pass_and_reads_go_on(data_dir):
    """A write refused (not a failure of the machine) with nothing else to write beside it: the first
    read gets the error, as a store that fails would give it; the next pass sets the insert aside, kept,
    and the read goes on (issue 44: one insert no one can write wedged every read of the directory)."""
    svc, ana, bo = MemoryServices.open(data_dir), Scope("ana"), Scope("bo")
    journal = svc.archival.journal
    apply = journal.apply

    def refusing(scope, entries):
        if any("forbidden" in e[0] for e in entries):
            raise ValueError("the engine refuses this record")
        return apply(scope, entries)

    journal.apply, journal.linger = refusing, 3600  # no pass before the first read asks for one
    rec = svc.archival.insert(ana, "The forbidden record.", defer=True)
    with pytest.raises(ValueError, match="refuses"):
        svc.archival.get(bo, rec.id)  # a read that does not hurry the writer: the first pass is its own
    assert journal.is_pending(rec.id)
    assert svc.archival.search(bo, "anything", 1) == []  # second pass: set aside
    assert [(a.rid, a.text) for a in journal.set_aside()] == [(rec.id, "The forbidden record.")]
    kept = svc.archival.insert(ana, "Ana's bike is red.", defer=True)
    assert [r.id for r, _ in svc.archival.search(ana, "bike", 3)] == [kept.id]


def test_an_insert_failing_because_its_provider_is_out_of_reach_is_never_set_aside(data_dir):
    """A failure of the machine (here an embedding provider out of reach: a refused connection behind
    the embedding's error) is no fault of the insert: it stays journalled pass after pass, each read
    gets the error, and it is written once the provider answers."""
    from pagefault.models.embedding_choice import EmbeddingsError

    svc, ana = MemoryServices.open(data_dir), Scope("ana")
    journal = svc.archival.journal
    apply, down = journal.apply, threading.Event()
    down.set()

    def provider(scope, entries):
        if down.is_set():
            try:
                raise ConnectionRefusedError(111, "Connection refused")
            except ConnectionRefusedError as e:
                raise EmbeddingsError("embedding 'remote' failed: Connection error.") from e
        return apply(scope, entries)

    journal.apply, journal.linger = provider, 3600
    rec = svc.archival.insert(ana, "Ana's umbrella is green.", defer=True)
    for _ in range(3):
        with pytest.raises(EmbeddingsError, match="Connection error"):
            svc.archival.get(ana, rec.id)
        assert journal.is_pending(rec.id) and journal.set_aside() == []
    down.clear()
    assert svc.archival.get(ana, rec.id).text == "Ana's umbrella is green."



def test_the_exit_hook_stops_the_writer_even_while_it_writes_another_process_s_inserts(tmp_path, monkeypatch):
    """The journal is the directory's: a writer also writes what other processes journalled. At exit this
    process's own inserts are written, and the writer, which may then be writing another process's, must
    have ended before the hook returns: left running, it was inside onnxruntime or Chroma when the
    interpreter finalized, and the process died (exit 134 or 139, issue 44 case 8)."""
    import sqlite3
    import weakref

    from pagefault.stores.provenance import Provenance
    from pagefault.stores.writers import archival_journal
    from pagefault.stores.writers.archival_journal import ArchivalJournal, encode_entry

    ana, bob, path = Scope("ana"), Scope("bob"), str(tmp_path / "lexical.sqlite")
    gate, in_other, written, writers = threading.Event(), threading.Event(), [], []

    def apply(scope, entries):
        writers.append(threading.current_thread())
        if scope == bob:  # another process's inserts: held inside their write until the test lets go
            in_other.set()
            assert gate.wait(60)
        written.extend((scope.user_id, e[0]) for e in entries)

    journal = ArchivalJournal(path, apply, prepare=lambda texts: None)
    monkeypatch.setattr(ArchivalJournal, "running", weakref.WeakSet([journal]))  # the exit hook drains this one only
    journal.linger = 3600.0  # the writer waits for a read (the exit's flush) before it writes
    journal.append(ana, "Ana keeps her bicycle in the cellar.", (), Provenance(source="user"), 0.0, "arc-ana")
    bobs = "Bob parks his van behind the bakery."
    with sqlite3.connect(path) as other:  # another process on the directory journals after this one
        other.execute("INSERT INTO archival_journal (scope, rid, entry) VALUES (?,?,?)",
                      (bob.key, "arc-bob", encode_entry(bob, bobs, (), Provenance(source="user"), 0.0)))
    exiting = threading.Thread(target=archival_journal._drain)
    exiting.start()
    assert in_other.wait(60), "the writer never took the other process's insert"
    assert written == [("ana", "Ana keeps her bicycle in the cellar.")] and not journal.is_pending("arc-ana")
    gate.set()
    exiting.join(120)
    assert not exiting.is_alive()
    assert written[-1] == ("bob", bobs), "the write in hand is finished"
    assert not writers[-1].is_alive(), "the writer thread outlived the exit hook"
