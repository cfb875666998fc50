"""Export and import of a whole agent: one user's memory, every tier, as one versioned JSON file.

An export carries the core blocks (with their JSON schemas, if typed), the learned procedures, every
archival record with its id and provenance, and every
thread of the user with its full message history (evicted messages included), its current window and
its running summary. Provenance says where in a thread a record came from twice: ``turn``, the
conversational turn (a user message and what follows it, from 0), and ``message_index``, the
message's position in the thread's history. A record stored before turns were counted gets its turn
from the exported thread it names, where it can (-1 where it cannot). The recall index is not
exported: it is derived from the threads and rebuilt from the imported checkpoints, as
``RecallIndex.rebuild`` always can.

Import goes into an empty store only (the user's memory and the file's thread ids unused there), and
refuses files that are malformed or were written by a newer pagefault, with a message that says which.
Nothing in a file reaches another user's memory: every write is under the file's own scope, archival
ids are the ones that scope mints (``scoped_archival_ids``), and imported threads belong to it. An
import journal (``IMPORT_JOURNAL``) in the data directory lives from before an import's first write
to after its last, so an import that was killed is seen (``unfinished_import``: by ``pagefault
doctor``, and ``export`` refuses that user) and is finished by importing the same file again.

Threads are written through the graph's own ``update_state``: first the whole history (so evicted
messages live in a checkpoint, as they did at the source), then the window and summary as they stood.
Recall hits therefore cite the imported checkpoints; everything else (ids, turns, message indexes,
texts, ranks) is as it was. A file of schema version 2 or older knew only message indexes (its
``turn`` was one): import reads it so.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Final, Iterator, Literal, Sequence, cast

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, messages_from_dict, messages_to_dict
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm import tqdm

from pagefault.graph.context import Context
from pagefault.graph.graph import build_graph
from pagefault.graph.saved_state import latest_saved, saved_history
from pagefault.persistence.embedded import EmbeddedPersistence
from pagefault.safety.guard import GUARD_VERSION, scan
from pagefault.stores.archival import archival_id, record_from_hit
from pagefault.stores.core import CoreMemoryError
from pagefault.stores.index.hybrid import TAG_PREFIX, Hit, HybridIndex, IndexedText
from pagefault.stores.index.protocols import Include
from pagefault.stores.procedures import ProceduralMemory, Procedure, ProcedureError
from pagefault.stores.provenance import log_position
from pagefault.stores.recall import conversation_turns
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.window.run import core_memory
from pagefault.window.thread_owner import owner_of

FORMAT: Final = "pagefault-agent"
#: The schema version this pagefault writes; it reads this version and older ones.
#: 2: core blocks carry their JSON schema; procedures (learned rules) travel too.
#: 3: provenance carries the conversational ``turn`` and the ``message_index`` (before, ``turn`` was the message index).
SCHEMA_VERSION = 3
#: Rows fetched from Chroma per page.
PAGE = 500
#: Archival metadata keys the schema carries as named fields; any other key travels in ``metadata``.
_ARCHIVAL_KEYS = frozenset({"scope", "thread_id", "created_at", "kind", "turn", "conversation_turn", "message_id",
                            "source"})


class TransferError(ValueError):
    """An export or import that cannot be done; the message says why and what to do."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CoreBlockRecord(_Strict):
    label: str
    value: str
    limit: int = Field(gt=0)
    description: str = ""
    value_schema: dict[str, Any] | None = Field(default=None, description="A typed block's JSON schema.")


#: A procedure's kind (``pagefault.stores.procedures.KINDS``).
ProcedureKind = Literal["rule", "preference"]


class ProcedureRecord(_Strict):
    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    kind: ProcedureKind = "rule"
    created_at: float
    log: list[dict[str, Any]] = Field(default_factory=list, description="Its edit history, provenance first.")


class ProvenanceRecord(_Strict):
    thread_id: str = ""
    turn: int = Field(default=-1, description="The conversational turn of the source message, from 0 (-1: none or "
                                                "not known). In files of schema version 2 or older: the message index.")
    message_index: int = Field(default=-1, description="The source message's position in the thread (-1: none).")
    message_id: str = ""
    source: str = "agent"
    created_at: float


