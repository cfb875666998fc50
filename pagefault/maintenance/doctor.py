"""What the memory runs on, whether each engine answers, and whether the data directory is sound
(``pagefault doctor``).

Reads the same settings a run does (``PAGEFAULT_DATABASE_URL``, ``PAGEFAULT_CHROMA_URL``,
``PAGEFAULT_DATA_DIR``, or explicit values) and checks each tier where it lives: threads and core
memory, archival and recall vectors, and their BM25 index, and which model made the vectors (each
collection's record) against the one this process would use. On the data directory it checks that it
is a directory this process can write (or can make), that every file pagefault keeps there is what
it should be (each SQLite file a SQLite database with that file's tables, the Chroma directory one
Chroma opens), and that no import was left half done. Nothing of pagefault's is created or changed
(opening Chroma notes the open in Chroma's own bookkeeping, as every open does); a table that is
missing is reported as made on first use.

A data directory that holds more records than one embedded process holds well is not a problem but a
``warning:`` line (``scale_warnings``): recall's vectors and the BM25 postings live in the memory of
every process that opens it, and past ``EMBEDDED_RECORD_LIMIT`` records of either kind the memory
they take says to move to a Chroma server (README, "Run it in production"). The records are counted
from the BM25 file's own per-scope counts: nothing is loaded or embedded.

Archival inserts the write-behind set aside, because their write failed on its own while the others
were written (``stores.writers.archival_journal``), are a ``problem:`` line (``set_aside_problems``):
how many, the first ones with their error, and what to do.

``data_dir_problems`` is the same check of the directory without the slow parts (SQLite's
``quick_check``, opening Chroma): the CLI runs it before every command, so a bad directory is one
line naming the file, never a traceback from deep inside a store.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from pagefault.engines import connections as backends
from pagefault.engines.directory_use import USE_FILE
from pagefault.engines.file_locks import LOCK_FILE
from pagefault.graph.context import Context
from pagefault.maintenance.transfer import IMPORT_JOURNAL, IMPORT_LOCK, unfinished_import
from pagefault.models.embedding_choice import DEFAULT, ENV, FORMER_DEFAULT, choice_name, opens_as
from pagefault.stores.index.embedding_record import LEGACY, ChromaCatalog, EmbeddingRecord, active, legacy_name, of_kind
from pagefault.stores.services import ARCHIVAL_RECENT_FILE, RECALL_FILE
from pagefault.stores.writers.archival_journal import SET_ASIDE_TABLE
from pagefault.stores.writers.shared_journal import SHARED_SET_ASIDE_TABLE

LANGGRAPH_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs", "store")
INDEX_KINDS = ("archival", "recall", "recall_unit")
SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""
CHROMA_DIR = "chroma"
LEXICAL_FILE = "lexical.sqlite"
EMBEDDED_RECORD_LIMIT = 200_000
"""Archival records, or recall entries, of one embedded data directory past which ``pagefault doctor``
warns that it has outgrown an embedded process and should move to a Chroma server (``scale_warnings``).

It comes from ``benchmarks/rss_scale.py`` (``benchmarks/RESULTS.md``, section "rss-scale-offline-joint"),
which measures an embedded process's resident memory against N archival passages and N recall entries of
the default embedding's 896-dimension vectors: 2.0 GiB at 100,000 of each and 5.4 GiB at 300,000, growing
linearly (``RESIDENT_BYTES_PER_RECORD``), so about 4 GiB per process at 200,000 of each (the fit crosses it
at 217,077), and every process that opens the directory pays it. (MiniLM's 384-dimension vectors, the
default before, took about 4,900 bytes per record: 4 GiB at 401,132; section "rss-scale".)"""
RESIDENT_BYTES_PER_RECORD = 8_880
"""Resident memory of an embedded process per stored record (an archival passage or a recall entry,
the two averaged), above what an empty data directory takes: the slope ``benchmarks/rss_scale.py``
fits for the default embedding (8,877 bytes, over 0, 100,000 and 300,000 records of each kind).
``scale_warnings`` estimates a directory's resident memory with it."""
EMPTY_PROCESS_BYTES = 450 * 1024 * 1024
"""Resident memory of an embedded process on an empty data directory, after its first searches
(``benchmarks/rss_scale.py``'s empty row: the libraries, Chroma's client and the two embedding models)."""


