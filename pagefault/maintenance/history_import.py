"""Import an existing multi-session dialog into a user's memory.

Each session becomes a thread. Messages go through the same path a live conversation takes (the
graph with ``respond=False``): they are checkpointed, the window is compacted when it fills, and
every turn is indexed in recall with its speaker, time and external id. Re-running an import
resumes where it stopped and never duplicates a message.

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

DIALOG_SCHEMA_DOC = """\
{"sessions": [{"id": str, "timestamp": ISO-8601 (optional),
               "messages": [{"text": str, "speaker": str (optional), "role": "user"|"assistant" (default "user"),
                             "id": str (optional external id), "timestamp": ISO-8601 (optional)}]}]}"""


def _check_iso(value: str | None) -> str | None:
    if value is not None:
        to_epoch(value)
    return value


#: An optional ISO-8601 date/time, checked when the dialog is parsed.
IsoTime = Annotated[str | None, AfterValidator(_check_iso)]


class DialogMessage(BaseModel):
    text: str
    speaker: str | None = None
    role: Literal["user", "assistant"] = "user"
    id: str | None = None
    timestamp: IsoTime = None


class DialogSession(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    timestamp: IsoTime = None
    messages: list[DialogMessage]


class Dialog(BaseModel):
    sessions: list[DialogSession]


class DialogError(ValueError):
    """The input is not a dialog of the documented shape; says where and what."""


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
    try:
        dialog = Dialog.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DialogError(f"bad dialog at {where or 'top level'}: {first['msg']} "
                          f"({e.error_count()} problem(s)); expected {DIALOG_SCHEMA_DOC}") from e
    ids = [s.id for s in dialog.sessions]
    if len(set(ids)) != len(ids):
        raise DialogError("session ids must be unique")
    return dialog


def to_message(thread_id: str, index: int, msg: DialogMessage, default_time: float | None) -> BaseMessage:
    ts = to_epoch(msg.timestamp) if msg.timestamp else (default_time + index if default_time is not None else None)
    meta: dict[str, Any] = {"source": "import"}
    if msg.id:
        meta["external_id"] = msg.id
    if ts is not None:
        meta["timestamp"] = ts
    key = msg.id or str(index)
    mid = "imp-" + hashlib.sha256(f"{thread_id}\x00{key}".encode()).hexdigest()[:24]
    cls = HumanMessage if msg.role == "user" else AIMessage
    return cls(content=msg.text, name=msg.speaker, id=mid, additional_kwargs={"pagefault": meta})


@dataclass
class ImportReport:
    threads: list[str]
    imported: int
    skipped: int


def import_history(
    graph: Any,
    dialog: Dialog | dict | str,
    ctx: Context,
    *,
    thread_prefix: str = "",
    batch_size: int = 16,
    progress: bool = True,
) -> ImportReport:
    """Append each session to its own thread of ``ctx.user_id``; resumable and idempotent."""
    if not isinstance(dialog, Dialog):
        dialog = parse_dialog(dialog)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    run_ctx = Context(**{**ctx.__dict__, "respond": False})
    total = sum(len(s.messages) for s in dialog.sessions)
    bar = tqdm(total=total, desc="importing", unit="msg", disable=not progress, file=sys.stderr)
    imported = skipped = 0
    threads = []
    try:
        for session in dialog.sessions:
            thread_id = f"{thread_prefix}{session.id}"
            threads.append(thread_id)
            config = {"configurable": {"thread_id": thread_id}}
            values = graph.get_state(config).values
            done = int(values.get("evicted_count", 0)) + len(values.get("messages", []))
            if done:  # resume after the messages this thread already holds
                skipped += min(done, len(session.messages))
                bar.update(min(done, len(session.messages)))
            start_time = to_epoch(session.timestamp) if session.timestamp else None
            pending = [to_message(thread_id, i, m, start_time) for i, m in enumerate(session.messages)][done:]
            for b in range(0, len(pending), batch_size):
                batch = pending[b : b + batch_size]
                graph.invoke({"messages": batch}, config, context=run_ctx)
                imported += len(batch)
                bar.update(len(batch))
    finally:
        bar.close()
    return ImportReport(threads, imported, skipped)
