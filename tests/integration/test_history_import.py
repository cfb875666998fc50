"""History import (any dialog of the documented shape)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from support.bad_files import place

from pagefault import Context, open_embedded
from pagefault.cli.main import main
from pagefault.maintenance.history_import import DialogError, import_history, parse_dialog
from pagefault.maintenance.transfer import thread_history
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
    ctx = Context(user_id="ana", data_dir=data_dir, context_window=2048)
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


def test_import_history_command(tmp_path, capsys):
    path = tmp_path / "dialog.json"
    path.write_text(json.dumps(DIALOG))
    cmd = [sys.executable, "-m", "pagefault.cli.main", "import-history", str(path), "--user", "ana",
           "--data-dir", str(tmp_path / "pf"), "--window", "2048"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"threads": 2, "imported": 41, "skipped": 0}
    assert "importing" in res.stderr and "41/41" in res.stderr  # the progress bar
    (tmp_path / "bad.json").write_text('{"sessions": 5}')
    assert main(["import-history", str(tmp_path / "bad.json"), *cmd[5:]]) == 2
    assert "bad dialog at sessions" in capsys.readouterr().err


# -- through the real CLI ---------------------------------------------------------------------------------------
# Refusals run main(), the function the ``pagefault`` entry point calls, in this process (each interpreter
# the CLI starts costs seconds of imports); a kill -9 needs a real process.

def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["import-history", *args, "-q"])
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys, *args: str, words: tuple[str, ...]) -> str:
    """A CLI error: exit 2 and one line on stderr (an uncaught exception would fail the test); returns the line."""
    code, _, err = _run(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err[-2000:])
    assert lines[0].startswith("pagefault: ") and all(w in lines[0] for w in words), lines[0]
    return lines[0]


def _counts(capsys, *args: str) -> dict:
    code, out, err = _run(capsys, *args)
    assert code == 0, err[-2000:]
    return json.loads(out)


def _threads(data_dir: str, *threads: str) -> dict[str, list]:
    """Each thread's whole history (evicted messages included) as [type, name, text, external id], from the
    checkpoints on disk."""
    out = {}
    with open_embedded(data_dir) as p:
        for t in threads:
            found = thread_history(p.checkpointer, t)
            out[t] = [[m.type, m.name, m.content, m.additional_kwargs.get("pagefault", {}).get("external_id")]
                      for m in (found[0] if found else [])]
    return out


def _said(session: dict) -> list[list]:
    return [["human" if m.get("role", "user") == "user" else "ai", m.get("speaker"), m["text"], m.get("id")]
            for m in session["messages"]]


def _log(tmp_path: Path, name: str, *sessions: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"sessions": list(sessions)}))
    return str(path)


FIRST = {"id": "session_1", "messages": [{"speaker": "Ana", "text": "I adopted a cat called Miso."},
                                         {"speaker": "Bo", "text": "How old is Miso?"},
                                         {"speaker": "Ana", "text": "Two years old."}]}
OTHER = {"id": "session_1", "messages": [{"speaker": "Cy", "text": "I sold my bike."},
                                         {"speaker": "Di", "text": "Why?"},
                                         {"speaker": "Cy", "text": "I walk to work now."}]}


def test_a_reused_session_id_is_refused_never_reported_as_imported(tmp_path, capsys):
    """Issue 21: a second log reusing ``session_1`` reported ``imported: 1, skipped: 2`` and its messages
    never appeared. Now it is refused (nothing written); a continuation of the same session resumes; and
    the counts are what landed."""
    store = str(tmp_path / "pf")
    assert _counts(capsys, _log(tmp_path, "a.json", FIRST), "--user", "ana", "--data-dir", store) == \
        {"threads": 1, "imported": 3, "skipped": 0}
    line = _refused(capsys, _log(tmp_path, "b.json", OTHER), "--user", "ana", "--data-dir", store,
                    words=("session 'session_1'", "already holds other messages", "--thread-prefix"))
    assert "I sold my bike." in line and "I adopted a cat" in line, "the message says which messages differ"
    assert _threads(store, "session_1") == {"session_1": _said(FIRST)}, "the refused log wrote nothing"

    # The same log with one more message is a continuation: the new message lands, the rest is skipped.
    longer = {**FIRST, "messages": [*FIRST["messages"], {"speaker": "Bo", "text": "Send me a photo of Miso!"}]}
    assert _counts(capsys, _log(tmp_path, "c.json", longer), "--user", "ana", "--data-dir", store) == \
        {"threads": 1, "imported": 1, "skipped": 3}
    # The other log under its own prefix lands whole, beside the first.
    assert _counts(capsys, str(tmp_path / "b.json"), "--user", "ana", "--data-dir", store, "--thread-prefix", "b-") \
        == {"threads": 1, "imported": 3, "skipped": 0}
    assert _threads(store, "session_1", "b-session_1") == {"session_1": _said(longer), "b-session_1": _said(OTHER)}
    # Another user's import into ana's thread is refused too, before anything is written.
    _refused(capsys, str(tmp_path / "c.json"), "--user", "bo", "--data-dir", store, words=("belongs to another user",))
    assert _threads(store, "session_1") == {"session_1": _said(longer)}


def test_every_message_lands_once_keyed_by_its_position(tmp_path, capsys):
    """Issue 21: two messages with one id reported ``imported: 3`` while the thread held 2. Duplicate ids are
    refused; and an id that spells another message's position ("3") no longer collides with it."""
    store = str(tmp_path / "pf")
    dup = {"id": "s", "messages": [{"text": "one", "id": "x"}, {"text": "two", "id": "x"}, {"text": "three"}]}
    _refused(capsys, _log(tmp_path, "dup.json", dup), "--user", "ana", "--data-dir", store,
             words=("message id 'x' appears twice (messages 0 and 1)",))
    assert _threads(store, "s") == {"s": []}
    tricky = {"id": "s", "messages": [{"text": "first, with external id 3", "id": "3"}, {"text": "second"},
                                      {"text": "third"}, {"text": "fourth, at position 3, without an id"}]}
    assert _counts(capsys, _log(tmp_path, "tricky.json", tricky), "--user", "ana", "--data-dir", store) == \
        {"threads": 1, "imported": 4, "skipped": 0}
    assert _threads(store, "s") == {"s": _said(tricky)}


