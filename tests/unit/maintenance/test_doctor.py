"""The data directory check behind ``pagefault doctor`` and every command: real files, one line each."""

from __future__ import annotations

import sqlite3

from pagefault.maintenance.doctor import SQLITE_MAGIC, data_dir_problems


def test_a_missing_or_fresh_directory_has_no_problem(tmp_path):
    assert data_dir_problems(str(tmp_path / "not-made-yet")) == []
    (tmp_path / "checkpoints.sqlite").write_bytes(b"")  # an empty file is an empty SQLite database
    assert data_dir_problems(str(tmp_path), thorough=True) == []


def test_each_kind_of_bad_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "store.sqlite").mkdir()  # a directory where a database should be
    (tmp_path / "locks").mkdir()  # and where the lock file should be
    (tmp_path / "recall.sqlite").write_bytes(b"garbage, not a database")
    conn = sqlite3.connect(tmp_path / "lexical.sqlite")  # some other program's database
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    problems = data_dir_problems(str(tmp_path))
    assert len(problems) == 4 and all("\n" not in p for p in problems), problems
    assert f"{tmp_path / 'locks'}: is not a file" in problems[0]
    assert problems[1].startswith(f"{tmp_path / 'store.sqlite'}: is not a file")
    assert problems[2] == (f"{tmp_path / 'lexical.sqlite'}: is a SQLite database, but it does not hold the BM25 index "
                           "(it has none of the tables archival_docs, recall_docs, recall_unit_docs)")
    assert problems[3].startswith(f"{tmp_path / 'recall.sqlite'}: is not a SQLite database")


def test_a_setup_cut_short_is_not_a_problem(tmp_path):
    """A file with some of its tables (a process killed during first-time setup) is pagefault's: the
    next open makes the rest."""
    conn = sqlite3.connect(tmp_path / "lexical.sqlite")
    conn.execute("CREATE TABLE recall_docs (id TEXT)")
    conn.commit()
    conn.close()
    assert data_dir_problems(str(tmp_path), thorough=True) == []


def test_a_damaged_database_is_found_by_the_thorough_check(tmp_path):
    """A file with SQLite's header and a broken body passes the quick look every command takes,
    and fails doctor's ``quick_check``."""
    path = tmp_path / "checkpoints.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE checkpoints (x BLOB)")
    conn.execute("CREATE TABLE writes (x BLOB)")
    conn.executemany("INSERT INTO checkpoints VALUES (?)", [(bytes(4000),) for _ in range(50)])
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    assert data.startswith(SQLITE_MAGIC)
    data[8192:8192 + 4096] = b"\xff" * 4096  # a page of the table overwritten
    path.write_bytes(bytes(data))
    assert data_dir_problems(str(tmp_path)) == []
    [problem] = data_dir_problems(str(tmp_path), thorough=True)
    assert problem.startswith(f"{path}: is ") and "\n" not in problem, problem


def test_a_file_in_the_way_of_the_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert data_dir_problems(str(blocker)) == [f"{blocker}: the data directory is a file, not a directory"]
    assert data_dir_problems(str(blocker / "pf")) == [
        f"{blocker / 'pf'}: the data directory cannot be made: {blocker} is a file, not a directory"]
