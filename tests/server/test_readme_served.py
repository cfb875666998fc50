"""README's served Python blocks run against real servers: the `langgraph dev` client snippet against
a dev server without auth, and the production snippet against a fresh Postgres database and a Chroma
server (the token snippet runs in test_serve_safely.py)."""

from __future__ import annotations

from langgraph_sdk import get_sync_client
from support.devserver import dev_server
from support.engines import chroma_server, fresh_database
from support.readme import blocks


def _block(heading: str):
    (block,) = [b for b in blocks() if b.heading == heading]
    return block


def test_the_langgraph_dev_snippet_runs(tmp_path):
    code = _block("Serve it with `langgraph dev`").code
    assert "http://127.0.0.1:2024" in code
    with dev_server(tmp_path) as server:
        ns: dict = {}
        exec(compile(code.replace("http://127.0.0.1:2024", server.url), "README langgraph dev snippet", "exec"), ns)
        state = get_sync_client(url=server.url, api_key=None).threads.get_state(ns["thread"]["thread_id"])
    assert [m["type"] for m in state["values"]["messages"]][:1] == ["human"]
    assert state["values"]["owner"] == {"user_id": "ana", "agent_id": "default"}


def test_the_production_snippet_runs(tmp_path, monkeypatch):
    code = _block("Run it in production: Postgres and a Chroma server").code
    url, chroma = "postgresql://postgres@127.0.0.1:5432/pagefault", "http://127.0.0.1:8000"
    assert url in code and chroma in code
    monkeypatch.chdir(tmp_path)
    with fresh_database("pf_readme") as db, chroma_server(tmp_path / "chroma") as server:
        ns: dict = {}
        exec(compile(code.replace(url, db).replace(chroma, server.url), "README production snippet", "exec"), ns)
        from pagefault.persistence.postgres import open_postgres

        with open_postgres(db) as memory:
            values = memory.graph().get_state({"configurable": {"thread_id": "t1"}}).values
    assert values["messages"][0].content == "My name is Ana." and values["messages"][-1].type == "ai"

