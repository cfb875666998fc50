"""A BM25 index over memory text, in SQLite FTS5.

Dense vectors miss exact names, numbers and rare words; BM25 catches them. This index is derived
data: it can always be rebuilt from the store it shadows, so it is written after that store.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from pagefault.stores.index.resident_bm25 import ResidentBM25
from pagefault.stores.validity import ValidityFilter
from pagefault.text.terms import query_terms

log = logging.getLogger(__name__)

#: Best matches of the whole index scored per wanted result before the filters (see ``search``).
OVERFETCH = 4
#: Entries of the change log kept for other processes' resident postings to catch up from.
LOG_KEEP = 50_000
#: Writes (upsert or delete calls) between two prunings of the change log.
PRUNE_EVERY = 500
# Words so common that OR-ing them into a BM25 query only adds noise.
@dataclass(frozen=True)
class LexicalDoc:
    id: str
    scope: str
    text: str
    thread_id: str = ""
    created_at: float = 0.0
    tags: tuple[str, ...] = ()
    # Validity of an archival fact (see stores.validity); None: valid from created_at, still open.
    valid_from: float | None = None
    valid_to: float | None = None
    superseded: bool = False
    fact_key: str = ""  # the fact an archival record states (see stores.validity), "" if none


class LexicalIndex:
    """One FTS5 table per ``kind`` (archival, recall) in one SQLite file.

    Searches are scored from postings held in memory (``ResidentBM25``) once they are loaded; FTS5
    answers until then. Every insert and delete, by this process or another on the same file, is
    also written to a change log by triggers, and each search first brings the postings up to that
    log, so a search never sees postings older than the rows.
    """

    #: Searches filter ids through this file (``LexicalBackend.can_match``).
    can_match = True

    def __init__(self, path: str, kind: str, *, resident: bool = True) -> None:
        if not re.fullmatch(r"[a-z_]+", kind):
            raise ValueError(f"bad index kind {kind!r}")
        self.kind = kind
        self.path = path
        self._lock = threading.Lock()
        self._fact_keys_complete = False
        self._closed = False
        self._resident: ResidentBM25 | None = None
        self._seq = 0  # last change-log entry applied to ``_resident``
        self._version = -1  # ``PRAGMA data_version`` when the log was last read
        self._since_prune = 0  # writes since the change log was last pruned
        self._own_writes = False  # this connection committed since the postings last caught up
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        t = kind
        with self._db:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {t}_docs (rid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,"
                " scope TEXT NOT NULL, thread_id TEXT NOT NULL, created_at REAL NOT NULL,"
                " tags TEXT NOT NULL, text TEXT NOT NULL)"
            )
            self._db.execute(f"CREATE INDEX IF NOT EXISTS {t}_scope ON {t}_docs(scope, thread_id)")
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({t}_docs)")}
            for col, decl in (("valid_from", "REAL"), ("valid_to", "REAL"), ("superseded", "INTEGER NOT NULL DEFAULT 0")):
                if col not in have:  # files made before validity existed
                    self._db.execute(f"ALTER TABLE {t}_docs ADD COLUMN {col} {decl}")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {t}_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            if "fact_key" not in have:
                self._db.execute(f"ALTER TABLE {t}_docs ADD COLUMN fact_key TEXT")
                if self._db.execute(f"SELECT 1 FROM {t}_docs LIMIT 1").fetchone() is None:
                    self._db.execute(f"INSERT OR REPLACE INTO {t}_meta VALUES ('fact_keys', 'complete')")
                # else: rows written before the column existed; see ``fill_fact_keys``
            self._db.execute(f"CREATE INDEX IF NOT EXISTS {t}_fact ON {t}_docs(fact_key, scope) WHERE fact_key IS NOT NULL")
            # Records per scope, kept by triggers in the writer's own transaction: every prompt shows
            # the count, and a count(*) over 100k rows cost ~10 ms each time any connection wrote.
            if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name=?", (f"{t}_counts",)).fetchone():
                self._db.execute(f"CREATE TABLE {t}_counts (scope TEXT PRIMARY KEY, n INTEGER NOT NULL)")
                self._db.execute(f"INSERT INTO {t}_counts SELECT scope, count(*) FROM {t}_docs GROUP BY scope")
            self._db.execute(
                f"CREATE TRIGGER IF NOT EXISTS {t}_count_add AFTER INSERT ON {t}_docs BEGIN INSERT INTO {t}_counts"
                " VALUES (new.scope, 1) ON CONFLICT(scope) DO UPDATE SET n = n + 1; END")
            self._db.execute(
                f"CREATE TRIGGER IF NOT EXISTS {t}_count_remove AFTER DELETE ON {t}_docs BEGIN UPDATE {t}_counts"
                " SET n = n - 1 WHERE scope = old.scope; END")
            self._db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {t}_fts USING fts5(text, content='{t}_docs',"
                " content_rowid='rid', tokenize='porter unicode61 remove_diacritics 2')"
            )
            # Row changes in order, for resident postings (here or in another process) to follow.
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {t}_log (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                             " rid INTEGER NOT NULL, added INTEGER NOT NULL)")
            self._db.execute(f"CREATE TRIGGER IF NOT EXISTS {t}_log_add AFTER INSERT ON {t}_docs BEGIN"
                             f" INSERT INTO {t}_log(rid, added) VALUES (new.rid, 1); END")
            self._db.execute(f"CREATE TRIGGER IF NOT EXISTS {t}_log_remove AFTER DELETE ON {t}_docs BEGIN"
                             f" INSERT INTO {t}_log(rid, added) VALUES (old.rid, 0); END")
        if resident:
            self._start_resident()

    @property
    def url(self) -> None:
        """None: this index is a file of this host, shared with no database (``LexicalBackend.url``)."""
        return None

    # -- resident postings ------------------------------------------------------------------------

    @property
    def resident(self) -> ResidentBM25 | None:
        """The postings held in memory (None until they are built), for tests that follow them."""
        return self._resident

    @property
    def db(self) -> sqlite3.Connection:
        """The FTS5 database, for tests that check a ranking against plain SQL."""
        return self._db

    def _start_resident(self) -> None:
        """Empty files get empty postings at once; others load theirs on a thread (FTS5 answers meanwhile)."""
        t = self.kind
        if self._db.execute(f"SELECT 1 FROM {t}_docs LIMIT 1").fetchone() is None:
            self._resident = ResidentBM25()
            self._seq = self._db.execute(f"SELECT coalesce(max(seq), 0) FROM {t}_log").fetchone()[0]
            self._version = self._db.execute("PRAGMA data_version").fetchone()[0]
            self._apply_log()  # rows another process added since
            return
        self._load_in_background()

    def _load_in_background(self) -> None:
        threading.Thread(target=self._load_resident, name=f"pagefault-bm25-{self.kind}", daemon=True).start()

    def _load_resident(self) -> None:
        t = self.kind
        try:
            db = sqlite3.connect(self.path, timeout=30)
            try:
                db.execute("BEGIN")  # one snapshot: the rows and the log position they reflect
                seq = db.execute(f"SELECT coalesce(max(seq), 0) FROM {t}_log").fetchone()[0]
                fresh = ResidentBM25()
                fresh.load(db.execute(f"SELECT rid, text FROM {t}_docs"))
                db.execute("COMMIT")
            finally:
                db.close()
            with self._lock:
                if self._closed:
                    return
                self._resident, self._seq = fresh, seq
                self._apply_log()
        except Exception:  # the index still works, through FTS5
            log.exception("could not load the %s BM25 postings into memory; searching FTS5 instead", t)

    def _apply_log(self) -> None:
        """Bring the resident postings up to the change log (under ``_lock``)."""
        if self._resident is None:
            return
        t = self.kind
        self._version = self._db.execute("PRAGMA data_version").fetchone()[0]
        changes = self._db.execute(f"SELECT seq, rid, added FROM {t}_log WHERE seq > ? ORDER BY seq",
                                   (self._seq,)).fetchall()
        if not changes:
            return
        if changes[0][0] > self._seq + 1 and self._db.execute(
                f"SELECT 1 FROM {t}_log WHERE seq <= ? LIMIT 1", (self._seq,)).fetchone() is None:
            # Entries this process had not read were pruned: reload from the rows.
            self._resident = None
            self._load_in_background()
            return
        added = list({rid for _, rid, a in changes if a})
        texts: dict[int, str] = {}
        for k in range(0, len(added), 900):
            part = added[k:k + 900]
            texts.update(self._db.execute(f"SELECT rid, text FROM {t}_docs WHERE rid IN ({','.join('?' * len(part))})",
                                          part).fetchall())
        for _, rid, a in changes:
            if a and rid in texts:
                self._resident.add(rid, texts[rid])
            else:
                self._resident.remove(rid)
        self._seq = changes[-1][0]

    def wait_resident(self, timeout: float = 60.0) -> bool:
        """Wait until searches are scored from memory (False if they still go to FTS5 at ``timeout``)."""
        # A bound on the wait (the answer says whether it was reached); no value depends on it.
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._resident is not None or self._closed:
                    return self._resident is not None
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _fresh_resident(self) -> ResidentBM25 | None:
        """The resident postings, caught up with every commit since the last search, this connection's
        and other connections' (under ``_lock``)."""
        if self._resident is not None and (self._own_writes or self._db.execute(
                "PRAGMA data_version").fetchone()[0] != self._version):
            self._own_writes = False
            self._apply_log()
        return self._resident

    def upsert(self, docs: Iterable[LexicalDoc]) -> None:
        t = self.kind
        with self._lock, self._db:
            for d in docs:
                row = self._db.execute(f"SELECT rid, text FROM {t}_docs WHERE id=?", (d.id,)).fetchone()
                if row is not None:
                    self._db.execute(f"INSERT INTO {t}_fts({t}_fts, rowid, text) VALUES('delete', ?, ?)", row)
                    self._db.execute(f"DELETE FROM {t}_docs WHERE rid=?", (row[0],))
                cur = self._db.execute(
                    f"INSERT INTO {t}_docs(id, scope, thread_id, created_at, tags, text, valid_from, valid_to,"
                    " superseded, fact_key) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (d.id, d.scope, d.thread_id, d.created_at, _tags_field(d.tags), d.text, d.valid_from, d.valid_to,
                     int(d.superseded), d.fact_key or None),
                )
                self._db.execute(f"INSERT INTO {t}_fts(rowid, text) VALUES (?, ?)", (cur.lastrowid, d.text))
            self._after_write()

    def _after_write(self) -> None:
        """Leave the resident postings to the next search: a write does not pay for tokenizing (a
        document's passages are ingested many times faster than they are searched)."""
        self._db.commit()
        self._own_writes = True
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:  # keep the change log to its last LOG_KEEP entries
            self._since_prune = 0
            with self._db:
                self._db.execute(f"DELETE FROM {self.kind}_log WHERE seq <= (SELECT max(seq) FROM {self.kind}_log) - ?",
                                 (LOG_KEEP,))

    def delete(self, ids: Sequence[str]) -> None:
        t = self.kind
        with self._lock, self._db:
            for id_ in ids:
                row = self._db.execute(f"SELECT rid, text FROM {t}_docs WHERE id=?", (id_,)).fetchone()
                if row is not None:
                    self._db.execute(f"INSERT INTO {t}_fts({t}_fts, rowid, text) VALUES('delete', ?, ?)", row)
                    self._db.execute(f"DELETE FROM {t}_docs WHERE rid=?", (row[0],))
            self._after_write()

    def search(
        self,
        query: str,
        scope: str,
        limit: int,
        *,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
        validity: ValidityFilter | None = None,
    ) -> list[tuple[str, float]]:
        """(id, bm25 score; higher is better) for docs matching any query term, filters first."""
        terms = query_terms(query)
        if not terms:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
        t = self.kind
        where, args = _filters(scope, thread_id, tags, start, end, validity)
        # First the best OVERFETCH * limit matches of the whole index, then the filters: joining every
        # match to its doc row costs as much as scoring it. Exact when ``limit`` of them pass (a passing
        # doc that scores higher is among them); otherwise the filtered query over all matches.
        wide = OVERFETCH * limit
        with self._lock:
            resident = self._fresh_resident()
            if resident is not None:
                ranked, matched = resident.top(terms, wide)
                if not ranked:  # no document holds any query term
                    return []
                where, args = _filters(scope, thread_id, tags, start, end, validity, scope_column="+d.scope")
                marks = ",".join("?" * len(ranked))
                passing = dict(self._db.execute(f"SELECT d.rid, d.id FROM {t}_docs d WHERE d.rid IN ({marks})"
                                                f" AND {where}", [r for r, _ in ranked] + args).fetchall())
                out = [(passing[r], s) for r, s in ranked if r in passing][:limit]
                if len(out) == limit or matched <= wide:
                    return out
        fast = (f"SELECT d.id, f.s FROM (SELECT rowid, -bm25({t}_fts) AS s FROM {t}_fts WHERE {t}_fts MATCH ? "
                f"ORDER BY s DESC LIMIT ?) f JOIN {t}_docs d ON d.rid = f.rowid WHERE {where} ORDER BY f.s DESC LIMIT ?")
        full = (f"SELECT d.id, -bm25({t}_fts) AS s FROM {t}_fts JOIN {t}_docs d ON d.rid = {t}_fts.rowid "
                f"WHERE {t}_fts MATCH ? AND {where} ORDER BY s DESC LIMIT ?")
        with self._lock:
            rows = self._db.execute(fast, [match, wide, *args, limit]).fetchall()
            if len(rows) < limit and self._db.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {t}_fts WHERE {t}_fts MATCH ? LIMIT ?)", [match, wide + 1]
            ).fetchone()[0] > wide:
                rows = self._db.execute(full, [match, *args, limit]).fetchall()
            return [(r[0], float(r[1])) for r in rows]

    def matching(
        self,
        ids: Sequence[str],
        scope: str,
        *,
        thread_id: str | None = None,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
        validity: ValidityFilter | None = None,
    ) -> set[str]:
        """Those of ``ids`` that pass the filters ``search`` applies. A vector search can then ask Chroma
        for unfiltered neighbours: its own metadata filter scans every record (~0.3 s at 100k)."""
        if not ids:
            return set()
        # "+d.scope": look the ids up by their own index, not every doc of the scope by the scope index.
        where, args = _filters(scope, thread_id, tags, start, end, validity, scope_column="+d.scope")
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(f"SELECT d.id FROM {self.kind}_docs d WHERE d.id IN ({marks}) AND {where}",
                                    [*ids, *args])
            return {r[0] for r in rows}

    def fact_records(self, scope: str, fact_key: str, since: float) -> list[str] | None:
        """Ids of the records of one fact whose validity a new value beginning at ``since`` can
        change: those still open at ``since`` and those beginning at or after it (a record that ended
        before ``since`` keeps its end). None while older rows lack their fact key (``fill_fact_keys``)."""
        if not self.fact_keys_complete():
            return None
        with self._lock:
            rows = self._db.execute(
                f"SELECT id FROM {self.kind}_docs WHERE fact_key=? AND scope=? AND (valid_to IS NULL OR valid_to >= ?"
                " OR valid_from IS NULL OR valid_from >= ?)", (fact_key, scope, since, since))
            return [r[0] for r in rows]

    def fill_fact_keys(self, keys: Mapping[str, str]) -> None:
        """Record the fact key of rows written before the column existed (id -> key), then use it."""
        t = self.kind
        with self._lock, self._db:
            self._db.executemany(f"UPDATE {t}_docs SET fact_key=? WHERE id=?", [(k, i) for i, k in keys.items() if k])
            self._db.execute(f"INSERT OR REPLACE INTO {t}_meta VALUES ('fact_keys', 'complete')")

    def fact_keys_complete(self) -> bool:
        """Whether every row carries its fact key (a file once complete stays so: asked once)."""
        if not self._fact_keys_complete:
            with self._lock:
                row = self._db.execute(f"SELECT value FROM {self.kind}_meta WHERE key='fact_keys'").fetchone()
            self._fact_keys_complete = row == ("complete",)
        return self._fact_keys_complete

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored text by id (missing ids are left out)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(f"SELECT id, text FROM {self.kind}_docs WHERE id IN ({marks})", list(ids))
            return dict(rows.fetchall())

    def ids(self, scope: str | None = None) -> set[str]:
        t = self.kind
        with self._lock:
            if scope is None:
                rows = self._db.execute(f"SELECT id FROM {t}_docs")
            else:
                rows = self._db.execute(f"SELECT id FROM {t}_docs WHERE scope=?", (scope,))
            return {r[0] for r in rows}

    def count(self, scope: str) -> int:
        with self._lock:
            row = self._db.execute(f"SELECT n FROM {self.kind}_counts WHERE scope=?", (scope,)).fetchone()
            return row[0] if row else 0

    def count_with(self, scope: str, ids: Sequence[str]) -> int:
        """``count(scope)`` plus the ``ids`` not stored yet, under one hold of the lock every write takes."""
        with self._lock:
            row = self._db.execute(f"SELECT n FROM {self.kind}_counts WHERE scope=?", (scope,)).fetchone()
            stored = len(self._db.execute(f"SELECT id FROM {self.kind}_docs WHERE id IN ({','.join('?' * len(ids))})",
                                          list(ids)).fetchall()) if ids else 0
            return (row[0] if row else 0) + len(set(ids)) - stored

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._resident = None
            self._db.close()


def _filters(scope: str, thread_id: str | None, tags: Sequence[str], start: float | None, end: float | None,
             validity: ValidityFilter | None, scope_column: str = "d.scope") -> tuple[str, list[object]]:
    """The SQL condition (on docs aliased ``d``) and its arguments for a search's filters."""
    sql: list[str] = [f"{scope_column} = ?"]
    args: list[object] = [scope]
    if thread_id is not None:
        sql.append("AND d.thread_id = ?")
        args.append(thread_id)
    for tag in tags:
        sql.append("AND instr(d.tags, ?) > 0")
        args.append(f"|{tag}|")
    if start is not None:
        sql.append("AND d.created_at >= ?")
        args.append(start)
    if end is not None:
        sql.append("AND d.created_at <= ?")
        args.append(end)
    if validity is not None and validity.as_of is not None:
        sql.append("AND coalesce(d.valid_from, d.created_at) <= ? AND coalesce(d.valid_to, 1e300) > ?")
        args += [validity.as_of, validity.as_of]
    elif validity is not None and validity.current_only:
        sql.append("AND d.superseded = 0")
    return " ".join(sql), args


def _tags_field(tags: Sequence[str]) -> str:
    return "".join(f"|{t}|" for t in tags)