class ArchivalRecordOut(_Strict):
    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    provenance: ProvenanceRecord
    metadata: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Any further stored metadata of the record, kept as is.")


class ThreadRecord(_Strict):
    thread_id: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(description="Every message of the thread, oldest first (LangChain message "
                                                       "dicts); a message's index here is its message_index.")
    window: list[dict[str, Any]] = Field(description="The messages in the main context now (messages evicted_count on).")
    summary: str = ""
    evicted_count: int = Field(default=0, ge=0)
    compactions: int = Field(default=0, ge=0)
    recall_indexed: int = Field(default=0, ge=0, description="The thread state's recall_indexed: messages below it were "
                                                             "confirmed in the recall index when its last step ran.")
    recall_held: int | None = Field(default=None, ge=0, description="Messages below this index were in the recall index "
                                    "at export (its writer may have indexed past recall_indexed); absent: recall_indexed.")
    pressure_warned: bool = False
    tokens: dict[str, Any] = Field(default_factory=dict)


class AgentExport(_Strict):
    """Schema of an export file (``format`` and ``version`` are checked first)."""

    format: Literal["pagefault-agent"]
    version: int = Field(ge=1)
    exported_at: str
    pagefault_version: str
    user_id: str
    agent_id: str
    core: list[CoreBlockRecord]
    procedures: list[ProcedureRecord] = Field(default_factory=list)
    archival: list[ArchivalRecordOut]
    threads: list[ThreadRecord]

    @property
    def scope(self) -> Scope:
        return Scope(self.user_id, self.agent_id)


def _pagefault_version() -> str:
    try:
        return version("pagefault")
    except PackageNotFoundError:
        return "unknown"


def _bar(total: int, desc: str, unit: str, progress: bool) -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, disable=not progress, file=sys.stderr, leave=False)


# -- reading the stores ------------------------------------------------------------------------

def _scope_rows(index: HybridIndex, scope: Scope, include: Include) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
    """Every (id, document, metadata) of ``scope`` in one Chroma collection, page by page."""
    offset = 0
    while True:
        got = index.collection.get(where={"scope": scope.key}, include=include, limit=PAGE, offset=offset)
        docs = got.get("documents") or [None] * len(got["ids"])
        for id_, doc, meta in zip(got["ids"], docs, got["metadatas"]):
            yield id_, doc, dict(meta or {})
        if len(got["ids"]) < PAGE:
            return
        offset += PAGE


def scope_threads(services: MemoryServices, scope: Scope) -> list[str]:
    """The threads a user has talked on, from the recall index (checkpoints do not record the user)."""
    services.recall.writer.flush()
    return sorted({m.get("thread_id", "") for _, _, m in _scope_rows(services.recall.index, scope, ["metadatas"])} - {""})


