"""A Postgres-backed LangGraph server: ``langgraph dev --config langgraph.postgres.json``.

The repository's ``langgraph.postgres.json`` gives the server LangGraph's Postgres checkpointer
and store (``pagefault.production.checkpointer`` / ``.store``, on ``PAGEFAULT_DATABASE_URL``), and
the graph's archival and recall go to the Chroma server at ``PAGEFAULT_CHROMA_URL``. Driven with
``langgraph_sdk`` as a user would; two users on the same server never see each other's memory,
and every tier is found where it should be: checkpoints and core memory as rows in Postgres,
archival records on the Chroma server.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest
from langgraph_sdk import get_sync_client

from engines import child_env, chroma_server, free_port, fresh_database
from pagefault.stores import MemoryServices, Scope

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT = 90.0


def _config(workdir: Path) -> Path:
    """The repository's langgraph.postgres.json with its paths made absolute (the server runs in ``workdir``)."""
    config = json.loads((REPO / "langgraph.postgres.json").read_text())
    config["graphs"] = {g: f"{(REPO / p.rpartition(':')[0]).resolve()}:{p.rpartition(':')[2]}"
                        for g, p in config["graphs"].items()}
    config["dependencies"] = [str((REPO / d).resolve()) for d in config["dependencies"]]
    out = workdir / "langgraph.json"
    out.write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("langgraph-postgres")
    with fresh_database("pf_lgserver") as url, chroma_server(workdir / "chroma") as chroma:
        port, log = free_port(), workdir / "server.log"
        env = child_env(PAGEFAULT_DATABASE_URL=url, PAGEFAULT_CHROMA_URL=chroma.url,
                        PAGEFAULT_DATA_DIR=str(workdir / "data"), PAGEFAULT_MODEL="offline",
                        LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true",
                        LANGSMITH_TRACING="false", NO_COLOR="1")
        for key in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_API_KEY", "OPENAI_API_KEY"):
            env.pop(key, None)
        cmd = [str(Path(sys.executable).with_name("langgraph")), "dev", "--no-browser", "--no-reload",
               "--host", "127.0.0.1", "--port", str(port), "--config", str(_config(workdir))]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))[-6000:]
                    pytest.fail(f"langgraph dev (Postgres config) did not come up:\n{text}", pytrace=False)
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=2):
                        break
                except OSError:
                    time.sleep(0.25)
            yield {"url": f"http://127.0.0.1:{port}", "database": url, "chroma": chroma.url,
                   "data_dir": str(workdir / "data"), "log": log}
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)


def _run(client, user: str, text: str, thread_id: str | None = None) -> tuple[str, dict]:
    thread_id = thread_id or client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "pagefault", input={"messages": [{"role": "user", "content": text}]},
                     context={"user_id": user})
    return thread_id, client.threads.get_state(thread_id)["values"]


