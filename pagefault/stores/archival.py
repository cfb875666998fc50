"""Archival memory: an unbounded, searchable store of facts and documents, in Chroma.

Record ids are a hash of scope and normalised text, so a retried insert (or the same fact
written twice) lands on the same record instead of duplicating it.

Facts carry validity (``stores.validity``): a statement that contradicts an earlier one about the
same subject and attribute supersedes it. The old record stays, out of default search, found by
``search(..., as_of=t)`` and pointing at its successor.

Which statements are about the same thing is read by the patterns (``text.facts``); an insert's
``judge`` (``stores.superseding``; a chat model's, with a real model) may tie the new text to current
records of its scope the patterns miss, as replaced or restated. Tied records join one fact key (the
new text's, else theirs, else one named after the first of them); a restated record and the new one
share a value, a replaced one keeps its own. So the timeline, consolidation and ``as_of`` treat them as
one fact, as if the patterns had read it.

A turn's inserts may be written behind it, from a journal: a file of the data directory on the embedded
setup (``writers.archival_journal``), a table of the shared database when replicas share a Chroma
server and the BM25 shadow in Postgres (``writers.shared_journal``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Sequence

from pagefault.engines.locks import LocalLocks, LockTimeout, locks_for
from pagefault.models.embeddings import beside
from pagefault.safety.guard import GUARD_VERSION, scan
from pagefault.safety.redaction import redact
from pagefault.stores.index.hybrid import TAG_PREFIX, Hit, HybridIndex, IndexedText, lexical_doc
from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
from pagefault.stores.provenance import Provenance
from pagefault.stores.scope import Scope
from pagefault.stores.superseding import PATTERNS, Candidate, Judgement, SupersedeJudge
from pagefault.stores.validity import ALL, CURRENT, Stamped, Validity, timeline
from pagefault.stores.validity import as_of as true_at
from pagefault.stores.writers.archival_journal import ArchivalJournal, Entry
from pagefault.stores.writers.shared_journal import SharedJournal
from pagefault.text.facts import Fact, fact_value, linked_fact, parse_fact
from pagefault.text.unicode import check_unicode

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 20_000
MAX_TAGS = 16
MAX_QUERY_CHARS = 20_000
MAX_TOP_K = 1_000
_TAG = re.compile(r"[A-Za-z0-9_\-:]{1,64}")
#: Embeds a fact's new record while its insert takes the locks and reads the fact (``ArchivalStore._insert``).
_EMBED_AHEAD = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pagefault-embed-ahead")


def archival_id(scope: Scope, text: str) -> str:
    norm = " ".join(text.split()).lower()
    return "arc-" + hashlib.sha256(f"{scope.key}\x00{norm}".encode()).hexdigest()[:24]


def check_tags(tags: object) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, (list, tuple)):
        raise ValueError("tags must be a list of strings")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags")
    out = []
    for t in tags:
        if not isinstance(t, str) or not _TAG.fullmatch(t):
            raise ValueError(f"bad tag {t!r}: use 1-64 letters, digits, '_', '-' or ':'")
        out.append(t)
    return tuple(dict.fromkeys(out))


def check_search(query: object, top_k: object, start: object = None, end: object = None,
                 thread_id: object = None) -> None:
    """Reject what no index can answer: a non-string or oversized query, a top_k out of range,
    times that are not epoch seconds, a thread id that is not a string."""
    if not isinstance(query, str):
        raise ValueError("query must be a string")
    check_unicode(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"query is longer than {MAX_QUERY_CHARS} characters")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be an integer between 1 and {MAX_TOP_K}, got {top_k!r}")
    for name, t in (("start", start), ("end", end)):
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t != t or abs(t) > 1e12):
            raise ValueError(f"{name} must be epoch seconds (a finite number) or None, got {t!r}")
    if thread_id is not None and not isinstance(thread_id, str):
        raise ValueError(f"thread_id must be a string or None, got {thread_id!r}")
    if thread_id is not None:
        check_unicode(thread_id, "thread_id")


@dataclass
class ArchivalRecord:
    """One archival memory, as an insert, a get or a search returns it: its ``id``, ``text`` (secrets
    redacted), ``tags`` and ``provenance``; ``created`` (False when the insert found it already
    stored); its ``validity`` (when it was true and whether something superseded it) and
    ``fact_key`` (the subject and attribute it states, '' if none); ``merged_from`` (duplicates
    consolidation folded into it) and ``guard_version`` (the guard that made its flags)."""

    id: str
    text: str
    tags: tuple[str, ...]
    provenance: Provenance
    created: bool = True  # False when the insert found the record already stored
    validity: Validity | None = None
    fact_key: str = ""
    merged_from: int = 0  # duplicates consolidation folded into this record (their provenance is kept)
    #: Which guard made ``provenance.flags`` (``guard.GUARD_VERSION``); another one's verdict is made afresh.
    guard_version: str = ""

    def citation(self) -> dict[str, Any]:
        """Where the record came from: ``turn`` is the conversational turn of its source message and
        ``message_index`` that message's position in the thread (-1: none, or not known)."""
        p = self.provenance
        return {"source": "archival", "id": self.id, "thread_id": p.thread_id, "turn": p.turn,
                "message_index": p.message_index, "created_at": p.created_at, "origin": p.source,
                "flagged": p.flagged}


