"""The web inspector mounted in a real ``langgraph dev`` server (``"http": {"app": ...}`` in the repo's
configs), reading the server's own checkpointer and store.

- ``langgraph.json`` with tokens on (``PAGEFAULT_JWT_SECRET``): Ann and Ben talk to the graph through
  ``langgraph_sdk`` with their own JWTs; the inspector takes the same tokens (a bearer header, or the
  sign-in form's cookie) and shows each only their own memory. An edit made on the page lands in
  the server's store, where the API reads it.
- ``langgraph.postgres.json`` without auth: the inspector reads threads and core memory from the
  Postgres database the server runs on, and says it answers loopback only.
"""

from __future__ import annotations

import re
import time

import httpx
import jwt
import pytest
from langgraph_sdk import get_sync_client
from support.devserver import dev_server, print_log_on_failure
from support.engines import fresh_database

from pagefault.cli.main import DEMO_FACTS, demo_filler

SECRET = "inspector-served-secret-" + "w" * 32


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + jwt.encode({"sub": user, "exp": int(time.time()) + 900}, SECRET,
                                                    algorithm="HS256")}


def talk(url: str, texts: list[str], headers: dict[str, str] | None = None, context: dict | None = None) -> tuple[str, dict]:
    client = get_sync_client(url=url, api_key=None, headers=headers, timeout=120)
    thread = client.threads.create()["thread_id"]
    for text in texts:
        client.runs.wait(thread, "pagefault", input={"messages": [{"role": "user", "content": text}]}, context=context)
    return thread, client.threads.get_state(thread)["values"]


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    with dev_server(tmp_path_factory.mktemp("inspector-tokens"), PAGEFAULT_JWT_SECRET=SECRET,
                    PAGEFAULT_CONTEXT_WINDOW="3000") as srv:
        ann_thread, ann_state = talk(srv.url, [*DEMO_FACTS, *[demo_filler(i) for i in range(9)],
                                               "Where does my sister work?"], bearer("ann"))
        ben_thread, _ = talk(srv.url, ["Ben keeps his spare key under the blue flowerpot."], bearer("ben"))
        yield {"server": srv, "url": srv.url, "ann_thread": ann_thread, "ann_state": ann_state, "ben_thread": ben_thread}


@pytest.fixture(autouse=True)
def _server_log(request):
    names = [n for n in ("token_server", "postgres_server") if n in request.fixturenames]
    if not names:
        yield
        return
    served = request.getfixturevalue(names[0])
    yield from print_log_on_failure(request, served["server"])


def test_anns_token_shows_her_memory_from_the_servers_own_stores(token_server):
    url, ann = token_server["url"], bearer("ann")
    state = token_server["ann_state"]
    assert state["compactions"] >= 1
    with httpx.Client(base_url=url, headers=ann, timeout=60) as http:
        context = http.get(f"/inspector/ann/context?thread={token_server['ann_thread']}")
        assert context.status_code == 200
        steps = re.findall(r'<a href="/inspector/ann/replay\?thread=[^"]+" class="step" data-total="(\d+)"', context.text)
        assert len(steps) >= 10 and int(steps[-1]) == state["tokens"]["total"]
        assert context.text.count('class="compaction-mark"') == state["compactions"]
        core = http.get("/inspector/ann/core")
        assert core.status_code == 200 and "Lives in: Lisbon" in core.text
        search = http.get("/inspector/ann/archival?q=where+does+my+sister+work")
        assert search.status_code == 200 and "Lucia" in search.text and "part-bm25" in search.text
        recall = http.get("/inspector/ann/recall?q=sister")
        assert 'data-window="evicted"' in recall.text and 'data-window="in"' in recall.text
        compactions = http.get(f"/inspector/ann/compactions?thread={token_server['ann_thread']}")
        assert compactions.text.count('class="card compaction"') == state["compactions"]
        assert http.get(f"/inspector/ann/replay?thread={token_server['ann_thread']}&turn=0").status_code == 200
        assert "No authentication" not in core.text and "Sign out" in core.text


def test_anns_token_cannot_see_bens_memory(token_server):
    url, ann, ben = token_server["url"], bearer("ann"), bearer("ben")
    with httpx.Client(base_url=url, timeout=60) as http:
        assert "flowerpot" in http.get("/inspector/ben/archival", headers=ben).text  # Ben's own: there
        for path in ("/inspector/ben/context", "/inspector/ben/core", "/inspector/ben/archival",
                     "/inspector/ben/archival?q=flowerpot", "/inspector/ben/recall?q=key", "/inspector/ben/compactions",
                     f"/inspector/ben/replay?thread={token_server['ben_thread']}&turn=0"):
            r = http.get(path, headers=ann)
            assert r.status_code == 403, (path, r.status_code)
            assert "flowerpot" not in r.text and token_server["ben_thread"] not in r.text
        for path in (f"/inspector/ann/context?thread={token_server['ben_thread']}",
                     f"/inspector/ann/replay?thread={token_server['ben_thread']}&turn=0"):
            r = http.get(path, headers=ann)  # Ben's thread through Ann's own pages
            assert r.status_code == 404 and "flowerpot" not in r.text
        mine = http.get("/inspector/ann/archival?q=spare+key+flowerpot", headers=ann)
        assert mine.status_code == 200 and "flowerpot" not in re.sub(r'value="[^"]*"|“[^”]*”', "", mine.text)
        assert http.post("/inspector/ben/core/human/append", data={"text": "Ann was here."}, headers=ann).status_code == 403
        assert http.get("/inspector/ann/core").status_code == 401
        assert http.get("/inspector/ann/core", headers={"Authorization": "Bearer not-a-jwt"}).status_code == 401


