"""The performance benchmarks run end to end at a tiny scale and write well-formed tables (never timings)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support.engines import child_env

REPO = Path(__file__).resolve().parents[2]
NUMBER = r"[-+]?[\d,]+(?:\.\d+)?"


def _run(script: str, *args: str, results: Path) -> str:
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args, "--results", str(results)],
                          env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text
    return text


def _section(text: str, name: str) -> str:
    return text[text.index(f"<!-- {name}:start -->"):text.index(f"<!-- {name}:end -->")]


def _rows(section: str, first: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith(f"| {first}")]


def test_perf_archival_writes_one_row_per_system(tmp_path):
    text = _run("perf_archival.py", "--sizes", "150", "--queries", "3", "--no-mem0", results=tmp_path / "R.md")
    section = _section(text, "perf_archival")
    assert "| passages | system | p50 ms | p95 ms | p50 / raw Chroma | p95 / raw Chroma |" in section
    rows = _rows(section, "150 |")
    assert [r[1] for r in rows] == [
        "pagefault ArchivalStore.search (hybrid)", "raw Chroma query, top 5",
        "raw Chroma, pagefault's request (filter, 100 candidates, docs)",
        "LangGraph InMemoryStore semantic search", "Mem0 OSS Memory.search (Chroma)"]
    for r in rows[:4]:
        assert all(re.fullmatch(NUMBER, c) for c in r[2:4]) and all(re.fullmatch(NUMBER + "x", c) for c in r[4:6]), r
    assert rows[1][4:6] == ["1.00x", "1.00x"]
    assert rows[4][2:] == ["-", "-", "-", "-"] and "Mem0: skipped (--no-mem0)" in section
    assert re.search(rf"Query embedding alone: p50 {NUMBER} ms, p95 {NUMBER} ms\.", section)


def test_perf_turns_writes_turn_storage_and_ingestion_tables(tmp_path):
    text = _run("perf_turns.py", "--turns", "12", "--passages", "150", "--ingest-tokens", "3000", "--quiet",
                results=tmp_path / "R.md")
    turns = _section(text, "perf_turns")
    assert "| system | p50 turns 3-6 | p95 | p50 turns 9-12 | p95 |" in turns
    names = ["pagefault", "bare", "create_agent + SummarizationMiddleware"]
    timing = [r for r in (_rows(turns, n + " |") for n in names)]
    assert [len(t) for t in timing] == [2, 2, 2]  # one row in the time table, one in the storage table
    for (time_row, bytes_row), name in zip(timing, names):
        assert time_row[0] == bytes_row[0] == name
        assert all(re.fullmatch(NUMBER, c) for c in time_row[1:5]), time_row
        assert re.fullmatch(NUMBER + "x", time_row[5])
        assert (time_row[6:] == ["-", "-"]) if name == "bare" else all(re.fullmatch(NUMBER, c) for c in time_row[6:])
        assert all(re.fullmatch(NUMBER, c) for c in bytes_row[1:3]) and bytes_row[4].endswith(" MB")
    assert re.search(rf"RSS {NUMBER} MiB before loading, {NUMBER} MiB with 150 passages loaded", turns)
    assert re.search(rf"`conversation_search` after the last turn, over its {NUMBER} recall entries \(top 50, .*"
                     rf"`offline-joint`\): p50 {NUMBER} ms, p95 {NUMBER} ms over 200 questions", turns), turns
    ingest = _section(text, "perf_ingest")
    rows = _rows(ingest, "embedding the passages only") + _rows(ingest, "`ingest_document`")
    assert len(rows) == 2 and rows[0][4] == "100 %" and re.fullmatch(r"\d+\.\d %", rows[1][4])


def test_chroma_gil_probe_writes_one_row_per_operation(tmp_path):
    text = _run("chroma_gil.py", "--records", "300", "--calls", "3", results=tmp_path / "R.md")
    section = _section(text, "chroma_gil")
    assert "| operation | call (ms) | other Python threads stopped, longest (ms) | share of the call |" in section
    rows = _rows(section, "upsert") + _rows(section, "query") + _rows(section, "get")
    assert [r[0] for r in rows] == [
        "upsert, 1 record(s)", "upsert, 4 record(s)", "upsert, 16 record(s)", "upsert, 64 record(s)",
        "query, 100 neighbours, scope filter, documents and metadata", "get, 20 ids, documents and metadata"]
    for r in rows:
        assert re.fullmatch(NUMBER, r[1]) and re.fullmatch(NUMBER, r[2]) and re.fullmatch(r"\d+ %", r[3]), r
        assert float(r[2]) <= float(r[1]) + 0.05, r  # the ticker cannot be stopped longer than the call
