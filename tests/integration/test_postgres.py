"""The Postgres path on the machine's real PostgreSQL (a fresh database per module; unreachable = FAIL).

- ``PAGEFAULT_DATABASE_URL`` switches the checkpointer and the store to LangGraph's Postgres ones;
- setup is automatic and idempotent, also when two replicas start at the same moment;
- the BM25 shadow index in Postgres ranks, filters and isolates like the SQLite one;
- an unreachable database is a ``ServiceUnavailable`` naming PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import threading

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore
from support.engines import child_env, free_port, fresh_database

from pagefault import Context, EmbeddedPersistence
from pagefault.engines.connections import ServiceUnavailable
from pagefault.engines.thread_lock import SerializedGraph
from pagefault.persistence.postgres import PostgresPersistence, open_persistence, open_postgres, open_postgres_async
from pagefault.stores import CoreMemory, Scope
from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
from pagefault.stores.index.lexical_sqlite import LexicalDoc, LexicalIndex


@pytest.fixture(scope="module")
def database():
    with fresh_database("pf_pg") as url:
        yield url


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_database_url_switches_checkpointer_and_store_to_postgres(database, tmp_path, monkeypatch):
    monkeypatch.setenv("PAGEFAULT_DATABASE_URL", database)
    with open_persistence(str(tmp_path / "unused")) as p:
        assert isinstance(p, PostgresPersistence)
        assert isinstance(p.checkpointer, PostgresSaver) and isinstance(p.store, PostgresStore)
        graph = p.graph()
        assert isinstance(graph, SerializedGraph)
        ctx = Context(user_id="pg-ana", data_dir=str(tmp_path / "d"))
        out = graph.invoke({"messages": [HumanMessage("My name is Ana and I live in Lisbon.")]},
                           {"configurable": {"thread_id": "pg-t1"}}, context=ctx)
        assert "saved" in out["messages"][-1].content.lower()
    assert not (tmp_path / "unused").exists(), "nothing embedded was made"
    # Threads and core memory are rows in Postgres, readable by any other process.
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'pg-t1'").fetchone()[0] > 0
    with open_postgres(database) as again:
        assert CoreMemory(again.store, Scope("pg-ana")).get("human").value == "Name: Ana\nLives in: Lisbon"
        values = again.graph().get_state({"configurable": {"thread_id": "pg-t1"}}).values
        assert [m.content for m in values["messages"] if isinstance(m, HumanMessage)] == [
            "My name is Ana and I live in Lisbon."]
    monkeypatch.delenv("PAGEFAULT_DATABASE_URL")
    with open_persistence(str(tmp_path / "embedded")) as p:
        assert isinstance(p, EmbeddedPersistence)


async def test_postgres_only_setup_async(database, tmp_path):
    """Postgres for threads and core memory, the vectors and BM25 index in the local directory; async API."""
    async with open_postgres_async(database) as p:
        graph = p.graph()
        ctx = Context(user_id="pg-async", data_dir=str(tmp_path / "d"), chroma_url="", database_url=database)
        config = {"configurable": {"thread_id": "pg-async-1"}}
        await graph.ainvoke({"messages": [HumanMessage("My name is Dora and I live in Porto.")]}, config, context=ctx)
        out = await graph.ainvoke({"messages": [HumanMessage("Where do I live?")]}, config, context=ctx)
        assert "Porto" in out["messages"][-1].content
        parts = [part async for part in graph.astream({"messages": [HumanMessage("What is my name?")]}, config,
                                                      context=ctx, stream_mode="values")]
        assert "Dora" in parts[-1]["messages"][-1].content
        item = await p.store.aget(("pagefault", "pg-async", "default", "core"), "human")
        assert item.value["value"] == "Name: Dora\nLives in: Porto"
    assert (tmp_path / "d" / "chroma").is_dir() and (tmp_path / "d" / "lexical.sqlite").exists()


SETUP_REPLICA = textwrap.dedent("""
    import os, sys, time
    from pagefault.persistence.postgres import open_postgres
    from pagefault.stores.index.lexical_postgres import PostgresLexicalIndex
    folder = sys.argv[1]
    open(os.path.join(folder, f"ready-{os.getpid()}"), "w").close()
    while len(os.listdir(folder)) < 2:
        time.sleep(0.005)
    open_postgres(os.environ["PAGEFAULT_DATABASE_URL"]).close()
    for kind in ("archival", "recall", "recall_unit"):
        PostgresLexicalIndex(os.environ["PAGEFAULT_DATABASE_URL"], kind)
    print("ready")