def thread_history(checkpointer: Any, thread_id: str) -> tuple[list[BaseMessage], dict[str, Any]] | None:
    """Every message of a thread (the first, untruncated version of each) and its latest channel values."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    turns: dict[int, BaseMessage] = {}
    latest: dict[str, Any] | None = None
    for tup in saved_history(checkpointer, config):  # oldest first
        values = tup.checkpoint.get("channel_values", {}) or {}
        offset = int(values.get("evicted_count", 0) or 0)
        for i, m in enumerate(values.get("messages", []) or []):
            turns.setdefault(offset + i, m)
        latest = values
    if latest is None:
        return None
    end = int(latest.get("evicted_count", 0) or 0) + len(latest.get("messages", []) or [])
    missing = [t for t in range(end) if t not in turns]
    if missing:
        raise TransferError(f"thread {thread_id!r}: messages {missing[:5]} are in no checkpoint; its history is incomplete")
    return [turns[t] for t in range(end)], latest


# -- export ------------------------------------------------------------------------------------

def export_agent(persistence: EmbeddedPersistence, scope: Scope, *, ctx: Context | None = None,
                 progress: bool = True) -> dict[str, Any]:
    """One user's agent as a JSON-ready dict (see ``AgentExport``): the memory of ``scope`` in
    ``persistence`` (its core blocks, procedures, archival records and threads; recall is derived
    from the threads, so ``import_agent`` rebuilds it). ``ctx``: the
    settings to read core memory with (persona, block limit; default: the scope's, in that data
    directory); ``progress`` shows progress bars on stderr. An import of this scope into that directory
    that has not finished (``unfinished_import``) is a ``TransferError``: the export would be partial."""
    journal = read_journal(persistence.data_dir)
    if journal is not None and (journal.user_id, journal.agent_id) == (scope.user_id, scope.agent_id):
        raise TransferError(f"cannot export user {scope.user_id!r} (agent {scope.agent_id!r}): "
                            f"{unfinished_import(persistence.data_dir)}")
    ctx = ctx or Context(user_id=scope.user_id, agent_id=scope.agent_id, data_dir=persistence.data_dir)
    svc = MemoryServices.open(persistence.data_dir)
    core = core_memory(persistence.store, ctx)
    blocks = [CoreBlockRecord(label=b.label, value=b.value, limit=b.limit, description=b.description,
                              value_schema=b.schema) for b in core.blocks()]
    # ProceduralMemory reads every procedure with a kind in KINDS (its type says only str).
    procedures = [ProcedureRecord(id=p.id, text=p.text, kind=cast(ProcedureKind, p.kind), created_at=p.created_at,
                                  log=list(p.log))
                  for p in ProceduralMemory(persistence.store, scope).list()]

    archival = []
    with _bar(svc.archival.count(scope), "archival", "record", progress) as bar:
        for id_, text, meta in _scope_rows(svc.archival.index, scope, ["documents", "metadatas"]):
            rec = record_from_hit(Hit(id_, text or "", 0.0, meta))
            p = rec.provenance
            extra = {k: v for k, v in meta.items() if k not in _ARCHIVAL_KEYS and not k.startswith(TAG_PREFIX)}
            archival.append(ArchivalRecordOut(
                id=rec.id, text=rec.text, tags=list(rec.tags), metadata=extra,
                provenance=ProvenanceRecord(thread_id=p.thread_id, turn=p.turn, message_index=p.message_index,
                                            message_id=p.message_id, source=p.source, created_at=p.created_at)))
            bar.update()
    archival.sort(key=lambda r: (r.provenance.created_at, r.id))

    threads = []
    turns: dict[str, list[int]] = {}  # the conversational turn of each message, by thread
    ids = scope_threads(svc, scope)
    with _bar(len(ids), "threads", "thread", progress) as bar:
        for tid in ids:
            found = thread_history(persistence.checkpointer, tid)
            if found is not None:
                history, values = found
                turns[tid] = conversation_turns(history)
                threads.append(ThreadRecord(
                    thread_id=tid, messages=_dump(history, tid), window=_dump(values.get("messages") or [], tid),
                    summary=values.get("summary", "") or "", evicted_count=int(values.get("evicted_count", 0) or 0),
                    compactions=int(values.get("compactions", 0) or 0),
                    recall_indexed=int(values.get("recall_indexed", 0) or 0),
                    # What recall holds: the writer may have indexed past what the last step saw confirmed.
                    recall_held=min(len(history), max(int(values.get("recall_indexed", 0) or 0),
                                                      svc.recall.indexed_through(scope, tid))),
                    pressure_warned=bool(values.get("pressure_warned", False)), tokens=dict(values.get("tokens") or {})))
            bar.update()
    _number_turns(archival, procedures, turns)

    doc = AgentExport(
        format=FORMAT, version=SCHEMA_VERSION, exported_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        pagefault_version=_pagefault_version(), user_id=scope.user_id, agent_id=scope.agent_id,
        core=blocks, procedures=procedures, archival=archival, threads=threads,
    )
    return doc.model_dump(mode="json")


def _number_turns(archival: Sequence[ArchivalRecordOut], procedures: Sequence[ProcedureRecord],
                  turns: dict[str, list[int]]) -> None:
    """Give records that know only their message index (stored before turns were counted) their turn,
    from the thread they name when it is in the file (``turns``: each message's turn, by thread)."""

    def turn_of(thread: Any, index: int) -> int:
        known = turns.get(thread) if isinstance(thread, str) else None
        return known[index] if known is not None and 0 <= index < len(known) else -1

    for r in archival:
        p = r.provenance
        if p.turn < 0 and p.message_index >= 0:
            p.turn = turn_of(p.thread_id, p.message_index)
    for proc in procedures:
        for i, e in enumerate(proc.log):
            turn, index = log_position(e)
            if turn < 0 and index >= 0:
                proc.log[i] = {**e, "turn": turn_of(e.get("thread_id"), index), "message_index": index}


def _upgrade(doc: AgentExport) -> None:
    """A file of schema version 2 or older: its provenance ``turn`` was the message index."""
    for r in doc.archival:
        r.provenance.message_index, r.provenance.turn = r.provenance.turn, -1
    turns = {t.thread_id: conversation_turns(_load(t.messages, f"thread {t.thread_id!r}")) for t in doc.threads}
    _number_turns(doc.archival, doc.procedures, turns)


def _dump(messages: Sequence[BaseMessage], thread_id: str) -> list[dict[str, Any]]:
    out = messages_to_dict(list(messages))
    for turn, m in enumerate(out):
        try:
            json.dumps(m)
        except (TypeError, ValueError) as e:
            raise TransferError(f"thread {thread_id!r}: a message ({m.get('type')}, position {turn}) holds data "
                                f"that is not JSON ({e}); it cannot be exported") from e
    return out


# -- import ------------------------------------------------------------------------------------

def parse_export(data: str | bytes | dict[str, Any], source: str = "the file") -> AgentExport:
    """Validate an export; malformed or newer-version files raise ``TransferError`` saying which."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as e:
            raise TransferError(f"{source} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
        except RecursionError as e:
            raise TransferError(f"{source} is not an export: its JSON is nested too deeply to read") from e
        except ValueError as e:  # e.g. an integer of more digits than Python converts
            raise TransferError(f"{source} is not valid JSON: {e}") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TransferError(f"{source} is not a pagefault agent export (expected \"format\": \"{FORMAT}\")")
    v = data.get("version")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise TransferError(f"{source} has no valid schema version (\"version\" must be a positive integer, got {v!r})")
    if v > SCHEMA_VERSION:
        raise TransferError(f"{source} was written by a newer pagefault (schema version {v}); this pagefault "
                            f"({_pagefault_version()}) reads versions up to {SCHEMA_VERSION}. Upgrade pagefault to import it.")
    try:
        _check_encodable(data, source)
        doc = AgentExport.model_validate(data)
        doc.scope  # noqa: B018 (validates the ids)
        for t in doc.threads:
            _check_thread(t, source)
        _check_unique_ids(doc, source)
        if v < 3:
            _upgrade(doc)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top level)'}: {err['msg']}" for err in e.errors()[:8])
        more = f" (and {e.error_count() - 8} more)" if e.error_count() > 8 else ""
        raise TransferError(f"{source} is malformed: {problems}{more}") from e
    except RecursionError as e:
        raise TransferError(f"{source} is malformed: a value is nested too deeply to read") from e
    except TransferError:
        raise
    except ValueError as e:
        raise TransferError(f"{source} is malformed: {e}") from e
    return doc


def _check_encodable(data: dict[str, Any], source: str) -> None:
    """Every text in the file is one the stores can hold (no lone surrogates from ``\\ud800`` escapes)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise TransferError(f"{source} is malformed: it holds text that is not valid Unicode (a lone surrogate "
                            "such as \\ud800)") from e


def _load(messages: list[dict[str, Any]], where: str) -> list[BaseMessage]:
    try:
        return messages_from_dict(messages)
    except RecursionError as e:
        raise TransferError(f"{where}: a message is nested too deeply to read") from e
    except Exception as e:  # langchain raises KeyError/ValueError/ValidationError for bad dicts
        said = " ".join(str(e).split())  # one line (a ValidationError spans several)
        raise TransferError(f"{where}: a message is malformed ({type(e).__name__}: "
                            f"{said[:300]}{'...' if len(said) > 300 else ''})") from e


def _check_thread(t: ThreadRecord, source: str) -> None:
    where = f"{source}, thread {t.thread_id!r}"
    history, window = _load(t.messages, where), _load(t.window, where)
    if len(window) != len(history) - t.evicted_count:
        raise TransferError(f"{where} is malformed: {len(history)} messages with {t.evicted_count} evicted leave "
                            f"{len(history) - t.evicted_count} in the window, but the window holds {len(window)}")
    if t.recall_indexed > len(history):
        raise TransferError(f"{where} is malformed: recall_indexed {t.recall_indexed} is past its {len(history)} messages")
    if t.recall_held is not None and t.recall_held > len(history):
        raise TransferError(f"{where} is malformed: recall_held {t.recall_held} is past its {len(history)} messages")
    if not all(m.id for m in history):
        raise TransferError(f"{where} is malformed: every message needs an id")
    if len({m.id for m in history}) != len(history):
        raise TransferError(f"{where} is malformed: two of its messages have the same id")
    if [m.id for m in window] != [m.id for m in history[t.evicted_count:]]:
        raise TransferError(f"{where} is malformed: the window is not the thread's last {len(window)} messages")


def _check_unique_ids(doc: AgentExport, source: str) -> None:
    """Each archival record, procedure, core block and thread appears once: a second one would
    silently replace the first."""
    for kind, ids in (("archival id", [r.id for r in doc.archival]), ("procedure id", [p.id for p in doc.procedures]),
                      ("core block", [b.label for b in doc.core]), ("thread id", [t.thread_id for t in doc.threads])):
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                raise TransferError(f"{source} is malformed: {kind} {i!r} appears twice")
            seen.add(i)


def _check_empty(persistence: EmbeddedPersistence, svc: MemoryServices, doc: AgentExport) -> None:
    scope = doc.scope
    found = []
    if persistence.store.search(scope.namespace("core"), limit=1):
        found.append("core memory")
    if ProceduralMemory(persistence.store, scope).list():
        found.append("procedures")
    if svc.archival.count(scope):
        found.append(f"{svc.archival.count(scope)} archival record(s)")
    if svc.recall.count(scope):
        found.append(f"{svc.recall.count(scope)} recall entries")
    if found:
        raise TransferError(f"the store in {persistence.data_dir} already holds {', '.join(found)} for user "
                            f"{scope.user_id!r} (agent {scope.agent_id!r}); import needs an empty store, so "
                            "choose a new --data-dir")
    taken = [t.thread_id for t in doc.threads if _thread_exists(persistence, t.thread_id)]
    if taken:  # whoever's they are: a thread id names one conversation in the whole store
        raise TransferError(f"the store in {persistence.data_dir} already has thread(s) {', '.join(map(repr, taken[:5]))}; "
                            "import needs thread ids nobody uses there, so choose a new --data-dir")


def _thread_exists(persistence: EmbeddedPersistence, thread_id: str) -> bool:
    return persistence.checkpointer.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}) is not None


