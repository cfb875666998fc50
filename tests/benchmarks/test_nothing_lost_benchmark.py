"""The nothing-lost benchmark runs end to end (benchmark-scale, so only with ``-m slow``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.engines import child_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_nothing_lost_benchmark_writes_its_section(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "nothing_lost.py"), "--runs", "1", "--hogs", "1",
                           "--results", str(results)], env=child_env(), capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text
    section = text[text.index("<!-- nothing-lost:start -->"):text.index("<!-- nothing-lost:end -->")]
    assert "| 1 | 1 | 0 | 1,511 of 1,511 |" in section, section
