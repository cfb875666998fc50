"""History import (any dialog of the documented shape)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from pagefault import Context
from pagefault.maintenance.history_import import DialogError, import_history, parse_dialog
from pagefault.stores import MemoryServices, Scope

ROOT = Path(__file__).resolve().parents[2]

DIALOG = {"sessions": [
    {"id": "monday", "timestamp": "2024-03-04T09:00:00", "messages": [
        {"speaker": "Ana", "text": "I finally adopted a grey cat called Miso.", "id": "A1"},
        {"speaker": "Bo", "text": "Lovely! How old is Miso?", "id": "A2"},
        {"speaker": "Ana", "text": "About two years old, from the shelter on Elm Street.", "id": "A3"},
    ] + [{"speaker": "Bo", "text": f"Unrelated chatter line {i} about the weather and trains. " * 4, "id": f"A{i}"}
         for i in range(4, 40)]},
    {"id": "friday", "timestamp": "2024-03-08T18:30:00", "messages": [
        {"speaker": "Bo", "text": "Did you end up joining the climbing gym?", "id": "B1"},
        {"speaker": "Ana", "role": "assistant", "text": "Yes, bouldering twice a week now.", "id": "B2"},
    ]},
]}


def test_import_goes_through_the_graph_and_is_idempotent(embedded, data_dir):
    g = embedded.graph()
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=1500)
    first = import_history(g, DIALOG, ctx, progress=False)
    assert first.threads == ["monday", "friday"] and first.imported == 41 and first.skipped == 0
    monday = g.get_state({"configurable": {"thread_id": "monday"}}).values
    assert monday["compactions"] >= 1 and monday["evicted_count"] + len(monday["messages"]) == 39
    assert all(m.type in ("human", "ai") for m in monday["messages"]), "an import must not produce replies"
    again = import_history(g, DIALOG, ctx, progress=False)
    assert again.imported == 0 and again.skipped == 41
    after = g.get_state({"configurable": {"thread_id": "monday"}}).values
    assert after["evicted_count"] + len(after["messages"]) == 39, "a re-run must not duplicate messages"

    hits = MemoryServices.open(data_dir).recall.search(Scope("ana"), "what is the name of the cat?", 3)
    top = hits[0]
    assert top.external_id == "A1" and top.thread_id == "monday" and top.turn == 0
    assert top.text.startswith("Ana: I finally adopted")
    # Imported turns carry the session's time, so time filters work on them.
    friday = MemoryServices.open(data_dir).recall.search(Scope("ana"), "climbing gym", 5,
                                                          start=parse_ts("2024-03-07T00:00:00"))
    assert {h.external_id for h in friday} == {"B1", "B2"}
    # A live conversation continues on top of imported history.
    out = g.invoke({"messages": [HumanMessage("Which street is the shelter on?")]},
                   {"configurable": {"thread_id": "live"}}, context=ctx)
    assert "Elm Street" in out["messages"][-1].content


def parse_ts(iso: str) -> float:
    from pagefault.maintenance.history_import import to_epoch

    return to_epoch(iso)


@pytest.mark.parametrize("bad, where", [
    ('{"sessions": [{"id": "x", "messages": [{"txt": "hi"}]}]}', "sessions.0.messages.0.text"),
    ('{"sessions": [{"id": "x", "timestamp": "last tuesday", "messages": []}]}', "sessions.0.timestamp"),
    ('{"sessions": [{"id": "x", "messages": []}, {"id": "x", "messages": []}]}', "unique"),
    ("[1, 2, 3]", "top level"),
    ("{not json", "not valid JSON"),
])
def test_malformed_dialogs_are_clear_errors(bad, where):
    with pytest.raises(DialogError, match=where.replace(".", r"\.")):
        parse_dialog(bad)


def test_import_history_command(tmp_path):
    path = tmp_path / "dialog.json"
    path.write_text(json.dumps(DIALOG))
    cmd = [sys.executable, "-m", "pagefault.cli.main", "import-history", str(path), "--user", "ana",
           "--data-dir", str(tmp_path / "pf"), "--window", "1500"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"threads": 2, "imported": 41, "skipped": 0}
    assert "importing" in res.stderr and "41/41" in res.stderr  # the progress bar
    (tmp_path / "bad.json").write_text('{"sessions": 5}')
    bad = subprocess.run(cmd[:4] + [str(tmp_path / "bad.json")] + cmd[5:], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "bad dialog at sessions" in bad.stderr
