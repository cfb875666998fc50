"""Facts read from a statement's text: "my dentist is Dr Lee", "since 2024-03-01 I live in Porto".

A fact is a subject, an attribute and a value, with the date the text states for it; archival
memory uses it to settle contradictions (``stores.validity``), the offline model to cite. A judge
(``stores.superseding``) may tie statements to one fact that no pattern reads (``linked_fact``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

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

    @classmethod
    def stored(cls, key: str, value: str) -> "Fact":
        """The fact a record's ``fact_key`` and ``fact_value`` metadata name."""
        subject, _, attribute = key.partition("|")
        return cls(subject, attribute, value)


#: The subject of a fact key a judge made (``linked_fact``): the attribute is the id of the record that
#: first stated the fact, when no statement of it matched a pattern.
LINKED = "record"


def fact_value(text: str) -> str:
    """The value of a statement no pattern reads, as a judge links it to others: its normalised words."""
    return _norm(text)


def linked_fact(text: str, first_id: str) -> Fact:
    """The fact ``text`` states when a judge (not a pattern) tied it to record ``first_id``'s."""
    return Fact(LINKED, first_id, fact_value(text))


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