def test_two_users_on_a_postgres_backed_server(server):
    client = get_sync_client(url=server["url"], api_key=None, timeout=60)
    ana_thread, values = _run(client, "lgpg-ana", "My name is Ana and my locker code is 4417.")
    assert "saved" in values["messages"][-1]["content"].lower(), values["messages"][-1]
    bob_thread, values = _run(client, "lgpg-bob", "What is my locker code?")
    answer = values["messages"][-1]["content"]
    assert "4417" not in answer and "Ana" not in answer and "found nothing" in answer, answer
    _, values = _run(client, "lgpg-ana", "What is my locker code?")
    answer = values["messages"][-1]["content"]
    assert "4417" in answer and f"from thread {ana_thread}" in answer, answer

    # Core memory: the server's store is LangGraph's PostgresStore, scoped per user.
    ana = client.store.get_item(["pagefault", "lgpg-ana", "default", "core"], "human")
    assert ana["value"]["value"] == "Name: Ana"
    bob_items = client.store.search_items(["pagefault", "lgpg-bob"], limit=100)["items"]
    assert all("Ana" not in json.dumps(i["value"]) for i in bob_items), bob_items
    with psycopg.connect(server["database"]) as conn:
        rows = conn.execute("SELECT prefix, key FROM store WHERE prefix LIKE 'pagefault.lgpg-%'").fetchall()
        assert rows == [("pagefault.lgpg-ana.default.core", "human")], rows
        threads = {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert {ana_thread, bob_thread} <= threads, "the server's checkpoints are rows in Postgres"

    # Archival: on the Chroma server (and its BM25 index in Postgres), one record, Ana's.
    svc = MemoryServices.open(server["data_dir"], chroma_url=server["chroma"], database_url=server["database"])
    assert svc.archival.count(Scope("lgpg-ana")) == 1 and svc.archival.count(Scope("lgpg-bob")) == 0
    assert svc.archival.index.collection.count() == 1
    assert not os.path.exists(server["data_dir"]), "nothing was written to the server's local data directory"


@pytest.mark.parametrize("field", ["data_dir", "chroma_url", "database_url"])
def test_a_client_cannot_say_where_the_memory_lives(server, tmp_path, field):
    """Engines come from the server's environment: the served graph's context schema has no engine field,
    so the server drops one a client sends; the turn's memory lands on the server's own
    engines and nothing is read or written where the client pointed."""
    client = get_sync_client(url=server["url"], api_key=None, timeout=60)
    schema = client.assistants.get_schemas(client.assistants.search(graph_id="pagefault")[0]["assistant_id"])
    assert not {"data_dir", "chroma_url", "database_url"} & set(schema["context_schema"]["properties"])
    user, elsewhere = f"lgpg-eve-{field}", {
        "data_dir": str(tmp_path / "elsewhere"), "chroma_url": "http://127.0.0.1:9",
        "database_url": "postgresql://postgres@127.0.0.1:9/elsewhere"}[field]
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "pagefault", input={"messages": [{"role": "user", "content": "My cat is Tom."}]},
                     context={"user_id": user, field: elsewhere})
    values = client.threads.get_state(thread_id)["values"]
    assert "saved" in values["messages"][-1]["content"].lower(), values["messages"][-1]
    svc = MemoryServices.open(server["data_dir"], chroma_url=server["chroma"], database_url=server["database"])
    assert svc.archival.count(Scope(user)) == 1 and svc.archival.search(Scope(user), "cat", 1)[0][0].text == \
        "My cat is Tom."
    assert not (tmp_path / "elsewhere").exists() and not os.path.exists(server["data_dir"])


def test_the_served_graph_refuses_engine_settings_in_a_run_context():
    """The same graph run in process with a client-shaped context (a mapping) is refused, naming the field."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from pagefault.graph import builder

    graph = builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    for field in ("data_dir", "chroma_url", "database_url"):
        with pytest.raises(ValueError, match=f"{field} cannot be set by a run's context"):
            graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}},
                         context={"user_id": "eve", field: "/tmp/elsewhere"})


def test_memory_tools_keep_their_own_engines_whatever_the_run_context_says():
    """memory_tools / PagefaultMiddleware in a served create_agent app: the run's context may set the user,
    never where the memory lives; the engines are those of the Context the code gave them."""
    from pagefault import Context, RunContext
    from pagefault.toolkit import resolve_context

    own = Context(user_id="default", data_dir="/srv/pagefault", chroma_url="", database_url="")
    for run in ({"user_id": "eve", "data_dir": "/tmp/elsewhere", "chroma_url": "http://127.0.0.1:9",
                 "database_url": "postgresql://postgres@127.0.0.1:9/x"}, RunContext(user_id="eve")):
        ctx = resolve_context(own, run)
        assert (ctx.user_id, ctx.data_dir, ctx.chroma_url, ctx.database_url) == ("eve", "/srv/pagefault", "", "")
