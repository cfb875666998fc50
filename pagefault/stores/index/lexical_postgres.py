"""The BM25 shadow index in Postgres, for replicas that share one Chroma server.

Same surface as ``LexicalIndex`` (SQLite FTS5): each replica keeping its own SQLite file would see
only the records it wrote itself. Text is split and stemmed by Postgres' ``english`` text search
configuration; scoring is Okapi BM25 (k1 = 1.2, b = 0.75) computed in SQL from a postings table
(``<table>_postings``: one row per record and term, with the term's frequency, keyed by scope and
term), so a query reads the postings of its own terms rather than every matching record's whole
term vector (which had made a search of 850 three-turn recall units take 141 ms). Document counts,
lengths and frequencies are taken within the scope, so one user's memory never shifts another's
scores. Writes are ``INSERT ... ON CONFLICT`` on the record
id, so replicas writing the same record at once converge on one row.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Iterable, Mapping, Sequence

from pagefault.engines.connections import postgres_connection
from pagefault.engines.locks import locks_for
from pagefault.stores.index.lexical_sqlite import LexicalDoc
from pagefault.stores.validity import ValidityFilter

log = logging.getLogger(__name__)

K1, B = 1.2, 0.75
#: Characters of a document given to the tokenizer (a tsvector holds at most 1 MB).
MAX_TOKENIZED_CHARS = 200_000

_ready: set[tuple[str, str]] = set()
_ready_lock = threading.Lock()


#: The postings of the records of table ``{t}`` whose ids are in the array parameter (None: every record).
_POSTINGS_OF = ("SELECT d.scope, u.lexeme, d.id, coalesce(array_length(u.positions, 1), 1)"
                " FROM {t} d CROSS JOIN LATERAL unnest(d.terms) u WHERE %s::text[] IS NULL OR d.id = ANY(%s::text[])")


def _clean(text: str) -> str:
    return text.replace("\x00", "\ufffd")  # Postgres text cannot hold NUL


class PostgresLexicalIndex:
    """One table per ``kind`` (archival, recall, ...) in the database at ``url``; made on first use.

    It keeps no fact keys and filters no ids for a vector search: ``fact_keys_complete``,
    ``fact_records`` and ``matching`` answer None ("not supported"), ``can_match`` is False, and
    callers read the vectors instead (see ``stores.index.protocols.LexicalBackend``)."""

    #: ``matching`` is not supported here: a round trip to the database per vector search would
    #: cost what filtering in Chroma saves.
    can_match = False

    def __init__(self, url: str, kind: str) -> None:
        if not re.fullmatch(r"[a-z_]+", kind):
            raise ValueError(f"bad index kind {kind!r}")
        self.url = url
        self.kind = kind
        self.table = f"pagefault_lexical_{kind}"
        self.postings = f"{self.table}_postings"
        self._setup()

    def _setup(self) -> None:
        with _ready_lock:
            if (self.url, self.kind) in _ready:
                return
            t = self.table
            # Replicas starting together must not race on CREATE ... IF NOT EXISTS (it is not atomic).
            with locks_for(self.url).hold("setup", t, timeout=60), postgres_connection(self.url) as conn:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {t} (id text PRIMARY KEY, scope text NOT NULL,"
                    " thread_id text NOT NULL, created_at double precision NOT NULL, tags text[] NOT NULL,"
                    " text text NOT NULL, terms tsvector NOT NULL, lexemes text[] NOT NULL, len integer NOT NULL)"
                )
                conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_scope ON {t} (scope, thread_id)")
                conn.execute(f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS valid_from double precision,"
                             " ADD COLUMN IF NOT EXISTS valid_to double precision,"
                             " ADD COLUMN IF NOT EXISTS superseded boolean NOT NULL DEFAULT false")
                conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_lexemes ON {t} USING gin (lexemes)")
                p = self.postings
                had = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS had", (p,)).fetchone()["had"]
                conn.execute(f"CREATE TABLE IF NOT EXISTS {p} (scope text NOT NULL, lexeme text NOT NULL,"
                             f" id text NOT NULL REFERENCES {t} (id) ON DELETE CASCADE, tf real NOT NULL,"
                             " PRIMARY KEY (scope, lexeme, id))")
                conn.execute(f"CREATE INDEX IF NOT EXISTS {p}_id ON {p} (id)")
                if not had:  # a table written before the postings: derived from its term vectors, once
                    rows = conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"]
                    if rows:
                        log.warning("deriving the BM25 postings of %s records in %s (once; one statement)", rows, t)
                    conn.execute(f"INSERT INTO {p} (scope, lexeme, id, tf) {_POSTINGS_OF.format(t=t)} ON CONFLICT DO NOTHING",
                                 (None, None))
            _ready.add((self.url, self.kind))

    def upsert(self, docs: Iterable[LexicalDoc]) -> None:
        rows = [(d.id, d.scope, d.thread_id, float(d.created_at), list(d.tags), _clean(d.text), d.valid_from,
                 d.valid_to, bool(d.superseded), _clean(d.text[:MAX_TOKENIZED_CHARS])) for d in docs]
        if not rows:
            return
        t = self.table
        with postgres_connection(self.url) as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {t} (id, scope, thread_id, created_at, tags, text, valid_from, valid_to, superseded,"
                " terms, lexemes, len)"
                " SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, v, tsvector_to_array(v),"
                " coalesce((SELECT sum(coalesce(array_length(u.positions, 1), 1)) FROM unnest(v) u), 0)"
                " FROM to_tsvector('english', %s) AS v"
                " ON CONFLICT (id) DO UPDATE SET scope = excluded.scope, thread_id = excluded.thread_id,"
                " created_at = excluded.created_at, tags = excluded.tags, text = excluded.text,"
                " valid_from = excluded.valid_from, valid_to = excluded.valid_to, superseded = excluded.superseded,"
                " terms = excluded.terms, lexemes = excluded.lexemes, len = excluded.len",
                rows,
            )
            # The rows' postings follow their terms, in the same transaction (the upsert above holds
            # each row's lock, so two replicas writing one record take turns here too).
            ids = [r[0] for r in rows]
            cur.execute(f"DELETE FROM {self.postings} WHERE id = ANY(%s)", (ids,))
            cur.execute(f"INSERT INTO {self.postings} (scope, lexeme, id, tf) {_POSTINGS_OF.format(t=t)}"
                        " ON CONFLICT (scope, lexeme, id) DO UPDATE SET tf = excluded.tf", (ids, ids))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            with postgres_connection(self.url) as conn:
                conn.execute(f"DELETE FROM {self.table} WHERE id = ANY(%s)", (list(ids),))

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
        """(id, BM25 score; higher is better) of docs in ``scope`` matching any query term, filters first."""
        filters, args = ["d.scope = %(scope)s"], {"scope": scope, "query": _clean(query[:MAX_TOKENIZED_CHARS]),
                                                  "limit": int(limit), "k1": K1, "b": B}
        if thread_id is not None:
            filters.append("d.thread_id = %(thread)s")
            args["thread"] = thread_id
        if tags:
            filters.append("d.tags @> %(tags)s")
            args["tags"] = list(tags)
        if start is not None:
            filters.append("d.created_at >= %(start)s")
            args["start"] = float(start)
        if end is not None:
            filters.append("d.created_at <= %(end)s")
            args["end"] = float(end)
        if validity is not None and validity.as_of is not None:
            filters.append("coalesce(d.valid_from, d.created_at) <= %(as_of)s"
                           " AND coalesce(d.valid_to, 'infinity') > %(as_of)s")
            args["as_of"] = float(validity.as_of)
        elif validity is not None and validity.current_only:
            filters.append("NOT d.superseded")
        t, where = self.table, " AND ".join(filters)
        p = self.postings
        sql = f"""
            WITH q AS MATERIALIZED (SELECT coalesce(array_agg(DISTINCT lexeme), '{{}}') AS terms
                                    FROM unnest(to_tsvector('english', %(query)s))),
            scoped AS MATERIALIZED (SELECT count(*)::float8 AS n, coalesce(avg(len), 0)::float8 AS avgdl
                       FROM {t} d WHERE d.scope = %(scope)s),
            hits AS (SELECT h.id, h.lexeme, h.tf::float8 AS tf FROM {p} h
                     WHERE h.scope = %(scope)s AND h.lexeme = ANY((SELECT terms FROM q)::text[])),
            df AS MATERIALIZED (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme)
            SELECT hits.id, sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
                                * hits.tf * (%(k1)s + 1)
                                / (hits.tf + %(k1)s * (1 - %(b)s + %(b)s * d.len / greatest(s.avgdl, 1)))) AS score
            FROM hits JOIN df USING (lexeme) JOIN {t} d ON d.id = hits.id CROSS JOIN scoped s
            WHERE {where}
            GROUP BY hits.id ORDER BY score DESC, hits.id LIMIT %(limit)s
        """
        with postgres_connection(self.url) as conn:
            return [(r["id"], float(r["score"])) for r in conn.execute(sql, args)]

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
    ) -> None:
        """None: not supported (``can_match``); a vector search applies its filters in Chroma."""
        return None

    def fact_keys_complete(self) -> None:
        """None: this index keeps no fact keys (``fact_records`` cannot answer; nothing to fill)."""
        return None

    def fill_fact_keys(self, keys: Mapping[str, str]) -> None:
        """Nothing to fill: this index keeps no fact keys (``fact_keys_complete`` is None)."""

    def fact_records(self, scope: str, fact_key: str, since: float) -> None:
        """None: this index keeps no fact keys, so the caller reads the fact's records from Chroma."""
        return None

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored text by id (missing ids are left out)."""
        if not ids:
            return {}
        with postgres_connection(self.url) as conn:
            rows = conn.execute(f"SELECT id, text FROM {self.table} WHERE id = ANY(%s)", (list(ids),))
            return {r["id"]: r["text"] for r in rows}

    def ids(self, scope: str | None = None) -> set[str]:
        with postgres_connection(self.url) as conn:
            if scope is None:
                rows = conn.execute(f"SELECT id FROM {self.table}")
            else:
                rows = conn.execute(f"SELECT id FROM {self.table} WHERE scope = %s", (scope,))
            return {r["id"] for r in rows}

    def count(self, scope: str) -> int:
        with postgres_connection(self.url) as conn:
            return int(conn.execute(f"SELECT count(*) AS n FROM {self.table} WHERE scope = %s",
                                    (scope,)).fetchone()["n"])

    def count_with(self, scope: str, ids: Sequence[str]) -> int:
        """``count(scope)`` plus the ``ids`` not stored yet, in one statement (one snapshot)."""
        wanted = sorted(set(ids))
        with postgres_connection(self.url) as conn:
            return int(conn.execute(
                f"SELECT (SELECT count(*) FROM {self.table} WHERE scope = %s) + %s"
                f" - (SELECT count(*) FROM {self.table} WHERE id = ANY(%s)) AS n",
                (scope, len(wanted), wanted)).fetchone()["n"])

    def close(self) -> None:
        """Nothing to close: connections belong to the process's pool (``backends.postgres_pool``)."""

    def __repr__(self) -> str:
        return f"PostgresLexicalIndex({self.table!r})"