""")


def test_setup_is_automatic_and_idempotent_when_replicas_start_together():
    with fresh_database("pf_setup") as url:
        barrier = tempfile.mkdtemp(prefix="barrier-")
        env = child_env(PAGEFAULT_DATABASE_URL=url)
        procs = [subprocess.Popen([sys.executable, "-c", SETUP_REPLICA, barrier], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and out.strip() == "ready", err[-3000:]
        tables = _tables(url)
        assert {"checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_migrations", "store",
                "store_migrations", "pagefault_lexical_archival", "pagefault_lexical_recall",
                "pagefault_lexical_recall_unit"} <= tables
        with psycopg.connect(url) as conn:  # each migration applied once
            versions = [r[0] for r in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
        assert versions == list(range(len(versions)))
        open_postgres(url).close()  # and once more, with everything in place
        assert _tables(url) == tables


def test_unreachable_database_is_a_clear_error():
    port = free_port()
    with pytest.raises(ServiceUnavailable) as down:
        open_postgres(f"postgresql://postgres:secret@127.0.0.1:{port}/nowhere")
    assert down.value.service == "PostgreSQL"
    assert str(down.value).startswith(f"PostgreSQL at postgresql://postgres:***@127.0.0.1:{port}/nowhere is "
                                      "unreachable: "), str(down.value)
    assert "secret" not in str(down.value)


DOCS = [
    LexicalDoc("d1", "s-ana", "Lucia works as a marine biologist at the aquarium in Valencia.", "t1", 100.0, ("family",)),
    LexicalDoc("d2", "s-ana", "The aquarium opens at nine and the aquarium cafe at ten.", "t1", 200.0),
    LexicalDoc("d3", "s-ana", "Our launch deadline is the third of March.", "t2", 300.0, ("work",)),
    LexicalDoc("d4", "s-ana", "Zyzzogeton is the name of my favourite beetle.", "t2", 400.0, ("family", "work")),
    LexicalDoc("d5", "s-bob", "Bob's sister works at the aquarium in Valencia too.", "t9", 150.0, ("family",)),
]


def test_postgres_bm25_ranks_filters_and_isolates_like_sqlite(database, tmp_path):
    pg = PostgresLexicalIndex(database, "archival_test")
    sq = LexicalIndex(str(tmp_path / "lexical.sqlite"), "archival_test")
    pg.upsert(DOCS)
    pg.upsert(DOCS[:2])  # writing the same ids again changes nothing
    sq.upsert(DOCS)
    for query in ("where does Lucia work", "zyzzogeton", "aquarium", "launch deadline March"):
        got = [i for i, _ in pg.search(query, "s-ana", 10)]
        assert got[0] == [i for i, _ in sq.search(query, "s-ana", 10)][0], query
        assert "d5" not in got, "another scope's document"
    scores = dict(pg.search("aquarium", "s-ana", 10))
    assert scores["d2"] > scores["d1"] > 0  # two mentions in a shorter text beat one
    # Filters apply before the limit: the one match left is found even with limit 1.
    assert pg.search("aquarium", "s-ana", 1, thread_id="t2") == []
    assert [i for i, _ in pg.search("aquarium launch", "s-ana", 1, thread_id="t2")] == ["d3"]
    assert [i for i, _ in pg.search("works aquarium", "s-ana", 1, tags=["family"])] == ["d1"]
    assert [i for i, _ in pg.search("beetle aquarium launch", "s-ana", 5, tags=["family", "work"])] == ["d4"]
    assert [i for i, _ in pg.search("aquarium", "s-ana", 5, start=150.0, end=250.0)] == ["d2"]
    assert pg.count("s-ana") == 4 and pg.count("s-bob") == 1 and pg.ids("s-bob") == {"d5"}
    assert pg.texts(["d3", "nope"]) == {"d3": DOCS[2].text}
    pg.upsert([LexicalDoc("d6", "s-ana", "nul \x00 inside", "t1", 1.0)])
    assert pg.texts(["d6"]) == {"d6": "nul \ufffd inside"}
    pg.delete(["d6", "d1"])
    assert pg.count("s-ana") == 3 and [i for i, _ in pg.search("Lucia", "s-ana", 5)] == []
    assert pg.search("the of and", "s-ana", 5) == [], "a query of stopwords alone matches nothing"


def test_postgres_bm25_reads_postings_and_derives_them_for_an_older_table(database, caplog):
    """Search reads ``<table>_postings`` (one row per record and term); a table written before the
    postings existed gets them derived from its term vectors when first opened, and scores as before."""
    from pagefault.stores.index import lexical_postgres

    pg = PostgresLexicalIndex(database, "postings_test")
    pg.upsert(DOCS)
    before = {q: pg.search(q, "s-ana", 10) for q in ("where does Lucia work", "aquarium launch", "beetle")}
    with psycopg.connect(database) as conn:
        kept = conn.execute(f"SELECT count(*) FROM {pg.postings} WHERE id = 'd2'").fetchone()[0]
        assert kept > 0, "the record's terms have postings"
        pg.upsert([DOCS[1]])  # written again: its postings replaced, not added to
        assert conn.execute(f"SELECT count(*) FROM {pg.postings} WHERE id = 'd2'").fetchone()[0] == kept
        conn.execute(f"DROP TABLE {pg.postings}")  # as a table from before the postings
    lexical_postgres._ready.discard((database, "postings_test"))
    with caplog.at_level("WARNING", logger="pagefault.stores.index.lexical_postgres"):
        again = PostgresLexicalIndex(database, "postings_test")
    assert f"deriving the BM25 postings of {len(DOCS)} records in {pg.table}" in caplog.text, "said, with the count"
    assert {q: again.search(q, "s-ana", 10) for q in before} == before
    again.delete(["d2"])
    with psycopg.connect(database) as conn:
        assert conn.execute(f"SELECT count(*) FROM {pg.postings} WHERE id = 'd2'").fetchone()[0] == 0, "deleted with it"


class _PausingStore:
    """A Postgres store whose writes from one chosen thread stop half-way through that thread's
    read-modify-write, until another thread's edit has finished (or a few seconds passed)."""

    def __init__(self, store) -> None:
        self.store = store  # pagefault.engines.locks finds the database behind it, as it does for the real store
        self.paused_thread: int | None = None
        self.in_write, self.other_done = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.store, name)

    def put(self, *args, **kwargs):
        if threading.get_ident() == self.paused_thread:
            self.in_write.set()
            self.other_done.wait(timeout=3)
        return self.store.put(*args, **kwargs)