def scoped_archival_ids(scope: Scope, records: Sequence[ArchivalRecordOut]) -> dict[str, str]:
    """The id each record of an export takes in ``scope`` (keyed by its id in the file).

    A file's ids are not taken on trust: Chroma keys records by id alone, so a hand-written id equal
    to another user's record would replace it. An id this scope mints for the record's text (as
    ``archival_id`` does, also for a fact restated after it changed) is kept, so an export's ids
    survive the round trip; any other id is replaced by one derived from this scope and the file's
    id, which no other scope can mint."""
    out = {}
    for r in records:
        own = {archival_id(scope, r.text)}
        since = r.metadata.get("valid_from")
        if isinstance(since, (int, float)) and not isinstance(since, bool):
            own.add(archival_id(scope, f"{r.text}\x00since {float(since)!r}"))
        out[r.id] = r.id if r.id in own else \
            "arc-" + hashlib.sha256(f"{scope.key}\x00imported\x00{r.id}".encode()).hexdigest()[:24]
    return out


def import_agent(persistence: EmbeddedPersistence, data: str | bytes | dict[str, Any] | AgentExport, *,
                 progress: bool = True, source: str = "the file",
                 on_resume: Callable[[str], object] | None = None) -> AgentExport:
    """Recreate an exported agent in an empty store: core, archival, threads, recall.

    ``data`` is an export (its JSON text, the parsed dict, or an ``AgentExport``), written into
    ``persistence``, whose memory of that scope must be empty and whose thread ids must be free.
    Archival ids are kept when they are the ones this scope mints for their text, and recomputed for
    this scope otherwise (``scoped_archival_ids``), so no file reaches another user's records.

    An import journal in the data directory (``IMPORT_JOURNAL``) records the import from before its
    first write until its last: an import that is killed or fails midway leaves it, so
    ``unfinished_import`` (and ``pagefault doctor``, and ``export``) say the store is partial, and
    importing the same data again finishes it (rewriting the one thread that was being written)
    instead of refusing a non-empty store; ``on_resume`` is then called with a line saying what is
    being finished. Other data is refused until then. ``progress`` shows progress bars on stderr;
    ``source`` names the data in a ``TransferError`` (a file's path). Returns the export."""
    doc = data if isinstance(data, AgentExport) else parse_export(data, source)
    scope = doc.scope
    data_dir = persistence.data_dir
    svc = MemoryServices.open(data_dir)
    with _import_lock(data_dir):
        journal = read_journal(data_dir)
        digest = hashlib.sha256(doc.model_dump_json().encode()).hexdigest()
        if journal is None:
            _check_empty(persistence, svc, doc)
            _import_core(InMemoryStore(), doc, source)  # a dry run: a block or procedure the stores refuse stops it here
            journal = ImportJournal(digest=digest, user_id=scope.user_id, agent_id=scope.agent_id, source=source,
                                    started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    threads_total=len(doc.threads))
            _write_journal(data_dir, journal)
        elif journal.digest != digest:
            raise TransferError(f"{data_dir} holds {_describe(journal)}; finish it first (import that file again) "
                                f"before importing {source}")
        else:
            _check_resumable(persistence, doc, journal)
            if on_resume is not None:
                on_resume(f"finishing {_describe(journal)}")

        if journal.stage == "core":
            _import_core(persistence.store, doc, source)
            journal.stage = "archival"
            _write_journal(data_dir, journal)
        if journal.stage == "archival":
            _import_archival(svc, doc, progress)
            journal.stage = "threads"
            _write_journal(data_dir, journal)
        graph = build_graph(checkpointer=persistence.checkpointer, store=persistence.store)
        done = set(journal.threads_done)
        with _bar(len(doc.threads), "threads", "thread", progress) as bar:
            bar.update(len(done))
            for t in doc.threads:
                if t.thread_id in done:
                    continue
                if journal.thread_started == t.thread_id:  # cut off while being written: write it again
                    persistence.checkpointer.delete_thread(t.thread_id)
                journal.thread_started = t.thread_id
                _write_journal(data_dir, journal)
                _write_thread(graph, svc, scope, t)
                journal.threads_done.append(t.thread_id)
                _write_journal(data_dir, journal)
                bar.update()
        os.remove(_journal_path(data_dir))
    return doc


