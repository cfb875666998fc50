"""Which stored facts a new archival text replaces: the seam a model stands behind (``SupersedeJudge``).

The patterns of ``stores.validity`` always apply: two statements with the same fact key (subject and
attribute) and different values are one fact that changed. A judge adds what the patterns miss
("User moved to Berlin in May 2024." after "The user lives in Lisbon."): ``ArchivalStore.insert`` shows
it the new text and the current records of the same scope that a search for it finds (``Candidate``),
and it answers (``Judgement``) which of them the text makes no longer true, and which it only says
again (the same value still holds). The store checks the answer (ids outside the candidates, or named
both ways, are dropped), ties the named records and the new one into one fact, and falls back to the
patterns alone when the judge fails; it never loses the insert.

Restatements matter as much as replacements: once "still works at Umbrella" is tied to "works at
Umbrella", a later change needs to reach only one of them (a search shows a judge a few records, not
all) for the timeline to supersede both.

``PATTERNS`` is the judge of the offline model: it wants no candidates and names none.
``pagefault.consolidation.supersede`` has the chat model's judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Candidate:
    """A current record of the new text's own scope that the text may replace: its ``id`` and ``text``,
    the ``fact_key`` it has ('' if none) and ``valid_from``, when it became true (epoch seconds)."""

    id: str
    text: str
    fact_key: str
    valid_from: float


@dataclass(frozen=True)
class Judgement:
    """A judge's answer about one new text: the candidate ids it makes no longer true (``replaces``)
    and those it states again, their value still holding (``restates``)."""

    replaces: tuple[str, ...] = ()
    restates: tuple[str, ...] = ()


class SupersedeJudge(Protocol):
    """Decides which current records a new archival text replaces or restates (see module docs)."""

    #: How many candidates (the top hits of a search of the scope for the new text) it is shown; 0: it
    #: reads none, and ``judge`` is not called.
    candidates: int

    def judge(self, text: str, candidates: Sequence[Candidate]) -> Judgement:
        """What ``text`` does to each of ``candidates`` (ids not named: nothing). It may raise: the store
        then logs a warning and the patterns alone decide."""
        ...


class PatternJudge:
    """The patterns alone (``text.facts``): no candidates, and no tie beyond the fact keys'."""

    candidates = 0

    def judge(self, text: str, candidates: Sequence[Candidate]) -> Judgement:
        """Nothing: fact keys settle what the patterns read (``stores.validity``)."""
        return Judgement()


#: The judge of the offline model (and of every insert not told otherwise).
PATTERNS: SupersedeJudge = PatternJudge()
