"""The safety choices a run makes: how the guard treats flagged memory, and what happens to a
core-memory edit that comes from untrusted content. ``Context`` validates against these."""

from __future__ import annotations

from typing import Literal

#: ``flag`` marks instruction-shaped memories untrusted when shown, ``quarantine`` also leaves them
#: out of search results, ``off`` does neither.
GuardMode = Literal["off", "flag", "quarantine"]
GUARD_MODES: tuple[str, ...] = ("off", "flag", "quarantine")
#: ``deny`` refuses an untrusted core edit, ``approve`` asks a person (``interrupt()``), ``allow`` applies it.
CoreEditPolicy = Literal["deny", "approve", "allow"]
CORE_EDIT_POLICIES: tuple[str, ...] = ("deny", "approve", "allow")