def record_from_hit(hit: Hit) -> ArchivalRecord:
    m = hit.metadata
    tags = tuple(sorted(k[len(TAG_PREFIX):] for k in m if k.startswith(TAG_PREFIX)))
    return ArchivalRecord(hit.id, hit.text, tags, Provenance.from_metadata(m), created=False,
                          validity=Validity.from_metadata(m), fact_key=str(m.get("fact_key", "")),
                          merged_from=int(m.get("merged_count", 0)), guard_version=str(m.get("guard_version", "")))


def _validity(record: ArchivalRecord) -> Validity:
    """The validity of a record read or made here (``record_from_hit`` and ``_new_record`` always set one)."""
    if record.validity is None:
        raise ValueError(f"archival record {record.id} has no validity")
    return record.validity


_local_locks = LocalLocks()


@contextmanager
def fact_lock(index: HybridIndex, scope: Scope, key: str) -> Iterator[None]:
    """Hold one fact key of one scope while its timeline is rewritten: across replicas when the BM25
    shadow is in Postgres (they share it), within this process otherwise."""
    name = ("archival-fact", scope.key, key)
    url = index.lexical.url
    if url:
        with locks_for(url).hold(*name):
            yield
        return
    if not _local_locks.acquire(name, 60.0):
        raise LockTimeout(f"fact {key!r} is being rewritten by another run of this process (waited 60 s)")
    try:
        yield
    finally:
        _local_locks.release(name)


@contextmanager
def fact_locks(index: HybridIndex, scope: Scope, keys: Iterable[str]) -> Iterator[None]:
    """``fact_lock`` on several fact keys of one scope, taken in sorted order, so that two inserts
    joining the same facts never wait for each other crosswise."""
    with ExitStack() as stack:
        for key in sorted(set(keys)):
            stack.enter_context(fact_lock(index, scope, key))
        yield


def _stored_fact(hit: Hit) -> Fact | None:
    """The fact a stored record states, as its metadata names it (a judge's tie included); None if none."""
    key = str(hit.metadata.get("fact_key", "") or "")
    return Fact.stored(key, str(hit.metadata.get("fact_value", ""))) if key else None


