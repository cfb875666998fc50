"""A thread belongs to the user *and agent* of its first run, over the wire: through a real ``langgraph
dev`` (no auth), the same user's run under another agent is refused with a 403 before it is created,
as another user's is (``tests/server/test_serve_safely.py``), and the owner's own runs go on."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_sync_client

GRAPH = "pagefault"


@pytest.fixture(scope="module")
def client(plain_server):
    return get_sync_client(url=plain_server.url, api_key=None, timeout=60)  # shared: olga is this module's user


def _input(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def test_another_agent_of_the_same_user_cannot_run_on_the_thread(client):
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, GRAPH, input=_input("My locker code is 4417."), context={"user_id": "olga"})
    runs = len(client.runs.list(thread))
    with pytest.raises(httpx.HTTPStatusError) as e:
        client.runs.create(thread, GRAPH, input=_input("What is the locker code?"),
                           context={"user_id": "olga", "agent_id": "helper"})
    assert e.value.response.status_code == 403 and "belongs to another user or agent" in e.value.response.text
    assert len(client.runs.list(thread)) == runs, "no run was created"
    client.runs.wait(thread, GRAPH, input=_input("And my bike is in locker 9."), context={"user_id": "olga"})
    assert len(client.runs.list(thread)) == runs + 1
    state = client.threads.get_state(thread)["values"]
    assert state["owner"] == {"user_id": "olga", "agent_id": "default"}
