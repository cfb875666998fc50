"""CI runs exactly README's test command: the last line of ``.ci/run`` is the block under "Test it"."""

from __future__ import annotations

from pathlib import Path

from support.readme import blocks

REPO = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readmes_test_command():
    (command,) = [b.code.strip() for b in blocks("bash") if b.heading == "Test it (one command)"][:1]
    last = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert last == command
    assert "-n 4" in command  # on the workers RESULTS' "Test suite time" measured
