"""Recall's vectors on the embedded setup: SQLite on disk, a numpy matrix in memory.

Conversation recall writes every turn; archival writes only what the agent chooses to keep. Chroma's
embedded client holds the GIL for the whole of a write (its maintainers freed it for reads only), so
on the embedded setup every recall write stopped the turn running beside it: the recall writer's
Chroma upserts were most of the work behind a turn, and the compaction that waits for them set the
per-turn p95. This collection stores the same records in SQLite, whose calls let go of the GIL, and
searches an in-memory matrix with numpy (exact cosine, brute force: ~2 ms per 10k records here).

It answers the part of Chroma's ``Collection`` API that ``HybridIndex`` and the tools around it use
(``upsert``, ``update``, ``get``, ``query``, ``delete``, ``count``; ``where`` with ``$and``, ``$or``
and the comparison operators), with Chroma's result shapes, so recall code does not know which one
it has. A Chroma server (replicas) keeps recall in Chroma, where every host sees it.

Brute force grows with the thread history: about 2 ms per 10k messages, so recall past a few
hundred thousand messages on one embedded directory is better served by a Chroma server.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pagefault.stores.index.embedding_record import LEGACY, EmbeddingRecord, legacy_name, of_kind

#: Rows the matrix grows by when full (it doubles beyond this).
_GROW = 4_096
#: Vector changes kept in the log for other processes to catch up from, and writes between prunings.
LOG_KEEP = 50_000
PRUNE_EVERY = 500
_OPS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _normalized(vectors: Any) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array of vectors, got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.clip(norms, 1e-12, None)


def where_sql(where: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """A Chroma ``where`` filter as an SQL condition over the JSON ``metadata`` column."""
    if not isinstance(where, Mapping) or not where:
        raise ValueError(f"unsupported where filter: {where!r}")
    if len(where) > 1:  # {"a": 1, "b": 2} means both
        return where_sql({"$and": [{k: v} for k, v in where.items()]})
    (key, value), = where.items()
    if key in ("$and", "$or"):
        if not isinstance(value, Sequence) or not value:
            raise ValueError(f"{key} needs a non-empty list of filters")
        parts = [where_sql(w) for w in value]
        glue = " AND " if key == "$and" else " OR "
        return "(" + glue.join(p for p, _ in parts) + ")", [a for _, args in parts for a in args]
    if key.startswith("$"):
        raise ValueError(f"unsupported where operator: {key}")
    field = "json_extract(metadata, ?)"
    path = '$."' + key.replace('"', '""') + '"'
    if not isinstance(value, Mapping):
        value = {"$eq": value}
    (op, operand), = value.items()
    if op in _OPS:
        return f"{field} {_OPS[op]} ?", [path, _sql_value(operand)]
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str) or not operand:
            raise ValueError(f"{op} needs a non-empty list")
        marks = ", ".join("?" for _ in operand)
        neg = "NOT " if op == "$nin" else ""
        return f"{field} {neg}IN ({marks})", [path, *(_sql_value(v) for v in operand)]
    raise ValueError(f"unsupported where operator: {op}")


def _sql_value(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (str, int, float)):
        return v
    raise ValueError(f"where values must be str, int, float or bool, got {type(v).__name__}")


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    # As the BM25 file beside it: durable across a crash of the process; after a power loss the last
    # writes may be missing, and ``RecallIndex.rebuild`` re-derives them from the checkpoints.
    db.execute("PRAGMA synchronous=NORMAL")
    _schema(db)
    return db


def _schema(db: sqlite3.Connection) -> None:
    """The file's tables: the records, notes of what was done per collection, the log of vector changes
    (so a process sees what another one wrote to the same file) and each collection's embedding record."""
    db.execute("CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, id TEXT NOT NULL, "
               "document TEXT, metadata TEXT NOT NULL, embedding BLOB NOT NULL, PRIMARY KEY (kind, id))")
    db.execute("CREATE TABLE IF NOT EXISTS notes (kind TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (kind, key))")
    db.execute("CREATE TABLE IF NOT EXISTS records_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
               "kind TEXT NOT NULL, id TEXT NOT NULL, added INTEGER NOT NULL)")
    for event, row, added in (("INSERT", "new", 1), ("UPDATE OF embedding", "new", 1), ("DELETE", "old", 0)):
        name = "records_log_" + event.split()[0].lower()
        db.execute(f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON records BEGIN INSERT INTO "
                   f"records_log(kind, id, added) VALUES ({row}.kind, {row}.id, {added}); END")
    db.execute("CREATE TABLE IF NOT EXISTS embedding_records (kind TEXT PRIMARY KEY, model TEXT NOT NULL, "
               "dimensions INTEGER NOT NULL, generation INTEGER NOT NULL, complete INTEGER NOT NULL)")