@pytest.mark.parametrize("name, content, words", [
    ("deep inside", '{"sessions": [{"id": "s", "messages": [{"text": ' + "[" * 5000 + "]" * 5000 + "}]}]}",
     ["nested too deeply"]),
    ("nested value", '{"sessions": [{"id": "s", "messages": [{"text": ' + "[" * 900 + "]" * 900 + "}]}]}",
     ["bad dialog at sessions.0.messages.0.text"]),
    ("binary", b"\xff\xfe\x00garbage", ["cannot read", "not UTF-8"]),
    ("empty", "", ["not valid JSON"]),
    ("huge integer", '{"sessions": ' + "9" * 5000 + "}", ["not valid JSON"]),
    ("lone surrogate", '{"sessions": [{"id": "s", "messages": [{"text": "\\ud800"}]}]}', ["not valid Unicode"]),
    ("a directory", "DIR", ["cannot read"]),
    ("missing", "MISSING", ["cannot read"]),
])
def test_every_bad_file_is_one_line_and_exit_2(tmp_path, capsys, name, content, words):
    path = place(tmp_path / "bad.json", content)
    line = _refused(capsys, str(path), "--user", "ana", "--data-dir", str(tmp_path / "pf"), words=tuple(words))
    assert len(line) < 600


def test_a_deeply_nested_file_is_one_line_from_the_real_command(tmp_path):
    """Issue 21: a deeply nested JSON file gave a RecursionError traceback."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    res = subprocess.run([sys.executable, "-m", "pagefault.cli.main", "import-history", str(path), "--user", "ana",
                          "--data-dir", str(tmp_path / "pf")], capture_output=True, text=True, timeout=300)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "deep.json: not a dialog: its JSON is nested too deeply to read" in lines[0]


# The real command in a child process whose progress bar, once it has counted 32 messages, says so in a file
# and stops there, so that the kill lands midway whatever the machine's load.
_STOP_AT_32 = """
import sys, time
from pathlib import Path
import pagefault.maintenance.history_import as h
class Bar(h.tqdm):
    def update(self, n=1):
        out = super().update(n)
        if self.n >= 32:
            Path(sys.argv[1]).write_text(str(self.n))
            time.sleep(3600)
        return out
h.tqdm = Bar
from pagefault.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def test_a_killed_import_resumes_where_it_stopped(tmp_path, capsys):
    """``kill -9`` midway (once the progress bar has counted 32 of 96 messages), then the same command
    again: every message lands exactly once, and the counts say what the second run did."""
    sessions = [{"id": f"day{d}", "timestamp": f"2024-03-0{d + 1}T09:00:00",
                 "messages": [{"speaker": "Ana" if i % 2 else "Bo", "text": f"Day {d}, line {i}: the trains were late.",
                               "id": f"D{d}:{i}"} for i in range(16)]} for d in range(6)]
    path = _log(tmp_path, "week.json", *sessions)
    store = str(tmp_path / "pf")
    marker = tmp_path / "at-32"
    proc = subprocess.Popen([sys.executable, "-c", _STOP_AT_32, str(marker), "import-history", path, "--user", "ana",
                             "--data-dir", store], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not marker.exists():
            assert proc.poll() is None, "the import ended before it counted 32 messages"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the import was killed midway"
    ids = [s["id"] for s in sessions]
    held = sum(len(v) for v in _threads(store, *ids).values())
    assert 32 <= held < 96, held

    assert _counts(capsys, path, "--user", "ana", "--data-dir", store) == \
        {"threads": 6, "imported": 96 - held, "skipped": held}
    assert _threads(store, *ids) == {s["id"]: _said(s) for s in sessions}
    recall = MemoryServices.open(store).recall
    assert {h.external_id for h in recall.search(Scope("ana"), "the trains were late", 200)} == \
        {f"D{d}:{i}" for d in range(6) for i in range(16)}, "every message is in recall too"
