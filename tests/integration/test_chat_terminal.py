"""`pagefault chat` driven in a real pseudo-terminal, across two processes and two threads.

The console script is spawned under a pty with pexpect (so it runs exactly as a user would run it,
line discipline and all), with the offline model and a fresh data directory.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

TIMEOUT = 60
PROMPT = "you> "
SCRIPT = Path(sys.executable).with_name("pagefault")


def _env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without any PAGEFAULT_* override, so the offline model is used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEFAULT_")}
    env["TERM"] = "dumb"
    env["PYTHONUNBUFFERED"] = "1"
    env["HOME"] = str(tmp_path / "home")  # nothing from the real home directory leaks in
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def _spawn(tmp_path: Path, data_dir: Path, thread: str, user: str = "ana"):
    child = pexpect.spawn(
        str(SCRIPT),
        ["chat", "--user", user, "--thread", thread, "--data-dir", str(data_dir)],
        env=_env(tmp_path), cwd=str(tmp_path), encoding="utf-8", timeout=TIMEOUT,
        dimensions=(50, 500),  # wide enough that no reply wraps
        echo=False,
        # poll(), not select(): an xdist worker that ran many tests before this one may hold descriptors
        # numbered above select()'s 1024 (the memory services a test opens stay open in its process)
        use_poll=True,
    )
    child.expect("NOT an LLM")  # the offline-model notice comes first
    child.expect(f"thread {re.escape(thread)}")
    child.expect_exact(PROMPT)
    return child


def _send(child, line: str) -> str:
    """Type one line; return everything printed until the next prompt."""
    child.sendline(line)
    child.expect_exact(PROMPT)
    return child.before


def _quit(child) -> None:
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, f"exit status {child.exitstatus}, signal {child.signalstatus}"


@pytest.fixture
def children():
    spawned = []
    yield spawned
    for c in spawned:  # only the processes this test started
        if c.isalive():
            c.terminate(force=True)


def test_chat_in_a_terminal_persists_across_processes_and_threads(tmp_path: Path, children) -> None:
    assert SCRIPT.exists(), f"console script not found next to the interpreter: {SCRIPT}"
    data_dir = tmp_path / "data"

    # -- first process, thread one ------------------------------------------------------------
    child = _spawn(tmp_path, data_dir, "thread-one")
    children.append(child)

    out = _send(child, "My name is Ana and I live in Lisbon.")
    assert re.search(r"agent> Noted\. I saved that to memory \(arc-[0-9a-f]+", out), out

    out = _send(child, "Where do I live?")
    m = re.search(r"agent> (.*)", out)
    assert m, out
    answer = m.group(1)
    assert "Lisbon" in answer, answer
    assert re.search(r"\[archival arc-[0-9a-f]+, from thread thread-one turn \d+\]", answer), answer

    out = _send(child, "/memory")
    assert re.search(r"\[human \d+/2000 chars\]", out), out
    assert "Name: Ana" in out and "Lives in: Lisbon" in out, out
    assert re.search(r"\[persona \d+/2000 chars\]", out), out

    out = _send(child, "/context")
    m = re.search(r"\[([#.]+)\] (\d+)/(\d+) tokens \(system (\d+) \| core (\d+) \| procedures (\d+) "
                  r"\| summary (\d+) \| messages (\d+) \| tools (\d+)\)", out)
    assert m, out
    total, window = int(m.group(2)), int(m.group(3))
    parts = [int(g) for g in m.group(4, 5, 6, 7, 8, 9)]
    assert 0 < total <= window and sum(parts) == total, out
    assert parts[4] > 0, "messages of this thread count against the window"

    out = _send(child, "/search Lisbon")
    assert re.search(r'archival arc-[0-9a-f]+ \(thread thread-one, turn 0, message 0\): "My name is Ana and I live in '
                     r'Lisbon\."', out), out
    assert re.search(r'recall thread thread-one, turn 0, message 0: "user: My name is Ana and I live in Lisbon\."', out), out

    out = _send(child, "/bogus")
    assert "unknown command" in out, out

    _quit(child)

    # -- second process, same user, another thread ------------------------------------------
    child = _spawn(tmp_path, data_dir, "thread-two")
    children.append(child)

    out = _send(child, "/memory")
    assert "Name: Ana" in out and "Lives in: Lisbon" in out, out

    out = _send(child, "/context")
    m = re.search(r"\| messages (\d+) \|", out)
    assert m and int(m.group(1)) == 0, f"a new thread starts with an empty window: {out}"

    # What was said on thread one is found from thread two, cited to where it came from.
    out = _send(child, "Where do I live?")
    m = re.search(r"agent> (.*)", out)
    assert m, out
    assert "Lisbon" in m.group(1), m.group(1)
    assert "thread thread-one" in m.group(1), m.group(1)

    _quit(child)

    # -- a different user sees none of it -----------------------------------------------------
    child = _spawn(tmp_path, data_dir, "thread-three", user="bob")
    children.append(child)
    out = _send(child, "/memory")
    assert "Name: Ana" not in out and "Lisbon" not in out, out
    out = _send(child, "/search Lisbon")
    assert "Lisbon" not in out, out
    _quit(child)