class ResidentCollection:
    """One named collection: rows in SQLite (``kind`` column), unit vectors in a resident matrix."""

    def __init__(self, path: str, name: str) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._db = _connect(path)
        self._rows: dict[str, int] = {}
        self._ids: list[str] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._seq = 0  # last log entry reflected in memory
        self._version = -1  # ``PRAGMA data_version`` when memory was last brought up to the file
        self._writes = 0
        self._load()

    def _load(self) -> None:
        """Read every vector of this collection (under the lock, or before others can see self)."""
        self._db.execute("BEGIN")
        try:
            self._seq = self._db.execute("SELECT coalesce(max(seq), 0) FROM records_log").fetchone()[0]
            rows = self._db.execute("SELECT id, embedding FROM records WHERE kind = ? ORDER BY rowid",
                                    (self.name,)).fetchall()
        finally:
            self._db.execute("COMMIT")
        self._version = self._db.execute("PRAGMA data_version").fetchone()[0]
        self._ids = [i for i, _ in rows]
        self._rows = {i: n for n, i in enumerate(self._ids)}
        self._matrix = _normalized(np.vstack([np.frombuffer(b, dtype=np.float32) for _, b in rows])) if rows else \
            np.zeros((0, self._matrix.shape[1]), dtype=np.float32)

    def _fresh(self) -> None:
        """Bring memory up to commits other connections made since (under the lock)."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return
        self._version = version
        self._db.execute("BEGIN")  # one snapshot: the changes and the log position they reach
        try:
            changes = self._db.execute("SELECT seq, id, added FROM records_log WHERE seq > ? AND kind = ? "
                                       "ORDER BY seq", (self._seq, self.name)).fetchall()
            # Two queries: SQLite answers a lone max() or min() from the key, but both in one SELECT by
            # reading every row of the log (2.5 ms at 50k rows, at each other connection's commit).
            last = (self._db.execute("SELECT coalesce(max(seq), 0) FROM records_log").fetchone()[0],
                    self._db.execute("SELECT coalesce(min(seq), 0) FROM records_log").fetchone()[0])
        finally:
            self._db.execute("COMMIT")
        if last[1] > self._seq + 1:  # entries this process had not read were pruned
            self._load()
            return
        self._seq = last[0]
        if not changes:
            return
        final = {i: a for _, i, a in changes}  # the last change of each id decides
        gone = [i for i, a in final.items() if not a and i in self._rows]
        if gone:
            self._drop(set(gone))
        got = self._by_id("id, embedding", [i for i, a in final.items() if a])
        if got:
            self._place([i for i, _ in got], _normalized(np.vstack([np.frombuffer(b, dtype=np.float32) for _, b in got])))

    def _by_id(self, columns: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``columns`` of the stored records among ``ids``, in chunks SQLite's parameter limit allows."""
        wanted = list(dict.fromkeys(ids))
        rows: list[tuple[Any, ...]] = []
        for k in range(0, len(wanted), 500):
            part = wanted[k:k + 500]
            rows += self._db.execute(f"SELECT {columns} FROM records WHERE kind = ? AND id IN "
                                     f"({', '.join('?' * len(part))})", [self.name, *part]).fetchall()
        return rows

    def _write(self, statements: Callable[[sqlite3.Connection], object]) -> None:
        """Run ``statements(db)`` in one transaction (under the lock); memory follows the caller."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            before = self._db.execute("SELECT coalesce(max(seq), 0) FROM records_log").fetchone()[0]
            statements(self._db)
            after = self._db.execute("SELECT coalesce(max(seq), 0) FROM records_log").fetchone()[0]
            self._writes += 1
            if self._writes % PRUNE_EVERY == 0:
                self._db.execute("DELETE FROM records_log WHERE seq <= ?", (after - LOG_KEEP,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        if before == self._seq:  # nobody else wrote since memory caught up: it is current with ours
            self._seq = after

    def _drop(self, doomed: set[str]) -> None:
        keep = [n for n, i in enumerate(self._ids) if i not in doomed]
        self._matrix = self._matrix[keep].copy()
        self._ids = [self._ids[n] for n in keep]
        self._rows = {i: n for n, i in enumerate(self._ids)}

    # -- writes ---------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], embeddings: Any, metadatas: Sequence[Mapping[str, Any]] | None = None,
               documents: Sequence[str | None] | None = None) -> None:
        ids = list(ids)
        vecs = _normalized(embeddings)
        metas = list(metadatas) if metadatas is not None else [{}] * len(ids)
        docs = list(documents) if documents is not None else [None] * len(ids)
        if not (len(ids) == len(vecs) == len(metas) == len(docs)):
            raise ValueError("ids, embeddings, metadatas and documents must have the same length")
        if len(set(ids)) != len(ids):
            raise ValueError("ids must be unique within one upsert")
        rows = [(self.name, i, d, json.dumps(dict(m or {}), ensure_ascii=False), v.tobytes())
                for i, d, m, v in zip(ids, docs, metas, vecs)]
        with self._lock:
            self._fresh()
            self._write(lambda db: db.executemany(
                "INSERT INTO records (kind, id, document, metadata, embedding) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document, "
                "metadata = excluded.metadata, embedding = excluded.embedding", rows))
            self._place(ids, vecs)

    def _place(self, ids: list[str], vecs: np.ndarray) -> None:
        """Put vectors in the matrix (caller holds the lock): overwrite known ids, append new ones.
        A reader may hold the old matrix; appending into spare rows never moves the rows it sees."""
        if self._matrix.shape[1] == 0 and len(vecs):
            self._matrix = np.zeros((0, vecs.shape[1]), dtype=np.float32)
        if len(vecs) and vecs.shape[1] != self._matrix.shape[1]:
            raise ValueError(f"embeddings have {vecs.shape[1]} dimensions; this collection holds {self._matrix.shape[1]}")
        new = [n for n, i in enumerate(ids) if i not in self._rows]
        need = len(self._ids) + len(new)
        if need > len(self._matrix):
            grown = np.zeros((max(need, 2 * len(self._matrix), _GROW), self._matrix.shape[1]), dtype=np.float32)
            grown[:len(self._ids)] = self._matrix[:len(self._ids)]
            self._matrix = grown
        for n, i in enumerate(ids):
            row = self._rows.get(i)
            if row is None:
                row = self._rows[i] = len(self._ids)
                self._ids.append(i)
            self._matrix[row] = vecs[n]

    def update(self, ids: Sequence[str], metadatas: Sequence[Mapping[str, Any]] | None = None,
               documents: Sequence[str] | None = None, embeddings: Any = None) -> None:
        """Replace the given fields of stored records (unknown ids are ignored, as Chroma does)."""
        ids = list(ids)
        vecs = _normalized(embeddings) if embeddings is not None else None

        def statements(db: sqlite3.Connection) -> None:
            if metadatas is not None:
                db.executemany("UPDATE records SET metadata = ? WHERE kind = ? AND id = ?",
                               [(json.dumps(dict(m or {}), ensure_ascii=False), self.name, i)
                                for i, m in zip(ids, metadatas)])
            if documents is not None:
                db.executemany("UPDATE records SET document = ? WHERE kind = ? AND id = ?",
                               [(d, self.name, i) for i, d in zip(ids, documents)])
            if vecs is not None:
                db.executemany("UPDATE records SET embedding = ? WHERE kind = ? AND id = ?",
                               [(vecs[n].tobytes(), self.name, i) for n, i in enumerate(ids)])

        with self._lock:
            self._fresh()
            self._write(statements)
            if vecs is not None:
                known = [(n, i) for n, i in enumerate(ids) if i in self._rows]
                self._place([i for _, i in known], vecs[[n for n, _ in known]])

    def delete(self, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._fresh()
            doomed = set(ids or [])
            if where:
                doomed |= set(self._select_ids(where))
            doomed &= set(self._rows)
            if not doomed:
                return
            self._write(lambda db: db.executemany("DELETE FROM records WHERE kind = ? AND id = ?",
                                                  [(self.name, i) for i in doomed]))
            self._drop(doomed)

    def note(self, key: str) -> None:
        """Remember that something was done for this collection (``noted``), across processes."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO notes VALUES (?, ?)", (self.name, key))

    def noted(self, key: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM notes WHERE kind = ? AND key = ?", (self.name, key)).fetchone() is not None

    # -- reads ----------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            self._fresh()
            return len(self._rows)

    def _select_ids(self, where: Mapping[str, Any], limit: int | None = None, offset: int | None = None) -> list[str]:
        cond, args = where_sql(where)
        sql = f"SELECT id FROM records WHERE kind = ? AND {cond} ORDER BY rowid"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            args = [*args, -1 if limit is None else int(limit), int(offset or 0)]
        with self._lock:
            return [r[0] for r in self._db.execute(sql, [self.name, *args])]

    def _fetch(self, ids: Sequence[str], include: Sequence[str]) -> dict[str, Any]:
        """Chroma's ``get`` result for ``ids`` that exist, in the order given."""
        out: dict[str, Any] = {"ids": [], "documents": None, "metadatas": None, "embeddings": None,
                               "included": list(include)}
        want_doc, want_meta, want_emb = "documents" in include, "metadatas" in include, "embeddings" in include
        with self._lock:
            found = {id_: (doc, json.loads(meta)) for id_, doc, meta in self._by_id("id, document, metadata", ids)}
            if want_emb:
                self._fresh()
            hits = [i for i in ids if i in found and (not want_emb or i in self._rows)]
            vecs = [self._matrix[self._rows[i]].copy() for i in hits] if want_emb else None
        out["ids"] = hits
        if want_doc:
            out["documents"] = [found[i][0] for i in hits]
        if want_meta:
            out["metadatas"] = [found[i][1] or None for i in hits]
        if want_emb:
            out["embeddings"] = (np.asarray(vecs, dtype=np.float32) if hits
                                 else np.zeros((0, self._matrix.shape[1]), dtype=np.float32))
        return out

    def get(self, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None,
            limit: int | None = None, offset: int | None = None,
            include: Sequence[str] = ("documents", "metadatas")) -> dict[str, Any]:
        if ids is not None:
            chosen = list(ids)
            if where:
                allowed = set(self._select_ids(where))
                chosen = [i for i in chosen if i in allowed]
            chosen = chosen[int(offset or 0):][:limit] if (limit is not None or offset) else chosen
        elif where:
            chosen = self._select_ids(where, limit, offset)
        else:
            with self._lock:
                self._fresh()
                chosen = list(self._ids)
            chosen = chosen[int(offset or 0):][:limit] if (limit is not None or offset) else chosen
        return self._fetch(chosen, include)

    def query(self, query_embeddings: Any, n_results: int = 10, where: Mapping[str, Any] | None = None,
              include: Sequence[str] = ("documents", "metadatas", "distances")) -> dict[str, Any]:
        """The ``n_results`` nearest by cosine distance (1 - cosine), nearest first, per query vector."""
        queries = _normalized(query_embeddings)
        with self._lock:
            self._fresh()
            matrix, ids = self._matrix[:len(self._ids)], list(self._ids)
        rows = np.arange(len(ids))
        if where:
            allowed = set(self._select_ids(where))
            rows = np.asarray([n for n, i in enumerate(ids) if i in allowed], dtype=np.int64)
        out: dict[str, Any] = {k: [] for k in ("ids", "distances", "documents", "metadatas")}
        for q in queries:
            if q.shape[0] != matrix.shape[1] and len(rows):
                raise ValueError(f"query has {q.shape[0]} dimensions; this collection holds {matrix.shape[1]}")
            # einsum, not ``matrix @ q``: OpenBLAS runs a matrix-vector product on worker threads that
            # then spin for a while, waiting for more. On two cores that took ~20 ms of CPU per turn
            # from the turn and the writers, and made every kind of turn slower as recall grew.
            # Scoring every row and picking the allowed ones also spares copying the allowed rows.
            sims = np.einsum("ij,j->i", matrix, q)[rows] if len(rows) else np.zeros(0, dtype=np.float32)
            k = min(int(n_results), len(sims))
            top = np.argpartition(-sims, k - 1)[:k] if 0 < k < len(sims) else np.arange(len(sims))
            top = top[np.argsort(-sims[top], kind="stable")][:k]
            got_ids = [ids[rows[t]] for t in top]
            out["ids"].append(got_ids)
            out["distances"].append([float(1.0 - sims[t]) for t in top])
            if "documents" in include or "metadatas" in include:
                got = self._fetch(got_ids, include)
                out["documents"].append(got["documents"])
                out["metadatas"].append(got["metadatas"])
        for key in ("documents", "metadatas", "distances"):
            if key not in include:
                out[key] = None
        return out


class ResidentCatalog:
    """The collections of one resident file and their embedding records (``embedding_record``).

    ``elsewhere``: names of old collections whose records are still in Chroma and will be copied into
    this file when opened (an embedded directory from before recall left Chroma): they count as the
    offline model's until the copy is noted done."""

    def __init__(self, path: str, *, elsewhere: frozenset[str] = frozenset()) -> None:
        self.path = path
        self.elsewhere = elsewhere
        self._db = _connect(path)

    @property
    def where(self) -> str:
        """The file."""
        return self.path

    def records(self, kind: str) -> dict[str, EmbeddingRecord]:
        """Every collection of ``kind`` in the file; the old one without a record, if it holds records
        (here, or in Chroma not yet copied), as ``LEGACY``."""
        out = {name: EmbeddingRecord(model, dims, gen, bool(done))
               for name, model, dims, gen, done in self._db.execute(
                   "SELECT kind, model, dimensions, generation, complete FROM embedding_records")
               if of_kind(name, kind)}
        old = legacy_name(kind)
        if old not in out and (self.count(old) or (old in self.elsewhere and self._db.execute(
                "SELECT 1 FROM notes WHERE kind = ? AND key = 'copied from chroma'", (old,)).fetchone() is None)):
            out[old] = LEGACY
        return out

    def write_record(self, name: str, record: EmbeddingRecord) -> None:
        """Set the record of collection ``name`` (a collection here is its rows: none are made)."""
        self._db.execute("INSERT OR REPLACE INTO embedding_records VALUES (?, ?, ?, ?, ?)",
                         (name, record.model, record.dimensions, record.generation, int(record.complete)))

    def count(self, name: str) -> int:
        """Records of collection ``name`` in the file."""
        return int(self._db.execute("SELECT count(*) FROM records WHERE kind = ?", (name,)).fetchone()[0])

    def drop(self, name: str) -> None:
        """Delete collection ``name``'s records and its record, in one transaction (its notes stay)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("DELETE FROM records WHERE kind = ?", (name,))
            self._db.execute("DELETE FROM embedding_records WHERE kind = ?", (name,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the file's connection."""
        self._db.close()