def _check_resumable(persistence: EmbeddedPersistence, doc: AgentExport, journal: "ImportJournal") -> None:
    """Before finishing an import: the threads it has not begun are still free, and the one it was
    writing is its own (so rewriting it removes nothing of anyone else's)."""
    done = set(journal.threads_done)
    for t in doc.threads:
        if t.thread_id in done or not _thread_exists(persistence, t.thread_id):
            continue
        latest = latest_saved(persistence.checkpointer, t.thread_id)
        values = latest[1] if latest else {}
        ours = {m.get("data", {}).get("id") for m in t.messages}
        if (t.thread_id != journal.thread_started or values.get("owner") not in (owner_of(doc.scope), None, {})
                or any(m.id not in ours for m in values.get("messages") or [])):  # or someone talked on it since
            raise TransferError(f"{persistence.data_dir} holds {_describe(journal)}, but thread {t.thread_id!r} has been "
                                "written since by something else; it cannot be finished there, so import into a new --data-dir")


def _import_core(store: BaseStore, doc: AgentExport, source: str) -> None:
    """Core blocks and procedures into ``store``, under the export's scope (writing them again changes nothing)."""
    scope = doc.scope
    core = core_memory(store, Context(user_id=scope.user_id, agent_id=scope.agent_id))
    for b in doc.core:
        try:
            core.set_block(b.label, b.value, limit=b.limit, description=b.description, schema=b.value_schema)
        except CoreMemoryError as e:
            raise TransferError(f"{source}: core block {b.label!r}: {e}") from e
    procedures = ProceduralMemory(store, scope, redact_secrets=False)
    for r in doc.procedures:
        try:
            procedures.restore(Procedure(r.id, r.text, r.kind, r.created_at, tuple(r.log)))
        except ProcedureError as e:
            raise TransferError(f"{source}: procedure {r.id!r}: {e}") from e