async def test_the_saver_and_store_are_bound_to_the_advisory_locks_of_the_url_they_were_opened_with(database, caplog):
    """``open_postgres`` (sync and async) binds its saver and store to the advisory locks of the URL it was given,
    and a wrapper whose ``store`` is one is guarded by them too. A LangGraph Postgres store opened elsewhere on a
    pool takes the locks of its pool's database; one on a single connection, whose database the locks cannot
    name without rebuilding its connection string, takes this process's own, and says so once."""
    from psycopg_pool import ConnectionPool

    from pagefault.engines.locks import PROCESS_LOCKS, locks_for, locks_of

    with open_postgres(database) as p:
        assert locks_of(p.checkpointer) is locks_of(p.store) is locks_of(_PausingStore(p.store)) is locks_for(database)
        assert p.graph().locks is locks_for(database)
    async with open_postgres_async(database) as p:
        assert locks_of(p.checkpointer) is locks_of(p.store) is locks_for(database)
    pool = ConnectionPool(database, min_size=1, max_size=1, open=False)
    assert locks_of(PostgresStore(pool)) is locks_for(database)
    with PostgresStore.from_conn_string(database) as store, caplog.at_level("WARNING", logger="pagefault.locks"):
        assert locks_of(store) is PROCESS_LOCKS and locks_of(store) is PROCESS_LOCKS
    assert caplog.text.count("bound to no locks") == 1, caplog.text


