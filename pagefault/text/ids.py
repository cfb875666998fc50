"""The ids a run is known by: its user, its agent and its thread, each at most ``MAX_ID`` characters.

An id is stored with everything the run writes (every checkpoint row and pending write carries the thread
id, every memory record its scope), so an unbounded one multiplied: a 1,000,000-character thread id added
62-72 MiB to the data directory at each turn. Every path a run takes checks its ids before anything is
written: ``Context`` (user and agent), the graph's run and a ``SerializedGraph``'s (the thread, from the
run's config, in process or served), the middleware's first step and the command line. A refused id is one
line naming it and its length, never the id itself.
"""

from __future__ import annotations

from typing import Any, Mapping

from pagefault.text.unicode import check_unicode

#: The longest user, agent or thread id, in characters.
MAX_ID = 256


def too_long(kind: str, value: str) -> ValueError:
    """The error for an id ``value`` of ``kind`` that is longer than ``MAX_ID``."""
    return ValueError(f"{kind} is longer than {MAX_ID} characters (it has {len(value):,}); "
                      f"ids are at most {MAX_ID} characters")


def check_id(kind: str, value: object) -> str:
    """``value`` as a user or agent id (``kind`` names it): a non-empty string of at most ``MAX_ID``
    characters, without control characters, that UTF-8 can encode; a ValueError otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID:
        raise too_long(kind, value)
    if any(ord(c) < 32 or c == "\x7f" for c in value):
        raise ValueError(f"{kind} must not contain control characters")
    check_unicode(value, kind)
    return value


def _field(source: object, kind: str) -> object:
    if isinstance(source, Mapping):
        return source.get(kind)
    return getattr(source, kind, None)  # a context object: pagefault's ``Context``, or an app's own with these fields


def check_run_ids(config: Mapping[str, Any] | None, context: object = None) -> None:
    """Refuse (ValueError) a run whose thread, user or agent id is longer than ``MAX_ID`` characters, before
    it starts: the thread id of ``config`` (``configurable["thread_id"]``, as LangGraph keeps it: ``str`` of
    it), and the user and agent ids of the run's ``context`` (a mapping, or an object with those fields) and
    of ``configurable``, where an app may name them. Ids it does not find pass: the run decides."""
    configurable = (config or {}).get("configurable") or {}
    for kind in ("thread_id", "user_id", "agent_id"):
        for source in (configurable, context) if kind != "thread_id" else (configurable,):
            value = _field(source, kind)
            if value is not None and len(str(value)) > MAX_ID:
                raise too_long(kind, str(value))
