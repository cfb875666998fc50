"""Import an existing multi-session dialog into a user's memory.

Each session becomes a thread. Messages go through the same path a live conversation takes (the
graph with ``respond=False``): they are checkpointed, the window is compacted when it fills, and
every turn is indexed in recall with its speaker, time and external id. Re-running an import
resumes where it stopped and never duplicates a message: a thread that already holds the first
messages of its session gets the rest. A thread that holds other messages (a second log that reuses
a session id, or a thread with its own turns since) is refused before anything is written, with a
``HistoryConflict`` naming the session and the first message that differs; so is a thread of another
user or agent. Message ids are unique within a session (``DialogError`` otherwise), and each message
is keyed by its session and position, so every message of the dialog lands, and the counts reported
are the messages that landed.

The JSON shape (``DIALOG_SCHEMA_DOC`` below says the same)::

    {"sessions": [
        {"id": "s1", "timestamp": "2023-05-08T13:56:00",
         "messages": [{"speaker": "Caroline", "text": "Hi!", "id": "D1:1"},
                      {"speaker": "assistant", "role": "assistant", "text": "Hello."}]}]}
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import AfterValidator, BaseModel, Field, ValidationError
from tqdm import tqdm

from pagefault.graph.context import Context
from pagefault.graph.saved_state import SavedHistory
from pagefault.maintenance.transfer import thread_history
from pagefault.stores.scope import Scope
from pagefault.text.messages import message_text
from pagefault.text.unicode import encodable
from pagefault.window.run import services
from pagefault.window.thread_owner import ThreadOwnedError, claim_thread

DIALOG_SCHEMA_DOC = """\
{"sessions": [{"id": str, "timestamp": ISO-8601 (optional),
               "messages": [{"text": str, "speaker": str (optional), "role": "user"|"assistant" (default "user"),
                             "id": str (optional external id), "timestamp": ISO-8601 (optional)}]}]}"""

#: The same, on one line, for error messages.
_SHAPE = " ".join(DIALOG_SCHEMA_DOC.split())


def _check_iso(value: str | None) -> str | None:
    if value is not None:
        to_epoch(value)
    return value


def _check_text(value: str) -> str:
    if not encodable(value):
        raise ValueError("not valid Unicode text (it contains a lone surrogate such as \\ud800)")
    return value


#: Text a store can hold (UTF-8 encodable), checked when the dialog is parsed.
Text = Annotated[str, AfterValidator(_check_text)]
#: An optional ISO-8601 date/time, checked when the dialog is parsed.
IsoTime = Annotated[str | None, AfterValidator(_check_iso)]


class DialogMessage(BaseModel):
    text: Text
    speaker: Text | None = None
    role: Literal["user", "assistant"] = "user"
    id: Text | None = None
    timestamp: IsoTime = None


class DialogSession(BaseModel):
    id: Text = Field(min_length=1, max_length=200)
    timestamp: IsoTime = None
    messages: list[DialogMessage]


class Dialog(BaseModel):
    sessions: list[DialogSession]


class DialogError(ValueError):
    """The input is not a dialog of the documented shape; says where and what."""


class HistoryConflict(ValueError):
    """The dialog does not fit what the store holds (a session's thread holds other messages, or is
    another user's); nothing of the import was written."""


def to_epoch(value: str) -> float:
    try:
        dt = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"not an ISO-8601 date/time: {value!r}")
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def parse_dialog(data: Any) -> Dialog:
    """Validate raw JSON data (or a JSON string) as a Dialog; DialogError names the bad field."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as e:
            raise DialogError(f"not valid JSON: {e}") from e
        except RecursionError as e:
            raise DialogError(f"not a dialog: its JSON is nested too deeply to read; expected {_SHAPE}") from e
        except ValueError as e:  # e.g. an integer of more digits than Python converts
            raise DialogError(f"not valid JSON: {e}") from e
    try:
        dialog = Dialog.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DialogError(f"bad dialog at {where or 'top level'}: {first['msg']} "
                          f"({e.error_count()} problem(s)); expected {_SHAPE}") from e
    except RecursionError as e:
        raise DialogError(f"not a dialog: a value is nested too deeply to read; expected {_SHAPE}") from e
    ids = [s.id for s in dialog.sessions]
    if len(set(ids)) != len(ids):
        raise DialogError("session ids must be unique")
    for session in dialog.sessions:
        first_at: dict[str, int] = {}
        for i, m in enumerate(session.messages):
            if m.id is not None and first_at.setdefault(m.id, i) != i:
                raise DialogError(f"session {session.id!r}: message id {m.id!r} appears twice (messages "
                                  f"{first_at[m.id]} and {i}); message ids must be unique within a session")
    return dialog


def to_message(thread_id: str, index: int, msg: DialogMessage, default_time: float | None) -> BaseMessage:
    """The ``index``-th message of a session as the LangChain message its thread gets; its id is
    made of the thread and the position (and the external id), so no two messages share one."""
    ts = to_epoch(msg.timestamp) if msg.timestamp else (default_time + index if default_time is not None else None)
    meta: dict[str, Any] = {"source": "import"}
    if msg.id:
        meta["external_id"] = msg.id
    if ts is not None:
        meta["timestamp"] = ts
    mid = "imp-" + hashlib.sha256(f"{thread_id}\x00{index}\x00{msg.id or ''}".encode()).hexdigest()[:24]
    cls = HumanMessage if msg.role == "user" else AIMessage
    return cls(content=msg.text, name=msg.speaker, id=mid, additional_kwargs={"pagefault": meta})


@dataclass
class ImportReport:
    """What an import did: the threads of its sessions, the messages that landed in them now
    (``imported``) and those that were there already from an earlier run (``skipped``)."""

    threads: list[str]
    imported: int
    skipped: int


@dataclass
class _Plan:
    session: DialogSession
    thread_id: str
    messages: list[BaseMessage]
    done: int  # messages the thread already holds


def import_history(
    graph: Any,
    dialog: Dialog | dict | str,
    ctx: Context,
    *,
    thread_prefix: str = "",
    batch_size: int = 16,
    progress: bool = True,
) -> ImportReport:
    """Append each session to its own thread of ``ctx.user_id``; resumable and idempotent.

    ``graph`` is a pagefault graph with a checkpointer, ``dialog`` a ``Dialog`` (or the JSON of one),
    ``thread_prefix`` is put before each session id to make its thread id, and ``batch_size``
    messages go through the graph at a time; ``progress`` shows a bar on stderr. Every session is
    checked against its thread before anything is written: ``HistoryConflict`` when a thread holds
    messages that are not the first ones of its session, or belongs to another user or agent. A thread
    an earlier, killed run wrote whose messages recall lacks is indexed again from its checkpoints."""
    if not isinstance(dialog, Dialog):
        dialog = parse_dialog(dialog)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    run_ctx = Context(**{**ctx.__dict__, "respond": False})
    plans = [_plan(graph, session, f"{thread_prefix}{session.id}", Scope(ctx.user_id, ctx.agent_id))
             for session in dialog.sessions]
    bar = tqdm(total=sum(len(p.session.messages) for p in plans), desc="importing", unit="msg", disable=not progress,
               file=sys.stderr)
    imported = skipped = 0
    scope, recall = Scope(ctx.user_id, ctx.agent_id), services(ctx, graph.store).recall
    try:
        for plan in plans:
            config = {"configurable": {"thread_id": plan.thread_id}}
            if plan.done and recall.thread_count(scope, plan.thread_id) < plan.done:
                # an earlier run was killed before recall's writer wrote these messages: derive them again
                recall.rebuild(SavedHistory(graph.checkpointer), scope, plan.thread_id)
            held = min(plan.done, len(plan.messages))
            skipped += held
            bar.update(held)
            pending = plan.messages[plan.done:]
            count = plan.done
            for b in range(0, len(pending), batch_size):
                batch = pending[b : b + batch_size]
                values = graph.invoke({"messages": batch}, config, context=run_ctx)
                landed = _held(values) - count
                count += landed
                imported += landed
                bar.update(landed)
                if landed != len(batch):  # never expected: each message has its own id
                    raise HistoryConflict(f"session {plan.session.id!r}: {landed} of {len(batch)} messages landed in "
                                          f"thread {plan.thread_id!r}")
    finally:
        bar.close()
    return ImportReport([p.thread_id for p in plans], imported, skipped)


def _held(values: Any) -> int:
    """How many messages a thread holds in all, from its state's values (evicted ones included)."""
    return int(values.get("evicted_count", 0) or 0) + len(values.get("messages", []) or [])


