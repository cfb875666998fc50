"""Archival inserts written behind the turn on the replicated setup (a Chroma server, BM25 in Postgres):
journalled in a table of the shared database (``writers.shared_journal``).

- a deferred insert is a committed row when ``insert`` returns, and another replica counts it and
  finds it at once (its read writes what the lingering owner has not yet);
- a process SIGKILLed with inserts journalled, or in the middle of writing them (its transaction
  holding the rows), loses none: another replica writes each exactly once;
- a write that fails stays journalled, the read waiting for it gets the error, and it is retried.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading

import psycopg
import pytest
from support.engines import child_env, chroma_server, fresh_database

from pagefault.stores import MemoryServices, Scope
from pagefault.stores.archival import ArchivalStore
from pagefault.stores.index.hybrid import HybridIndex
from pagefault.stores.index.lexical_sqlite import LexicalIndex
from pagefault.stores.writers.shared_journal import SHARED_JOURNAL_TABLE, SharedJournal


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared-journal")
    with fresh_database("pf_sjournal") as url, chroma_server(root / "chroma") as chroma:
        yield {"url": url, "chroma": chroma.url, "data_dir": str(root / "data"),
               "svc": MemoryServices.open(str(root / "data"), chroma_url=chroma.url, database_url=url)}


def _rows(url: str, rid: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {SHARED_JOURNAL_TABLE} WHERE rid = %s", (rid,)).fetchone()[0]


def _in_chroma(svc: MemoryServices, rid: str) -> int:
    return len(svc.archival.index.collection.get(ids=[rid], include=[])["ids"])


def test_the_replicated_setup_journals_in_the_database(engines):
    journal = engines["svc"].archival.journal
    assert isinstance(journal, SharedJournal) and journal.url == engines["url"]


def test_a_shared_journal_needs_the_shadow_in_postgres(engines, tmp_path):
    index = engines["svc"].archival._index
    local = HybridIndex(index.collection, LexicalIndex(str(tmp_path / "lexical.sqlite"), "archival"), index.embeddings)
    with pytest.raises(ValueError, match="BM25 shadow in Postgres"):
        ArchivalStore(local, shared_journal=True)
    with pytest.raises(ValueError, match="not both"):
        ArchivalStore(index, journal_path=str(tmp_path / "j.sqlite"), shared_journal=True)


def test_another_replica_sees_a_journalled_insert_at_once(engines):
    svc, scope = engines["svc"], Scope("sj-see")
    owner = svc.archival.journal
    assert isinstance(owner, SharedJournal)
    # A second replica's archival store: its own journal writer on the same table.
    other = ArchivalStore(svc.archival._index, shared_journal=True)
    assert isinstance(other.journal, SharedJournal) and other.journal is not owner
    owner.linger = 30.0  # the owner's writer would wait long for more of the turn
    try:
        rec = svc.archival.insert(scope, "My piano tuner is called Ilse Brandt.", defer=True)
        assert rec.created and _rows(engines["url"], rec.id) == 1, "journalled (committed) when insert returns"
        assert other.count(scope) == 1
        hits = other.search(scope, "who tunes my piano", 3)
        assert [r.id for r, _ in hits] == [rec.id]
        assert _rows(engines["url"], rec.id) == 0 and _in_chroma(svc, rec.id) == 1
    finally:
        owner.linger = 0.25
    owner.flush(timeout=30)  # the owner finds it written by the other and stops waiting for it
    assert not owner.is_pending(rec.id) and svc.archival.count(scope) == 1


CHILD = textwrap.dedent("""
    import json, os, signal, sys, threading
    from pagefault.stores import MemoryServices, Scope
    data_dir, chroma, url, user, mode = sys.argv[1:6]
    svc = MemoryServices.open(data_dir, chroma_url=chroma, database_url=url)
    journal = svc.archival.journal
    if mode == "journalled":  # dies before its writer takes the row
        journal.apply = lambda *a: threading.Event().wait()
    else:  # dies in the middle of writing: Chroma and BM25 written, the journal's transaction not committed
        real = journal.apply
        def apply(scope, entries):
            real(scope, entries)
            print(json.dumps({"wrote": [e[4] for e in entries]}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        journal.apply = apply
    rec = svc.archival.insert(Scope(user), f"My {mode} neighbour Odile keeps bees on the roof.", defer=True)
    print(json.dumps({"rid": rec.id}), flush=True)
    if mode == "journalled":
        os.kill(os.getpid(), signal.SIGKILL)
    journal.hurry()
    threading.Event().wait(60)
""")


@pytest.mark.parametrize("mode", ["journalled", "mid-write"])
def test_a_replica_killed_loses_no_journalled_insert(engines, mode):
    svc, user = engines["svc"], f"sj-kill-{mode}"
    done = subprocess.run([sys.executable, "-c", CHILD, engines["data_dir"], engines["chroma"], engines["url"], user, mode],
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    rid = json.loads(done.stdout.splitlines()[0])["rid"]
    if mode == "mid-write":
        assert json.loads(done.stdout.splitlines()[1]) == {"wrote": [rid]}
    assert _rows(engines["url"], rid) == 1, "the row outlives the process (its transaction rolled back)"
    scope = Scope(user)
    assert svc.archival.count(scope) == 1
    rec = svc.archival.get(scope, rid)  # the read writes the row first
    assert rec is not None and "Odile" in rec.text
    assert _rows(engines["url"], rid) == 0 and _in_chroma(svc, rid) == 1 and svc.archival.count(scope) == 1


def test_a_write_that_fails_stays_journalled_and_is_retried(engines):
    svc, scope = engines["svc"], Scope("sj-fail")
    journal = svc.archival.journal
    assert isinstance(journal, SharedJournal)
    real, failed = journal.apply, threading.Event()

    def fail(*args):
        failed.set()
        raise RuntimeError("chroma said no")

    journal.apply = fail
    try:
        rec = svc.archival.insert(scope, "My locksmith is called Piet.", defer=True)
        with pytest.raises(RuntimeError, match="chroma said no"):
            svc.archival.get(scope, rec.id)
        assert failed.is_set() and _rows(engines["url"], rec.id) == 1
    finally:
        journal.apply = real
    assert svc.archival.get(scope, rec.id) is not None and _rows(engines["url"], rec.id) == 0



def test_the_same_words_again_are_journalled_once(engines):
    """One statement tells a new insert from one journalled or stored already (``append_new``)."""
    svc, scope = engines["svc"], Scope("sj-again")
    journal = svc.archival.journal
    assert isinstance(journal, SharedJournal)
    journal.linger = 30.0  # the first insert stays journalled while the second comes
    try:
        first = svc.archival.insert(scope, "My aunt Greta repairs clocks in Bremen.", defer=True)
        again = svc.archival.insert(scope, "My aunt Greta repairs clocks in Bremen.", defer=True)
        assert first.created and not again.created and again.id == first.id
        assert _rows(engines["url"], first.id) == 1, "one journal row for the two inserts"
    finally:
        journal.linger = 0.25
    journal.flush(timeout=30)
    stored = svc.archival.insert(scope, "My aunt Greta repairs clocks in Bremen.", defer=True)
    assert not stored.created and stored.id == first.id and _rows(engines["url"], first.id) == 0
    assert svc.archival.count(scope) == 1


def test_a_read_waits_out_rows_another_process_holds_and_then_writes_them(engines):
    """A replica killed mid-write holds its rows until Postgres rolls its transaction back. A read's first pass
    skips them (``SKIP LOCKED``); once they are free, the read's writer must take them, not let the read wait
    out its timeout (a fresh-clone CI run timed out so, after 120 s). The hold is a transaction of this test's,
    released only after the read's first pass has run."""
    svc, scope = engines["svc"], Scope("sj-held")
    journal = svc.archival.journal
    assert isinstance(journal, SharedJournal)
    gone = ArchivalStore(svc.archival._index, shared_journal=True)  # a replica that journals, then stops
    gone.journal.linger = 3600.0
    rec = gone.insert(scope, "The tide tables are pinned inside the boathouse door.", defer=True)
    gone.journal.close()  # its row stays journalled, for another replica
    assert _rows(engines["url"], rec.id) == 1
    holder = psycopg.connect(engines["url"])
    holder.execute(f"SELECT 1 FROM {SHARED_JOURNAL_TABLE} WHERE rid = %s FOR UPDATE", (rec.id,))
    with journal._cond:
        before = journal._attempt
    errors: list[BaseException] = []

    def read() -> None:
        try:
            journal.flush(timeout=60)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with journal._cond:  # the read's pass has run and passed over the held row
            assert journal._cond.wait_for(lambda: journal._attempt > before, 30)
        assert _rows(engines["url"], rec.id) == 1 and reader.is_alive()
    finally:
        holder.rollback()  # the hold ends, as a killed replica's does
        holder.close()
    reader.join(30)
    assert not reader.is_alive(), "the read still waits for a row no one holds"
    assert errors == []
    assert _rows(engines["url"], rec.id) == 0
    assert [r.id for r, _ in svc.archival.search(scope, "tide tables boathouse", 3)] == [rec.id]