@dataclass(frozen=True)
class DataFile:
    """A SQLite file pagefault keeps in a data directory: its ``name`` there (a path relative to the
    directory), the ``tier`` that ``pagefault doctor`` lists it under, what it ``holds`` (for
    messages), and the ``tables`` it makes (a SQLite database with tables but none of these is some
    other program's file; one with only some is one whose setup was cut short, which the next open
    finishes)."""

    name: str
    tier: str
    holds: str
    tables: tuple[str, ...]


DATA_FILES: tuple[DataFile, ...] = (
    DataFile("checkpoints.sqlite", "threads", "the threads", ("checkpoints", "writes")),
    DataFile("store.sqlite", "core memory", "core memory", ("store",)),
    DataFile(LEXICAL_FILE, "BM25 index", "the BM25 index", tuple(f"{kind}_docs" for kind in INDEX_KINDS)),
    DataFile(RECALL_FILE, "recall vectors", "recall's vectors", ("records", "notes", "records_log", "embedding_records")),
    DataFile(ARCHIVAL_RECENT_FILE, "archival, recent writes", "archival's recent writes",
             ("records", "notes", "records_log", "embedding_records")),
    DataFile(f"{CHROMA_DIR}/chroma.sqlite3", "archival", "archival memory (Chroma's database)",
             ("collections", "segments", "embeddings", "migrations")),
)
"""Every SQLite file of an embedded data directory (besides each one's ``-wal`` and ``-shm``, which
SQLite itself checks and rebuilds)."""
LOCK_FILES: tuple[str, ...] = (LOCK_FILE, IMPORT_LOCK, USE_FILE)
"""Files of a data directory that processes only lock (their bytes mean nothing): each must be a
file this process can write. They are checked without being opened, since closing a lock file drops
the locks the process holds on it."""


@dataclass
class Check:
    """One tier: what holds it, where, and whether it answered."""

    tier: str
    engine: str
    where: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'DOWN'}  {self.tier:<22} {self.engine:<18} {self.where}\n      {self.detail}"


@dataclass
class Diagnosis:
    """What ``pagefault doctor`` found: a ``Check`` per tier (``checks``) and, one line each naming
    the file or setting, the ``problems`` of the data directory and the environment's settings, and
    the ``warnings``: what works but should change (a data directory past ``EMBEDDED_RECORD_LIMIT``)."""

    checks: list[Check]
    problems: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every engine answered and nothing is wrong with the data directory or the settings (warnings
        do not count: ``pagefault doctor`` still exits 0)."""
        return all(c.ok for c in self.checks) and not self.problems


# --- the data directory ---------------------------------------------------------------------------


#: Linux's ``FS_IOC_GETFLAGS`` ioctl and the inode flags ``chattr`` sets (``lsattr`` shows them).
_FS_IOC_GETFLAGS = 0x80086601
_FS_IMMUTABLE_FL = 0x10
_FS_APPEND_FL = 0x20


def _write_blocking_attribute(path: str) -> str:
    """The file attribute that stops every write to ``path``, whatever its mode bits and whoever
    writes (root too): ``"immutable"``, ``"append-only"``, or '' for none (or none that can be read)."""
    flags = getattr(os.stat(path), "st_flags", None)  # BSD and macOS
    if flags is not None:
        immutable = stat.UF_IMMUTABLE | stat.SF_IMMUTABLE
        append = stat.UF_APPEND | stat.SF_APPEND
        return "immutable" if flags & immutable else "append-only" if flags & append else ""
    try:
        import fcntl
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (ImportError, OSError):
        return ""
    try:
        flags = int.from_bytes(fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder)
    except OSError:  # not Linux, or a file system without attributes
        return ""
    finally:
        os.close(fd)
    return "immutable" if flags & _FS_IMMUTABLE_FL else "append-only" if flags & _FS_APPEND_FL else ""


def _not_writable(path: str) -> str:
    """Why ``path`` (which exists) cannot be written by this process: a read-only file system, an
    immutable or append-only attribute (which its mode bits do not show), or its mode bits."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "is on a read-only file system"
    except OSError:
        pass
    attribute = _write_blocking_attribute(path)
    if attribute:
        flag = "i" if attribute == "immutable" else "a"
        return (f"has the {attribute} attribute (chattr +{flag}; lsattr shows it), so no user can write it "
                f"whatever its mode; chattr -{flag} clears it")
    return f"is not writable by this user (mode {stat.filemode(os.stat(path).st_mode)})"


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK | os.X_OK if os.path.isdir(path) else os.W_OK)