def _by_time(candidates: Iterable[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (c.valid_from, c.id))


def _linked_key(c: Candidate) -> str:
    """The fact key a candidate has, or would get if it were the first of a fact a judge ties."""
    return c.fact_key or linked_fact(c.text, c.id).key


@dataclass(frozen=True)
class _Links:
    """The candidates a judge tied a new text to, checked: those it replaces and those it restates,
    and each one's value as stored (its own words, normalised, when it has no fact key)."""

    replaced: tuple[Candidate, ...] = ()
    restated: tuple[Candidate, ...] = ()
    values: tuple[tuple[str, str], ...] = ()

    @property
    def all(self) -> tuple[Candidate, ...]:
        return (*self.replaced, *self.restated)

    def joined_fact(self, text: str, fact: Fact | None) -> Fact:
        """The fact the new text states once tied: the patterns' key if they read one, else the key of
        the earliest link that has one, else one named after the earliest link. Its value: the
        patterns', else the earliest restated record's, else the text's own normalised words."""
        ordered = _by_time(self.all)
        keyed = [c for c in ordered if c.fact_key]
        key = fact.key if fact is not None else keyed[0].fact_key if keyed else linked_fact(text, ordered[0].id).key
        values = dict(self.values)
        value = fact.value if fact is not None else values[_by_time(self.restated)[0].id] if self.restated \
            else fact_value(text)
        return Fact.stored(key, value)


@dataclass(frozen=True)
class _Pending:
    """A text checked and judged, ready to be written (see ``ArchivalStore._prepare``)."""

    text: str
    tags: tuple[str, ...]
    prov: Provenance
    fact: Fact | None
    since: float
    rid: str


class ArchivalStore:
    """Insert and hybrid-search archival records of one or many scopes.

    ``index`` holds the records (a Chroma collection and its BM25 shadow). Deferred inserts (see
    ``insert``) are written behind the caller from a journal: in the file ``journal_path`` (the
    embedded setup's, ``ArchivalJournal``), or with ``shared_journal`` in a table of the database
    the BM25 shadow is in (replicas': ``SharedJournal``; the shadow must be a ``PostgresLexicalIndex``).
    With neither, they are written at once. ``MemoryServices.open`` builds one; most code uses
    ``services.archival``.
    """

    def __init__(self, index: HybridIndex, *, journal_path: str | None = None, shared_journal: bool = False) -> None:
        if journal_path and shared_journal:
            raise ValueError("an archival store journals in a file or in the shared database, not both")
        if shared_journal and not isinstance(index.lexical, PostgresLexicalIndex):
            raise ValueError(f"a shared journal lives beside a BM25 shadow in Postgres; this store's is {index.lexical!r}")
        self._index = index
        #: The judge of each journalled insert still to be written (by record id), when it is not the
        #: patterns; inserts left journalled by a process that stopped are written with the patterns.
        self._judges: dict[str, SupersedeJudge] = {}
        if index.lexical.fact_keys_complete() is False:  # (None: a backend that keeps no fact keys)
            self._fill_fact_keys()
        #: Inserts a turn makes, written behind it (see the module docstring).
        self.journal: ArchivalJournal | SharedJournal | None = None
        if journal_path:
            self.journal = ArchivalJournal(journal_path, self._write_journalled, prepare=index.embeddings.embed_array)
        elif isinstance(index.lexical, PostgresLexicalIndex) and shared_journal:
            self.journal = SharedJournal(index.lexical.url, self._write_journalled, shadow_table=index.lexical.table,
                                         prepare=index.embeddings.embed_array)

    @property
    def index(self) -> HybridIndex:
        """The stores. A read through here first waits for journalled inserts to be written."""
        if self.journal is not None:
            self.journal.flush()
        return self._index

    def _write_journalled(self, scope: Scope, entries: list[Entry]) -> None:
        """Write journalled inserts of one scope: those stating no fact (by the patterns) and judged by
        them alone together, the others one by one, in order, each with its judge."""
        pending = [(_Pending(text, tags, prov, parse_fact(text), since, rid), self._judges.get(rid, PATTERNS))
                   for text, tags, prov, since, rid in entries]
        self._write_plain(scope, [p for p, judge in pending if p.fact is None and not judge.candidates])
        for p, judge in pending:
            if p.fact is not None or judge.candidates:
                self._insert(scope, p, judge)
        for p, _ in pending:
            self._judges.pop(p.rid, None)

    def _write_plain(self, scope: Scope, plain: list[_Pending]
                     ) -> tuple[dict[str, Hit], dict[str, tuple[IndexedText, ArchivalRecord]]]:
        """Records stating no fact, in one read and one write: returns those already stored (their BM25
        half repaired if a crash lost it) and those written now, by id."""
        found = {h.id: h for h in self.index.get(list(dict.fromkeys(p.rid for p in plain)))} if plain else {}
        new: dict[str, tuple[IndexedText, ArchivalRecord]] = {}
        for p in plain:
            if p.rid not in found and p.rid not in new:
                new[p.rid] = self._new_record(scope, p, p.rid)
        self.index.upsert([item for item, _ in new.values()])
        for hit in found.values():
            self._repair_lexical(hit, record_from_hit(hit))
        return found, new

    def _fill_fact_keys(self, page: int = 2_000) -> None:
        """Once, for a BM25 file from before it kept fact keys: copy each record's key from Chroma."""
        keys: dict[str, str] = {}
        offset = 0
        while True:
            got = self._index.collection.get(include=["metadatas"], limit=page, offset=offset)
            keys.update({i: str((m or {}).get("fact_key", "") or "") for i, m in zip(got["ids"], got["metadatas"])})
            if len(got["ids"]) < page:
                break
            offset += page
        self._index.lexical.fill_fact_keys(keys)

    def insert(
        self, scope: Scope, text: str, tags: Sequence[str] = (), provenance: Provenance | None = None,
        *, redact_secrets: bool = True, valid_from: float | None = None, defer: bool = False,
        judge: SupersedeJudge = PATTERNS,
    ) -> ArchivalRecord:
        """Store ``text`` (secrets redacted unless told not to); the guard's flags go into its provenance.

        ``valid_from`` is when the fact became true (event time); else a date the text states
        ("As of 2024-05-03, ..."), else the provenance time. A fact that contradicts a stored one
        about the same subject and attribute supersedes it (or, if it is older, is superseded by it).

        ``judge`` decides, beside the patterns, which current records of ``scope`` the text replaces
        (``stores.superseding``); it is asked before any lock is taken, and a judge that fails (or names
        a record it was not shown) costs a warning in the log, never the insert.

        ``defer``: a new record may be journalled and written behind the caller (a turn's inserts are,
        when the store has a journal); the result is then the record as it will be written, before
        its fact's timeline is settled (and before the judge is asked). Reads of this store wait for it.
        """
        p = self._prepare(scope, text, tags, provenance, redact_secrets, valid_from)
        # Whether it is stored is asked of the BM25 shadow, not Chroma, which would wait for the writer's
        # Chroma write in progress. (A record a crash left in Chroma alone is journalled again, and
        # the writer's ``_insert`` finds and repairs it.)
        if defer and self.journal is not None:
            before = self._judges.get(p.rid)
            if judge.candidates:  # before the append: the writer may take the entry at once
                self._judges[p.rid] = judge
            done = self.journal.append_new(scope, p.text, p.tags, p.prov, p.since, p.rid,
                                           lambda rid: bool(self._index.lexical.texts([rid])))
            if done != "appended" and judge.candidates:  # not this insert's entry: the judge it had stays
                if before is None:
                    self._judges.pop(p.rid, None)
                else:
                    self._judges[p.rid] = before
            if done != "stored":
                return replace(self._new_record(scope, p, p.rid)[1], created=done == "appended")
            existing = self._index.get([p.rid]) if p.fact is None else []
            # The same words again: that record, as ``_insert`` would return it; unless a judge tied it to a
            # fact that has changed since (then ``_insert`` decides whether its value holds once more).
            if existing and (_stored_fact(existing[0]) is None or _validity(record_from_hit(existing[0])).current):
                return record_from_hit(existing[0])
        return self._insert(scope, p, judge)

    def insert_many(
        self, scope: Scope, entries: Sequence[tuple[str, Provenance | None]], tags: Sequence[str] = (),
        *, redact_secrets: bool = True,
    ) -> list[ArchivalRecord]:
        """``insert`` for many texts (a document's passages), with the same results, in order. Every
        entry is checked before any is written. Those that state no fact take one read and one write
        for the lot (each write of the stores waits on disk syncs); facts go one by one, as their
        timelines must be settled."""
        prepared = [self._prepare(scope, text, tags, prov, redact_secrets, None) for text, prov in entries]
        found, new = self._write_plain(scope, [p for p in prepared if p.fact is None])
        out, written = [], set()
        for p in prepared:
            if p.fact is not None:
                out.append(self._insert(scope, p))
            elif p.rid in found:
                out.append(record_from_hit(found[p.rid]))
            else:  # the same passage twice in one batch is stored once, as one by one would
                out.append(new[p.rid][1] if p.rid not in written else replace(new[p.rid][1], created=False))
                written.add(p.rid)
        return out

    def _prepare(self, scope: Scope, text: object, tags: Sequence[str], provenance: object, redact_secrets: bool,
                 valid_from: float | None) -> _Pending:
        """Check one text, redact it, let the guard judge it and read the fact it states, if any."""
        if valid_from is not None and (isinstance(valid_from, bool) or not isinstance(valid_from, (int, float))
                                       or valid_from != valid_from or abs(valid_from) > 1e11):
            raise ValueError(f"valid_from must be epoch seconds, got {valid_from!r}")
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"text is {len(text)} characters; archival records hold at most {MAX_TEXT_CHARS}"
                             " (split it, or ingest it as a document)")
        check_unicode(text, "text")
        tags = check_tags(tags)
        if provenance is not None and not isinstance(provenance, Provenance):
            raise ValueError("provenance must be a Provenance")
        if redact_secrets:
            text = redact(text).text
        prov = provenance or Provenance()
        prov = replace(prov, flags=tuple(dict.fromkeys((*prov.flags, *scan(text).rules))))
        fact = parse_fact(text)
        since = valid_from if valid_from is not None else (fact.since if fact and fact.since is not None
                                                            else prov.created_at)
        return _Pending(text, tags, prov, fact, float(since), archival_id(scope, text))

    def _new_record(self, scope: Scope, p: _Pending, rid: str) -> tuple[IndexedText, ArchivalRecord]:
        validity = Validity(valid_from=p.since, recorded_at=time.time())
        item = IndexedText(
            id=rid, text=p.text, scope=scope.key, thread_id=p.prov.thread_id, created_at=p.prov.created_at,
            tags=p.tags, metadata={"kind": "archival", **p.prov.metadata(), "guard_version": GUARD_VERSION,
                                   **validity.metadata(), **(p.fact.metadata() if p.fact else {})},
        )
        return item, ArchivalRecord(rid, p.text, p.tags, p.prov, created=True, validity=validity,
                                    fact_key=p.fact.key if p.fact else "", guard_version=GUARD_VERSION)

    def _insert(self, scope: Scope, p: _Pending, judge: SupersedeJudge = PATTERNS) -> ArchivalRecord:
        fact, since, rid = p.fact, p.since, p.rid
        index = self.index  # waits for the journal once, here, never under the fact lock below
        # A complete BM25 shadow that lacks the record: it is not stored, or only its Chroma half (a crash
        # between the two writes), which the write below completes. Chroma is not asked then (on a
        # server, a round trip for each insert).
        existing = index.get([rid]) if not index.shadow_is_complete or index.lexical.texts([rid]) else []
        if existing:
            record = record_from_hit(existing[0])
            self._repair_lexical(existing[0], record)
            v = record.validity
            stated = _stored_fact(existing[0]) or fact  # as stored: a judge may have tied it to another key
            if v is None or v.current or not stated or since < v.valid_to:
                return record
            # The same words again, after the fact had changed. If that value is already back (an
            # earlier restatement), this is that record again; else the old value holds once more.
            for hit, _ in index.find(scope.key, extra={"fact_key": stated.key}):
                back = record_from_hit(hit)
                if back.validity is not None and back.validity.current and hit.metadata.get("fact_value") == stated.value:
                    return back
            rid = archival_id(scope, f"{p.text}\x00since {since!r}")
            again = index.get([rid])
            if again:
                return record_from_hit(again[0])
            fact = stated
        links = self._links(scope, p.text, rid, judge)  # a model's call, perhaps: before any lock
        if links.all:
            fact = links.joined_fact(p.text, fact)
        item, record = self._new_record(scope, replace(p, fact=fact), rid)
        if fact is None:
            index.upsert([item])
            return record
        held = {fact.key, *(_linked_key(c) for c in links.all)}
        # Embedded while the locks are taken and the fact's records read (each a round trip on Postgres and
        # a Chroma server); a background writer embeds on its own thread, as it does all its work.
        vectors = beside(_EMBED_AHEAD, index.embeddings.embed_array, [item.text])
        with fact_locks(index, scope, held):
            if links.all:
                self._join(scope, fact, links, held)
            near = self._fact_hits(scope, fact.key, None if links.all else since)  # joined: the whole timeline
            stamped = [Stamped(h.id, str(h.metadata.get("fact_value", "")), Validity.from_metadata(h.metadata))
                       for h in near if h.id != rid]
            fresh = _validity(record)
            changes = timeline([*stamped, Stamped(rid, fact.value, fresh)])
            validity = changes.pop(rid, fresh)
            item.metadata.update(validity.metadata())
            index.upsert([item], vectors=vectors.result())  # first: a crash before the restamp leaves two
            if changes:  # current records, which consolidation settles; ``near`` was read under the locks
                index.restamp({i: v.metadata() for i, v in changes.items()}, read=near)
        return replace(record, validity=validity)

    def _links(self, scope: Scope, text: str, rid: str, judge: SupersedeJudge) -> _Links:
        """The current records of ``scope`` that ``judge`` says ``text`` replaces or restates, among the
        top hits of a search for it (none when the judge wants no candidates, or there are none). Its
        answer is checked: ids it was not shown, or named both ways, are dropped; a judge that fails
        leaves the patterns to decide. Both are logged as warnings."""
        if not judge.candidates:
            return _Links()
        try:
            hits = [h for h in self._index.search(text, scope.key, judge.candidates + 1, validity=CURRENT)
                    if h.id != rid and h.metadata.get("scope") == scope.key][:judge.candidates]
            candidates = [Candidate(h.id, h.text, str(h.metadata.get("fact_key", "") or ""),
                                    Validity.from_metadata(h.metadata).valid_from) for h in hits]
            if not candidates:
                return _Links()
            answer = judge.judge(text, candidates)
            if not isinstance(answer, Judgement):
                raise TypeError(f"a judge answers a Judgement, not {answer!r}")
            replaces, restates = [str(i) for i in answer.replaces], [str(i) for i in answer.restates]
        except Exception as e:  # a model outage, a bad answer: the insert goes on with the patterns
            log.warning("archival: the supersede judge failed for record %s (%s: %s); the patterns decide",
                        rid, type(e).__name__, e)
            return _Links()
        ids = {c.id for c in candidates}
        stray = [i for i in dict.fromkeys([*replaces, *restates]) if i not in ids]
        both = sorted(set(replaces) & set(restates))
        if stray:
            log.warning("archival: the supersede judge named %s for record %s, not among the candidates it was "
                        "shown (%s); ignored", stray, rid, ", ".join(sorted(ids)))
        if both:
            log.warning("archival: the supersede judge said record %s both replaces and restates %s; ignored",
                        rid, both)
        values = tuple((h.id, str(h.metadata.get("fact_value", "")) if h.metadata.get("fact_key") else fact_value(h.text))
                       for h in hits)
        return _Links(tuple(c for c in candidates if c.id in replaces and c.id not in both),
                      tuple(c for c in candidates if c.id in restates and c.id not in both), values)

    def _join(self, scope: Scope, fact: Fact, links: _Links, held: set[str]) -> None:
        """Give the records a judge tied to the new text ``fact``'s key (the caller holds the locks of
        ``held``, every key involved). A linked record with another key brings every record of that key
        along, so its history stays one timeline; a restated one takes ``fact``'s value, a replaced one
        without a key its own words. A link that another insert tied elsewhere since it was shown (to a
        key not held here) is left."""
        index = self._index
        restated = {c.id for c in links.restated}
        changes: dict[str, dict[str, Any]] = {}
        for hit in index.get([c.id for c in links.all]):
            have = str(hit.metadata.get("fact_key", "") or "")
            if hit.metadata.get("scope") != scope.key or (have and have not in held):
                continue
            if have and have != fact.key:
                changes.update({h.id: {"fact_key": fact.key} for h, _ in index.find(scope.key, extra={"fact_key": have})})
            if hit.id in restated:
                changes[hit.id] = {"fact_key": fact.key, "fact_value": fact.value}
            elif not have:
                changes[hit.id] = {"fact_key": fact.key, "fact_value": fact_value(hit.text)}
        if changes:
            index.restamp(changes)

    def timeline(self, scope: Scope, key: str) -> list[ArchivalRecord]:
        """Every record of one fact key (current and superseded), oldest event time first."""
        recs = [record_from_hit(h) for h, _ in self.index.find(scope.key, extra={"fact_key": key})]
        return sorted(recs, key=lambda r: (_validity(r).valid_from, _validity(r).recorded_at, r.id))

    def settle(self, scope: Scope, key: str) -> dict[str, Validity]:
        """Recompute the validity of every record of one fact key (the caller holds ``fact_lock``):
        each value holds until a different one begins. Returns the validity of each record."""
        stamped = [Stamped(h.id, str(h.metadata.get("fact_value", "")), Validity.from_metadata(h.metadata))
                   for h in self._fact_hits(scope, key, None)]
        changes = timeline(stamped)
        if changes:
            self._index.restamp({i: v.metadata() for i, v in changes.items()})
        return {s.id: changes.get(s.id, s.validity) for s in stamped}

    def _fact_hits(self, scope: Scope, key: str, since: float | None) -> list[Hit]:
        """The records of one fact key that a value beginning at ``since`` can change (all, if None):
        those open at ``since`` or beginning later, from the BM25 file's fact-key index. Reading every
        record of the key made inserts of a fact restated each turn grow with the conversation."""
        # Not ``self.index``: the caller holds the key's fact lock, which a journalled insert of the
        # same key waits for, so waiting for the journal here could wait forever.
        index = self._index
        ids = index.lexical.fact_records(scope.key, key, since) if index.shadow_is_complete and since is not None \
            else None
        if ids is None:
            return [h for h, _ in index.find(scope.key, extra={"fact_key": key})]
        return [h for h in index.get(ids) if h.metadata.get("scope") == scope.key]

    def _repair_lexical(self, hit: Hit, record: ArchivalRecord) -> None:
        """A crash between the Chroma write and the BM25 write leaves the record in Chroma only; the
        retried insert finds it there and writes the missing BM25 half from what Chroma holds."""
        if self._index.lexical.texts([hit.id]):
            return
        self._index.lexical.upsert([lexical_doc(hit.id, hit.text, hit.metadata)])

    def search(
        self,
        scope: Scope,
        query: str,
        top_k: int = 5,
        *,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
        as_of: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[ArchivalRecord, float]]:
        """Hybrid search of ``scope``'s records for ``query``: the best ``top_k`` (record, score) pairs,
        best first; by default only records still current. ``tags``: only records with all of these;
        ``start`` / ``end`` (epoch seconds): only records created in that span. ``as_of`` (epoch
        seconds): records that were true then, superseded or not; ``include_superseded``: every
        record, as before validity."""
        return [(record, hit.score) for record, hit in self.explained_search(
            scope, query, top_k, tags=tags, start=start, end=end, as_of=as_of, include_superseded=include_superseded)]

    def explained_search(
        self,
        scope: Scope,
        query: str,
        top_k: int = 5,
        *,
        tags: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
        as_of: float | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[ArchivalRecord, Hit]]:
        """``search`` (the same ``scope``, ``query``, ``top_k``, ``tags``, ``start``, ``end``, ``as_of`` and
        ``include_superseded``), each record with the index's hit: its fused ``score`` and how it was
        made (``Hit.parts``: BM25 and cosine, raw and normalized), as the web inspector shows it."""
        check_search(query, top_k, start, end)
        if as_of is not None and (isinstance(as_of, bool) or not isinstance(as_of, (int, float))
                                  or as_of != as_of or abs(as_of) > 1e11):
            raise ValueError(f"as_of must be epoch seconds, got {as_of!r}")
        validity = true_at(as_of) if as_of is not None else ALL if include_superseded else CURRENT
        if self.journal is not None and self.journal.hurry():
            self._index.embeddings.embed_query_array([query])  # cached for the search, while the writer writes
        hits = self.index.search(query, scope.key, top_k, tags=check_tags(tags), start=start, end=end,
                                 validity=validity)
        return [(record_from_hit(h), h) for h in hits]

    def get(self, scope: Scope, record_id: str) -> ArchivalRecord | None:
        """The record with id ``record_id`` if ``scope`` owns it, else None (a record of another
        scope is never returned)."""
        if not isinstance(record_id, str) or not record_id:
            return None
        hits = self.index.get([record_id])
        if not hits or hits[0].metadata.get("scope") != scope.key:
            return None
        return record_from_hit(hits[0])

    def count_query(self, scope: Scope) -> tuple[str, str, tuple[str, ...]] | None:
        """``count(scope)`` as (database URL, SQL expression, parameters) where it is one statement of a
        shared database (the replicated setup's journal), for a caller that asks it beside other reads of
        that database; None elsewhere."""
        if isinstance(self.journal, SharedJournal):
            return (self.journal.url, *self.journal.count_query(scope))
        return None

    def count(self, scope: Scope) -> int:
        """Records of ``scope``, journalled ones included (every prompt shows it: it does not wait)."""
        if isinstance(self.journal, SharedJournal):  # other replicas' journalled inserts too, in one statement
            return self.journal.count(scope)
        pending = self.journal.pending_in(scope) if self.journal is not None else []
        if not pending:
            return self._index.count(scope.key)
        # Those the writer has not yet put in the BM25 shadow, which counts, read at one moment with it: the
        # writer storing one between two reads would have it counted never (or twice).
        return self._index.lexical.count_with(scope.key, pending)