def _import_archival(svc: MemoryServices, doc: AgentExport, progress: bool) -> None:
    """Every archival record, under the scope's own ids (writing them again changes nothing)."""
    scope = doc.scope
    ids = scoped_archival_ids(scope, doc.archival)
    with _bar(len(doc.archival), "archival", "record", progress) as bar:
        for start in range(0, len(doc.archival), 64):
            batch = doc.archival[start:start + 64]
            svc.archival.index.upsert([
                IndexedText(id=ids[r.id], text=r.text, scope=scope.key, thread_id=r.provenance.thread_id,
                            created_at=r.provenance.created_at, tags=tuple(r.tags),
                            metadata={**r.metadata, "kind": "archival", "turn": r.provenance.message_index,
                                      "conversation_turn": r.provenance.turn,
                                      "message_id": r.provenance.message_id, "source": r.provenance.source,
                                      # a successor is one of this file's records, or none
                                      "superseded_by": ids.get(str(r.metadata.get("superseded_by", "")), ""),
                                      **_guard_metadata(r)})
                for r in batch])
            bar.update(len(batch))


def _guard_metadata(r: ArchivalRecordOut) -> dict[str, Any]:
    """This pagefault's own guard verdict on an imported record. A file may add flags, never remove
    them: its stored verdict and version stamp are not taken on trust (anyone can write them)."""
    given = [f for f in str(r.metadata.get("flags", "")).split("|") if f]
    flags = tuple(dict.fromkeys((*given, *scan(r.text).rules)))
    return {"flags": "|".join(flags), "flagged": bool(flags), "guard_version": GUARD_VERSION}