def _directory_problem(path: str) -> str | None:
    """Why ``path`` cannot be a data directory (it is something else, or cannot be written or made)."""
    if os.path.isdir(path):
        return None if _writable(path) else f"{path}: the data directory {_not_writable(path)}"
    if os.path.lexists(path):
        return f"{path}: the data directory is a file, not a directory"
    parent = os.path.dirname(path)
    while parent and not os.path.lexists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{path}: the data directory cannot be made: {parent} is a file, not a directory"
    if not _writable(parent):
        return f"{path}: the data directory cannot be made: {parent} {_not_writable(parent)}"
    return None


def _read_only(path: str, *, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path`` (``immutable``: for a directory this process cannot
    write, where SQLite could not make its lock files)."""
    return sqlite3.connect(f"file:{path}?mode=ro" + ("&immutable=1" if immutable else ""), uri=True, timeout=5)


def _table_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _sqlite_tables(path: str, *, immutable: bool) -> set[str]:
    conn = _read_only(path, immutable=immutable)
    try:
        return _table_names(conn)
    finally:
        conn.close()


def _quick_check(path: str) -> str:
    conn = _read_only(path)
    try:
        said = str(conn.execute("PRAGMA quick_check(1)").fetchone()[0])
        return " ".join(part.strip("* ") for part in said.splitlines() if part.strip("* "))  # one line
    finally:
        conn.close()


def _file_status(path: str, data_file: DataFile, *, directory_ok: bool, thorough: bool) -> tuple[str | None, str]:
    """(the problem with ``path`` as ``data_file``, one line naming it, or None; what it holds)."""
    if not os.path.lexists(path):
        return None, "made on first use"
    if not os.path.isfile(path):
        return f"{path}: is not a file, so it cannot hold {data_file.holds} (a SQLite database)", ""
    if not os.access(path, os.R_OK):
        return f"{path}: is not readable by this user", ""
    if directory_ok and not os.access(path, os.W_OK):
        return f"{path}: {_not_writable(path)}", ""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        return f"{path}: cannot be read: {e.strerror}", ""
    if not head:
        return None, "empty: made on first use"
    if head != SQLITE_MAGIC:
        return (f"{path}: is not a SQLite database, so {data_file.holds} cannot be read from it (move it away, "
                "or restore it from a backup)"), ""
    try:
        # Without a writable directory SQLite cannot make the files a read needs: read the main file as it is.
        tables = _sqlite_tables(path, immutable=not directory_ok)
        verdict = _quick_check(path) if thorough and directory_ok else "ok"
    except sqlite3.Error as e:
        return f"{path}: is an unreadable SQLite database ({' '.join(str(e).split())})", ""
    if verdict != "ok":
        return f"{path}: is a damaged SQLite database ({verdict})", ""
    if not tables:
        return None, "empty: made on first use"
    if not tables & set(data_file.tables):
        return (f"{path}: is a SQLite database, but it does not hold {data_file.holds} (it has none of the tables "
                f"{', '.join(data_file.tables)})"), ""
    return None, f"{len(tables)} tables"


def _chroma_problem(chroma_dir: str) -> str | None:
    """Why the Chroma directory does not open (or count its collections), if it does not."""
    if not os.path.exists(os.path.join(chroma_dir, "chroma.sqlite3")):
        return None  # nothing to open: Chroma makes it on first use
    try:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.PersistentClient(path=chroma_dir, settings=Settings(anonymized_telemetry=False,
                                                                               allow_reset=False))
        for c in client.list_collections():
            client.get_collection(c.name).count()
    except Exception as e:  # whatever Chroma raises, the directory does not open: say so, in one line
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"{chroma_dir}: Chroma does not open it ({type(e).__name__}: {detail})"
    return None


def data_dir_problems(data_dir: str, *, thorough: bool = False) -> list[str]:
    """What is wrong with ``data_dir`` as an embedded data directory, one line each naming the path:
    it is not a directory this process can write (or make), or a file pagefault keeps there is not
    what it should be. ``thorough`` (``pagefault doctor``): also run SQLite's ``quick_check`` on
    each database, open the Chroma directory, and report an import left half done; without it the
    check reads only each file's header and table list, cheap enough to run before every command."""
    return [p for p in _data_dir_statuses(os.path.abspath(os.path.expanduser(data_dir)), thorough)[0] if p]


def _data_dir_statuses(path: str, thorough: bool) -> tuple[list[str | None], dict[str, str]]:
    """(the problems of the directory at ``path`` (None where a part is fine), what each file holds by name)."""
    directory = _directory_problem(path)
    problems: list[str | None] = [directory]
    details: dict[str, str] = {}
    if not os.path.isdir(path):
        return problems, {f.name: "made on first use" for f in DATA_FILES}
    chroma_dir = os.path.join(path, CHROMA_DIR)
    if os.path.lexists(chroma_dir) and not os.path.isdir(chroma_dir):
        problems.append(f"{chroma_dir}: is a file, not Chroma's directory")
    elif os.path.isdir(chroma_dir) and directory is None and not _writable(chroma_dir):
        problems.append(f"{chroma_dir}: {_not_writable(chroma_dir)}")
    for name in LOCK_FILES:
        lock = os.path.join(path, name)
        if os.path.lexists(lock) and not os.path.isfile(lock):
            problems.append(f"{lock}: is not a file, so processes cannot take turns on it")
        elif os.path.isfile(lock) and directory is None and not os.access(lock, os.W_OK):
            problems.append(f"{lock}: {_not_writable(lock)}")
    for data_file in DATA_FILES:
        problem, details[data_file.name] = _file_status(os.path.join(path, data_file.name), data_file,
                                                        directory_ok=directory is None, thorough=thorough)
        problems.append(problem)
    if thorough and not any(problems):
        problems.append(_chroma_problem(chroma_dir))
    if thorough:
        pending = unfinished_import(path)
        journal = os.path.join(path, IMPORT_JOURNAL)
        problems.append(None if pending is None else pending if journal in pending else f"{journal}: {pending}")
    return problems, details


@dataclass(frozen=True)
class RecordCounts:
    """Records of an embedded data directory: ``archival`` records and ``recall`` entries (messages),
    every user's."""

    archival: int
    recall: int


def record_counts(data_dir: str) -> RecordCounts | None:
    """How many archival records and recall entries ``data_dir`` holds, read from its BM25 file, which has
    a row for each (its per-scope counts, kept by triggers, else a ``count(*)`` of the rows of a file made
    before them): read only, nothing loaded. None when the file is not there or cannot be read (its
    own check says why)."""
    path = os.path.join(os.path.abspath(os.path.expanduser(data_dir)), LEXICAL_FILE)
    if not os.path.isfile(path):
        return None
    try:
        conn = _read_only(path, immutable=not _writable(os.path.dirname(path)))
        try:
            tables = _table_names(conn)
            found = []
            for kind in ("archival", "recall"):
                if f"{kind}_counts" in tables:
                    found.append(int(conn.execute(f"SELECT coalesce(sum(n), 0) FROM {kind}_counts").fetchone()[0]))
                elif f"{kind}_docs" in tables:
                    found.append(int(conn.execute(f"SELECT count(*) FROM {kind}_docs").fetchone()[0]))
                else:
                    found.append(0)
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return RecordCounts(*found)


#: Set-aside inserts ``set_aside_problems`` names one by one; the rest are counted.
SET_ASIDE_NAMED = 3


def set_aside_problems(data_dir: str) -> list[str]:
    """A problem line (naming the BM25 file, where the journal keeps them) when archival inserts were set
    aside: their count, the first ``SET_ASIDE_NAMED`` with their user and error, and what to do. Nothing
    when there are none, or the file cannot be read (its own check says why)."""
    path = os.path.join(os.path.abspath(os.path.expanduser(data_dir)), LEXICAL_FILE)
    if not os.path.isfile(path):
        return []
    try:
        conn = _read_only(path, immutable=not _writable(os.path.dirname(path)))
        try:
            if SET_ASIDE_TABLE not in _table_names(conn):
                return []
            n = int(conn.execute(f"SELECT count(*) FROM {SET_ASIDE_TABLE}").fetchone()[0])
            first = conn.execute(f"SELECT rid, scope, error FROM {SET_ASIDE_TABLE} ORDER BY seq LIMIT ?",
                                 (SET_ASIDE_NAMED,)).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return _set_aside_line(path, SET_ASIDE_TABLE, n, first, "open the directory again (restart the server, or run "
                           "any pagefault command)")


def shared_set_aside_problems(database_url: str) -> list[str]:
    """``set_aside_problems`` for the replicated setup, whose journal sets inserts aside in the shared
    database (the line names it, without its password). Nothing if there are none or it cannot be read."""
    import psycopg

    try:
        with psycopg.connect(database_url, connect_timeout=int(backends.CONNECT_TIMEOUT), autocommit=True) as conn:
            if conn.execute("SELECT to_regclass(%s)", (SHARED_SET_ASIDE_TABLE,)).fetchone() in (None, (None,)):
                return []
            row = conn.execute(f"SELECT count(*) FROM {SHARED_SET_ASIDE_TABLE}").fetchone()
            first = conn.execute(f"SELECT rid, scope, error FROM {SHARED_SET_ASIDE_TABLE} ORDER BY seq LIMIT %s",
                                 (SET_ASIDE_NAMED,)).fetchall()
    except psycopg.Error:
        return []
    return _set_aside_line(backends.public_url(database_url), SHARED_SET_ASIDE_TABLE, int(row[0]) if row else 0,
                           [tuple(r) for r in first], "start a replica again")


def _set_aside_line(where: str, table: str, n: int, first: list[Any], reopen: str) -> list[str]:
    if not n:
        return []
    named = "; ".join(f"{rid} of {scope!r}: {error}" for rid, scope, error in first)
    more = f"; and {n - len(first)} more" if n > len(first) else ""
    return [f"{where}: {n} archival insert(s) set aside (table {table}) because their write failed on its own while "
            f"the others were written: {named}{more}. They are kept, not searchable: fix what the error says (often "
            f"the embedding's provider refusing the text), then {reopen}: each open tries them once more"]


def resident_estimate(counts: RecordCounts) -> int:
    """Bytes an embedded process on a directory with ``counts`` is expected to hold resident (after its
    first searches), from ``benchmarks/rss_scale.py``'s fit."""
    return EMPTY_PROCESS_BYTES + RESIDENT_BYTES_PER_RECORD * (counts.archival + counts.recall)


def scale_warnings(data_dir: str, *, limit: int = EMBEDDED_RECORD_LIMIT) -> list[str]:
    """A warning (one line naming the directory) when ``data_dir`` holds more than ``limit`` archival
    records or more than ``limit`` recall entries (``EMBEDDED_RECORD_LIMIT``, unless a caller, such as a
    test, chooses another): the counts, the resident memory every process that opens it is expected to
    take, and where to move. Nothing when it holds fewer, or its BM25 file cannot be read."""
    counts = record_counts(data_dir)
    if counts is None or max(counts.archival, counts.recall) <= limit:
        return []
    path = os.path.abspath(os.path.expanduser(data_dir))
    gib = resident_estimate(counts) / 2**30
    return [f"{path}: {counts.archival:,} archival records and {counts.recall:,} recall entries, past the {limit:,} "
            f"of either kind one embedded process holds well (benchmarks/rss_scale.py): each process that opens it "
            f"will hold about {gib:,.1f} GiB resident (recall's vectors and the BM25 postings are kept in memory); "
            "move it to a Chroma server with Postgres (PAGEFAULT_CHROMA_URL and PAGEFAULT_DATABASE_URL; README, "
            "\"Run it in production\")"]


def _resident_records(path: str, kinds: tuple[str, ...]) -> dict[str, dict[str, EmbeddingRecord]]:
    """The embedding records of a resident file, read only (as ``ResidentCatalog.records``), by kind."""
    out: dict[str, dict[str, EmbeddingRecord]] = {k: {} for k in kinds}
    if not os.path.isfile(path):
        return out
    conn = _read_only(path)
    try:
        tables = _table_names(conn)
        rows = conn.execute("SELECT kind, model, dimensions, generation, complete FROM embedding_records").fetchall() \
            if "embedding_records" in tables else []
        for kind in kinds:
            out[kind] = {n: EmbeddingRecord(m, d, g, bool(c)) for n, m, d, g, c in rows if of_kind(n, kind)}
            old = legacy_name(kind)
            if old not in out[kind] and "records" in tables and conn.execute(
                    "SELECT 1 FROM records WHERE kind = ? LIMIT 1", (old,)).fetchone():
                out[kind][old] = LEGACY
    finally:
        conn.close()
    return out


def embedding_check(data_dir: str, chroma_url: str = "") -> tuple[Check, list[str]]:
    """Which model made each tier's vectors (the collections' records), against the model this process
    would open them with (``PAGEFAULT_EMBEDDINGS``): a check, and the problems (a store this process's
    runs would be refused by, a reindex cut short). Nothing is opened for writing."""
    wanted = choice_name(None)
    where = backends.public_url(chroma_url) if chroma_url else data_dir
    try:
        records: dict[str, dict[str, EmbeddingRecord]] = {}
        if chroma_url or os.path.exists(os.path.join(data_dir, CHROMA_DIR, "chroma.sqlite3")):
            client = backends.chroma_client(chroma_url) if chroma_url else _chroma_client(os.path.join(data_dir, CHROMA_DIR))
            catalog = ChromaCatalog(client, where, url=chroma_url)
            records = {k: catalog.records(k) for k in INDEX_KINDS}
        if not chroma_url:
            records.update(_resident_records(os.path.join(data_dir, RECALL_FILE), ("recall", "recall_unit")))
            for name, rec in _resident_records(os.path.join(data_dir, ARCHIVAL_RECENT_FILE), ("archival",))["archival"].items():
                records.setdefault("archival", {}).setdefault(name, rec)
    except Exception as e:  # the store's own check reports why it does not open; here, only that it was not read
        return Check("embeddings", "collection records", where, False, f"not read: {type(e).__name__}: {e}"), []
    tiers = {k: found[1] for k in INDEX_KINDS if (found := active(records.get(k, {}))) is not None}
    process = f"this process: {wanted!r}" + (f" ({ENV})" if os.environ.get(ENV, "").strip() else " (the default)")
    if not tiers:
        return Check("embeddings", "collection records", where, True, f"recorded on first use; {process}"), []
    made = sorted({r.describe() for r in tiers.values()})
    problems = []
    if len(made) > 1:
        problems.append(f"{where}: a reindex was cut short, its tiers are embedded by different models ("
                        + ", ".join(f"{k} {r.model!r}" for k, r in tiers.items()) + "): run `pagefault reindex` again")
    elif not opens_as(wanted, next(iter(tiers.values())).model):
        problems.append(f"{where}: the store is embedded by {made[0]} and this process would use {wanted!r}: its runs "
                        f"are refused; run `pagefault reindex --embeddings {wanted}`, or set {ENV}="
                        f"{next(iter(tiers.values())).model}")
    unfinished = sorted({r.model for k in INDEX_KINDS for n, r in records.get(k, {}).items()
                         if not r.complete and r.model})
    if unfinished:
        problems.append(f"{where}: a reindex to {', '.join(map(repr, unfinished))} is unfinished (the store is whole "
                        "and still searched by its model): run `pagefault reindex` to it again to finish it")
    detail = f"{', '.join(made)}; {process}"
    if len(made) == 1 and wanted == DEFAULT and next(iter(tiers.values())).model == FORMER_DEFAULT:
        detail += (f"; {FORMER_DEFAULT!r} was the default before {DEFAULT!r}: the store is searched with it until "
                   f"`pagefault reindex --embeddings {DEFAULT}` moves it (English only until then)")
    return Check("embeddings", "collection records", where, not problems, detail), problems


def _chroma_client(chroma_dir: str) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=chroma_dir, settings=Settings(anonymized_telemetry=False, allow_reset=False))


