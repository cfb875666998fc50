"""The replicas benchmark runs end to end (benchmark-scale, so only with ``-m slow``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.engines import child_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_replicas_benchmark_writes_its_section(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "replicas.py"), "--turns", "2",
                           "--results", str(results)], env=child_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text
    section = text[text.index("<!-- replicas:start -->"):text.index("<!-- replicas:end -->")]
    for row in ("| embedded (SQLite + local Chroma) | 1 | 2 |", "| Postgres + Chroma server | 1 | 2 |",
                "| Postgres + Chroma server | 2 | 4 |"):
        assert row in section, section
