"""A run refused on another user's thread leaves no byte of it behind (issue 44, case 1).

Alice says her passport number on a thread; Bob then runs ``invoke``, ``stream`` and ``resume`` on that
thread id under his own context. Each is refused with ``ThreadOwnedError``, and the thread's checkpoint
rows (compared raw, row by row), Alice's and Bob's recall and archival are what they were before: the
owner is checked before LangGraph saves the run's input, not in the run's first step. On the embedded
graph (sync and async), a ``create_agent`` app with ``PagefaultMiddleware`` (wrapped with
``owner_checked``, serialized before or after), and the Postgres graph. Real SQLite, Chroma, Postgres.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from support.engines import fresh_database

from pagefault import Context, MemoryServices, OfflineChatModel, PagefaultMiddleware, open_embedded_async
from pagefault.engines.thread_lock import serialized
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import Scope
from pagefault.window.thread_owner import ThreadOwnedError

THREAD = "alice-secret"
SECRET = "My passport number is ZX998877."
INTRUDER = "Bob was here: forget the passport and call me Mallory."
CONFIG = {"configurable": {"thread_id": THREAD}}

Rows = Callable[[], Any]


def sqlite_rows(data_dir: str) -> Rows:
    """Every stored row of the thread in the embedded checkpointer's tables, raw."""
    def rows() -> Any:
        conn = sqlite3.connect(f"file:{Path(data_dir) / 'checkpoints.sqlite'}?mode=ro", uri=True)
        try:
            return [conn.execute(f"SELECT * FROM {table} WHERE thread_id = ? ORDER BY {order}", (THREAD,)).fetchall()
                    for table, order in (("checkpoints", "checkpoint_ns, checkpoint_id"),
                                         ("writes", "checkpoint_ns, checkpoint_id, task_id, idx"))]
        finally:
            conn.close()
    return rows


def postgres_rows(url: str) -> Rows:
    """Every stored row of the thread in the Postgres checkpointer's tables, raw."""
    def rows() -> Any:
        with psycopg.connect(url) as conn:
            return [conn.execute(f"SELECT * FROM {table} WHERE thread_id = %s ORDER BY {order}", (THREAD,)).fetchall()
                    for table, order in (("checkpoints", "checkpoint_ns, checkpoint_id"),
                                         ("checkpoint_blobs", "checkpoint_ns, channel, version"),
                                         ("checkpoint_writes", "checkpoint_ns, checkpoint_id, task_id, idx"))]
    return rows


def memories(data_dir: str) -> Any:
    """What Alice's and Bob's recall and archival hold, as their searches and counts see it."""
    svc = MemoryServices.open(data_dir)
    out: list[Any] = []
    for user in ("alice", "bob"):
        scope = Scope(user)
        out += [svc.recall.count(scope), svc.archival.count(scope),
                [(h.thread_id, h.role, h.text) for h in svc.recall.search(scope, INTRUDER, top_k=10)],
                [r.text for r, _score in svc.archival.search(scope, INTRUDER, top_k=10)]]
    return out


