"""When an archival fact was true, and when we learned and unlearned it (bitemporal validity).

Every archival record carries two clocks, as flat index metadata (Chroma and the BM25 shadow):

- event time: ``valid_from`` (when it became true) and ``valid_to`` (when it stopped; ``OPEN`` while
  it still holds);
- system time: ``recorded_at`` (when it was written) and ``superseded_at`` (when a later record
  replaced it; 0 while current), with ``superseded_by`` naming that successor.

A contradicted fact is superseded, never deleted: default search leaves it out, an ``as_of`` search
("what was true on 3 May?") still finds it. Records written before validity existed have none of
these fields: both indexes treat them as current, valid from their creation time.

Which records contradict each other is decided by a *fact key* (subject + attribute) read from the
text by the simple statement patterns below. They are deliberately few and documented; text that
matches none is stored as before, without a key (consolidation may still merge its duplicates):

- ``[As of|Since|On|From <date>,] <Subject>'s <attribute> is|is now|is still|remains|became|changed
  to|has changed to <value>``
- ``The <attribute> of <Subject> is ... <value>`` (same verbs)
- ``My <attribute> is <value>`` (subject: the user)
- ``I|<Subject> live(s) in|moved to|relocated to <value>`` (attribute: home)
- ``I|<Subject> work(s) at|for <value>`` (attribute: employer); ``... work(s) as a <value>`` (job)

A subject is "I"/"my", "my/our <word>", or one to three capitalised words. The leading date, when
given (ISO ``2024-05-03`` or ``3 May 2024``), is the event time of the fact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

#: ``valid_to`` of a fact that still holds (far future, within what every index stores exactly).
OPEN = 1e12

@dataclass(frozen=True)
class Validity:
    """The two clocks of one record (see module docs)."""

    valid_from: float
    valid_to: float = OPEN
    recorded_at: float = 0.0
    superseded_at: float = 0.0
    superseded_by: str = ""
    expired: bool = False

    @property
    def current(self) -> bool:
        return self.superseded_at == 0.0

    def true_at(self, t: float) -> bool:
        return self.valid_from <= t < self.valid_to

    def metadata(self) -> dict[str, Any]:
        return {"valid_from": float(self.valid_from), "valid_to": float(self.valid_to),
                "recorded_at": float(self.recorded_at), "superseded_at": float(self.superseded_at),
                "superseded_by": self.superseded_by, "superseded": not self.current, "expired": self.expired}

    @classmethod
    def from_metadata(cls, m: Mapping[str, Any]) -> "Validity":
        created = float(m.get("created_at", 0.0))
        return cls(float(m.get("valid_from", created)), float(m.get("valid_to", OPEN)),
                   float(m.get("recorded_at", created)), float(m.get("superseded_at", 0.0)),
                   str(m.get("superseded_by", "")), bool(m.get("expired", False)))

    def superseded(self, successor: str, until: float, at: float | None = None) -> "Validity":
        return Validity(self.valid_from, until, self.recorded_at, at or time.time(), successor, False)

    def reopened(self) -> "Validity":
        return Validity(self.valid_from, OPEN, self.recorded_at)


@dataclass(frozen=True)
class ValidityFilter:
    """Which records a search sees: only current ones (default), those true at ``as_of``, or all."""

    current_only: bool = True
    as_of: float | None = None

    def chroma_clauses(self) -> list[dict[str, Any]]:
        if self.as_of is not None:
            # Records without validity fields (written before it existed) have no valid_from: the
            # dense side leaves them out of as_of searches; the BM25 side falls back to created_at.
            return [{"valid_from": {"$lte": float(self.as_of)}}, {"valid_to": {"$gt": float(self.as_of)}}]
        if self.current_only:
            return [{"superseded": {"$ne": True}}]  # a missing field counts as current
        return []


ALL = ValidityFilter(current_only=False)
CURRENT = ValidityFilter()


def as_of(t: float) -> ValidityFilter:
    return ValidityFilter(current_only=False, as_of=float(t))


@dataclass
class Stamped:
    """One record of a fact's timeline: id, value, validity (consolidation and inserts recompute these)."""

    id: str
    value: str
    validity: Validity


def timeline(records: list[Stamped]) -> dict[str, Validity]:
    """The validity each record of one fact key should have: each is valid until the next record (by
    event time) with a different value begins, and is superseded by it; the last run stays current.
    Expired records keep their expiry. Returns only the records whose validity changes."""
    ordered = sorted(records, key=lambda r: (r.validity.valid_from, r.validity.recorded_at, r.id))
    changes: dict[str, Validity] = {}
    now = time.time()
    for i, r in enumerate(ordered):
        if r.validity.expired:
            continue
        nxt = next((s for s in ordered[i + 1:] if s.value != r.value), None)
        old = r.validity
        if nxt is None:
            new = old if old.current and old.valid_to == OPEN else old.reopened()
        elif old.superseded_by == nxt.id and old.valid_to == nxt.validity.valid_from:
            new = old
        else:
            new = old.superseded(nxt.id, nxt.validity.valid_from, now)
        if new != old:
            changes[r.id] = new
    return changes
