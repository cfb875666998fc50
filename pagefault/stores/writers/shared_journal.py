"""Write-behind for archival inserts when replicas share the stores: a Chroma server for the vectors
and the BM25 shadow in Postgres (``stores.services``, the production path).

``archival_journal`` journals a turn's inserts in a file of the data directory, which only that
process reads; replicas share the stores, and a journal on one host's disk would hide writes from the
others. This journal is a table of the shared database instead, so the turn's insert costs one
committed row, not the embedding, the Chroma server's upsert and the fact's timeline:

- A turn's insert is one row, committed before the tool answers: durable, and seen by every replica.
- A writer thread in each process takes the rows no one else holds (``FOR UPDATE SKIP LOCKED``, in a
  transaction kept open while it writes them to Chroma and the BM25 shadow, deleting them before it
  commits). A process killed mid-write holds nothing (its transaction ends with its connection), so
  another replica, or this one's next start, writes those rows, each once.
- Every read of the store, on any replica, first waits until the rows committed before it are gone
  (``flush``: one round trip when there are none); ``count`` counts journalled records with the stored
  ones, in one statement.
- A write that fails for a reason of the machine stays journalled; the read waiting for it gets the
  error, the next wake retries. One that fails otherwise is halved until the inserts that fail alone
  are found, and those are set aside in ``SHARED_SET_ASIDE_TABLE`` (as ``archival_journal`` does in its
  file), the others written; each start of a replica journals them again, once. A pass takes at most
  ``PASS_ROWS`` rows.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import time
import weakref
from typing import Any, Callable

from pagefault.engines.connections import CONNECT_TIMEOUT, postgres_connection, public_url
from pagefault.engines.locks import locks_for
from pagefault.models.embeddings import background_embedding
from pagefault.stores.provenance import Provenance
from pagefault.stores.scope import Scope
from pagefault.stores.writers.archival_journal import (
    EXIT_WAIT,
    LINGER_SECONDS,
    PASS_ROWS,
    Appended,
    Apply,
    Lone,
    Prepare,
    SetAside,
    WriteBehind,
    encode_entry,
    entry_text,
    report_set_aside,
    said,
    write_isolating,
)

log = logging.getLogger(__name__)

#: The table of ``SharedJournal``, in the database the BM25 shadow is in.
SHARED_JOURNAL_TABLE = "pagefault_archival_journal"
#: Where inserts whose write failed on its own are set aside, in the same database.
SHARED_SET_ASIDE_TABLE = "pagefault_archival_set_aside"
#: How often a read waiting for inserts another replica is writing looks again.
SHARED_POLL_SECONDS = 0.02


class SharedJournal(WriteBehind):
    """``ArchivalJournal``'s surface, its rows in ``SHARED_JOURNAL_TABLE`` of the database at ``url``
    (the one ``shadow_table``, the BM25 shadow, is in); ``apply`` writes a run of entries of one scope.
    See the module docstring for what keeps it safe."""

    thread_name = "pagefault-archival-shared-writer"
    running: "weakref.WeakSet[WriteBehind]" = weakref.WeakSet()

    def __init__(self, url: str, apply: Apply, *, shadow_table: str, prepare: Prepare | None = None) -> None:
        if not re.fullmatch(r"[a-z_]+", shadow_table):
            raise ValueError(f"bad table name {shadow_table!r}")
        self.url, self.apply, self._prepare, self._shadow = url, apply, prepare, shadow_table
        self.linger = LINGER_SECONDS
        self.busy_seconds = 0.0  # time spent writing, for benchmarks
        self._cond = threading.Condition()
        self._pending: dict[str, str] = {}  # rid -> scope key: journalled here, not yet seen written
        self._texts: list[str] = []  # journalled here, not yet embedded ahead of the write
        self._waiting = 0  # reads in ``flush``
        self._hurried = False
        self._sweep = True  # look for rows a process that stopped left (at start, and when a read waits)
        self._error: BaseException | None = None
        self._attempt = 0
        self._thread: threading.Thread | None = None
        self._local = threading.local()
        self._conn: Any = None  # the writer's own connection (its transaction holds the rows it writes)
        t = SHARED_JOURNAL_TABLE
        with locks_for(url).hold("setup", t, timeout=60), postgres_connection(url) as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {t} (seq bigserial PRIMARY KEY, scope text NOT NULL,"
                         " rid text NOT NULL, entry text NOT NULL)")
            conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_scope ON {t} (scope)")
            a = SHARED_SET_ASIDE_TABLE
            conn.execute(f"CREATE TABLE IF NOT EXISTS {a} (seq bigint PRIMARY KEY, scope text NOT NULL, rid text NOT NULL,"
                         " entry text NOT NULL, error text NOT NULL, at double precision NOT NULL)")
            with conn.transaction():  # inserts set aside before are tried once more, from the journal
                before = conn.execute(f"SELECT rid FROM {a}").fetchall()
                conn.execute(f"WITH moved AS (DELETE FROM {a} RETURNING seq, scope, rid, entry) INSERT INTO {t} "
                             "(scope, rid, entry) SELECT scope, rid, entry FROM moved ORDER BY seq")
            self._lone = Lone({str(_value(r)) for r in before})  # which inserts failing alone are set aside
            left = conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchall()
        if left:  # rows a process that stopped left: written now, by whichever replica takes them first
            self._wake()

    # -- the turn's side ------------------------------------------------------------------
    def append_new(self, scope: Scope, text: str, tags: tuple[str, ...], prov: Provenance, since: float, rid: str,
                   stored: Callable[[str], bool]) -> Appended:
        """``WriteBehind.append_new`` in one statement, committed when this returns: whether the BM25
        shadow (this journal's neighbour table, so ``stored`` is not asked) or the journal holds ``rid``,
        and the row if neither does."""
        t, d = SHARED_JOURNAL_TABLE, self._shadow
        with postgres_connection(self.url) as conn:
            row = conn.execute(
                f"WITH seen AS (SELECT EXISTS (SELECT 1 FROM {d} WHERE id = %(rid)s) AS stored,"
                f" EXISTS (SELECT 1 FROM {t} WHERE rid = %(rid)s) AS pending),"
                f" put AS (INSERT INTO {t} (scope, rid, entry) SELECT %(scope)s, %(rid)s, %(entry)s FROM seen"
                "  WHERE NOT seen.stored AND NOT seen.pending RETURNING seq)"
                " SELECT seen.stored, seen.pending FROM seen",
                {"rid": rid, "scope": scope.key, "entry": encode_entry(scope, text, tags, prov, since)}).fetchone()
        found = (row["stored"], row["pending"]) if isinstance(row, dict) else (row[0], row[1])
        if found[0]:
            return "stored"
        if found[1]:
            return "pending"
        with self._cond:
            self._pending[rid] = scope.key
            self._texts.append(text)
        self._wake()
        return "appended"

    def is_pending(self, rid: str) -> bool:
        """Whether an insert of record ``rid`` is journalled (by any replica) and not yet written."""
        with self._cond:
            if rid in self._pending:
                return True
        with postgres_connection(self.url) as conn:
            return bool(conn.execute(f"SELECT 1 FROM {SHARED_JOURNAL_TABLE} WHERE rid = %s LIMIT 1", (rid,)).fetchall())

    def set_aside(self) -> list[SetAside]:
        """The inserts set aside (by any replica) since the last start, oldest first."""
        with postgres_connection(self.url) as conn:
            rows = conn.execute(f"SELECT rid, scope, entry, error, at FROM {SHARED_SET_ASIDE_TABLE} ORDER BY seq"
                                ).fetchall()
        values = [list(r.values()) if isinstance(r, dict) else list(r) for r in rows]  # the pool's dicts, or tuples
        return [SetAside(str(v[0]), str(v[1]), entry_text(str(v[2])), str(v[3]), float(v[4])) for v in values]

    def pending_in(self, scope: Scope) -> list[str]:
        """Record ids of ``scope`` journalled (by any replica) and not yet written."""
        with postgres_connection(self.url) as conn:
            rows = conn.execute(f"SELECT DISTINCT rid FROM {SHARED_JOURNAL_TABLE} WHERE scope = %s", (scope.key,))
            return [_value(r) for r in rows.fetchall()]

    def count(self, scope: Scope) -> int:
        """Records of ``scope``: those in the BM25 shadow and those journalled that it lacks, read at one
        moment (a writer storing one between two reads would have it counted never, or twice)."""
        sql, args = self.count_query(scope)
        with postgres_connection(self.url) as conn:
            row = conn.execute(f"SELECT {sql} AS n", args).fetchone()
        return int(_value(row))

    def count_query(self, scope: Scope) -> tuple[str, tuple[str, ...]]:
        """``count``'s SQL expression (of this journal's database, ``url``) and its parameters."""
        t, d = SHARED_JOURNAL_TABLE, self._shadow
        return (f"(SELECT count(*) FROM {d} WHERE scope = %s) + (SELECT count(DISTINCT j.rid) FROM {t} j"
                f" WHERE j.scope = %s AND NOT EXISTS (SELECT 1 FROM {d} s WHERE s.id = j.rid))", (scope.key, scope.key))

    def flush(self, timeout: float | None = 120.0) -> None:
        """Wait until every insert journalled (by any replica) before this call is written; raise the
        error that stops one of this process's writes. After ``close`` it does not wait (the rows stay
        journalled, for another replica or the next start)."""
        if self.in_writer() or self._closed:
            return
        t = SHARED_JOURNAL_TABLE
        with self._cond:
            known = list(self._pending)  # their rows were committed before they were noted here
        with postgres_connection(self.url) as conn:
            mark = _value(conn.execute(f"SELECT max(seq) AS m FROM {t}").fetchone())
        if mark is None:
            with self._cond:
                for rid in known:  # all written (by whichever replica took them)
                    self._pending.pop(rid, None)
            return
        # A bound on the wait only: what the caller then reads is the database's, whatever the clock said.
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            self._sweep = True
            first = self._attempt  # a pass after this one that failed is this read's error
        asked = first  # the pass this read last asked for has run once ``_attempt`` passes this
        self._wake()
        try:
            while True:
                with self._cond:
                    seen = self._attempt
                with postgres_connection(self.url) as conn:
                    if not conn.execute(f"SELECT 1 FROM {t} WHERE seq <= %s LIMIT 1", (mark,)).fetchall():
                        return
                with self._cond:
                    if self._error is not None and self._attempt > first:
                        raise self._error
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError(f"archival inserts journalled in {public_url(self.url)} still being "
                                           f"written after {timeout} s")
                    if self._attempt > asked and not self._sweep:
                        # The pass asked for is over and rows before the mark remain: another process held them
                        # (its writer, or one killed mid-write whose transaction had not yet rolled back), and
                        # SKIP LOCKED passed them over. Ask for another pass, after a pause.
                        self._cond.wait(SHARED_POLL_SECONDS)
                        asked, self._sweep = self._attempt, True
                        self._cond.notify_all()
                    self._cond.wait_for(lambda: self._attempt > seen,
                                        SHARED_POLL_SECONDS if left is None else min(SHARED_POLL_SECONDS, left))
        finally:
            with self._cond:
                self._waiting -= 1

    # -- the writer -----------------------------------------------------------------------
    def _linger(self) -> None:
        """Wait for more of the turn's inserts unless a read waits or the turn is over, embedding the
        journalled texts meanwhile (the write finds their vectors cached)."""
        # The clock bounds only when the batch is written, never what is written or what a read sees.
        deadline = time.monotonic() + self.linger
        while True:
            with self._cond:
                if self._waiting > 0 or self._hurried or self._closed:
                    self._hurried = False
                    return
                texts, self._texts = self._texts, []
                if not texts:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait_for(lambda: self._waiting > 0 or self._hurried or self._closed or bool(self._texts),
                                        left)
                    continue
            if self._prepare is not None:
                try:
                    self._prepare(texts)
                except Exception as exc:  # only a head start
                    log.debug("archival pre-embedding failed: %s", exc)

    def _run(self) -> None:
        self._local.writer = True
        background_embedding()
        while True:
            with self._cond:
                self._cond.wait_for(lambda: ((bool(self._pending) or self._sweep) and self._error is None)
                                    or self._closed)
                if self._closed:  # exiting (``close``): what is journalled stays for another replica
                    return
            self._linger()
            with self._cond:
                self._hurried = self._sweep = False
                self._texts.clear()
            start = time.perf_counter()
            took = 0
            try:
                took = self._write_rows()
                self._forget_written()
            except Exception as exc:  # stays journalled; a waiting read raises it, the next wake retries
                log.warning("archival write-behind (shared) failed, will retry: %s", exc)
                if self._conn is not None and (self._conn.closed or self._conn.broken):
                    self._conn = None
                with self._cond:
                    self._error = exc
            finally:
                with self._cond:
                    self.busy_seconds += time.perf_counter() - start
                    self._attempt += 1
                    self._cond.notify_all()
                    if not took and self._pending and self._error is None:  # held by another replica: look again soon
                        self._cond.wait(SHARED_POLL_SECONDS)

    def _write_rows(self) -> int:
        """Take the first ``PASS_ROWS`` rows no other process holds, write them (setting aside those that fail
        alone, ``write_isolating``), delete what is written or set aside, commit; how many were taken. An
        insert failing alone that is not set aside yet stays journalled, and its error is raised."""
        import psycopg

        if self._conn is None:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT))
        t, a = SHARED_JOURNAL_TABLE, SHARED_SET_ASIDE_TABLE
        with self._conn.transaction():
            rows = self._conn.execute(f"SELECT seq, scope, rid, entry FROM {t} ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED",
                                      (PASS_ROWS,)).fetchall()
            done: list[int] = []
            failed, wrote = write_isolating([tuple(r) for r in rows], self.apply,
                                            lambda part: done.extend(seq for seq, _ in part), closed=lambda: self._closed)
            aside, kept = self._lone.judged(failed, wrote)  # ``kept`` stay journalled: raised once this commits
            for seq, _, _, exc in aside:
                self._conn.execute(f"INSERT INTO {a} (seq, scope, rid, entry, error, at) SELECT seq, scope, rid, entry,"
                                   f" %s, %s FROM {t} WHERE seq = %s ON CONFLICT (seq) DO NOTHING",
                                   (said(exc), time.time(), seq))
            if rows:
                self._conn.execute(f"DELETE FROM {t} WHERE seq = ANY(%s)", (done + [f[0] for f in aside],))
        report_set_aside(aside)
        if kept:
            raise kept[0][3]
        if len(rows) == PASS_ROWS:  # more are left: the next pass takes them without waiting for a wake
            with self._cond:
                self._sweep = True
        return len(rows)

    def _forget_written(self) -> None:
        """Drop from ``_pending`` what is no longer journalled (written here or by another replica)."""
        with self._cond:
            rids = list(self._pending)
        if not rids:
            return
        with postgres_connection(self.url) as conn:
            left = {_value(r) for r in conn.execute(f"SELECT DISTINCT rid FROM {SHARED_JOURNAL_TABLE} WHERE rid = ANY(%s)",
                                                    (rids,)).fetchall()}
        with self._cond:
            for rid in rids:
                if rid not in left:
                    self._pending.pop(rid, None)
            self._cond.notify_all()


def _value(row: Any) -> Any:
    """The one value of a row, whichever row factory made it (the pool's dicts, or tuples)."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


@atexit.register
def _drain_shared() -> None:
    """On a normal exit, write what this process journalled (a crash leaves it for another replica), then
    stop the writer threads before the interpreter finalizes (``WriteBehind.close``)."""
    for journal in list(SharedJournal.running):
        if journal.hurry():  # something of this process's is left to write
            try:
                journal.flush(timeout=30)
            except Exception as exc:
                log.warning("archival inserts left journalled at exit: %s", exc)
        if not journal.close():
            log.warning("the shared archival writer was still writing %.0f s after exit began", EXIT_WAIT)
