"""Outages: the Chroma server killed, Postgres cut off (a proxy in front of the real server is closed).

A turn during an outage fails with ``ServiceUnavailable`` naming the service and where it was looked
for (with the Chroma server down, a turn that only saves still lands: archival inserts are journalled
in Postgres and written behind the turn); the user's message is not lost; the same turn succeeds
once the service is back; and
``pagefault doctor`` shows what is configured and what answers, with a failing exit status.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from support.engines import ChromaServer, TcpProxy, fresh_database

from pagefault import Context
from pagefault.cli.main import main
from pagefault.engines.connections import ServiceUnavailable
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import MemoryServices, Scope


@pytest.fixture(scope="module")
def database():
    with fresh_database("pf_outage") as url:
        yield url


@pytest.fixture
def chroma(tmp_path):
    server = ChromaServer(tmp_path / "chroma").start()
    yield server
    server.kill()


def _humans(values) -> list[str]:
    return [m.content for m in values["messages"] if isinstance(m, HumanMessage)]


def _status(doctor_output: str, tier: str) -> list[str]:
    """[status, engine, where] of a tier in ``pagefault doctor``'s report."""
    for line in doctor_output.splitlines():
        if f"  {tier}  " in line:
            status, rest = line.split(None, 1)
            engine_where = rest[len(tier):].strip()
            engine = next(e for e in ("PostgreSQL", "Chroma server", "SQLite") if engine_where.startswith(e))
            return [status, engine, engine_where[len(engine):].strip()]
    raise AssertionError(f"no {tier!r} line in:\n{doctor_output}")


def _say(graph, ctx, thread, text):
    return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)


def test_chroma_server_down_then_back(database, chroma, tmp_path, capsys):
    ctx = Context(user_id="out-chroma", chroma_url=chroma.url, database_url=database, data_dir=str(tmp_path / "d"))
    config = {"configurable": {"thread_id": "t1"}}
    with open_postgres(database) as persistence:
        graph = persistence.graph()
        _say(graph, ctx, "t1", "My name is Ana.")
        svc, scope = MemoryServices.open(ctx.data_dir, chroma_url=chroma.url, database_url=database), Scope(ctx.user_id)

        chroma.kill()
        # An insert is journalled in Postgres and written behind the turn: the turn that saves lands.
        saved = _say(graph, ctx, "t1", "My cat is called Tom.")["messages"][-1].content
        assert "saved" in saved.lower(), saved
        assert svc.archival.count(scope) == 2, "the journalled record is counted"
        # A turn that must read the vectors fails, naming the server.
        with pytest.raises(ServiceUnavailable) as down:
            _say(graph, ctx, "t1", "What is my cat called?")
        assert down.value.service == "Chroma server"
        assert str(down.value).startswith(f"Chroma server at {chroma.url} is unreachable: ")
        # The message is saved in the thread, waiting for the steps the outage stopped.
        snap = graph.get_state(config)
        assert _humans(snap.values) == ["My name is Ana.", "My cat is called Tom.", "What is my cat called?"]
        assert snap.next, "the interrupted turn should still have steps to run"

        assert main(["doctor", "--chroma-url", chroma.url, "--database-url", database]) == 1
        out = capsys.readouterr().out
        assert _status(out, "archival + recall") == ["DOWN", "Chroma server", chroma.url], out
        assert _status(out, "threads + core memory")[:2] == ["ok", "PostgreSQL"], out
        assert out.strip().endswith("unreachable: Chroma server"), out

        chroma.start()  # same port, same data
        values = graph.resume(config, context=ctx)
        assert _humans(values) == ["My name is Ana.", "My cat is called Tom.", "What is my cat called?"], \
            "each message is there once"
        assert isinstance(values["messages"][-1], AIMessage) and "Tom" in values["messages"][-1].content, values
        assert svc.archival.count(scope) == 2
        assert svc.archival.journal is not None and not svc.archival.journal.pending_in(scope), "all written"
        assert graph.resume(config, context=ctx) is None, "nothing is left pending"

    assert main(["doctor", "--chroma-url", chroma.url, "--database-url", database]) == 0
    assert "all reachable" in capsys.readouterr().out


def test_postgres_down_then_back(database, chroma, tmp_path, capsys):
    proxy = TcpProxy("127.0.0.1", 5432)
    proxy.restore()
    url = proxy.url_for(database)
    ctx = Context(user_id="out-pg", chroma_url=chroma.url, database_url=url, data_dir=str(tmp_path / "d"))
    try:
        with open_postgres(url) as persistence:
            graph = persistence.graph()
            _say(graph, ctx, "t-pg", "My name is Bea.")

            proxy.cut()
            with pytest.raises(ServiceUnavailable) as down:
                _say(graph, ctx, "t-pg", "My dog is called Rex.")
            assert down.value.service == "PostgreSQL"
            assert str(down.value).startswith(f"PostgreSQL at postgresql://postgres@127.0.0.1:{proxy.port}/")
            assert main(["doctor", "--chroma-url", chroma.url, "--database-url", url]) == 1
            out = capsys.readouterr().out
            assert _status(out, "threads + core memory") == ["DOWN", "PostgreSQL", url], out
            assert _status(out, "archival + recall")[:2] == ["ok", "Chroma server"], out

            proxy.restore()
            # Nothing of the failed call was written, so sending the same turn again lands it exactly once.
            values = _say(graph, ctx, "t-pg", "My dog is called Rex.")
            assert _humans(values) == ["My name is Bea.", "My dog is called Rex."]
            assert "saved" in values["messages"][-1].content.lower()
            svc = MemoryServices.open(ctx.data_dir, chroma_url=chroma.url, database_url=url)
            assert svc.archival.count(Scope(ctx.user_id)) == 2
            assert "Rex" in _say(graph, ctx, "t-pg", "What is my dog called?")["messages"][-1].content
    finally:
        proxy.cut()