def settings_problem() -> str | None:
    """Why the environment's ``PAGEFAULT_<FIELD>`` settings are refused (``Context()`` raises), or None."""
    try:
        Context()
    except ValueError as e:
        return f"settings: {str(e).splitlines()[0]}"
    return None


# --- the engines ----------------------------------------------------------------------------------


def _postgres(url: str) -> tuple[bool, str, set[str]]:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=int(backends.CONNECT_TIMEOUT), autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            assert row is not None  # SHOW always returns one row
            version = row[0]
            tables = {r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
        return True, f"PostgreSQL {version}", tables
    except Exception as e:
        return False, f"unreachable: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}", set()


def _tables(tables: set[str], wanted: tuple[str, ...]) -> str:
    missing = [t for t in wanted if t not in tables]
    return "tables ready" if not missing else f"tables made on first use: {', '.join(missing)}"


def _chroma_server(url: str) -> tuple[bool, str]:
    try:
        client = backends.chroma_client(url)
        client.heartbeat()
        names = sorted(c.name for c in client.list_collections() if c.name.startswith("pagefault_"))
        counts = ", ".join(f"{n[len('pagefault_'):]} {client.get_collection(n).count()}" for n in names)
        return True, f"Chroma {client.get_version()}; " + (f"records: {counts}" if names else
                                                           "collections made on first use")
    except backends.ServiceUnavailable as e:
        return False, f"unreachable: {e.detail}"
    except Exception as e:
        return False, f"unreachable: {e}"


def uses_data_dir(database_url: str, chroma_url: str) -> bool:
    """Whether a setup keeps anything in its data directory: all but Postgres with a Chroma server do."""
    return not (database_url and chroma_url)


def diagnose(data_dir: str | None = None, database_url: str | None = None,
             chroma_url: str | None = None, *, record_limit: int = EMBEDDED_RECORD_LIMIT) -> Diagnosis:
    """A check per tier, the problems and the warnings found, for explicit settings or (where None) the
    environment's: ``data_dir`` (default ``PAGEFAULT_DATA_DIR``, else ``.pagefault``), ``database_url``
    (Postgres) and ``chroma_url`` (a Chroma server). ``record_limit``: the records of either kind past
    which a data directory whose vectors live in this process is warned about (``scale_warnings``)."""
    data_dir = os.path.abspath(os.path.expanduser(data_dir or os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault")))
    db, server = backends.database_url(database_url), backends.chroma_url(chroma_url)
    problems: list[str | None] = [settings_problem()]
    details: dict[str, str] = {}
    if uses_data_dir(db, server):
        found, details = _data_dir_statuses(data_dir, thorough=True)
        problems += found

    def about(where: str) -> str | None:
        """What the first problem of ``where`` (or of the whole directory) says, without the path."""
        for prefix in (f"{where}: ", f"{where}/", f"{data_dir}: "):
            said = next((p[len(prefix):] for p in problems if p and p.startswith(prefix)), None)
            if said is not None:
                return said
        return None

    def local(data_file: DataFile) -> tuple[str, bool, str]:
        where = os.path.join(data_dir, data_file.name)
        said = about(where)
        return where, said is None, said or details.get(data_file.name, "made on first use")

    files = {f.name: f for f in DATA_FILES}
    checks: list[Check] = []
    pg_ok, pg_detail, tables = _postgres(db) if db else (False, "", set())
    if db:
        where = backends.public_url(db)
        checks.append(Check("threads + core memory", backends.POSTGRES, where, pg_ok,
                            pg_detail + ("; " + _tables(tables, LANGGRAPH_TABLES) if pg_ok else "")))
    else:
        for name in ("checkpoints.sqlite", "store.sqlite"):
            checks.append(Check(files[name].tier, "SQLite", *local(files[name])))
    if server:
        ok, detail = _chroma_server(server)
        checks.append(Check("archival + recall", backends.CHROMA, backends.public_url(server), ok, detail))
        if db:
            lexical = tuple(f"pagefault_lexical_{k}" for k in INDEX_KINDS)
            checks.append(Check("BM25 index", backends.POSTGRES, backends.public_url(db), pg_ok,
                                pg_detail + ("; " + _tables(tables, lexical) if pg_ok else "")))
    else:
        chroma_dir = os.path.join(data_dir, CHROMA_DIR)
        said = about(chroma_dir)
        checks.append(Check("archival", "Chroma (embedded)", chroma_dir, said is None,
                            said or ("opens" if os.path.isdir(chroma_dir) else "made on first use")))
        checks.append(Check(files[ARCHIVAL_RECENT_FILE].tier, "SQLite + numpy", *local(files[ARCHIVAL_RECENT_FILE])))
        checks.append(Check(files[RECALL_FILE].tier, "SQLite + numpy", *local(files[RECALL_FILE])))
    if not (server and db):
        checks.append(Check("BM25 index", "SQLite", *local(files[LEXICAL_FILE])))
    if not any(problems) or server:  # a directory whose files are wrong is reported as such first
        embeddings, mixed = embedding_check(data_dir, server)
        checks.append(embeddings)
        problems += mixed
    lexical_file = os.path.join(data_dir, LEXICAL_FILE)  # the embedded journal's file, unless it has a problem
    if not server and not any(p and p.startswith(lexical_file) for p in problems):
        problems += set_aside_problems(data_dir)
    elif server and db and pg_ok:
        problems += shared_set_aside_problems(db)
    # Where the vectors live in this process (embedded, Postgres-only), their number bounds it.
    warnings = scale_warnings(data_dir, limit=record_limit) \
        if not server and about(os.path.join(data_dir, LEXICAL_FILE)) is None else []
    return Diagnosis(checks, [p for p in problems if p], warnings)


def setup_name(checks: list[Check]) -> str:
    engines = {c.engine for c in checks}
    if backends.CHROMA in engines and backends.POSTGRES in engines:
        return "Postgres + Chroma server (replicas share every tier)"
    if backends.POSTGRES in engines:
        return "Postgres-only (threads and core memory shared; vectors and BM25 files local to one process)"
    if backends.CHROMA in engines:
        return "Chroma server with local SQLite (one replica)"
    return "embedded (one process)"


def report(diagnosis: Diagnosis) -> str:
    """The diagnosis as text: a line per tier, a ``problem:`` line per problem (each naming the file or
    setting), a ``warning:`` line per warning, then a summary line (``all reachable`` when there is
    nothing to fix, followed by the number of warnings if any)."""
    checks = diagnosis.checks
    down = dict.fromkeys(c.engine for c in checks if not c.ok and c.engine in (backends.POSTGRES, backends.CHROMA))
    summary = [f"unreachable: {', '.join(down)}"] if down else []
    if diagnosis.problems:
        summary.append(f"{len(diagnosis.problems)} problem(s) to fix")
    said = "; ".join(summary) or "all reachable"
    if diagnosis.warnings:
        said += f"; {len(diagnosis.warnings)} warning(s)"
    lines = [f"pagefault doctor: {setup_name(checks)}", *(c.line() for c in checks),
             *(f"problem: {p}" for p in diagnosis.problems), *(f"warning: {w}" for w in diagnosis.warnings), said]
    return "\n".join(lines)


def as_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis as JSON: the setup, ``ok``, each check, the problems and the warnings."""
    return {"setup": setup_name(diagnosis.checks), "ok": diagnosis.ok, "checks": [asdict(c) for c in diagnosis.checks],
            "problems": diagnosis.problems, "warnings": diagnosis.warnings}
