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

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

#: ``valid_to`` of a fact that still holds (far future, within what every index stores exactly).
OPEN = 1e12
#: The subject key of facts the user states about themself.
USER = "user"

_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
_DATE = (r"(?P<date>\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?|\d{1,2} (?i:"
         + "|".join(_MONTHS) + r") \d{4})")
_WHEN = rf"(?:(?i:as of|since|on|from|starting) {_DATE},?\s+)?"
_NAME = r"(?:(?i:my|our|the) [a-z][\w-]*(?: [A-Z][\w-]*)?|[A-Z][\w-]*(?: [A-Z][\w-]*){0,2})"
_VERB = r"(?i:is now|is still|has changed to|changed to|became|remains|is|was)"
_VALUE = r"(?P<value>[^.;!?\n]{1,80}?)"
_END = r"\s*(?:[.;!?]|$|(?= and (?:I|my|we)\b))"
_PATTERNS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(rf"^{_WHEN}(?P<subject>{_NAME})'s (?P<attribute>[a-z][\w -]{{0,40}}?) {_VERB} {_VALUE}{_END}"), None),
    (re.compile(rf"^{_WHEN}(?i:the) (?P<attribute>[a-z][\w -]{{0,40}}?) of (?P<subject>{_NAME}) {_VERB} {_VALUE}{_END}"), None),
    (re.compile(rf"^{_WHEN}(?P<subject>(?i:my)) (?P<attribute>[a-z][\w -]{{0,40}}?) {_VERB} {_VALUE}{_END}"), None),
    (re.compile(rf"^{_WHEN}(?P<subject>I|{_NAME}) (?:now )?(?:lives? in|moved to|relocated to) {_VALUE}{_END}"), "home"),
    (re.compile(rf"^{_WHEN}(?P<subject>I|{_NAME}) (?:now )?works? as an? {_VALUE}{_END}"), "job"),
    (re.compile(rf"^{_WHEN}(?P<subject>I|{_NAME}) (?:now )?works? (?:at|for) {_VALUE}{_END}"), "employer"),
]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s-]", " ", text.lower()).split())


def parse_date(text: str) -> float | None:
    """Epoch seconds (UTC) of an ISO date/time or a ``3 May 2024`` date; None if it is neither."""
    text = text.strip()
    m = re.fullmatch(r"(\d{1,2}) ([A-Za-z]+) (\d{4})", text)
    try:
        if m and m.group(2).lower() in _MONTHS:
            dt = datetime(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
        else:
            dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


@dataclass(frozen=True)
class Fact:
    """A subject/attribute/value statement read from a record's text; ``since`` is its stated date."""

    subject: str
    attribute: str
    value: str
    since: float | None = None

    @property
    def key(self) -> str:
        return f"{self.subject}|{self.attribute}"

    def metadata(self) -> dict[str, Any]:
        return {"fact_key": self.key, "fact_value": self.value}


def parse_fact(text: str) -> Fact | None:
    """The fact a statement makes, by the patterns in the module docs; None when none matches."""
    if not isinstance(text, str) or len(text) > 400:
        return None
    sentence = " ".join(text.split())
    for pattern, attribute in _PATTERNS:
        m = pattern.match(sentence)
        if not m:
            continue
        subject = _norm(m.group("subject"))
        subject = USER if subject in ("i", "my", "me") else subject
        attr = _norm(attribute or m.group("attribute"))
        value = _norm(m.group("value"))
        if not (subject and attr and value):
            continue
        date = m.group("date")
        return Fact(subject, attr, value, parse_date(date) if date else None)
    return None


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
