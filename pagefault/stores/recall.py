"""Conversation recall: every message of every thread, evicted ones included, searchable.

The checkpointer is the source of truth. This index is derived from it: messages are indexed as
they appear in saved checkpoints, each with its thread, its position in the thread (the message
index: the entry's id and its stored ``turn`` key), its conversational turn (stored as
``conversation_turn``; see ``conversation_turns``) and the checkpoint that holds it, and ``rebuild``
recreates the whole index by walking a thread's checkpoint history. An entry written before
turns were counted has no ``conversation_turn``: its hits say turn -1 (not known) and still carry
their message index; ``rebuild`` gives them one.

Search looks at each turn twice: alone, and as a *unit* with the turns before and after it in the
same thread (an answer often only makes sense next to its question). Four signals are fused (BM25
and dense, on turns and on units), then turns in threads where many strong hits cluster get a
small boost: conversations are local, and the rest of the matching exchange is usually nearby.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from pagefault.models.embeddings import background_embedding
from pagefault.safety.guard import GUARD_VERSION, scan
from pagefault.safety.redaction import redact
from pagefault.stores.archival import check_search
from pagefault.stores.index.hybrid import HybridIndex, IndexedText, fuse, lexical_confidence
from pagefault.stores.index.protocols import SearchFilters
from pagefault.stores.scope import Scope
from pagefault.stores.writers.recall_writer import RecallWriter
from pagefault.text.messages import message_text
from pagefault.text.unicode import check_unicode, repaired

#: Longest text indexed per message (the embedding sees less; BM25 sees all of it).
MAX_INDEXED_CHARS = 200_000
#: Signal weights: BM25 on turns and on units count fully, the two dense views half each.
WEIGHTS = {"turn_lexical": 1.0, "unit_lexical": 1.0, "turn_dense": 0.5, "unit_dense": 0.5}
#: The lexical weights are scaled by ``lexical_confidence``: BM25 has its full say once its best raw score
#: reaches this (tuned with the dense weights on LoCoMo conversations 0-4: benchmarks/embedding_models.py).
LEXICAL_FULL_AT = 10.0
#: Thread boost: this share of the summed scores of a thread's hits among the top THREAD_POOL.
THREAD_BOOST = 0.05
THREAD_POOL = 20
#: Candidates each signal contributes.
CANDIDATES = 100
#: Turns (and threads) whose text and vector stay in memory for the next batch (``_remember``).
RECENT_TURNS = 3
RECENT_THREADS = 1024
#: How much of a hit search results carry (and so how much of it the poisoning guard judges).
HIT_TEXT_CHARS = 4_000
#: Separates rule labels in the guard verdict stored with each turn (metadata values are scalars).
_FLAG_SEP = "\x1f"


def recall_id(scope: Scope, thread_id: str, turn: int) -> str:
    """The id of a thread's message in recall; ``turn`` is its message index (the name is older than
    conversational turns, and the ids must stay as they were)."""
    return "rec-" + hashlib.sha256(f"{scope.key}\x00{thread_id}\x00{turn}".encode()).hexdigest()[:24]


def conversation_turns(messages: Iterable[BaseMessage], users_before: int = 0) -> list[int]:
    """The conversational turn of each message, from 0: a user message begins a turn, and every message
    up to the next user message belongs to it; messages before a thread's first user message belong to
    turn 0. ``users_before``: how many user messages the thread had before ``messages`` begin."""
    out, users = [], users_before
    for m in messages:
        users += isinstance(m, HumanMessage)
        out.append(max(users - 1, 0))
    return out


class HistoryTurns:
    """Numbers the messages of a thread's checkpoints, read oldest first, by conversational turn.

    A checkpoint's window starts at message ``evicted_count``; the user messages before it are the
    checkpoint's ``evicted_user_messages`` when it counted them, else those of the earlier checkpoints
    (which held the evicted messages), so checkpoints from before turns were counted number right too.
    """

    def __init__(self) -> None:
        self._seen: dict[int, bool] = {}  # message index -> is a user message (first version seen)
        self._users = [0]  # _users[k]: user messages among messages 0..k-1, while every one was seen

    def turns(self, values: Mapping[str, Any]) -> list[int] | None:
        """The turn of each message of one checkpoint's ``channel_values``; None if it cannot be known."""
        messages: Sequence[BaseMessage] = values.get("messages", []) or []
        offset = int(values.get("evicted_count", 0) or 0)
        for i, m in enumerate(messages):
            self._seen.setdefault(offset + i, isinstance(m, HumanMessage))
        while len(self._users) - 1 in self._seen:
            self._users.append(self._users[-1] + self._seen[len(self._users) - 1])
        counted = values.get("evicted_user_messages")
        base = (0 if offset == 0 else counted if type(counted) is int and counted >= 0
                else self._users[offset] if offset < len(self._users) else None)
        return None if base is None else conversation_turns(messages, base)


