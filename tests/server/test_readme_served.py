"""README's served Python blocks run against real servers: the `langgraph dev` client snippet against
a dev server without auth, and the production snippet against a fresh Postgres database and a Chroma
server (the token snippet runs in test_serve_safely.py)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import psycopg
from langgraph_sdk import get_sync_client
from support.devserver import dev_server
from support.engines import chroma_server, fresh_database
from support.readme import blocks

from pagefault import Scope


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
        # The snippet's process would write what it journalled at exit; here the database goes first, so
        # the writers finish now, and nothing is left in the shared journal.
        from pagefault.stores import MemoryServices
        from pagefault.stores.writers.shared_journal import SHARED_JOURNAL_TABLE

        MemoryServices.forget(".pagefault")
        with psycopg.connect(db) as conn:
            assert conn.execute(f"SELECT count(*) FROM {SHARED_JOURNAL_TABLE}").fetchone()[0] == 0
    assert values["messages"][0].content == "My name is Ana." and values["messages"][-1].type == "ai"



# A served create_agent app, as README's "Use it in your app" and "Serve it safely" describe it: the
# middleware's own settings own the engines, the run's context (``context_schema=Context``) says whose
# memory the run is for.
SERVED_APP = '''
import os

from langchain.agents import create_agent

from pagefault import Context, OfflineChatModel, PagefaultMiddleware

agent = create_agent(OfflineChatModel(), tools=[], context_schema=Context,
                     middleware=[PagefaultMiddleware(data_dir=os.environ["APP_DATA_DIR"])])
'''


def _app_server_config(tmp_path):
    (tmp_path / "app.py").write_text(SERVED_APP)
    repo = Path(__file__).resolve().parents[2]
    config = tmp_path / "app-langgraph.json"
    config.write_text(json.dumps({"dependencies": [str(repo)], "graphs": {"app": f"{tmp_path / 'app.py'}:agent"}}))
    return config


def _core_block(client, user: str) -> dict | None:
    try:
        return client.store.get_item(Scope(user).namespace("core"), "human")
    except httpx.HTTPStatusError as e:  # a missing item may come back as a 404
        if e.response.status_code == 404:
            return None
        raise


def test_a_served_create_agent_app_runs_with_the_run_context(tmp_path):
    app_data = tmp_path / "app-data"
    with dev_server(tmp_path, config=str(_app_server_config(tmp_path)), APP_DATA_DIR=str(app_data)) as server:
        client = get_sync_client(url=server.url, api_key=None, timeout=120)

        def say(text: str, context: dict, thread: str | None = None) -> tuple[str, dict]:
            thread = thread or client.threads.create()["thread_id"]
            client.runs.wait(thread, "app", input={"messages": [{"role": "user", "content": text}]}, context=context)
            return thread, client.threads.get_state(thread)["values"]

        thread, values = say("My name is Ana and I live in Lisbon.", {"user_id": "ana"})
        assert "saved" in values["messages"][-1]["content"].lower(), values["messages"][-1]
        _, values = say("Where do I live?", {"user_id": "ana"})  # a new thread: the answer comes from memory
        answer = values["messages"][-1]["content"]
        assert "Lisbon" in answer and "[archival arc-" in answer, answer
        human = _core_block(client, "ana")  # core memory: the server's store, under the run context's user
        assert human is not None and "Lives in: Lisbon" in human["value"]["value"], human
        assert _core_block(client, "default") is None, "the run's context, not the app's default, chose the user"

        # A run whose context names what the app owns is refused, and writes nothing for its user.
        eve = client.threads.create()["thread_id"]
        run = client.runs.create(eve, "app", input={"messages": [{"role": "user", "content": "My name is Eve."}]},
                                 context={"user_id": "eve", "data_dir": str(tmp_path / "elsewhere")})
        client.runs.join(eve, run["run_id"])
        assert client.runs.get(eve, run["run_id"])["status"] == "error"
        assert "data_dir" in server.log(tail=None) and "which the app owns" in server.log(tail=None)
        assert _core_block(client, "eve") is None
        assert not (tmp_path / "elsewhere").exists()
    assert app_data.is_dir() and thread
