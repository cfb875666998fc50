"""The README's "Use it in your app" examples run as written (offline), and do what they say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """A fresh working directory (the examples use the default data_dir, .pagefault) and no settings."""
    monkeypatch.chdir(tmp_path)
    for key in [k for k in __import__("os").environ if k.startswith("PAGEFAULT_")]:
        monkeypatch.delenv(key)
    return tmp_path


def test_examples_run_and_do_what_they_say(in_tmp, capsys):
    middleware, tools, retriever = _blocks(_section("Use it in your app"), "python")
    ns: dict = {}

    exec(compile(middleware, "README middleware example", "exec"), ns)
    answer = ns["reply"]["messages"][-1].content
    assert answer.startswith('From memory: "My name is Ana and I live in Lisbon."') and "[archival arc-" in answer
    assert (in_tmp / ".pagefault" / "store.sqlite").exists(), "core memory went to the embedded store"

    exec(compile(tools, "README tools example", "exec"), ns)
    assert {t.name for t in ns["tools"]} == {"core_memory_append", "core_memory_replace", "archival_memory_insert",
                                             "archival_memory_search", "conversation_search", "procedure_update"}
    assert "Lisbon" in ns["found"] and ns["found"].startswith("1 archival result")

    exec(compile(retriever, "README retriever example", "exec"), ns)
    doc = ns["docs"][0]
    assert "Lisbon" in doc.page_content and doc.id.startswith("arc-") and doc.metadata["thread_id"] == "t1"
    printed = capsys.readouterr().out
    assert "From memory:" in printed and doc.id in printed


def test_cli_lines_are_real_commands(in_tmp, capsys):
    """The shell block's commands exist with those flags (each is exercised in test_transfer/test_visibility)."""
    from pagefault.cli.main import main

    (shell,) = _blocks(_section("Use it in your app"), "bash")
    for line in shell.strip().splitlines():
        argv = line.split("#")[0].split()
        assert argv[0] == "pagefault"
        with pytest.raises(SystemExit) as done:
            main([argv[1], "--help"])
        assert done.value.code == 0
        usage = capsys.readouterr().out
        for flag in (a for a in argv[2:] if a.startswith("--")):
            assert flag in usage, (line, flag)
