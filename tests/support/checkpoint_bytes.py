"""How many bytes a thread's checkpoints take in a checkpointer's tables: SQLite (``checkpoints`` and
``writes``) and Postgres (``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg


def sqlite_bytes(path: str | Path, thread_id: str | None = None) -> int:
    """The bytes of ``thread_id``'s checkpoints and writes (every thread's: None) in a SqliteSaver file:
    the stored checkpoint, metadata and write values."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    where, args = ("WHERE thread_id = ?", (thread_id,)) if thread_id else ("", ())
    try:
        a = conn.execute(f"SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints {where}",
                         args).fetchone()[0]
        b = conn.execute(f"SELECT coalesce(sum(length(value)), 0) FROM writes {where}", args).fetchone()[0]
        return int(a + b)
    finally:
        conn.close()


def postgres_bytes(url: str, thread_id: str | None = None) -> int:
    """The same for a PostgresSaver database: the stored size (``pg_column_size``, after any TOAST
    compression) of checkpoints and metadata, channel blobs and writes."""
    where, args = ("WHERE thread_id = %s", (thread_id,)) if thread_id else ("", ())
    with psycopg.connect(url) as conn:
        a = conn.execute("SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) "
                         f"FROM checkpoints {where}", args).fetchone()[0]
        b = conn.execute(f"SELECT coalesce(sum(pg_column_size(blob)), 0) FROM checkpoint_blobs {where}", args).fetchone()[0]
        c = conn.execute(f"SELECT coalesce(sum(pg_column_size(blob)), 0) FROM checkpoint_writes {where}", args).fetchone()[0]
    return int(a + b + c)
