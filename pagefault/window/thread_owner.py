"""A thread has one owner: the user (and agent) of its first run.

Recall is indexed from a thread's messages under the scope of the run that reads them, so a second
user's run on someone else's thread id would copy that thread into their own recall, and their
``conversation_search`` would find it. The first run records its scope in the state (``owner``);
a run of any other scope is refused before anything is read, indexed or written. This holds with
LangGraph auth or without it (with auth, the server's owner filter refuses such a run even earlier).

LangGraph checkpoints a run's input before its first node or router runs, so a check inside the run
(``claim_thread``) comes too late to keep a refused input out of the thread. ``refuse_foreign_run`` is
the check every entry makes before the run starts: it reads the owner the thread's latest checkpoint
records (or its pending writes, when the step that claimed the thread was cut short before its
checkpoint) and refuses a run of another scope. The compiled graph (``window.cut_short.ResumingGraph``),
``resume`` and a ``create_agent`` app wrapped with ``PagefaultMiddleware.owner_checked`` call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

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


def _root(config: RunnableConfig) -> RunnableConfig | None:
    """The thread's root namespace (where the owner is recorded), None for a run with no thread or nested
    in another graph (its parent's entry checked it)."""
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None or conf.get("checkpoint_ns"):
        return None
    return cast(RunnableConfig, {"configurable": {"thread_id": str(conf["thread_id"]), "checkpoint_ns": ""}})


def recorded_owner(latest: CheckpointTuple | None) -> Mapping[str, Any] | None:
    """The owner a thread's latest checkpoint records: its ``owner`` channel, else the last ``owner``
    write saved against it (a step that claimed the thread, cut short before its checkpoint)."""
    if latest is None:
        return None
    owner = (latest.checkpoint.get("channel_values") or {}).get("owner")
    for _task, channel, value in latest.pending_writes or ():
        if not owner and channel == "owner" and isinstance(value, Mapping):
            owner = value
    return owner if isinstance(owner, Mapping) and owner else None


def refuse_foreign_run(saver: object, config: RunnableConfig, scope: Scope | None) -> None:
    """``ThreadOwnedError`` when ``config``'s thread belongs to a scope other than ``scope``: the check
    a run's entry makes before LangGraph saves anything of it. Nothing is checked without a saver, a
    thread or a scope (a context the run itself refuses), or for a nested run."""
    root = _root(config)
    if root is None or scope is None or not isinstance(saver, BaseCheckpointSaver):
        return
    owner = recorded_owner(saver.get_tuple(root))
    claim_thread(owner, scope, str(root["configurable"]["thread_id"]))


async def arefuse_foreign_run(saver: object, config: RunnableConfig, scope: Scope | None) -> None:
    """``refuse_foreign_run`` for async runs (an async saver's own read)."""
    root = _root(config)
    if root is None or scope is None or not isinstance(saver, BaseCheckpointSaver):
        return
    owner = recorded_owner(await saver.aget_tuple(root))
    claim_thread(owner, scope, str(root["configurable"]["thread_id"]))