def _write_thread(graph: Any, svc: MemoryServices, scope: Scope, t: ThreadRecord) -> None:
    history, window = messages_from_dict(t.messages), messages_from_dict(t.window)
    config = {"configurable": {"thread_id": t.thread_id}}
    # First the whole history, so evicted messages live in a checkpoint as at the source, with the
    # thread's owner: the importing scope, so no other user's run may read or extend it ...
    config = graph.update_state(config, {"messages": history, "owner": owner_of(scope)}, as_node="reason")
    # ... then the window as it stood: evicted messages removed, truncated copies in place, the summary.
    evicted = history[:t.evicted_count]
    changed = [w for w, h in zip(window, history[t.evicted_count:]) if w != h]
    graph.update_state(config, {
        # Every message has an id: exported turns come from checkpoints, and add_messages (the update above)
        # gives any message without one its id.
        "messages": [RemoveMessage(id=cast(str, m.id)) for m in evicted] + changed,
        "summary": t.summary, "evicted_count": t.evicted_count, "compactions": t.compactions,
        "evicted_user_messages": sum(isinstance(m, HumanMessage) for m in evicted),
        "pressure_warned": t.pressure_warned, "recall_indexed": t.recall_indexed, "tokens": t.tokens,
    }, as_node="reason")
    # Recall holds what it held at the source (the next turn indexes the rest, as it would have
    # there), citing the checkpoint that now holds those messages, each with its turn.
    held = t.recall_indexed if t.recall_held is None else t.recall_held
    svc.recall.add(scope, t.thread_id, list(enumerate(history[:held])), config["configurable"]["checkpoint_id"],
                   turns=dict(enumerate(conversation_turns(history))))


