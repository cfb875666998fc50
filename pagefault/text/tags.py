"""Stored text inside the prompt's own tags (a block of core memory, the list of procedures): ``</`` is
shown as ``<\\/``, so no stored text can close the tag it sits in and pass for the prompt's own words."""

from __future__ import annotations

#: How the prompt shows ``</`` in stored text.
SHOWN_CLOSE = "<\\/"


def inert(text: str) -> str:
    """``text`` as the prompt shows it inside a tag: every ``</`` written ``SHOWN_CLOSE``."""
    return text.replace("</", SHOWN_CLOSE)


def as_stored(shown: str) -> str:
    """Text a model copied from the prompt (``inert``'s form) as it is stored."""
    return shown.replace(SHOWN_CLOSE, "</")
