"""Scanning a text of any length in full: in overlapping pieces the guard reads whole.

``guard.scan`` reads at most ``MAX_SCAN_CHARS`` of a text, and its learned scorer at most
``MAX_WINDOWS`` sentence pairs of it: enough for a memory record, not for a tool output, which the
model reads in full. ``scan_in_full`` cuts such a text into pieces small enough for both, each
overlapping the one before by ``OVERLAP_CHARS`` or half its length if less (an injection that long is
whole in some piece, wherever it falls), and scans every piece. Each piece starts at least three eighths
of its length after the one before, so each character is scanned under three times and the cost grows
with the text's length; each piece's verdict is cached by ``scan`` like any other text's.

A piece starts at a line start when one is near, else at a sentence start, else at a word start; one
that starts inside a line is read after the neutral word ``MID_LINE``, so the rules anchored at a line
start (a fake ``system:`` header, "new instructions:") see no line start the text does not have. A
piece ends at a sentence end when one is near, else after whitespace, so the scorer reads no sentence
cut short that it need not and no word is cut in two. A text that is one piece is scanned as ``scan``
scans it.
"""

from __future__ import annotations

import bisect
import re

from pagefault.safety.guard import MAX_WINDOWS, WINDOW_CHARS, Finding, Verdict, scan

#: Characters in a piece at most.
PIECE_CHARS = 20_000
#: Sentence ends in a piece at most: with the cuts of sentences longer than ``WINDOW_CHARS``, the
#: scorer's sentences in a piece stay under its ``MAX_WINDOWS`` pairs, so it reads every one.
PIECE_SENTENCES = MAX_WINDOWS - 2 * PIECE_CHARS // WINDOW_CHARS - 2
#: Characters each piece shares with the one before at least (or half of the piece before, if less).
OVERLAP_CHARS = 4_000
#: How far a cut may move to fall on a line start or whitespace (at most a quarter of the overlap).
SLACK_CHARS = 200

#: What a piece that starts inside a line is read after.
MID_LINE = "and "
#: What the scorer may take for a sentence end (a superset of its own: never fewer are counted).
_SENTENCE_END = re.compile(r"[.!?。]+|\n+")
_WORD_START = re.compile(r"(?<=\s)\S")


def pieces(text: str) -> list[str]:
    """``text`` as overlapping pieces that cover all of it; the text itself if it is short enough."""
    return [text[a:b] if a == 0 or text[a - 1] == "\n" else MID_LINE + text[a:b] for a, b in spans(text)]


def spans(text: str) -> list[tuple[int, int]]:
    """Where the pieces of ``text`` start and end (``pieces`` without the word before a mid-line start)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        limit = start + PIECE_CHARS
        first = bisect.bisect_right(ends, start)
        if first + PIECE_SENTENCES < len(ends):
            limit = min(limit, ends[first + PIECE_SENTENCES - 1])
        if limit >= len(text):
            out.append((start, len(text)))
            return out
        end = _end_at(text, start, limit, ends)
        out.append((start, end))
        overlap = min(OVERLAP_CHARS, (end - start) // 2)
        start = _start_at(text, start, max(end - overlap, start + 1), min(SLACK_CHARS, overlap // 4), ends)


def _end_at(text: str, start: int, limit: int, ends: list[int]) -> int:
    """Where a piece that may reach ``limit`` ends: at the last sentence end near it, else after the last
    whitespace near it, else at it."""
    lo = max(start + 1, limit - SLACK_CHARS)
    k = bisect.bisect_right(ends, limit) - 1
    if k >= 0 and ends[k] >= lo:
        return ends[k]
    for i in range(limit, lo - 1, -1):
        if text[i - 1].isspace():
            return i
    return limit


def _start_at(text: str, floor: int, at: int, slack: int, ends: list[int]) -> int:
    """Where the next piece starts, at most ``slack`` before ``at`` (and after ``floor``): a line start,
    else a sentence start, else the start of the word at ``at``, else ``at``."""
    lo = max(floor + 1, at - slack)
    line = text.rfind("\n", lo - 1, at)
    if line >= 0:
        return line + 1
    k = bisect.bisect_right(ends, at) - 1
    if k >= 0 and ends[k] >= lo and (m := _WORD_START.search(text, ends[k], at + 1)):
        return m.start()
    starts = [m.start() for m in _WORD_START.finditer(text, lo, at + 1)]
    return starts[-1] if starts else at


def scan_in_full(text: str) -> Verdict:
    """``guard.scan`` of every piece of ``text``: each rule's first finding, in the order found."""
    findings: dict[str, Finding] = {}
    for piece in pieces(text):
        for f in scan(piece).findings:
            findings.setdefault(f.label(), f)
    return Verdict(tuple(findings.values()))
