"""Write-behind for archival inserts a turn makes, on the embedded (one-process) setup.

Writing a record (embedding it, a Chroma write that waits on disk syncs, the BM25 row, the fact's
timeline) was the largest cost of a turn that states something. The turn only needs to know the
record's id and that it is safe. So the insert is journalled — one SQLite row in the BM25 file,
committed before the tool answers — and one background thread per store writes it to Chroma and
BM25, in order, then deletes the row. What keeps this safe:

- A crash loses nothing: rows left in the journal are written when the store is next opened.
- Every read of the store in this process waits for the journal to drain (``ArchivalStore.index``).
- A write that fails for a reason of the machine (a lock held too long, a full disk: an ``OSError`` or
  SQLite's ``OperationalError`` among its causes) stays journalled; the read that waits for it gets
  the error, and the next insert or read retries it.
- A write that fails otherwise (an engine or an embedding refusing what it was given) is halved until
  the inserts that fail on their own are found, and the others are written. An insert that failed on
  its own is set aside when its pass wrote others (the store works: the fault is that insert's), when
  it was set aside before, or on its ``SET_ASIDE_AFTER``-th pass failing; until then it stays
  journalled, as above. Set aside means moved to ``SET_ASIDE_TABLE`` in the journal's file: kept,
  never retried in the writer's passes (so no read waits for it), logged, and named by
  ``pagefault doctor``. Each open of the store journals them again, once: fixing the cause and
  reopening writes them. If the first ``SET_ASIDE_PROBES`` inserts tried alone fail before anything
  is written, the fault is taken to be the store's or the model's: the pass stops there.
- A pass writes at most ``PASS_ROWS`` journalled inserts, so a backlog (a burst of inserts, a journal
  that grew while a store was down) is written in bounded passes, one after another.

The writer lingers ``LINGER_SECONDS`` for more inserts unless a read waits or the turn is over
(``hurry``: a search is coming, or the answer is out), and writes the records
that state no fact together (one read and one write of the stores); facts go one by one.

This journal is the embedded setup's: with a Chroma server and the BM25 shadow in Postgres, replicas
share the stores, and a journal on one host's disk would hide writes from the others, so they journal
in a table of that database (``shared_journal``). With a Chroma server and the BM25 file here, inserts
are written in the turn.
"""

from __future__ import annotations

import atexit
import json
import logging
import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from pagefault.models.embeddings import background_embedding
from pagefault.stores.provenance import Provenance
from pagefault.stores.scope import Scope
from pagefault.stores.writers import joined

log = logging.getLogger(__name__)

#: One journalled insert: checked and redacted text, tags, provenance, since, record id.
Entry = tuple[str, tuple[str, ...], Provenance, float, str]
#: Writes journalled inserts of one scope, in order.
Apply = Callable[[Scope, list[Entry]], object]
#: Work a write will need done that holds no lock and no GIL (embedding the texts), done while lingering.
Prepare = Callable[[list[str]], object]
#: What ``append_new`` did: the record was stored already, journalled already, or is journalled now.
Appended = Literal["stored", "pending", "appended"]
#: How long the writer waits for more inserts before writing what it has, unless a read is waiting.
LINGER_SECONDS = 0.25
#: The most journalled inserts one pass of the writer takes (a backlog is written in passes of this many).
PASS_ROWS = 1_000
#: Inserts that failed alone, before anything of their pass was written, that stop the pass (see the
#: module docstring): the fault is then the store's or the model's, and everything stays journalled.
SET_ASIDE_PROBES = 3
#: The pass in which an insert failing on its own, with nothing of its pass written, is set aside.
SET_ASIDE_AFTER = 2
#: The table of the journal's file holding inserts whose write failed on its own (see the module docstring).
SET_ASIDE_TABLE = "archival_set_aside"


@dataclass(frozen=True)
class SetAside:
    """An insert set aside: its record ``rid``, the ``scope`` key it belongs to, its ``text``, the ``error``
    its write failed with and when (``at``, epoch seconds)."""

    rid: str
    scope: str
    text: str
    error: str
    at: float
#: Seconds a normal exit waits for a writer thread to finish the write in hand and stop (``WriteBehind.close``).
EXIT_WAIT = 120.0


