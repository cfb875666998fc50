"""A thread has one owner: the user (and agent) of its first run.

Recall is indexed from a thread's messages under the scope of the run that reads them, so a second
user's run on someone else's thread id would copy that thread into their own recall, and their
``conversation_search`` would find it. The first run records its scope in the state (``owner``);
a run of any other scope is refused before anything is read, indexed or written. This holds with
LangGraph auth or without it (with auth, the server's owner filter refuses such a run even earlier).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pagefault.stores.scope import Scope


class ThreadOwnedError(PermissionError):
    """A run on a thread that belongs to another user or agent."""


def owner_of(scope: Scope) -> dict[str, str]:
    return {"user_id": scope.user_id, "agent_id": scope.agent_id}


def claim_thread(owner: Mapping[str, Any] | None, scope: Scope, thread: str) -> dict[str, Any]:
    """The state update that records ``scope`` as the owner of a thread nobody owns yet (``{}`` when
    it owns it already); ``ThreadOwnedError`` when the thread is another scope's."""
    if not owner:
        return {"owner": owner_of(scope)}
    if owner.get("user_id") == scope.user_id and owner.get("agent_id") == scope.agent_id:
        return {}
    raise ThreadOwnedError(f"thread {thread} belongs to another user or agent; start a new thread "
                           "(each thread is owned by the user and agent of its first run)")
