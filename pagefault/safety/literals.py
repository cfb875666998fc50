"""Literal strings a regular expression cannot match without: a cheap test before the real search.

The guard's rules are long alternations that ``re`` tries at every position of a text; on a
document's passages they cost milliseconds. Yet nearly every alternative needs some word ("ignore",
"system", "send") to be present. ``required_literals`` reads a pattern's parse tree and returns a set
of strings such that every match contains at least one of them, or None when it cannot tell. A text
containing none of them cannot match, and plain substring tests are far cheaper than the search.

Only what the parse tree proves is used: a literal, a small character class, a group, an alternation
of those, and a repeat of at least one; anything else (a category such as ``\\w``, a large class, an
unbounded structure with no literal) makes that part unknown, never guessed.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]  # typeshed has no stubs for these private modules
    from re import _parser as _p  # type: ignore[attr-defined]  # (the same)
except ImportError:  # pragma: no cover
    import sre_constants as _c
    import sre_parse as _p

#: Most strings an exact piece may expand to (alternations of words, and their concatenations).
MAX_EXPANSION = 512


def required_literals(pattern: str, flags: int = 0) -> frozenset[str] | None:
    """Strings one of which every match of ``pattern`` contains, or None if unknown. Case-sensitive
    patterns only (IGNORECASE would need case folding here)."""
    if flags & re.I:
        return None
    tree = _p.parse(pattern, flags)
    if tree.state.flags & re.I:  # an inline (?i) for the whole pattern
        return None
    need = _needed(list(tree))
    return frozenset(need) if need else None


def required_literal_sets(pattern: str, flags: int = 0) -> list[frozenset[str]]:
    """Every set of strings found such that each match of ``pattern`` contains one string of each set
    (``required_literals`` gives the most selective one alone), or [] if none is known: a text must
    hold one of each, and the sets of the words an alternative joins ("send ... data ... http") are
    rarely all matched by a text even when each one often is."""
    if flags & re.I:
        return []
    tree = _p.parse(pattern, flags)
    if tree.state.flags & re.I:
        return []
    found: list[set[str]] = []
    _needed(list(tree), found)
    return list(dict.fromkeys(frozenset(s) for s in found))


def _exact(items: list[Any]) -> set[str] | None:
    """Every string the sequence ``items`` can match, if it is a small finite set of literals."""
    out = {""}
    for op, av in items:
        alts: set[str] | None
        if op is _c.LITERAL:
            alts = {chr(av)}
        elif op is _c.AT:
            alts = {""}  # \b, ^, $: zero width
        elif op is _c.IN:
            alts = _class(av)
        elif op is _c.SUBPATTERN:
            if av[1] & re.I or av[2]:  # inline flags inside the group
                return None
            alts = _exact(list(av[3]))
        elif op is _c.BRANCH:
            alts = set()
            for branch in av[1]:
                got = _exact(list(branch))
                if got is None:
                    return None
                alts |= got
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and av[0] == av[1] == 1:
            alts = _exact(list(av[2]))
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            alts = {""}  # lookarounds consume nothing
        else:
            return None
        if alts is None:
            return None
        out = {a + b for a, b in itertools.product(out, alts)}
        if len(out) > MAX_EXPANSION:
            return None
    return out


def _class(items: list[Any]) -> set[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is _c.LITERAL:
            chars.add(chr(av))
        elif op is _c.RANGE and av[1] - av[0] < 8:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY, wide ranges
            return None
    return chars if len(chars) <= 8 else None


def _needed(items: list[Any], found: list[set[str]] | None = None) -> set[str] | None:
    """A set of strings one of which every match of the sequence contains (the most selective one
    found), or None; every such set found is also appended to ``found``, if given."""
    best: set[str] | None = None

    def consider(cand: set[str] | None) -> None:
        nonlocal best
        if cand and all(cand):
            if found is not None:
                found.append(cand)
            if best is None or _better(cand, best):
                best = cand

    run = {""}  # what the current run of exact items can match (a run is cut where it would grow too big)
    for item in items:
        exact = _exact([item])
        if exact is not None:
            if len(run) * len(exact) <= MAX_EXPANSION:
                run = {a + b for a, b in itertools.product(run, exact)}
            else:
                consider(run)
                run = exact
            continue
        consider(run)
        run = {""}
        op, av = item
        if op is _c.SUBPATTERN and not (av[1] & re.I or av[2]):
            consider(_needed(list(av[3]), found))  # what a group needs, the sequence holding it needs
        elif op is _c.BRANCH:
            parts = [_needed(list(b)) for b in av[1]]
            known = [p for p in parts if p is not None]
            if len(known) == len(parts):
                consider(set[str]().union(*known))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and av[0] >= 1:
            consider(_needed(list(av[2]), found))
    consider(run)
    return best


def _better(a: set[str], b: set[str]) -> bool:
    """Prefer the set whose shortest string is longer (more selective), then the smaller set."""
    return (min(map(len, a)), -len(a)) > (min(map(len, b)), -len(b))
