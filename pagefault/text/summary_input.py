"""The summary request's input: the previous summary and the evicted messages, under two fixed headers.

Compaction (``window.compaction``) writes it as the user message of its summary call, whatever the
summary prompt says; the offline model (``models.offline``) recognises a summary call by it, so an
app's own summary prompt (``Prompts.summary``) needs no marker of pagefault's.
"""

from __future__ import annotations

from dataclasses import dataclass

PREVIOUS_HEADER = "PREVIOUS SUMMARY:\n"
"""Opens the input: the running summary follows (``(none)`` before the first compaction)."""
NEW_HEADER = "\n\nNEW MESSAGES:\n"
"""Separates the previous summary from the transcript of the evicted messages, one ``speaker: text`` a line."""
NO_SUMMARY = "(none)"


@dataclass(frozen=True)
class SummaryInput:
    """What a summary call is asked to merge: the running summary (empty before the first) and the transcript."""

    previous: str
    transcript: str

    def render(self) -> str:
        """The input as the summary call's user message."""
        return f"{PREVIOUS_HEADER}{self.previous or NO_SUMMARY}{NEW_HEADER}{self.transcript}"

    @classmethod
    def parse(cls, text: str) -> "SummaryInput | None":
        """The input ``text`` holds, or None when it is not one ``render`` wrote."""
        if not text.startswith(PREVIOUS_HEADER) or NEW_HEADER not in text:
            return None
        previous, _, transcript = text.removeprefix(PREVIOUS_HEADER).partition(NEW_HEADER)
        previous = previous.strip()
        return cls("" if previous == NO_SUMMARY else previous, transcript)