def test_an_edit_on_the_page_lands_in_the_servers_store(token_server):
    url, ann = token_server["url"], bearer("ann")
    with httpx.Client(base_url=url, headers=ann, timeout=60) as http:
        r = http.post("/inspector/ann/core/human/append", data={"text": "Likes the inspector."})
        assert r.status_code == 303 and r.headers["location"].startswith("/inspector/ann/core?saved=human")
    client = get_sync_client(url=url, api_key=None, headers=ann)
    item = client.store.get_item(["pagefault", "ann", "default", "core"], "human")
    assert item["value"]["value"].endswith("\nLikes the inspector.")
    assert item["value"]["log"][-1]["source"] == "user" and item["value"]["log"][-1]["message_id"] == "inspector:ann"


def test_signing_in_with_the_form_keeps_the_token_for_the_pages(token_server):
    url = token_server["url"]
    with httpx.Client(base_url=url, timeout=60) as browser:
        start = browser.get("/inspector/")
        assert start.status_code == 200 and 'id="login"' in start.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', start.text).group(1)
        r = browser.post("/inspector/login", data={"token": bearer("ann")["Authorization"].split()[1], "csrf": csrf})
        assert r.status_code == 303 and r.headers["location"] == "/inspector/ann/context"
        assert browser.get("/inspector/ann/core").status_code == 200
        assert browser.get("/inspector/ben/core").status_code == 403
        bad = browser.post("/inspector/login", data={"token": "forged", "csrf": csrf})
        assert bad.status_code == 401 and "invalid token" in bad.text


def test_a_user_whose_sub_has_a_slash_opens_their_own_pages(token_server):
    """A token whose ``sub`` is ``team/ana``: her pages' URLs carry ``team%2Fana``, which the server
    used to decode into two segments (a 404 on every page of hers)."""
    url, ana = token_server["url"], bearer("team/ana")
    thread, _ = talk(url, ["My name is Ana."], ana)
    with httpx.Client(base_url=url, headers=ana, timeout=60) as http:
        home = http.get("/inspector/")
        assert home.status_code == 303 and home.headers["location"] == "/inspector/team%2Fana/context", home.headers
        context = http.get(f"/inspector/team%2Fana/context?thread={thread}")
        assert context.status_code == 200 and '<b>team/ana</b>' in context.text, context.text[-2000:]
        assert 'href="/inspector/team%2Fana/core"' in context.text
        core = http.get("/inspector/team%2Fana/core")
        assert core.status_code == 200 and "Name: Ana" in core.text
        r = http.post("/inspector/team%2Fana/core/human/append", data={"text": "Works in a team."})
        assert r.status_code == 303 and r.headers["location"].startswith("/inspector/team%2Fana/core?saved=human")
        assert http.get("/inspector/team/ana/core").status_code == 404  # a path of two segments is no user of hers
    client = get_sync_client(url=url, api_key=None, headers=ana)
    assert client.store.get_item(["pagefault", "team/ana", "default", "core"], "human")["value"]["value"].endswith(
        "\nWorks in a team.")
    with httpx.Client(base_url=url, headers=bearer("team"), timeout=60) as http:
        assert http.get("/inspector/team%2Fana/core").status_code == 403  # another user's pages, as before


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("inspector-postgres")
    with fresh_database("pf_inspector") as db, dev_server(workdir, config="langgraph.postgres.json",
                                                         PAGEFAULT_DATABASE_URL=db,
                                                         PAGEFAULT_DATA_DIR=str(workdir / "data")) as srv:
        thread, state = talk(srv.url, ["My name is Pia and I live in Porto.", "Where do I live?"],
                             context={"user_id": "pia"})
        yield {"server": srv, "url": srv.url, "thread": thread, "state": state}


def test_on_postgres_the_inspector_reads_the_servers_database(postgres_server):
    url = postgres_server["url"]
    with httpx.Client(base_url=url, timeout=60) as http:
        core = http.get("/inspector/pia/core")
        assert core.status_code == 200 and "Lives in: Porto" in core.text
        assert "No authentication." in core.text and "loopback" in core.text
        context = http.get(f"/inspector/pia/context?thread={postgres_server['thread']}")
        assert context.status_code == 200
        assert f"{postgres_server['state']['tokens']['total']:,} / 8,192" in context.text
        assert http.get("/inspector/nobody/core").status_code == 404
        remote = http.get("/inspector/pia/core", headers={"Host": "pagefault.example"})
        assert remote.status_code == 403 and "Porto" not in remote.text