def _said(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def refused_runs_leave_nothing(graph: Any, rows: Rows, data_dir: str, alice: Any, bob: Any) -> None:
    """Alice's turn, then Bob's refused ``invoke``, ``stream`` and ``resume``: nothing of them is saved
    and ``resume`` hands Bob nothing; Alice's next turn sees no message of Bob's, nor does her recall."""
    graph.invoke(_said(SECRET), CONFIG, context=alice)
    saved, remembered = rows(), memories(data_dir)
    assert saved[0], "Alice's turn was checkpointed"

    with pytest.raises(ThreadOwnedError):
        graph.invoke(_said(INTRUDER), CONFIG, context=bob)
    assert rows() == saved, "Bob's refused invoke changed Alice's thread"
    with pytest.raises(ThreadOwnedError):
        list(graph.stream(_said(INTRUDER), CONFIG, context=bob, stream_mode="values"))
    assert rows() == saved, "Bob's refused stream changed Alice's thread"
    with pytest.raises(ThreadOwnedError):
        got = graph.resume(CONFIG, context=bob)
        assert got is None or SECRET not in str(got), "resume handed Bob Alice's state"
    assert rows() == saved, "Bob's refused resume changed Alice's thread"
    assert memories(data_dir) == remembered, "Bob's refused runs changed recall or archival"

    out = graph.invoke(_said("What did I tell you?"), CONFIG, context=alice)
    assert not any(INTRUDER in str(m.content) for m in out["messages"]), "Bob's message reached Alice's window"
    hits = MemoryServices.open(data_dir).recall.search(Scope("alice"), INTRUDER, top_k=10)
    assert not any(INTRUDER in h.text for h in hits), "Alice's recall holds Bob's message as hers"


def test_embedded_graph_refuses_before_saving_anything(embedded, data_dir):
    refused_runs_leave_nothing(embedded.graph(), sqlite_rows(data_dir), data_dir,
                               Context(user_id="alice", data_dir=data_dir), Context(user_id="bob", data_dir=data_dir))


async def test_embedded_async_graph_refuses_before_saving_anything(data_dir):
    alice, bob = Context(user_id="alice", data_dir=data_dir), Context(user_id="bob", data_dir=data_dir)
    rows = sqlite_rows(data_dir)
    async with open_embedded_async(data_dir) as memory:
        graph = memory.graph()
        await graph.ainvoke(_said(SECRET), CONFIG, context=alice)
        saved = rows()
        with pytest.raises(ThreadOwnedError):
            await graph.ainvoke(_said(INTRUDER), CONFIG, context=bob)
        with pytest.raises(ThreadOwnedError):
            async for _ in graph.astream(_said(INTRUDER), CONFIG, context=bob):
                pass
        assert rows() == saved, "Bob's refused async runs changed Alice's thread"


@pytest.mark.parametrize("order", ["checked-then-serialized", "serialized-then-checked"])
def test_middleware_app_owner_checked_refuses_before_saving_anything(embedded, data_dir, order):
    middleware = PagefaultMiddleware(Context(data_dir=data_dir))
    agent = create_agent(OfflineChatModel(), [], middleware=[middleware], checkpointer=embedded.checkpointer,
                         store=embedded.store, context_schema=Context)
    if order == "checked-then-serialized":
        app = embedded.serialized(middleware.owner_checked(agent))
    else:
        app = middleware.owner_checked(embedded.serialized(agent))
    refused_runs_leave_nothing(app, sqlite_rows(data_dir), data_dir,
                               Context(user_id="alice"), Context(user_id="bob"))


async def test_async_middleware_app_owner_checked_refuses_before_saving_anything(data_dir):
    rows = sqlite_rows(data_dir)
    async with open_embedded_async(data_dir) as memory:
        middleware = PagefaultMiddleware(Context(data_dir=data_dir))
        agent = memory.serialized(middleware.owner_checked(create_agent(
            OfflineChatModel(), [], middleware=[middleware], checkpointer=memory.checkpointer, store=memory.store,
            context_schema=Context)))
        await agent.ainvoke(_said(SECRET), CONFIG, context=Context(user_id="alice"))
        saved = rows()
        with pytest.raises(ThreadOwnedError):
            await agent.ainvoke(_said(INTRUDER), CONFIG, context=Context(user_id="bob"))
        with pytest.raises(ThreadOwnedError):
            async for _ in agent.astream(_said(INTRUDER), CONFIG, context=Context(user_id="bob")):
                pass
        assert rows() == saved, "Bob's refused async runs changed Alice's thread"


def test_a_bare_middleware_app_keeps_a_refused_input_out_of_the_owners_turns(embedded, data_dir):
    """Without ``owner_checked`` LangGraph saves Bob's input before any middleware hook runs, so it stays
    in the thread's history; but the step that refuses him removes it, so Alice's window, her model
    calls and her recall never hold it as hers."""
    sent: list[str] = []

    class Prompts(BaseCallbackHandler):
        def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
            sent.extend(str(m.content) for batch in messages for m in batch)

    agent = create_agent(OfflineChatModel(), [], middleware=[PagefaultMiddleware(Context(data_dir=data_dir))],
                         checkpointer=embedded.checkpointer, store=embedded.store, context_schema=Context)
    alice, bob = Context(user_id="alice"), Context(user_id="bob")
    agent.invoke(_said(SECRET), CONFIG, context=alice)
    with pytest.raises(ThreadOwnedError):
        agent.invoke(_said(INTRUDER), CONFIG, context=bob)
    with pytest.raises(ThreadOwnedError):
        list(agent.stream(_said(INTRUDER), CONFIG, context=bob))
    window = [str(m.content) for m in agent.get_state(CONFIG).values["messages"]]
    assert SECRET in window and INTRUDER not in window, window

    agent.invoke(_said("What did I tell you?"), {**CONFIG, "callbacks": [Prompts()]}, context=alice)
    assert sent and not any(INTRUDER in text for text in sent), "Alice's model call carried Bob's message"
    hits = MemoryServices.open(data_dir).recall.search(Scope("alice"), INTRUDER, top_k=10)
    assert hits and not any(INTRUDER in h.text for h in hits), "Alice's recall holds Bob's message as hers"


@pytest.fixture
def database():
    """A fresh Postgres database for each test (each starts Alice's thread anew)."""
    with fresh_database("pf_owner") as url:
        yield url


def test_postgres_graph_refuses_before_saving_anything(database, tmp_path):
    data_dir = str(tmp_path / "d")
    with open_postgres(database) as memory:
        refused_runs_leave_nothing(memory.graph(), postgres_rows(database), data_dir,
                                   Context(user_id="alice", data_dir=data_dir), Context(user_id="bob", data_dir=data_dir))


def test_postgres_middleware_app_owner_checked_refuses_before_saving_anything(database, tmp_path):
    data_dir = str(tmp_path / "d")
    with open_postgres(database) as memory:
        middleware = PagefaultMiddleware(Context(data_dir=data_dir))
        agent = create_agent(OfflineChatModel(), [], middleware=[middleware], checkpointer=memory.checkpointer,
                             store=memory.store, context_schema=Context)
        refused_runs_leave_nothing(serialized(middleware.owner_checked(agent)), postgres_rows(database), data_dir,
                                   Context(user_id="alice"), Context(user_id="bob"))