def test_set_block_waits_for_an_append_in_flight(database):
    """An append has read the block and is about to write it when set_block starts: set_block waits for the
    append's lock, so neither edit is lost and the set, coming second, is what the block holds."""
    with open_postgres(database) as p:
        store = _PausingStore(p.store)
        core = CoreMemory(store, Scope("pg-set"))
        core.set_block("plans", "Trip to Porto in May.")

        def append() -> None:
            store.paused_thread = threading.get_ident()
            core.append("plans", "Book the train.")

        appender = threading.Thread(target=append)
        appender.start()
        assert store.in_write.wait(timeout=60), "the append never reached its write"
        core.set_block("plans", "Trip to Porto moved to June.")
        store.other_done.set()
        appender.join(timeout=60)

        block = CoreMemory(p.store, Scope("pg-set")).get("plans")
        assert block.value == "Trip to Porto moved to June."
        assert [e["op"] for e in block.log] == ["set", "append", "set"], "the append landed, then the set"


async def test_async_runs_on_one_thread_take_turns_and_a_refused_one_leaves_no_trace(database, tmp_path):
    """ainvoke/astream hold the thread like invoke/stream: two at once both land, in turn; one that cannot
    wait is ThreadBusy, saves nothing, and lets the thread go."""
    import asyncio

    from pagefault.engines.thread_lock import ThreadBusy

    async with open_postgres_async(database) as p:
        graph = p.graph()
        ctx = Context(user_id="pg-turns", data_dir=str(tmp_path / "d"))
        config = {"configurable": {"thread_id": "pg-turns-1"}}
        first, second = "My boat is called Aurora.", "My kite is called Zephyr."

        async def stream(text):
            return [part async for part in graph.astream({"messages": [HumanMessage(text)]}, config, context=ctx)]

        await asyncio.gather(graph.ainvoke({"messages": [HumanMessage(first)]}, config, context=ctx), stream(second))
        kinds = [m.type for m in (await graph.aget_state(config)).values["messages"]]
        assert kinds == ["human", "ai", "tool", "ai"] * 2, kinds

        impatient = p.graph(wait=0.2)
        held = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with graph.locks.hold("thread", "pg-turns-1"):
                held.set()
                release.wait(timeout=30)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(timeout=30)
        with pytest.raises(ThreadBusy, match="is busy"):
            await impatient.ainvoke({"messages": [HumanMessage("My canoe is yellow.")]}, config, context=ctx)
        with pytest.raises(ThreadBusy, match="is busy"):
            [part async for part in impatient.astream({"messages": [HumanMessage("My canoe is yellow.")]}, config,
                                                      context=ctx)]
        release.set()
        holder.join(timeout=30)
        humans = [m.content for m in (await graph.aget_state(config)).values["messages"] if isinstance(m, HumanMessage)]
        assert sorted(humans) == sorted([first, second]), "the refused runs saved nothing"
        await impatient.ainvoke({"messages": [HumanMessage("My canoe is yellow.")]}, config, context=ctx)
        humans = [m.content for m in (await graph.aget_state(config)).values["messages"] if isinstance(m, HumanMessage)]
        assert humans[-1] == "My canoe is yellow." and len(humans) == 3, "the thread was let go"


def test_the_latest_checkpoint_id_is_read_alone_and_matches_get_tuple(database, tmp_path):
    """A turn's start and end ask only the thread's latest checkpoint id (``cut_short.latest_checkpoint_id``):
    on ``PostgresSaver`` one indexed row, the same id ``get_tuple`` gives, in each namespace."""
    from pagefault.window.cut_short import latest_checkpoint_id

    with open_postgres(database, data_dir=str(tmp_path / "pf")) as p:
        saver = p.checkpointer
        root = {"configurable": {"thread_id": "latest-id", "checkpoint_ns": ""}}
        assert latest_checkpoint_id(saver, root) is None, "a thread with no checkpoint"
        graph = p.graph()
        ctx = Context(user_id="lid", data_dir=str(tmp_path / "pf"), model="offline")
        ids = []
        for text in ("Hello", "My cat is called Tom."):
            graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "latest-id"}}, context=ctx)
            tup = saver.get_tuple(root)
            assert tup is not None and latest_checkpoint_id(saver, root) == tup.checkpoint["id"]
            ids.append(tup.checkpoint["id"])
        assert ids[0] != ids[1], "the second turn moved it on"
        assert latest_checkpoint_id(saver, {"configurable": {"thread_id": "latest-id", "checkpoint_ns": "sub"}}) is None
    with PostgresSaver.from_conn_string(database) as plain:  # a saver on one connection, not a pool
        assert latest_checkpoint_id(plain, root) == ids[1]