def _plan(graph: Any, session: DialogSession, thread_id: str, scope: Scope) -> _Plan:
    """What importing ``session`` into ``thread_id`` takes: the messages its thread already holds
    must be the session's first ones (an earlier run of this import), in a thread of ``scope``."""
    start_time = to_epoch(session.timestamp) if session.timestamp else None
    messages = [to_message(thread_id, i, m, start_time) for i, m in enumerate(session.messages)]
    state = graph.get_state({"configurable": {"thread_id": thread_id}}).values
    try:
        claim_thread(state.get("owner"), scope, thread_id)
    except ThreadOwnedError as e:
        raise HistoryConflict(f"session {session.id!r}: thread {thread_id!r} belongs to another user or agent, so nothing "
                              "was imported; import this log with another --thread-prefix") from e
    done = _held(state)
    if not done:
        return _Plan(session, thread_id, messages, 0)
    found = thread_history(graph.checkpointer, thread_id)
    history = found[0] if found else []
    for i, (have, new) in enumerate(zip(history, messages)):
        if not _same(have, new):
            raise HistoryConflict(
                f"session {session.id!r}: thread {thread_id!r} already holds other messages (its message {i} is "
                f"{_said(have)}, the session's is {_said(new)}), so this is not a re-run of the same import; nothing was "
                "imported. Give this log's sessions new ids, or import it with another --thread-prefix")
    return _Plan(session, thread_id, messages, done)


def _same(have: BaseMessage, new: BaseMessage) -> bool:
    meta = (have.additional_kwargs or {}).get("pagefault", {}) or {}
    return (have.type, have.content, have.name, meta.get("external_id")) == (
        new.type, new.content, new.name, new.additional_kwargs["pagefault"].get("external_id"))


def _said(m: BaseMessage) -> str:
    text = message_text(m)
    return f"{m.name or m.type}: {text[:40]!r}{'...' if len(text) > 40 else ''}"
