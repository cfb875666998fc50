"""BM25 postings held in memory, beside the FTS5 table that keeps them on disk.

FTS5 scores an OR query row by row through every posting of every term: at 100k passages of
ordinary words that alone took ~22 ms a query. The same postings as numpy arrays score in a few
milliseconds. FTS5 stays the durable copy and the fallback; this one is rebuilt from the rows at
open and follows every insert and delete (``LexicalIndex`` feeds it).

Scores use FTS5's own bm25() formula and constants, so a ranking matches the FTS5 one up to the
tokenizer: words are split on Unicode letters and digits, folded to lower case without diacritics,
and Porter-stemmed, as FTS5's ``porter unicode61 remove_diacritics 2`` does.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from array import array
from typing import Iterable, Sequence

import numpy as np
import snowballstemmer

#: FTS5's bm25() defaults (k1, b), so scores line up with the FTS5 fallback.
K1, B = 1.2, 0.75
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_STEM_CACHE_MAX = 200_000


class _Stems:
    """Porter stems by word, cached (a store's vocabulary is small next to its text). A snowball
    stemmer keeps its word in its own fields, so each thread stems with its own."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._cache: dict[str, str] = {}

    def __call__(self, word: str) -> str:
        stem = self._cache.get(word)
        if stem is None:
            stemmer = getattr(self._local, "stemmer", None)
            if stemmer is None:
                stemmer = self._local.stemmer = snowballstemmer.stemmer("porter")
            if len(self._cache) >= _STEM_CACHE_MAX:
                self._cache.clear()
            stem = self._cache[word] = stemmer.stemWord(word)
        return stem


_stem = _Stems()


def forget_stems() -> None:
    """Empty the stem cache (tests that check stemming from a cold start)."""
    _stem._cache.clear()


def tokens(text: str) -> list[str]:
    """The stemmed tokens of ``text``, in order (repeats kept: they are term frequencies)."""
    text = text.lower()
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return [_stem(w) for w in _TOKEN.findall(text)]


class ResidentBM25:
    """Postings of the live documents, each document a slot that is never reused.

    A document is keyed by the SQLite rowid of its row. SQLite can hand a deleted row's rowid to a
    later row, so postings name slots, not rowids: a removed document's slot is marked dead and its
    postings are dropped at the next ``compact``.
    """

    def __init__(self) -> None:
        self._postings: dict[str, tuple[array, array]] = {}  # term -> (slots, term frequencies)
        # term -> (length, slots, tf * (k1 + 1), tf + k1 * (1 - b), k1 * b * length) (see ``_term_arrays``)
        self._arrays: dict[str, tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._slot_of: dict[int, int] = {}  # live rowid -> slot
        self._rid = np.zeros(1024, dtype=np.int64)
        self._len = np.zeros(1024, dtype=np.float64)
        self._alive = np.zeros(1024, dtype=bool)
        self._slots = 0
        self._tokens = 0  # tokens in live documents
        self._dead = 0  # removed documents whose postings are still in the arrays


    def has_term(self, term: str) -> bool:
        """Whether any posting holds ``term`` (a stem)."""
        return term in self._postings
    def __len__(self) -> int:
        return len(self._slot_of)

    def add(self, rid: int, text: str) -> None:
        """Index the row ``rid`` (replacing what it held before)."""
        self.remove(rid)
        toks = tokens(text)
        slot = self._slots
        if slot == len(self._rid):
            grow = len(self._rid)
            self._rid = np.concatenate([self._rid, np.zeros(grow, dtype=np.int64)])
            self._len = np.concatenate([self._len, np.zeros(grow, dtype=np.float64)])
            self._alive = np.concatenate([self._alive, np.zeros(grow, dtype=bool)])
        self._slots += 1
        self._rid[slot], self._len[slot], self._alive[slot] = rid, len(toks), True
        self._slot_of[rid] = slot
        self._tokens += len(toks)
        counts: dict[str, int] = {}
        for t in toks:
            counts[t] = counts.get(t, 0) + 1
        for t, n in counts.items():
            p = self._postings.get(t)
            if p is None:
                p = self._postings[t] = (array("q"), array("f"))
            p[0].append(slot)
            p[1].append(n)

    def remove(self, rid: int) -> None:
        """Forget the row ``rid`` (nothing if it is not indexed)."""
        slot = self._slot_of.pop(rid, None)
        if slot is None:
            return
        self._alive[slot] = False
        self._tokens -= int(self._len[slot])
        # Its postings stay, masked, until enough have piled up to be worth a pass over all of them.
        self._dead += 1
        if self._dead > max(5_000, len(self._slot_of) // 4):
            self.compact()

    def compact(self) -> None:
        """Drop the postings of removed documents."""
        for term, (slots, tfs) in list(self._postings.items()):
            s = np.frombuffer(slots, dtype=np.int64).copy()
            keep = self._alive[s]
            if keep.all():
                continue
            if not keep.any():
                del self._postings[term]
            else:
                self._postings[term] = (array("q", s[keep].tobytes()),
                                        array("f", np.frombuffer(tfs, dtype=np.float32)[keep].tobytes()))
            self._arrays.pop(term, None)
        self._dead = 0

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """A term's postings as arrays: slots, tf * (k1 + 1), tf + k1 * (1 - b), and the
        document-length part k1 * b * length (all fixed per posting: computed once per growth)."""
        p = self._postings.get(term)
        if p is None:
            return None
        cached = self._arrays.get(term)
        if cached is None or cached[0] != len(p[0]):
            # Copies: a numpy view would pin the array's buffer and make the next append fail.
            slots = np.array(p[0], dtype=np.int64)
            tf = np.array(p[1], dtype=np.float64)
            cached = (len(p[0]), slots, tf * (K1 + 1), tf + K1 * (1 - B), K1 * B * self._len[slots])
            self._arrays[term] = cached
        return cached[1], cached[2], cached[3], cached[4]

    def top(self, words: Sequence[str], n: int) -> tuple[list[tuple[int, float]], int]:
        """The ``n`` best (rowid, score) for an OR of ``words`` (higher is better), and how many
        documents matched at all."""
        live = len(self._slot_of)
        terms = [t for w in words for t in tokens(w)]
        if not live or not terms or n <= 0:
            return [], 0
        avgdl = self._tokens / live if self._tokens > 0 else 1.0
        scores = np.zeros(self._slots, dtype=np.float64)
        alive = self._alive[:self._slots]
        for term in terms:
            got = self._term_arrays(term)
            if got is None:
                continue
            slots, tf1, tf_k, len_part = got
            live_here = alive[slots] if self._dead else None
            df = len(slots) if live_here is None else int(np.count_nonzero(live_here))
            if df == 0:
                continue
            idf = math.log((live - df + 0.5) / (df + 0.5))
            if idf <= 0:
                idf = 1e-6  # as FTS5: a term in over half the rows still counts, barely
            # FTS5's bm25: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))
            w = tf1 / (tf_k + len_part / avgdl)
            if live_here is not None:
                w *= live_here
            scores[slots] += idf * w
        hit = np.flatnonzero(scores)
        matched = len(hit)
        if matched > n:  # the n best; among equal scores at the cut, the lower rowids (as FTS5 orders)
            cut = np.partition(scores[hit], matched - n)[matched - n]
            above, tied = hit[scores[hit] > cut], hit[scores[hit] == cut]
            hit = np.concatenate([above, tied[np.argsort(self._rid[tied], kind="stable")][:n - len(above)]])
        order = hit[np.lexsort((self._rid[hit], -scores[hit]))]
        return [(int(self._rid[s]), float(scores[s])) for s in order], matched

    def load(self, rows: Iterable[tuple[int, str]]) -> None:
        for rid, text in rows:
            self.add(rid, text)
