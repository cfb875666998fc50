"""README runs as written: every Python block under the library sections, in README's order, in one
fresh directory with no PAGEFAULT_* settings, each printing what its comments say it prints. The
served blocks run against real servers in tests/server/test_readme_served.py (and the token example in
test_serve_safely.py); the shell lines are real commands with those flags."""

from __future__ import annotations

import contextlib
import io
import os

import pytest
from support.readme import blocks, matches

SERVED = ("Serve it with `langgraph dev`", "Serve it safely", "Run it in production: Postgres and a Chroma server")


@pytest.fixture
def fresh_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("PAGEFAULT_")]:
        monkeypatch.delenv(key)
    return tmp_path


def test_every_served_block_is_run_elsewhere():
    """A new README section with Python in it must be added to one of the two runners."""
    local = {"Use it as a library", "Use it in your app", "Four kinds of memory"}
    assert {b.heading for b in blocks()} <= local | set(SERVED) | {"Serve it safely"}, {b.heading for b in blocks()}


def test_the_readmes_python_runs_in_order_and_prints_what_it_says(fresh_dir):
    ran = []
    for i, block in enumerate(b for b in blocks() if b.heading not in SERVED):
        out = io.StringIO()
        ns: dict = {}
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, f"README block {i} ({block.heading})", "exec"), ns)
        printed = out.getvalue()
        for expected in block.expected_prints():
            assert matches(expected, printed), (block.heading, expected, printed)
        ran.append((block, ns, printed))
    assert len(ran) == 6, [b.heading for b, _, _ in ran]

    (_, lib, _), (_, _, asyncio_printed), (_, mw, _), (_, tools, _), (_, retriever, _), (_, kinds, _) = ran
    assert lib["out"]["messages"][-1].content.startswith("Noted.")
    assert "From memory:" in asyncio_printed and "Ana" in asyncio_printed  # ask() ran through ainvoke
    answer = mw["reply"]["messages"][-1].content
    assert answer.startswith('From memory: "My name is Ana and I live in Lisbon."') and "[archival arc-" in answer
    assert (fresh_dir / ".pagefault" / "store.sqlite").exists(), "core memory went to the embedded store"
    assert {t.name for t in tools["tools"]} == {"core_memory_append", "core_memory_replace", "archival_memory_insert",
                                                "archival_memory_search", "conversation_search", "procedure_update"}
    assert "Lisbon" in tools["found"]
    doc = retriever["docs"][0]
    assert "Lisbon" in doc.page_content and doc.id.startswith("arc-") and doc.metadata["thread_id"] == "t1"
    assert kinds["answer"].startswith('From memory: "As of 2024-05-03, I moved to Berlin."')
    assert kinds["working"] == "Lives in: Berlin"
    assert kinds["rules"] == ["Always answer in French."]
    assert kinds["episode"].messages[-1].content == "As of 2024-01-10, I live in Lisbon."
    assert kinds["now"] == "As of 2024-05-03, I moved to Berlin." and kinds["then"] == "As of 2024-01-10, I live in Lisbon."


def test_the_export_and_inspect_lines_see_the_middleware_example(fresh_dir, capsys):
    """Run after the middleware example (as README orders them), inspect and export find its thread."""
    import json

    from pagefault.cli.main import main

    mw = next(b for b in blocks() if b.heading == "Use it in your app" and "create_agent" in b.code)
    exec(compile(mw.code, "README middleware example", "exec"), {})
    capsys.readouterr()
    assert main(["inspect", "--user", "ana", "--thread", "t1"]) == 0
    assert "no thread" not in capsys.readouterr().out
    assert main(["export", "--user", "ana"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [t["thread_id"] for t in exported["threads"]] == ["t1"]


def test_cli_lines_are_real_commands(fresh_dir, capsys):
    """Every shell line of the library sections calls .venv/bin/ and exists with those flags."""
    from pagefault.cli.main import main

    for block in (b for b in blocks("bash") if b.heading == "Use it in your app"):
        for line in block.code.strip().splitlines():
            argv = line.split("#")[0].split()
            assert argv[0] == ".venv/bin/pagefault", line
            with pytest.raises(SystemExit) as done:
                main([argv[1], "--help"])
            assert done.value.code == 0
            usage = capsys.readouterr().out
            for flag in (a for a in argv[2:] if a.startswith("--")):
                assert flag in usage, (line, flag)


def test_the_matcher_can_fail():
    assert matches('From memory: "x" [archival arc-...', 'From memory: "x" [archival arc-1, from thread t1]')
    assert not matches("1 archival result(s) ...", "2 archival result(s) found")
