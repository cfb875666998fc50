"""``pagefault reindex``: archival and recall re-embedded with another model, resumably.

Each tier's vectors live in a collection that records the model that made them
(``stores.index.embedding_record``). A reindex leaves that collection as it is and writes a new one,
of the next generation and named after the new model, marked incomplete: archival records are
embedded again from their text; recall's messages too (pagefault's own bookkeeping turns borrow the
vector of the turn before, as when they were indexed); recall's units are the normalized sums of
their turns' new vectors, so they cost no embedding. The BM25 shadow is the same for every model and
is left alone. Only once every tier holds every record is each new collection marked complete, which
switches the tier to it, and the old ones are dropped.

So nothing is lost when a reindex is killed: until the switch the old collections are whole and
still the ones searched (by the old model), and running it again resumes into the incomplete ones,
embedding only the records they lack (and bringing over what changed in the old ones meanwhile).
A switch cut short (some tiers switched, not all) is finished by the next run, and meanwhile the
store refuses both models, with a message that says to run it.

A reindex must be alone on an embedded directory: it takes the directory's use exclusively
(``engines.directory_use``) and is refused while an agent, a chat or a server has it open, which are
refused in turn while it runs. On a Chroma server it cannot see the other replicas: stop them first.

Per-user reindex: one collection holds the vectors of every user of the store, and records one model,
because a search compares a query's vector with every vector of the collection it reads. So a store
is re-embedded whole. ``user`` says whose memory the caller means to re-embed: it is refused when the
store holds no records of that user, and when it holds other users' too (re-embedding them all is
then the caller's decision: run without ``user``), rather than splitting the store across two
models or re-embedding more than was asked.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
from chromadb.api import ClientAPI
from tqdm import tqdm

from pagefault.engines import connections as backends
from pagefault.engines.directory_use import alone
from pagefault.models.embedding_choice import EmbeddingChoice, EmbeddingModel, embedding_model
from pagefault.stores.index.batched_writes import BatchedCollection, write_limit
from pagefault.stores.index.embedding_record import (
    KINDS,
    ChromaCatalog,
    EmbeddingRecord,
    RecordedCollections,
    active,
    collection_name,
)
from pagefault.stores.index.protocols import Metadata, VectorCollection
from pagefault.stores.index.resident_vectors import ResidentCollection
from pagefault.stores.index.tiered_vectors import TieredCollection
from pagefault.stores.recall import dense_text, recall_body
from pagefault.stores.services import (
    ARCHIVAL_RECENT_FILE,
    RECALL_FILE,
    MemoryServices,
    chroma_catalog,
    copy_from_chroma,
    local_catalogs,
)

#: Records embedded (and written) together.
BATCH = 64
#: Records read at a time when listing a collection.
PAGE = 2_000


class ReindexError(ValueError):
    """A reindex that cannot be done as asked (no such user, other users in the store): one line."""


@dataclass
class TierPlan:
    """One tier's reindex: its ``kind``, the ``place`` that holds its collections, the ``source``
    collection (the active one) and its record, and the ``target`` collection and its record."""

    kind: str
    place: RecordedCollections
    source: str
    source_record: EmbeddingRecord
    target: str
    target_record: EmbeddingRecord


@dataclass
class ReindexReport:
    """What a reindex did: the store (``where``), the model its tiers now record (``embeddings``,
    ``dimensions``), what made each tier before (``previous``, by kind: '' for a tier that had no
    collection, the new model's name for one already switched), the records each tier holds now
    (``records``), and how many were embedded by this run (``embedded``) or found already written
    by an earlier, interrupted one (``kept``)."""

    where: str
    embeddings: str
    dimensions: int
    previous: dict[str, str] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    kept: int = 0

    def line(self) -> str:
        """One line saying what was done."""
        counts = ", ".join(f"{k} {self.records.get(k, 0)}" for k in KINDS)
        before = sorted({m for m in self.previous.values() if m and m != self.embeddings})
        if not any(self.previous.values()):
            return f"{self.where}: no vectors yet, nothing to re-embed (the first open with {self.embeddings!r} records it)"
        if not before:
            return f"{self.where}: already embedded by {self.embeddings!r} ({counts}); nothing to do"
        return (f"{self.where}: re-embedded by {self.embeddings!r} ({self.dimensions} dimensions), was "
                f"{', '.join(repr(b) for b in before)}: {counts} records ({self.embedded} embedded now, "
                f"{self.kept} by an earlier run)")

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        return {"where": self.where, "embeddings": self.embeddings, "dimensions": self.dimensions,
                "previous": self.previous, "records": self.records, "embedded": self.embedded, "kept": self.kept}


def reindex(data_dir: str, embeddings: EmbeddingChoice | None = None, *, user: str | None = None,
            chroma_url: str | None = None, database_url: str | None = None, progress: bool = True,
            batch: int = BATCH) -> ReindexReport:
    """Re-embed the archival and recall of the store in ``data_dir`` (or on the Chroma server at
    ``chroma_url``; both default to the environment's, as ``MemoryServices.open``) with ``embeddings``
    (None: ``PAGEFAULT_EMBEDDINGS``, else the default), resumably (see the module docstring). ``user``:
    the user whose memory is meant (checked, see the module docstring). ``progress``: a bar of
    records done / total on stderr."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    model = embedding_model(embeddings)
    path = os.path.abspath(os.path.expanduser(data_dir))
    server = backends.chroma_url(chroma_url)
    shared = backends.database_url(database_url) if server else ""
    if server and shared:
        return _reindex(path, server, model, user, progress, batch)
    if not os.path.isdir(path):
        raise ReindexError(f"{path}: no such data directory")
    with alone(path):
        MemoryServices.forget(path)
        return _reindex(path, server, model, user, progress, batch)


def _reindex(path: str, server: str, model: EmbeddingModel, user: str | None, progress: bool,
             batch: int) -> ReindexReport:
    client = backends.chroma_client(server) if server else _local_client(path)
    chroma = chroma_catalog(client, path, server, model)
    if server:
        return _run(_Stores(client, chroma, path, server, {k: chroma for k in KINDS}), model, user, progress, batch)
    for kind in ("recall", "recall_unit"):  # a directory from before recall left Chroma: its copy first
        copy_from_chroma(client, ResidentCollection(os.path.join(path, RECALL_FILE), f"pagefault_{kind}"))
    with local_catalogs(chroma, path) as (tiered, recall_file):
        places: dict[str, RecordedCollections] = {"archival": tiered, "recall": recall_file, "recall_unit": recall_file}
        return _run(_Stores(client, chroma, path, server, places), model, user, progress, batch)


def _local_client(path: str) -> ClientAPI:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=os.path.join(path, "chroma"),
                                     settings=Settings(anonymized_telemetry=False, allow_reset=False))


@dataclass
class _Stores:
    """Where a store's collections are: its Chroma ``client`` and catalog, and each tier's place."""

    client: ClientAPI
    chroma: ChromaCatalog
    path: str
    server: str
    places: dict[str, RecordedCollections]

    def collection(self, kind: str, name: str, *, writing: bool) -> VectorCollection:
        """Collection ``name`` of ``kind``'s tier, to read (``writing`` False) or to fill."""
        if self.server:
            col = self.chroma.collection(name) if writing else self.client.get_collection(name, embedding_function=None)
            return BatchedCollection(backends.ServerCollection(col, self.server), write_limit(self.client))
        if kind != "archival":
            return ResidentCollection(os.path.join(self.path, RECALL_FILE), name)
        hot = ResidentCollection(os.path.join(self.path, ARCHIVAL_RECENT_FILE), name)
        if writing:  # a whole collection at a time: straight into Chroma, in batches it takes (``--batch`` may be more)
            return BatchedCollection(self.chroma.collection(name), write_limit(self.client))
        if name not in self.chroma.names():
            return hot
        return TieredCollection(self.client.get_collection(name, embedding_function=None), hot)


def _run(stores: _Stores, model: EmbeddingModel, user: str | None, progress: bool, batch: int) -> ReindexReport:
    where = stores.server and backends.public_url(stores.server) or stores.path
    report = ReindexReport(where, model.name, 0)
    plans: list[TierPlan] = []
    leftovers: list[tuple[RecordedCollections, str]] = []  # collections nothing uses: dropped once the user is checked
    for kind in KINDS:
        place = stores.places[kind]
        records = place.records(kind)
        found = active(records)
        report.previous[kind] = found[1].model if found else ""
        if found is None:
            continue
        name, record = found
        if record.model == model.name and record.dimensions == model.dimensions:
            # a switch cut short, or an abandoned reindex: what is left of it
            leftovers += [(place, other) for other in records if other != name]
            continue
        target = collection_name(kind, model.name)
        plan = TierPlan(kind, place, name, record, target,
                        EmbeddingRecord(model.name, model.dimensions, record.generation + 1, complete=False))
        kept = records.get(target)
        # earlier reindexes' leftovers, but the one this run resumes
        leftovers += [(place, other) for other in records
                      if other != name and not (other == target and kept == plan.target_record)]
        plans.append(plan)
    report.dimensions = model.dimensions
    sources = {p.kind: _rows(stores.collection(p.kind, p.source, writing=False)) for p in plans}
    if user is not None:  # whose memory the store holds: its sources, and the tiers already switched
        metas = {k: [m for _, m in rows] for k, rows in sources.items()}
        for kind in KINDS:
            found = active(stores.places[kind].records(kind))
            if kind not in metas and found is not None:
                metas[kind] = [m for _, m in _rows(stores.collection(kind, found[0], writing=False))]
        _check_user(user, metas, report.where)
    for place, name in leftovers:
        place.drop(name)
    total = sum(len(rows) for rows in sources.values())
    with tqdm(total=total, desc=f"reindex to {model.name}", unit="record", file=sys.stderr,
              disable=not progress or not total, mininterval=0, miniters=1) as bar:
        for plan in plans:
            plan.place.write_record(plan.target, plan.target_record)
        by_kind = {p.kind: p for p in plans}
        if "archival" in by_kind:
            _archival(stores, by_kind["archival"], sources["archival"], model, batch, bar, report)
        turns = None
        if "recall" in by_kind:
            turns = stores.collection("recall", by_kind["recall"].target, writing=True)
            _recall_turns(stores, by_kind["recall"], sources["recall"], turns, model, batch, bar, report)
        if "recall_unit" in by_kind:
            recall_name = by_kind["recall"].target if "recall" in by_kind else _active_name(stores, "recall")
            turns = turns or stores.collection("recall", recall_name, writing=False)
            _recall_units(stores, by_kind["recall_unit"], sources["recall_unit"], turns, model, batch, bar, report)
    for plan in plans:  # every tier holds every record: switch each, then let go of the old collections
        written = plan.place.count(plan.target)
        if written != len(sources[plan.kind]):
            raise ReindexError(f"{report.where}: {plan.kind} holds {written} records after the reindex, its source "
                               f"{len(sources[plan.kind])}; nothing was switched: run it again")
    for plan in plans:
        plan.place.write_record(plan.target, EmbeddingRecord(model.name, model.dimensions,
                                                             plan.target_record.generation, complete=True))
    for plan in plans:
        plan.place.drop(plan.source)
    if not stores.server and plans:  # the copies an earlier version's recall left in Chroma are copied: gone too
        for kind in ("recall", "recall_unit"):
            if f"pagefault_{kind}" in stores.chroma.names():
                stores.chroma.drop(f"pagefault_{kind}")
    for kind in KINDS:
        found = active(stores.places[kind].records(kind))
        report.records[kind] = stores.places[kind].count(found[0]) if found else 0
    return report


def _active_name(stores: _Stores, kind: str) -> str:
    """The active collection of ``kind`` (one this run does not rewrite)."""
    found = active(stores.places[kind].records(kind))
    if found is None:
        raise ReindexError(f"{stores.path}: {kind} has no collection")
    return found[0]


def _rows(col: VectorCollection) -> list[tuple[str, Metadata]]:
    """Every (id, metadata) of ``col``, paged."""
    out: list[tuple[str, Metadata]] = []
    offset = 0
    while True:
        got = col.get(include=["metadatas"], limit=PAGE, offset=offset)
        out += [(i, dict(m or {})) for i, m in zip(got["ids"], got["metadatas"])]
        if len(got["ids"]) < PAGE:
            return out
        offset += PAGE


def user_of(scope_key: str) -> str:
    """The user of a ``Scope.key`` (``<length>:<user>|<agent>``)."""
    length, _, rest = scope_key.partition(":")
    return rest[:int(length)] if length.isdigit() else scope_key


def _check_user(user: str | None, metas: dict[str, list[Metadata]], where: str) -> None:
    """Refuse ``user`` when the store holds none of their records, or others' as well (module docstring)."""
    if user is None:
        return
    users = {user_of(str(m.get("scope", ""))) for rows in metas.values() for m in rows}
    if user not in users:
        raise ReindexError(f"--user {user!r}: {where} holds no archival or recall records of that user "
                           f"({len(users)} user(s) there)")
    others = sorted(users - {user})
    if others:
        shown = ", ".join(repr(o) for o in others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ReindexError(f"--user {user!r}: {where} also holds the memory of {shown}, and one collection holds "
                           "every user's vectors under one model: a store is re-embedded whole (run without --user)")


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _fetch(col: VectorCollection, ids: list[str], *, vectors: bool = False) -> dict[str, tuple[str, Metadata, Any]]:
    """(document, metadata, vector or None) of the ``ids`` ``col`` holds, by id."""
    if not ids:
        return {}
    got = col.get(ids=ids, include=["documents", "metadatas", "embeddings"] if vectors else ["documents", "metadatas"])
    vecs = got["embeddings"] if vectors else [None] * len(got["ids"])
    return {i: (d or "", dict(m or {}), v) for i, d, m, v in zip(got["ids"], got["documents"], got["metadatas"], vecs)}


def _write(target: VectorCollection, ids: list[str], vectors: np.ndarray, found: dict[str, tuple[str, Metadata, Any]]
           ) -> None:
    if ids:
        target.upsert(ids=ids, embeddings=np.asarray(vectors, dtype=np.float32),
                      metadatas=[found[i][1] for i in ids], documents=[found[i][0] for i in ids])


def _changed(source: dict[str, tuple[str, Metadata, Any]], target: dict[str, tuple[str, Metadata, Any]]
             ) -> tuple[list[str], list[str]]:
    """Ids to embed (not in ``target``, or with other text there) and ids whose metadata alone changed
    (the old collection was written after an earlier run stopped: a restamp, a supersede)."""
    embed = [i for i in source if i not in target or target[i][0] != source[i][0]]
    restamp = [i for i in source if i in target and target[i][0] == source[i][0]
               and not same_metadata(target[i][1], source[i][1])]
    return embed, restamp


def same_metadata(a: Metadata, b: Metadata) -> bool:
    """Whether two records' metadata say the same: the same keys and values, floats to within their
    last digits (Chroma keeps an epoch-seconds float a digit or so shorter than SQLite's JSON does)."""
    if set(a) != set(b):
        return False
    for key, x in a.items():
        y = b[key]
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-9):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


def _restamp(target: VectorCollection, ids: list[str], source: dict[str, tuple[str, Metadata, Any]]) -> None:
    if ids:
        target.update(ids=ids, metadatas=[source[i][1] for i in ids])


def _drop_extra(target: VectorCollection, wanted: set[str]) -> None:
    """Remove what ``target`` holds that the source no longer does (deleted after an earlier run stopped)."""
    extra = [i for i, _ in _rows(target) if i not in wanted]
    if extra:
        target.delete(ids=extra)


def _archival(stores: _Stores, plan: TierPlan, rows: list[tuple[str, Metadata]], model: EmbeddingModel, batch: int,
              bar: tqdm, report: ReindexReport) -> None:
    """Archival records embedded again from their text, ``batch`` at a time."""
    source = stores.collection("archival", plan.source, writing=False)
    target = stores.collection("archival", plan.target, writing=True)
    for chunk in _chunks([i for i, _ in rows], batch):
        got, have = _fetch(source, list(chunk)), _fetch(target, list(chunk))
        embed, restamp = _changed(got, have)
        _write(target, embed, model.embed_array([got[i][0] for i in embed]), got)
        _restamp(target, restamp, got)
        report.embedded += len(embed)
        report.kept += len(got) - len(embed)
        bar.update(len(chunk))
    _drop_extra(target, {i for i, _ in rows})


def _place(meta: Metadata) -> tuple[str, str, int]:
    return str(meta.get("scope", "")), str(meta.get("thread_id", "")), int(meta.get("turn", -1))


def _bookkeeping(text: str, meta: Metadata) -> bool:
    """A recall entry of pagefault's own loop (a tool's result, a model turn that only called tools): it
    borrows the vector of the turn before, as ``RecallIndex`` indexed it."""
    role = meta.get("role")
    return role == "tool" or (role == "ai" and recall_body(text).startswith("[called "))


def _recall_turns(stores: _Stores, plan: TierPlan, rows: list[tuple[str, Metadata]], target: VectorCollection,
                  model: EmbeddingModel, batch: int, bar: tqdm, report: ReindexReport) -> None:
    """Recall's messages, thread by thread in order, embedded again as ``RecallIndex`` embeds them."""
    source = stores.collection("recall", plan.source, writing=False)
    ordered = sorted(rows, key=lambda r: _place(r[1]))
    by_place = {_place(m): i for i, m in ordered}
    for chunk in _chunks([i for i, _ in ordered], batch):
        got, have = _fetch(source, list(chunk)), _fetch(target, list(chunk))
        embed, restamp = _changed(got, have)
        own = [i for i in embed if not _bookkeeping(got[i][0], got[i][1])]
        vectors = dict(zip(own, model.embed_array([dense_text(got[i][0]) for i in own])))
        for i in [i for i in embed if i not in vectors]:  # in thread order: the turn before is written or here
            scope, thread, turn = _place(got[i][1])
            vectors[i] = _vector(by_place.get((scope, thread, turn - 1)), vectors, target, model, dense_text(got[i][0]))
        _write(target, embed, np.asarray([vectors[i] for i in embed], dtype=np.float32).reshape(len(embed), -1), got)
        _restamp(target, restamp, got)
        report.embedded += len(embed)
        report.kept += len(got) - len(embed)
        bar.update(len(chunk))
    _drop_extra(target, {i for i, _ in rows})


def _vector(rid: str | None, fresh: dict[str, np.ndarray], target: VectorCollection, model: EmbeddingModel,
            own_text: str) -> np.ndarray:
    """The new vector of recall entry ``rid`` (written in this batch or before); the entry's own when
    there is none to borrow."""
    if rid is not None and rid in fresh:
        return fresh[rid]
    if rid is not None:
        got = target.get(ids=[rid], include=["embeddings"])
        if len(got["ids"]):
            return np.asarray(got["embeddings"][0], dtype=np.float32)
    return model.embed_array([own_text])[0]


def _recall_units(stores: _Stores, plan: TierPlan, rows: list[tuple[str, Metadata]], turns: VectorCollection,
                  model: EmbeddingModel, batch: int, bar: tqdm, report: ReindexReport) -> None:
    """Recall's units: each the normalized sum of its turn's and its neighbours' new vectors (no
    embedding), with its text and metadata as they were."""
    source = stores.collection("recall_unit", plan.source, writing=False)
    target = stores.collection("recall_unit", plan.target, writing=True)
    turn_ids = {_place(m): i for i, m in _rows(turns)}
    for chunk in _chunks([i for i, _ in rows], batch):
        got = _fetch(source, list(chunk))
        near = {i: [turn_ids[p] for p in _neighbours(_place(got[i][1])) if p in turn_ids] for i in got}
        vecs = _fetch(turns, sorted({n for ns in near.values() for n in ns}), vectors=True)
        out = []
        for i in got:
            parts = [np.asarray(vecs[n][2], dtype=np.float32) for n in near[i] if n in vecs]
            v = np.sum(parts, axis=0) if parts else model.embed_array([dense_text(got[i][0])])[0]
            out.append(v / max(float(np.linalg.norm(v)), 1e-12))
        ids = list(got)
        _write(target, ids, np.asarray(out, dtype=np.float32).reshape(len(ids), -1), got)
        bar.update(len(chunk))
    _drop_extra(target, {i for i, _ in rows})


def _neighbours(place: tuple[str, str, int]) -> list[tuple[str, str, int]]:
    scope, thread, turn = place
    return [(scope, thread, turn - 1), (scope, thread, turn), (scope, thread, turn + 1)]

