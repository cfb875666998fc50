"""What the memory runs on, and whether each engine answers (``pagefault doctor``).

Reads the same settings a run does (``PAGEFAULT_DATABASE_URL``, ``PAGEFAULT_CHROMA_URL``,
``PAGEFAULT_DATA_DIR``, or explicit values) and checks each tier where it lives: threads and core
memory, archival and recall vectors, and their BM25 index. Nothing is created or changed; a table
that is missing is reported as made on first use.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from pagefault.engines import connections as backends

LANGGRAPH_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs", "store")
INDEX_KINDS = ("archival", "recall", "recall_unit")


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


def _sqlite(path: str) -> tuple[bool, str]:
    if not os.path.exists(path):
        return True, "made on first use"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            n = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        finally:
            conn.close()
        return True, f"{n} tables"
    except sqlite3.Error as e:
        return False, f"unreadable: {e}"


def diagnose(data_dir: str | None = None, database_url: str | None = None,
             chroma_url: str | None = None) -> list[Check]:
    """A check per tier, for explicit settings or (where None) the environment's."""
    data_dir = os.path.abspath(os.path.expanduser(data_dir or os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault")))
    db, server = backends.database_url(database_url), backends.chroma_url(chroma_url)
    checks: list[Check] = []
    pg_ok, pg_detail, tables = _postgres(db) if db else (False, "", set())
    if db:
        where = backends.public_url(db)
        checks.append(Check("threads + core memory", backends.POSTGRES, where, pg_ok,
                            pg_detail + ("; " + _tables(tables, LANGGRAPH_TABLES) if pg_ok else "")))
    else:
        for tier, name in (("threads", "checkpoints.sqlite"), ("core memory", "store.sqlite")):
            ok, detail = _sqlite(os.path.join(data_dir, name))
            checks.append(Check(tier, "SQLite", os.path.join(data_dir, name), ok, detail))
    if server:
        ok, detail = _chroma_server(server)
        checks.append(Check("archival + recall", backends.CHROMA, backends.public_url(server), ok, detail))
        if db:
            lexical = tuple(f"pagefault_lexical_{k}" for k in INDEX_KINDS)
            checks.append(Check("BM25 index", backends.POSTGRES, backends.public_url(db), pg_ok,
                                pg_detail + ("; " + _tables(tables, lexical) if pg_ok else "")))
    else:
        chroma_dir = os.path.join(data_dir, "chroma")
        checks.append(Check("archival", "Chroma (embedded)", chroma_dir, True,
                            "directory present" if os.path.isdir(chroma_dir) else "made on first use"))
        recent = os.path.join(data_dir, "archival_recent.sqlite")  # ``services.ARCHIVAL_RECENT_FILE``
        ok, detail = _sqlite(recent)
        checks.append(Check("archival, recent writes", "SQLite + numpy", recent, ok, detail))
        recall = os.path.join(data_dir, "recall.sqlite")  # ``pagefault.stores.services.RECALL_FILE``
        ok, detail = _sqlite(recall)
        checks.append(Check("recall vectors", "SQLite + numpy", recall, ok, detail))
    if not (server and db):
        ok, detail = _sqlite(os.path.join(data_dir, "lexical.sqlite"))
        checks.append(Check("BM25 index", "SQLite", os.path.join(data_dir, "lexical.sqlite"), ok, detail))
    return checks


def setup_name(checks: list[Check]) -> str:
    engines = {c.engine for c in checks}
    if backends.CHROMA in engines and backends.POSTGRES in engines:
        return "Postgres + Chroma server (replicas share every tier)"
    if backends.POSTGRES in engines:
        return "Postgres-only (threads and core memory shared; vectors and BM25 files local to one process)"
    if backends.CHROMA in engines:
        return "Chroma server with local SQLite (one replica)"
    return "embedded (one process)"


def report(checks: list[Check]) -> str:
    down = [c for c in checks if not c.ok]
    lines = [f"pagefault doctor: {setup_name(checks)}", *(c.line() for c in checks),
             "all reachable" if not down else f"unreachable: {', '.join(dict.fromkeys(c.engine for c in down))}"]
    return "\n".join(lines)


def as_json(checks: list[Check]) -> dict[str, Any]:
    return {"setup": setup_name(checks), "ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]}
