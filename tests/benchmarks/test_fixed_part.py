"""The fixed-part table (``benchmarks/fixed_part.py``) measures what a real request carries: its figures
are those of a new user's first request sent by a real ``ChatOpenAI`` through the graph, to the scripted
server on loopback."""

from __future__ import annotations

import sys
from pathlib import Path

from langchain_core.messages import HumanMessage
from support.scripted_openai import ScriptedOpenAI

from pagefault import Context
from pagefault.models.tokens import token_counter

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_is_what_a_new_users_request_carries(embedded, data_dir):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fixed_part

    measured = fixed_part.measure()
    with ScriptedOpenAI() as api:
        graph = embedded.graph(model=api.chat_model())
        out = graph.invoke({"messages": [HumanMessage("Hi")]}, {"configurable": {"thread_id": "t"}},
                           context=Context(user_id="new-user", data_dir=data_dir))
        (body,) = api.chat_requests
    counter = token_counter("gpt-4o-mini")
    sent = {t["function"]["name"]: counter.count_tools([t]) for t in body["tools"]}
    assert {k: measured[k] for k in sent} == sent
    assert measured["tool schemas"] == sum(sent.values()) <= 600
    tokens = out["tokens"]
    assert measured["core blocks"] == tokens["core"] and measured["procedures"] == tokens["procedures"] == 0
    assert abs(measured["system prompt"] - tokens["system"]) <= 3  # the date line's minute may tokenize apart
    table = fixed_part.table(measured, 0.5)
    assert "| **tool schemas** | 1,082 | 1,081 | " + f"{measured['tool schemas']:,} |" in table
    assert f"is {int(measured['fixed part'] / 0.5) + 1:,} tokens" in table
