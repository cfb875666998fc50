"""The default test command runs the static checks too: ruff (lint and import order) over the
repository and mypy over the package, with their configuration in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_passes_clean():
    done = _run(str(BIN / "ruff"), "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_passes_clean_on_the_package():
    done = _run(str(BIN / "mypy"))
    assert done.returncode == 0, done.stdout + done.stderr