# -- the import journal ------------------------------------------------------------------------

#: The file, in a data directory, that says an import into it is under way, or stopped before it finished.
IMPORT_JOURNAL: Final = "import-journal.json"
#: The file an import holds a lock on while it runs (so two imports never write one directory at once).
IMPORT_LOCK: Final = "import.lock"


class ImportJournal(BaseModel):
    """What an import into a data directory has done so far (``IMPORT_JOURNAL``)."""

    digest: str = Field(description="sha256 of the export being imported, to recognise the same data again.")
    user_id: str
    agent_id: str
    source: str = Field(description="Where the export came from (a file's path, or stdin).")
    started_at: str
    stage: Literal["core", "archival", "threads"] = Field(default="core", description="The stage now under way.")
    threads_total: int
    threads_done: list[str] = Field(default_factory=list, description="Threads written in full.")
    thread_started: str = Field(default="", description="The thread being written (maybe in part).")


def _journal_path(data_dir: str) -> str:
    return os.path.join(data_dir, IMPORT_JOURNAL)


def read_journal(data_dir: str) -> ImportJournal | None:
    """The journal of an import under way or unfinished in ``data_dir`` (None when there is none);
    ``TransferError`` when there is one this pagefault cannot read."""
    path = _journal_path(data_dir)
    try:
        with open(path, "rb") as f:
            return ImportJournal.model_validate_json(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as e:  # pydantic's ValidationError is a ValueError
        raise TransferError(f"an import into {data_dir} did not finish, so the store may be partial, and its journal "
                            f"{path} is unreadable ({type(e).__name__}); import into a new --data-dir") from e


def _write_journal(data_dir: str, journal: ImportJournal) -> None:
    """Replace the journal in one step (a reader sees the old one or the new one, never half), on disk
    before the writes it announces."""
    path = _journal_path(data_dir)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(journal.model_dump_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


@contextmanager
def _import_lock(data_dir: str) -> Iterator[None]:
    fd = os.open(os.path.join(data_dir, IMPORT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TransferError(f"another import into {data_dir} is running; wait for it to finish") from None
        yield
    finally:
        os.close(fd)  # and with it the lock


def _import_running(data_dir: str) -> bool:
    try:
        fd = os.open(os.path.join(data_dir, IMPORT_LOCK), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _describe(journal: ImportJournal) -> str:
    return (f"an unfinished import of user {journal.user_id!r} (agent {journal.agent_id!r}) from {journal.source}, "
            f"started {journal.started_at}: {len(journal.threads_done)} of {journal.threads_total} thread(s) written")


def unfinished_import(data_dir: str) -> str | None:
    """One line describing an import into ``data_dir`` that started and has not finished (it was
    killed or failed midway, or is running now), so the store holds part of an agent; None if none."""
    try:
        journal = read_journal(data_dir)
    except TransferError as e:
        return str(e)
    if journal is None:
        return None
    if _import_running(data_dir):
        return f"{_describe(journal)} so far; it is running now, so the store is partial until it ends"
    return (f"{_describe(journal)}; the store is partial: import the same file into {data_dir} again to finish it")


def write_export(doc: dict[str, Any], out: Any) -> None:
    """The export as JSON text (UTF-8, one record per line for readable diffs)."""
    json.dump(doc, out, ensure_ascii=False, indent=1)
    out.write("\n")


__all__ = ["AgentExport", "FORMAT", "IMPORT_JOURNAL", "IMPORT_LOCK", "ImportJournal", "SCHEMA_VERSION", "TransferError",
           "export_agent", "import_agent", "parse_export", "read_journal", "scope_threads", "scoped_archival_ids",
           "thread_history", "unfinished_import", "write_export"]