class WriteBehind:
    """What a journal's writer thread and the turn share, in either journal (this module's and
    ``shared_journal``'s): the condition they meet on, the inserts journalled here and not yet seen
    written (record id -> scope key), and whether the writer was told to stop lingering."""

    #: The writer thread's name, and the journals of the class to drain at a normal exit.
    thread_name: str
    running: "weakref.WeakSet[WriteBehind]"
    _cond: threading.Condition
    _pending: dict[str, str]
    _hurried: bool
    _local: threading.local
    _error: BaseException | None
    _thread: threading.Thread | None
    #: Set by ``close``: the writer stops after the write in hand, and no new one starts.
    _closed: bool = False

    def flush(self, timeout: float | None = 120.0) -> None:
        """Wait until the inserts journalled before this call are written; raise the error that stops one."""
        raise NotImplementedError

    def is_pending(self, rid: str) -> bool:
        """Whether an insert of record ``rid`` is journalled and not yet written."""
        raise NotImplementedError

    def append_new(self, scope: Scope, text: str, tags: tuple[str, ...], prov: Provenance, since: float, rid: str,
                   stored: Callable[[str], bool]) -> Appended:
        """Journal an insert (durable when this returns; the writer takes it from there) unless record
        ``rid`` is stored already (``stored(rid)``, asked of the BM25 shadow, not the vectors, whose
        writer may be mid-write) or journalled already."""
        raise NotImplementedError

    def _run(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        """Start the writer thread if it is not running (again, after a failure), and wake it; after
        ``close``, nothing starts (what is journalled stays journalled)."""
        with self._cond:
            self._error = None
            if self._closed:
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
                self._thread.start()
                self.running.add(self)
            self._cond.notify_all()

    def hurry(self) -> bool:
        """Tell the writer to stop lingering, without waiting; False if nothing journalled here is
        pending. A search calls this, embeds its query while the writer writes, then waits (``flush``);
        the end of a turn calls it too (``MemoryServices.turn_over``)."""
        with self._cond:
            if not self._pending:
                return False
            self._hurried = True
            self._cond.notify_all()
        return True

    def in_writer(self) -> bool:
        """Whether this is the writer's thread (whose reads must not wait for itself)."""
        return getattr(self._local, "writer", False)

    def close(self, timeout: float | None = EXIT_WAIT) -> bool:
        """Stop the writer thread: it finishes the write in hand (a run of one scope's inserts, which may
        be another process's) and ends; wait up to ``timeout`` seconds for it. What is still journalled
        stays journalled, written when the store is next opened. True once no writer thread runs.

        The writer is a daemon thread: left running at exit, it would still be inside onnxruntime or
        Chroma's native code when the interpreter finalizes, and the process died there (SIGABRT,
        SIGSEGV) after its work was done. A normal exit calls this (after ``flush``) for every journal."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        return joined(thread, timeout)


class ArchivalJournal(WriteBehind):
    """The journal table and its writer thread; ``apply`` writes a run of entries of one scope."""

    thread_name = "pagefault-archival-writer"
    running: "weakref.WeakSet[WriteBehind]" = weakref.WeakSet()

    def __init__(self, path: str, apply: Apply, *, prepare: Prepare | None = None) -> None:
        #: The write each journalled run ends in; tests wrap it to hold or fail the writer.
        self.apply = apply
        self._prepare = prepare  # work ``apply`` will need that holds no lock and no GIL: embedding the texts
        self._prepared_seq = 0
        self._waiting = 0  # reads in ``flush``
        self._hurried = False  # a read is coming (``hurry``)
        self._appended = 0  # highest journal row this process appended
        self.linger = LINGER_SECONDS
        # Autocommit, every statement read to its end, and only under ``_cond``: the turn and the writer
        # share this connection, and a read left open would pin an old snapshot, so the next write in
        # WAL mode would fail at once with "database is locked" whatever the timeout.
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS archival_journal (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                         " scope TEXT NOT NULL, rid TEXT NOT NULL, entry TEXT NOT NULL)")
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {SET_ASIDE_TABLE} (seq INTEGER PRIMARY KEY, scope TEXT NOT NULL,"
                         " rid TEXT NOT NULL, entry TEXT NOT NULL, error TEXT NOT NULL, at REAL NOT NULL)")
        with self._db:  # inserts set aside before are tried once more, from the journal (the module docstring)
            self._db.execute("BEGIN IMMEDIATE")
            #: Those inserts, and how many passes failed each insert failing on its own here (``Lone``).
            self._lone = Lone({r[0] for r in self._db.execute(f"SELECT rid FROM {SET_ASIDE_TABLE}").fetchall()})
            self._db.execute(f"INSERT INTO archival_journal (scope, rid, entry) SELECT scope, rid, entry FROM "
                             f"{SET_ASIDE_TABLE} ORDER BY seq")
            self._db.execute(f"DELETE FROM {SET_ASIDE_TABLE}")
        self._backlog = False  # the last pass left journalled rows behind: the next one does not linger
        self._cond = threading.Condition()
        self._pending: dict[str, str] = dict(self._db.execute("SELECT rid, scope FROM archival_journal").fetchall())
        self._error: BaseException | None = None
        self._attempt = 0  # bumped by each pass of the writer, so a waiting read knows it was tried
        self._thread: threading.Thread | None = None
        self._local = threading.local()
        self.busy_seconds = 0.0  # time spent writing, for benchmarks: the work left the turn, not the machine
        if self._pending:  # left by a process that stopped before writing them
            self._wake()

    # -- the turn's side ------------------------------------------------------------------
    def append_new(self, scope: Scope, text: str, tags: tuple[str, ...], prov: Provenance, since: float, rid: str,
                   stored: Callable[[str], bool]) -> Appended:
        if stored(rid):
            return "stored"
        if self.is_pending(rid):
            return "pending"
        self.append(scope, text, tags, prov, since, rid)
        return "appended"

    def append(self, scope: Scope, text: str, tags: tuple[str, ...], prov: Provenance, since: float, rid: str) -> None:
        """Journal one insert (durable when this returns); the writer takes it from here."""
        entry = encode_entry(scope, text, tags, prov, since)
        with self._cond:
            cur = self._db.execute("INSERT INTO archival_journal (scope, rid, entry) VALUES (?,?,?)",
                                   (scope.key, rid, entry))
            self._appended = max(self._appended, cur.lastrowid or 0)
            self._pending[rid] = scope.key
        self._wake()

    def is_pending(self, rid: str) -> bool:
        with self._cond:
            return rid in self._pending

    def set_aside(self) -> list[SetAside]:
        """The inserts set aside since the store was opened (see the module docstring), oldest first."""
        with self._cond:
            rows = self._db.execute(f"SELECT rid, scope, entry, error, at FROM {SET_ASIDE_TABLE} ORDER BY seq").fetchall()
        return [SetAside(rid, scope, entry_text(entry), error, at) for rid, scope, entry, error, at in rows]

    def pending_in(self, scope: Scope) -> list[str]:
        with self._cond:
            return [r for r, s in self._pending.items() if s == scope.key]

    def flush(self, timeout: float | None = 120.0) -> None:
        """Wait until every journalled insert is written; raise the error that stops one."""
        if self.in_writer():
            return
        with self._cond:
            if not self._pending or self._closed:  # closed: they stay journalled for the next open
                return
            attempt = self._attempt
        self._wake()
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()  # the writer stops lingering
            try:
                done = self._cond.wait_for(lambda: not self._pending or (self._attempt > attempt and self._error),
                                           timeout)
            finally:
                self._waiting -= 1
            if self._pending and self._error is not None:
                raise self._error
            if not done:
                raise TimeoutError(f"{len(self._pending)} archival insert(s) still being written after {timeout} s")

    # -- the writer -----------------------------------------------------------------------
    def _linger(self) -> None:
        """Wait for the next turns' inserts unless a read waits: one Chroma write for several records
        costs little more than for one, and it holds the GIL while it runs. Meanwhile embed the
        journalled texts (ONNX lets go of the GIL), so a read that stops the wait finds only writes left."""
        # The clock bounds only when the batch is written, never what is written or what a read sees
        # (every read waits for what is journalled).
        deadline = time.monotonic() + self.linger
        while True:
            with self._cond:
                if self._waiting > 0 or self._hurried or self._closed:
                    self._hurried = False
                    return
                rows = self._db.execute("SELECT seq, entry FROM archival_journal WHERE seq > ? ORDER BY seq",
                                        (self._prepared_seq,)).fetchall() if self._prepare else []
                if not rows:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait_for(lambda: self._waiting > 0 or self._hurried or self._closed
                                        or self._appended > self._prepared_seq, left)
                    continue
                self._prepared_seq = rows[-1][0]
            try:
                if self._prepare is not None:  # it is: rows are read only then
                    self._prepare(_texts(rows))
            except Exception as exc:  # only a head start: ``apply`` does it again and reports
                log.debug("archival pre-embedding failed: %s", exc)

    def _run(self) -> None:
        self._local.writer = True
        background_embedding()
        while True:
            with self._cond:
                self._cond.wait_for(lambda: (bool(self._pending) and self._error is None) or self._closed)
                if self._closed:
                    return
            if not self._backlog:
                self._linger()
            with self._cond:
                self._hurried = False  # a hurry is for what is journalled now; later inserts linger again
                rows = self._db.execute("SELECT seq, scope, rid, entry FROM archival_journal ORDER BY seq LIMIT ?",
                                        (PASS_ROWS,)).fetchall()
                self._backlog = len(rows) == PASS_ROWS
                # Rows gone from the table were written by another process on this directory (a CLI
                # opened beside a server replays what it finds); waiting for them would never end.
                present = {r[0] for r in self._db.execute("SELECT DISTINCT rid FROM archival_journal").fetchall()}
                for rid in [r for r in self._pending if r not in present]:
                    del self._pending[rid]
                self._cond.notify_all()
            start = time.perf_counter()
            try:
                self._write_pass(rows)
            except Exception as exc:  # stays journalled; a waiting read raises it, the next wake retries
                log.warning("archival write-behind failed, will retry: %s", exc)
                with self._cond:
                    self._error = exc
                    self._backlog = False
            finally:
                with self._cond:
                    self.busy_seconds += time.perf_counter() - start
                    self._attempt += 1
                    self._cond.notify_all()

    def _write_pass(self, rows: list[tuple[int, str, str, str]]) -> None:
        """Write journalled ``rows`` and delete them, setting aside those whose write fails alone
        (``write_isolating``); a failure of the machine, or of everything, is raised."""
        failed, wrote = write_isolating(rows, self.apply, lambda part: self._written([seq for seq, _ in part],
                                                                                      {entry[4] for _, entry in part}),
                                        closed=lambda: self._closed)
        aside, kept = self._lone.judged(failed, wrote)
        if aside:
            self._set_aside(aside)
        if kept:
            raise kept[0][3]

    def _written(self, seqs: list[int], rids: set[str]) -> None:
        """Delete written journal rows; their records are no longer pending unless journalled again."""
        with self._cond:
            self._db.execute(f"DELETE FROM archival_journal WHERE seq IN ({','.join('?' * len(seqs))})", seqs)
            self._forget(rids)
            self._cond.notify_all()

    def _forget(self, rids: set[str]) -> None:
        """Drop from ``_pending`` those of ``rids`` no longer journalled (the caller holds ``_cond``)."""
        ids = sorted(rids)
        left = {r[0] for r in self._db.execute(
            f"SELECT DISTINCT rid FROM archival_journal WHERE rid IN ({','.join('?' * len(ids))})", ids).fetchall()}
        for rid in rids - left:
            self._pending.pop(rid, None)

    def _set_aside(self, failed: Sequence[Failed]) -> None:
        """Move the journal rows of inserts whose write failed alone to ``SET_ASIDE_TABLE``, and say so."""
        at = time.time()
        with self._cond:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for seq, _, _, exc in failed:
                    self._db.execute(f"INSERT OR REPLACE INTO {SET_ASIDE_TABLE} (seq, scope, rid, entry, error, at) "
                                     "SELECT seq, scope, rid, entry, ?, ? FROM archival_journal WHERE seq = ?",
                                     (said(exc), at, seq))
                    self._db.execute("DELETE FROM archival_journal WHERE seq = ?", (seq,))
            self._forget({rid for _, _, rid, _ in failed})
            self._cond.notify_all()
        report_set_aside(failed)


#: A journal row that could not be written: its sequence number, scope key, record id and the error.
Failed = tuple[int, str, str, BaseException]


class Lone:
    """Which inserts that failed on their own a journal sets aside (see the module docstring): it
    remembers the records set aside before this open (``before``) and how many passes failed each."""

    def __init__(self, before: set[str]) -> None:
        self.before = before
        self._passes: dict[str, int] = {}

    def judged(self, failed: list[Failed], wrote: bool) -> tuple[list[Failed], list[Failed]]:
        """``failed`` (from a pass that ``wrote`` others or not) as (to set aside, to keep journalled)."""
        aside, kept = [], []
        for f in failed:
            rid = f[2]
            self._passes[rid] = self._passes.get(rid, 0) + 1
            if wrote or rid in self.before or self._passes[rid] >= SET_ASIDE_AFTER:
                aside.append(f)
                self._passes.pop(rid, None)
                self.before.discard(rid)
            else:
                kept.append(f)
        return aside, kept


def write_isolating(rows: list[tuple[int, str, str, str]], apply: Apply,
                    written: Callable[[list[tuple[int, Entry]]], object], *,
                    closed: Callable[[], bool] = lambda: False) -> tuple[list[Failed], bool]:
    """Write journal ``rows`` (seq, scope key, rid, entry) in order, a run of one scope at a time, with
    ``apply``, telling ``written`` each part written; return the rows that failed alone (see the module
    docstring), unwritten, and whether any part was written. A run whose write fails for a reason not of
    the machine is halved until those are found, and a row that cannot be read fails alone at once. A
    failure of the machine is raised, and so is the ``SET_ASIDE_PROBES``-th row failing alone before
    anything was written. Once ``closed`` says so (a normal exit), the parts not yet written stay journalled."""
    readable: list[tuple[int, str, str, str]] = []
    failed: list[Failed] = []
    for row in rows:
        try:
            entry_runs([row])
        except Exception as exc:  # a row this version cannot read: no pass ever will
            failed.append((row[0], row[1], row[2], exc))
            continue
        readable.append(row)
    wrote = False
    for scope, run in entry_runs(readable):
        parts = [run]
        while parts:
            if closed():  # exiting: the rest stays journalled for the next open
                return failed, wrote
            part = parts.pop(0)
            try:
                apply(scope, [entry for _, entry in part])
            except Exception as exc:
                if _of_the_machine(exc):
                    raise
                if len(part) > 1:
                    parts[:0] = [part[:len(part) // 2], part[len(part) // 2:]]
                    continue
                failed.append((part[0][0], scope.key, part[0][1][4], exc))
                if not wrote and len(failed) >= SET_ASIDE_PROBES:
                    raise
                continue
            wrote = True
            written(part)
    return failed, wrote


def report_set_aside(failed: Sequence[Failed]) -> None:
    """Log each insert set aside, as an error."""
    for _, scope, rid, exc in failed:
        log.error("archival insert %s of %s set aside: its write failed on its own (%s); the other journalled "
                  "inserts go on. pagefault doctor lists it; it is tried again when the store is next opened",
                  rid, scope, said(exc))


def _of_the_machine(exc: BaseException) -> bool:
    """Whether a write failed for a reason of the machine, not of what it wrote: an ``OSError`` (a full
    disk, a lock held too long, an engine or a provider out of reach) or SQLite's ``OperationalError``
    (a database locked) among its causes."""
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and not any(cause is s for s in seen):
        if isinstance(cause, (OSError, sqlite3.OperationalError)):
            return True
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    return False


def said(exc: BaseException) -> str:
    """An error as one line: its class and the first line of its message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def entry_text(raw: str) -> str:
    """The text of a journal row's entry ('' if the row cannot be read)."""
    try:
        return str(json.loads(raw)["text"])
    except (ValueError, KeyError, TypeError):
        return ""


def encode_entry(scope: Scope, text: str, tags: tuple[str, ...], prov: Provenance, since: float) -> str:
    """One journalled insert as its row stores it (``entry_runs`` reads it back), in either journal."""
    return json.dumps({"user_id": scope.user_id, "agent_id": scope.agent_id, "text": text, "tags": list(tags),
                       "since": since,
                       "prov": {"thread_id": prov.thread_id, "turn": prov.turn, "message_id": prov.message_id,
                                "source": prov.source, "created_at": prov.created_at, "flags": list(prov.flags),
                                "offset": prov.offset, "message_index": prov.message_index}})


def _texts(rows: list[tuple[int, str]]) -> list[str]:
    return [json.loads(raw)["text"] for _, raw in rows]


def entry_runs(rows: list[tuple[int, str, str, str]]) -> list[tuple[Scope, list[tuple[int, Entry]]]]:
    """Journal rows as consecutive runs of one scope, each entry with its row's sequence number."""
    out: list[tuple[Scope, list[tuple[int, Entry]]]] = []
    for seq, scope_key, rid, raw in rows:
        e = json.loads(raw)
        prov = dict(e["prov"])
        if "message_index" not in prov:  # journalled before turns were counted: its turn was the message index
            prov["message_index"], prov["turn"] = prov.get("turn", -1), -1
        entry = (e["text"], tuple(e["tags"]), Provenance(**{**prov, "flags": tuple(prov["flags"])}),
                 float(e["since"]), rid)
        if out and out[-1][0].key == scope_key:
            out[-1][1].append((seq, entry))
        else:
            out.append((Scope(e["user_id"], e["agent_id"]), [(seq, entry)]))
    return out


@atexit.register
def _drain() -> None:
    """On a normal exit, write what this process journalled (a crash leaves it for the next open), then
    stop the writer threads before the interpreter finalizes (``WriteBehind.close``)."""
    for journal in list(ArchivalJournal.running):
        try:
            journal.flush(timeout=30)
        except Exception as exc:  # still journalled: written when the store is next opened
            log.warning("archival inserts left journalled at exit: %s", exc)
        if not journal.close():
            log.warning("the archival writer was still writing %.0f s after exit began", EXIT_WAIT)