def speaker(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return message.name or "user"
    if isinstance(message, AIMessage):
        return message.name or "assistant"
    if isinstance(message, ToolMessage):
        return f"tool {message.name or ''}".strip()
    return message.type


#: Tool results that only re-quote memory; recall keeps their first line, not the quoted payload.
REQUOTING_TOOLS = frozenset({"archival_memory_search", "conversation_search"})


def recall_text(message: BaseMessage) -> str:
    """How a message reads in recall: speaker, text, and any tool calls it made. Secrets are redacted
    (``pagefault.safety.redaction``): the index never holds a key; the checkpoint keeps the message as sent."""
    text = message_text(message)
    if isinstance(message, ToolMessage) and message.name in REQUOTING_TOOLS:
        text = text.split("\n", 1)[0]
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = "; ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
        text = f"{text} [called {calls}]".strip()
    return repaired(redact(f"{speaker(message)}: {text}"[:MAX_INDEXED_CHARS]).text)


_CALLED = re.compile(r"\[called (.*)\]\s*$", re.S)
#: Record ids pagefault mints (archival, recall, imported turns, procedures): ``arc-`` and 24 hex digits.
_MINTED_ID = re.compile(r"\b(?:arc|rec|imp)-[0-9a-f]{24}\b|\bproc-[0-9a-f]{12}\b")


def dense_text(text: str) -> str:
    """What of a recall entry is embedded: the entry without the record ids in it. An id is meaning to
    BM25 (a search for it finds it) and noise to a sentence vector, and its hex digits were two thirds
    of the word pieces of a reply such as "Noted. I saved that to memory (arc-...)"."""
    return _MINTED_ID.sub("", text)


def recall_body(text: str) -> str:
    """A recall entry without what pagefault itself added (see ``recall_text``): the ``speaker:``
    prefix and the names in the ``[called tool(args)]`` note. Only the rest is scanned, so the entry's
    own format never reads as a role header or a tool call; the arguments still are."""
    body = text.split(": ", 1)[1] if ": " in text else text
    return _CALLED.sub(lambda m: "[called " + re.sub(r"\b\w+\(", "(", m.group(1)) + "]", body)


def guard_stamp(text: str) -> dict[str, str]:
    """The poisoning guard's verdict on a recall entry, made once at index time: scanning every hit
    of every search again cost more than the search itself."""
    flags = scan(recall_body(text)[:HIT_TEXT_CHARS]).rules
    return {"guard_flags": _FLAG_SEP.join(flags), "guard_version": GUARD_VERSION}


def stored_flags(meta: dict[str, Any]) -> tuple[str, ...] | None:
    """The verdict stored with an entry, or None when it is missing or made by other rules."""
    if meta.get("guard_version") != GUARD_VERSION:
        return None
    return tuple(f for f in str(meta.get("guard_flags", "")).split(_FLAG_SEP) if f)


@dataclass
class RecallHit:
    """One past message that a recall search found: its ``thread_id`` and place there
    (``message_index``, ``turn``), ``role`` and ``text``, its LangChain ``message_id`` and the
    ``checkpoint_id`` that holds it, its ``score`` (higher is better); ``external_id`` (the id an
    imported message had in its source history, '' otherwise) and ``flags`` (see below)."""

    thread_id: str
    #: The message's position in the thread's full history (what its recall id is made of).
    message_index: int
    role: str
    text: str
    message_id: str
    checkpoint_id: str
    score: float
    external_id: str = ""
    #: The guard's stored verdict (rule labels), or None if it must be made afresh.
    flags: tuple[str, ...] | None = None
    #: The conversational turn of the message, from 0 (-1: indexed before turns were counted).
    turn: int = -1

    def citation(self) -> dict[str, Any]:
        """Where the message is, as a tool result cites it: thread, turn, message index, checkpoint
        and message ids (and the imported message's id, if any)."""
        c = {"source": "recall", "thread_id": self.thread_id, "turn": self.turn, "message_index": self.message_index,
             "checkpoint_id": self.checkpoint_id, "message_id": self.message_id}
        if self.external_id:
            c["external_id"] = self.external_id
        return c


def _truncated(message: BaseMessage) -> bool:
    return bool(((message.additional_kwargs or {}).get("pagefault") or {}).get("truncated"))


def _bookkeeping(message: BaseMessage) -> bool:
    """A message pagefault's loop makes around a turn: a tool's result, or a model turn with no words."""
    if isinstance(message, ToolMessage):
        return True
    return isinstance(message, AIMessage) and bool(message.tool_calls) and not message_text(message).strip()


class RecallIndex:
    """Hybrid index of past turns, keyed by (scope, thread, turn).

    ``index`` holds one entry per message; ``units``, the same ids with each message's text between
    its neighbours', so a search also finds a message by its context. ``MemoryServices.open``
    builds one; most code uses ``services.recall``.
    """

    def __init__(self, index: HybridIndex, units: HybridIndex) -> None:
        self.index = index  # one entry per turn
        self.units = units  # the same ids, text = previous + this + next turn of the thread
        # Turns are indexed off the turn path (see ``recall_writer``); reads below wait for it.
        self.writer = RecallWriter(
            lambda scope, thread, entries, cps, turns: self.add(scope, thread, entries, "", checkpoints=cps, turns=turns),
            background=background_embedding, prepare=self._embed_ahead,
        )
        self._recent: OrderedDict[tuple[str, str], dict[int, tuple[str, np.ndarray, float]]] = OrderedDict()
        self._recent_lock = threading.Lock()

    def add(
        self,
        scope: Scope,
        thread_id: str,
        entries: Iterable[tuple[int, BaseMessage]],
        checkpoint_id: str,
        created_at: float | None = None,
        *,
        checkpoints: dict[int, str] | None = None,
        turns: Mapping[int, int] | None = None,
    ) -> int:
        """Index (message index, message) pairs that live in ``checkpoint_id`` (or, per message, in
        ``checkpoints``); idempotent. ``turns`` gives each message's conversational turn by message index
        (see ``conversation_turns``); an entry without one is stored without, as before turns were counted."""
        if not isinstance(scope, Scope) or not isinstance(thread_id, str) or not isinstance(checkpoint_id, str):
            raise ValueError("scope must be a Scope, thread_id and checkpoint_id strings")
        check_unicode(thread_id, "thread_id")
        check_unicode(checkpoint_id, "checkpoint_id")
        entries = list(entries)
        if not all(isinstance(e, tuple) and len(e) == 2 and type(e[0]) is int and e[0] >= 0
                   and isinstance(e[1], BaseMessage) for e in entries):
            raise ValueError("entries must be (message index, message) pairs: an index >= 0 and a LangChain message")
        now = time.time() if created_at is None else created_at
        items = []
        for turn, msg in entries:
            meta = msg.additional_kwargs.get("pagefault", {}) if msg.additional_kwargs else {}
            if _truncated(msg):
                continue  # the full text was indexed before truncation
            text = recall_text(msg)
            items.append(IndexedText(
                id=recall_id(scope, thread_id, turn), text=text, scope=scope.key,
                thread_id=thread_id, created_at=float(meta.get("timestamp", now)),
                metadata={"kind": "recall", "turn": turn, "role": msg.type, "message_id": msg.id or "",
                          "checkpoint_id": (checkpoints or {}).get(turn, checkpoint_id) or "",
                          "external_id": str(meta.get("external_id", "")),
                          **({"conversation_turn": int(turns[turn])} if turns and turn in turns else {}),
                          **guard_stamp(text)},
            ))
        vectors = self._vectors(scope, thread_id, items, [m for t, m in entries if not _truncated(m)])
        self.index.upsert(items, vectors)
        self._index_units(scope, thread_id, items, vectors)
        self._remember(scope, thread_id, items, vectors)
        return len(items)

    def _embed_ahead(self, entries: Sequence[tuple[int, BaseMessage]]) -> None:
        """Embed the texts ``add`` will embed (into the embedding cache), while the writer lingers."""
        self.index.embeddings.embed_array([dense_text(recall_text(m)) for _, m in entries
                                           if not _truncated(m) and not _bookkeeping(m)])

    def _remember(self, scope: Scope, thread_id: str, items: list[IndexedText], vectors: np.ndarray) -> None:
        """Keep the last turns written per thread: the next batch needs their text and vectors (for
        its units and borrowed vectors), and reading them back from Chroma cost two reads a turn."""
        with self._recent_lock:
            recent = self._recent.setdefault((scope.key, thread_id), {})
            self._recent.move_to_end((scope.key, thread_id))
            for item, vec in zip(items, vectors):
                recent[int(item.metadata["turn"])] = (item.text, vec, item.created_at)
            for t in sorted(recent)[:-RECENT_TURNS]:
                del recent[t]
            while len(self._recent) > RECENT_THREADS:
                self._recent.popitem(last=False)

    def _recalled(self, scope: Scope, thread_id: str, turns: Sequence[int]) -> dict[int, tuple[str, np.ndarray, float]]:
        """Those of ``turns`` this process wrote last for the thread (text, vector, created_at)."""
        with self._recent_lock:
            recent = self._recent.get((scope.key, thread_id), {})
            return {t: recent[t] for t in turns if t in recent}

    def _vectors(self, scope: Scope, thread_id: str, items: list[IndexedText], messages: list[BaseMessage]
                 ) -> np.ndarray:
        """Embed the turns people wrote; pagefault's own bookkeeping (a model turn that only calls
        tools, a tool's result) borrows the vector of the turn before it, which it serves: its text
        repeats that turn or says "Saved as ...", and embedding it cost more than the turn itself.
        Turns are indexed in order, so the turn before a batch is already stored, and the vectors
        do not depend on how turns were batched (a rebuild gives the same ones)."""
        own = [i for i, m in enumerate(messages) if not _bookkeeping(m)]
        vecs = self.index.embeddings.embed_array([dense_text(items[i].text) for i in own])
        out = np.zeros((len(items), vecs.shape[1]), dtype=np.float32)
        prev = self._stored_vector(scope, thread_id, int(items[0].metadata["turn"]) - 1) if items and (
            not own or own[0] > 0) else None
        mine = dict(zip(own, vecs))
        for i in range(len(items)):
            if i in mine:
                prev = mine[i]
            elif prev is None:  # nothing before it to borrow from: its own
                prev = self.index.embeddings.embed_array([dense_text(items[i].text)])[0]
            out[i] = prev
        return out

    def _stored_vector(self, scope: Scope, thread_id: str, turn: int) -> np.ndarray | None:
        if turn < 0:
            return None
        known = self._recalled(scope, thread_id, [turn])
        if known:
            return known[turn][1]
        got = self.index.collection.get(ids=[recall_id(scope, thread_id, turn)], include=["embeddings"])
        return np.asarray(got["embeddings"][0], dtype=np.float32) if len(got["ids"]) else None

    def _index_units(self, scope: Scope, thread_id: str, items: list[IndexedText], vectors: np.ndarray) -> None:
        """(Re)write the unit of each new turn and of the turn just before them (its next is now known).

        A unit's text (for BM25) is the previous, this and the next turn; its vector is the normalized
        sum of those turns' vectors, so units cost no extra embedding.
        """
        if not items:
            return
        turns = {int(i.metadata["turn"]): i for i in items}
        text = {t: i.text for t, i in turns.items()}
        vec = {int(i.metadata["turn"]): v for i, v in zip(items, vectors)}
        created = {t: i.created_at for t, i in turns.items()}
        first = min(turns)
        wanted = [t for t in (first - 2, first - 1) if t >= 0 and t not in turns]
        for t, (doc, v, at) in self._recalled(scope, thread_id, wanted).items():
            text[t], vec[t], created[t] = doc, v, at
        before = [recall_id(scope, thread_id, t) for t in wanted if t not in text]
        if before:
            got = self.index.collection.get(ids=before, include=["documents", "metadatas", "embeddings"])
            for doc, meta, v in zip(got["documents"], got["metadatas"], got["embeddings"]):
                t = int(meta["turn"])
                text[t], vec[t], created[t] = doc, np.asarray(v, dtype=np.float32), float(meta["created_at"])
        units, unit_vectors = [], []
        for t in sorted(text):
            if t < first - 1:
                continue  # only a neighbour of the unit before the new turns
            near = [x for x in (t - 1, t, t + 1) if x in text]
            units.append(IndexedText(recall_id(scope, thread_id, t), "\n".join(text[x] for x in near), scope.key,
                                     thread_id, created[t], metadata={"kind": "recall_unit", "turn": t}))
            v = np.sum([vec[x] for x in near], axis=0)
            unit_vectors.append(v / max(float(np.linalg.norm(v)), 1e-12))
        self.units.upsert(units, np.asarray(unit_vectors, dtype=np.float32))

    def search(
        self, scope: Scope, query: str, top_k: int = 5, *, thread_id: str | None = None,
        start: float | None = None, end: float | None = None, window: tuple[str, int] | None = None,
    ) -> list[RecallHit]:
        """The ``top_k`` past messages of ``scope`` that best match ``query``, best first: of one thread
        if ``thread_id`` is given, and only those written from ``start`` to ``end`` (epoch seconds).

        ``window`` = (thread, first message index): the caller's context window holds that thread from
        that message on, so the search does not wait for those messages to be indexed (they may be missing
        from the hits)."""
        check_search(query, top_k, start, end, thread_id)
        self.writer.flush(in_window=(scope, window[0], window[1]) if window is not None else None)
        n = max(CANDIDATES, top_k)
        filters = SearchFilters(thread_id=thread_id, start=start, end=end)
        turn_lexical = self.index.start_lexical(query, scope.key, n, **filters)
        unit_lexical = self.units.start_lexical(query, scope.key, n, **filters)
        qvec = self.index.embeddings.embed_query_array([query])[0]
        units = self.units.start_signals(query, qvec, scope.key, n, with_docs=False, lexical=unit_lexical, **filters)
        turn = self.index.signals(query, qvec, scope.key, n, lexical=turn_lexical, **filters)
        unit = units.result()
        say = lexical_confidence([turn.lexical, unit.lexical], LEXICAL_FULL_AT)
        scores = fuse([(WEIGHTS["turn_lexical"] * say, turn.lexical), (WEIGHTS["unit_lexical"] * say, unit.lexical),
                       (WEIGHTS["turn_dense"], turn.dense), (WEIGHTS["unit_dense"], unit.dense)])
        pool = sorted(scores, key=lambda i: scores[i], reverse=True)
        docs = turn.docs
        self.index.resolve(pool[:THREAD_POOL], docs)
        by_thread: dict[str, float] = {}
        for i in pool[:THREAD_POOL]:
            if i in docs:
                t = docs[i][1].get("thread_id", "")
                by_thread[t] = by_thread.get(t, 0.0) + scores[i]
        boosted = {}
        for i in pool[: max(top_k * 4, THREAD_POOL * 4)]:
            t = docs[i][1].get("thread_id", "") if i in docs else ""
            boosted[i] = scores[i] + THREAD_BOOST * by_thread.get(t, 0.0)
        ranked = sorted(boosted, key=lambda i: boosted[i], reverse=True)[:top_k]
        self.index.resolve(ranked, docs)
        out = []
        for i in ranked:
            if i not in docs:
                continue
            text, m = docs[i]
            out.append(RecallHit(m.get("thread_id", ""), int(m.get("turn", -1)), m.get("role", ""), text,
                                 m.get("message_id", ""), m.get("checkpoint_id", ""), boosted[i],
                                 m.get("external_id", ""), stored_flags(m), int(m.get("conversation_turn", -1))))
        return out

    def count(self, scope: Scope) -> int:
        """Messages of ``scope`` in the index, every thread, after the background writer has written
        what it holds."""
        self.writer.flush()
        return self.index.count(scope.key)

    def _thread_ids(self, scope: Scope, thread_id: str, *clauses: dict[str, Any]) -> list[str]:
        where = {"$and": [{"scope": scope.key}, {"thread_id": thread_id}, *clauses]}
        return list(self.index.collection.get(where=where, include=[])["ids"])

    def thread_count(self, scope: Scope, thread_id: str) -> int:
        """How many messages of one thread are in recall (what a search of the thread can find)."""
        self.writer.flush()
        return len(self._thread_ids(scope, thread_id))

    def indexed_through(self, scope: Scope, thread_id: str) -> int:
        """One past the highest message index of the thread in recall (0: none), once the writer has
        written what it was given: a thread's state counts only what its last step saw confirmed
        (``recall_indexed``), and the writer may have indexed more behind the turn since."""
        self.writer.flush()
        where = {"$and": [{"scope": scope.key}, {"thread_id": thread_id}]}
        metas = self.index.collection.get(where=where, include=["metadatas"])["metadatas"] or []
        return max((int(m["turn"]) for m in metas if m and isinstance(m.get("turn"), int)), default=-1) + 1

    def user_messages_before(self, scope: Scope, thread_id: str, message_index: int) -> int:
        """How many of a thread's messages below ``message_index`` are user messages, counted in recall:
        for a thread compacted before its state counted them. Evicted messages were indexed before they
        left the window, so this need not wait for the writer."""
        if message_index <= 0:
            return 0
        return len(self._thread_ids(scope, thread_id, {"role": "human"}, {"turn": {"$lt": int(message_index)}}))

    def rebuild(self, checkpointer: Any, scope: Scope, thread_id: str) -> int:
        """Re-derive this thread's recall entries from its checkpoint history (oldest first), each with
        its conversational turn (also for entries indexed before turns were counted)."""
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        seen: set[int] = set()
        numbering = HistoryTurns()
        total = 0
        for tup in reversed(list(checkpointer.list(config))):
            values = tup.checkpoint.get("channel_values", {})
            messages: Sequence[BaseMessage] = values.get("messages", []) or []
            offset = int(values.get("evicted_count", 0) or 0)
            numbered = numbering.turns(values)
            new = [(offset + i, m) for i, m in enumerate(messages) if offset + i not in seen]
            seen.update(t for t, _ in new)
            turns = None if numbered is None else {offset + i: t for i, t in enumerate(numbered)}
            total += self.add(scope, thread_id, new, tup.checkpoint["id"], turns=turns)
        return total
