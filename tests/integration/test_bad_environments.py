"""Bad environments through the real CLI: one line, exit status 2, nothing written; ``doctor`` exits 1.

Each environment is a real one: a file where the data directory should be, a read-only directory (a
read-only bind mount when the tests run as root, for whom ``chmod`` stops nothing; ``chmod`` otherwise),
each database file of a real data directory overwritten with random bytes, a SQLite file of some
other program where one of pagefault's should be, and settings out of their bounds
(``PAGEFAULT_CONTEXT_WINDOW=10**30``, ``--window 0``).

For each one, ``pagefault doctor`` exits 1 with a ``problem:`` line naming the file (or setting),
and every other command prints one line on stderr naming it, exits 2, shows no traceback, and leaves
every file of the data directory as it was. The console script (``.venv/bin/pagefault``) runs the
headline cases one process each; the whole matrix (every command in every environment) runs in one
fresh process through ``tests/support/cli_runs.py``, which calls the same ``main`` the script does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.engines import child_env

PAGEFAULT = str(Path(sys.executable).with_name("pagefault"))
CLI_RUNS = Path(__file__).resolve().parents[1] / "support" / "cli_runs.py"
USER, THREAD = "ana", "t1"
BIG = str(10 ** 30)

DATABASES = ["checkpoints.sqlite", "store.sqlite", "lexical.sqlite", "recall.sqlite", "archival_recent.sqlite",
             "chroma/chroma.sqlite3"]


def _pagefault(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """``.venv/bin/pagefault`` with ``args``, none of the developer's ``PAGEFAULT_*`` but ``env``."""
    return subprocess.run([PAGEFAULT, *args], input=stdin, capture_output=True, text=True, timeout=180,
                          env=child_env(**(env or {})))


def _one_line_error(stderr: str, *names: str) -> str:
    """The single line of ``stderr``, checked: no traceback, ``pagefault:`` first, each of ``names`` in it."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("pagefault"), lines[0]
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` and a hash of its bytes, write-ahead logs included (a write lands
    there first). Left out: an empty ``-wal`` and every ``-shm`` (SQLite's index of the log), which
    a read-only SQLite connection makes when they are missing."""
    if not root.exists():
        return {}
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))
            if not p.name.endswith("-shm") and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


def _cli_runs(runs: list[dict]) -> list[dict]:
    """Run ``runs`` (see ``tests/support/cli_runs.py``) in one fresh process."""
    proc = subprocess.run([sys.executable, str(CLI_RUNS)], input=json.dumps(runs), capture_output=True, text=True,
                          timeout=300, env=child_env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A real data directory (an imported dialog and an ingested document made every file there), an
    export of it, the dialog and the document: what the commands are given."""
    root = tmp_path_factory.mktemp("bad-env")
    good, export, dialog, doc = root / "good", root / "ana.json", root / "dialog.json", root / "doc.txt"
    dialog.write_text(json.dumps({"sessions": [{"id": THREAD, "messages": [
        {"role": "user", "text": "My name is Ana and I live in Lisbon."},
        {"role": "assistant", "text": "Nice to meet you, Ana."}]}]}))
    doc.write_text("A short document about the harbour.\n")
    d = ["--data-dir", str(good)]
    made = _cli_runs([{"argv": ["import-history", str(dialog), "--user", USER, "-q", *d]},
                      {"argv": ["ingest", str(doc), "--user", USER, "-q", *d]},
                      {"argv": ["export", "--user", USER, "-q", "-o", str(export), *d]}])
    assert [r["rc"] for r in made] == [0, 0, 0], made
    for name in DATABASES:
        assert (good / name).is_file(), f"the commands should have made {name}"
    return {"root": root, "good": good, "export": export, "dialog": dialog, "doc": doc}


def _commands(inputs: dict[str, Path], data_dir: Path) -> list[list[str]]:
    """Every command but doctor, on ``data_dir``, each with valid arguments (only the directory is bad)."""
    d = ["--data-dir", str(data_dir)]
    out = str(inputs["root"] / "out.json")
    return [["chat", "--user", USER, "--thread", THREAD, *d],
            ["export", "--user", USER, *d],
            ["export", "--user", USER, "-o", out, *d],
            ["import", str(inputs["export"]), *d],
            ["inspect", "--user", USER, "--thread", THREAD, *d],
            ["import-history", str(inputs["dialog"]), "--user", USER, *d],
            ["ingest", str(inputs["doc"]), "--user", USER, *d],
            ["consolidate", "--user", USER, *d],
            ["replay", "--thread", THREAD, "--turn", "0", *d],
            ["demo", *d]]


def _copy_of_good(inputs: dict[str, Path], name: str) -> Path:
    target = inputs["root"] / name
    shutil.copytree(inputs["good"], target)
    return target


def _garbage(inputs: dict[str, Path], database: str, prefix: str = "garbage") -> tuple[Path, Path]:
    """A copy of the good directory with ``database`` overwritten by random bytes; (directory, the file)."""
    d = _copy_of_good(inputs, f"{prefix}-{database.replace('/', '-')}")
    path = d / database
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(os.urandom(16384))
    return d, path


def _foreign(inputs: dict[str, Path]) -> tuple[Path, Path]:
    """A copy whose ``store.sqlite`` is some other program's SQLite database."""
    d = _copy_of_good(inputs, "foreign-store")
    path = d / "store.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    return d, path


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """``directory`` read-only for this process's children, for real: a read-only bind mount of it on
    itself when the tests run as root (whom ``chmod`` does not stop), else ``chmod`` 0555. Undone after."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True, capture_output=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(directory)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True, capture_output=True)


def _bad_directories(inputs: dict[str, Path]) -> list[tuple[str, Path, Path]]:
    """(case, data directory, the path every message must name) for each bad directory but the read-only one."""
    root = inputs["root"]
    a_file = root / "a-file"
    a_file.write_text("not a directory\n")
    cases = [("a file as the data directory", a_file, a_file),
             ("a data directory under a file", a_file / "pf", a_file)]
    cases += [(f"garbage {db}", *_garbage(inputs, db)) for db in DATABASES]
    cases.append(("another program's SQLite as store.sqlite", *_foreign(inputs)))
    return cases


NUMERIC_VARIABLES = [
    ("PAGEFAULT_CONTEXT_WINDOW", "0", "context_window"),
    ("PAGEFAULT_CONTEXT_WINDOW", BIG, "context_window"),
    ("PAGEFAULT_TOP_K", "51", "top_k"),
    ("PAGEFAULT_CORE_BLOCK_LIMIT", BIG, "core_block_limit"),
    ("PAGEFAULT_CONSOLIDATE_EVERY", "-1", "consolidate_every"),
    ("PAGEFAULT_WARNING_FRACTION", "nan", "warning_fraction"),
    ("PAGEFAULT_COMPACTION_TRIGGER", "inf", "compaction_trigger"),
    ("PAGEFAULT_COMPACTION_TARGET", "-0.5", "compaction_target"),
]
"""(variable, a value out of bounds, the field the message names): every numeric ``PAGEFAULT_*``."""


@dataclass
class Batch:
    """Every command of the matrix, run in one fresh process: ``results`` maps a case to its
    ``(argv, result)`` pairs; ``paths`` holds the directories of the cases, ``named`` the path that
    each bad directory's messages must name, ``changed`` the cases whose directory a command changed."""

    results: dict[str, list[tuple[list[str], dict]]]
    paths: dict[str, Path]
    named: dict[str, Path]
    changed: list[str]


@pytest.fixture(scope="module")
def batch(inputs) -> Batch:
    """The bad directories (a read-only one mounted read-only while the commands run), the settings
    out of bounds, a healthy and a half-imported directory, and export into a missing directory:
    every command on each, in one process through ``tests/support/cli_runs.py``."""
    root = inputs["root"]
    cases = _bad_directories(inputs)
    paths = {case: d for case, d, _ in cases}
    named = {case: path for case, _, path in cases}
    runs: list[tuple[str, dict]] = []
    for case, d, _ in cases:
        runs += [(case, {"argv": argv}) for argv in [["doctor", "--data-dir", str(d)], *_commands(inputs, d)]]
    for variable, value, field in NUMERIC_VARIABLES:
        case = f"{variable}={value}"
        paths[case] = root / f"env-{field}-{len(paths)}"
        runs += [(case, {"argv": argv, "env": {variable: value}})
                 for argv in [*_commands(inputs, paths[case]), ["doctor", "--data-dir", str(paths[case])]]]
    paths["healthy"] = _copy_of_good(inputs, "doctor-good")
    paths["half-imported"] = half = _copy_of_good(inputs, "half-imported")
    (half / "import-journal.json").write_text(json.dumps({  # what an import killed midway leaves
        "digest": "0" * 64, "user_id": "bo", "agent_id": "default", "source": str(inputs["export"]),
        "started_at": "2025-01-01T00:00:00+00:00", "stage": "threads", "threads_total": 3,
        "threads_done": ["t1"], "thread_started": "t2"}))
    paths["window 0"] = _copy_of_good(inputs, "window-0")
    runs += [("healthy", {"argv": ["doctor", "--data-dir", str(paths["healthy"])]}),
             ("half-imported", {"argv": ["doctor", "--data-dir", str(half)]}),
             ("export -o a missing directory", {"argv": ["export", "--user", USER, "-o", str(_missing(root)),
                                                         "--data-dir", str(paths["healthy"])]}),
             ("window 0", {"argv": ["import-history", str(inputs["dialog"]), "--user", USER, "--window", "0",
                                    "--data-dir", str(paths["window 0"])]})]
    paths["read-only"] = named["read-only"] = ro = _copy_of_good(inputs, "read-only")
    runs += [("read-only", {"argv": argv}) for argv in [["doctor", "--data-dir", str(ro)], *_commands(inputs, ro)]]
    before = {case: _snapshot(d) for case, d in paths.items()}
    with read_only(ro):
        assert subprocess.run(["touch", str(ro / "probe")], capture_output=True).returncode != 0, \
            "the read-only directory took a write"
        got = _cli_runs([run for _, run in runs])
        changed = ["read-only"] if _snapshot(ro) != before["read-only"] else []
    results: dict[str, list[tuple[list[str], dict]]] = {}
    for (case, run), result in zip(runs, got, strict=True):
        results.setdefault(case, []).append((run["argv"], result))
    # doctor opens Chroma where nothing else is wrong, and Chroma notes the open in its own database.
    opened = ("read-only", "healthy", "half-imported")
    changed += [case for case, d in paths.items() if case not in opened and _snapshot(d) != before[case]]
    return Batch(results, paths, named, changed)


def _missing(root: Path) -> Path:
    """Where ``export -o`` is pointed: a file in directories that do not exist."""
    return root / "no" / "such" / "dir" / "x.json"


def test_every_command_in_every_bad_directory_is_one_line_and_writes_nothing(inputs, batch):
    assert len(batch.named) == 10
    for case, named in batch.named.items():
        runs = batch.results[case]
        assert len(runs) == 11
        for argv, got in runs:
            what = f"{case}: pagefault {' '.join(argv)}"
            if argv[0] == "doctor":
                assert got["rc"] == 1, (what, got)
                assert "Traceback" not in got["stderr"] + got["stdout"], (what, got)
                problems = [line for line in got["stdout"].splitlines() if line.startswith("problem: ")]
                assert any(line.startswith(f"problem: {named}") for line in problems), (what, got["stdout"])
                assert "all reachable" not in got["stdout"], (what, got["stdout"])
            else:
                assert got["rc"] == 2, (what, got)
                _one_line_error(got["stderr"], str(named))
    assert not [case for case in batch.named if case in batch.changed], batch.changed
    assert not (inputs["root"] / "out.json").exists(), "an export was written from a bad directory"


def _pagefault_together(*commands: tuple[list[str], str]) -> list[subprocess.CompletedProcess]:
    """Each ``(args, stdin)`` through the console script, in processes started together."""
    procs = [(args, subprocess.Popen([PAGEFAULT, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=child_env()))
             for args, _ in commands]
    done = []
    for (args, proc), (_, stdin) in zip(procs, commands, strict=True):
        out, err = proc.communicate(stdin, timeout=180)
        done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return done


def test_the_console_script_on_bad_directories(inputs):
    """The same through ``.venv/bin/pagefault`` itself, one process per command, for the cases the
    issue names: a file as the directory, a garbage ``checkpoints.sqlite``, a read-only directory."""
    a_file = inputs["root"] / "script-file"
    a_file.write_text("x")
    d, path = _garbage(inputs, "checkpoints.sqlite", "script")
    ro = _copy_of_good(inputs, "script-read-only")
    with read_only(ro):
        chat, doctor, say = _pagefault_together(
            (["chat", "--user", USER, "--thread", THREAD, "--data-dir", str(a_file)], "Hello.\n"),
            (["doctor", "--data-dir", str(d)], ""),
            (["chat", "--user", USER, "--thread", THREAD, "--data-dir", str(ro)], "Hello.\n"))
    assert chat.returncode == 2
    assert _one_line_error(chat.stderr, str(a_file)).endswith("is a file, not a directory")
    assert doctor.returncode == 1, doctor.stdout
    assert f"problem: {path}: is not a SQLite database" in doctor.stdout, doctor.stdout
    assert say.returncode == 2
    line = _one_line_error(say.stderr, str(ro))
    assert ("read-only file system" if os.geteuid() == 0 else "not writable") in line, line


def test_doctor_on_a_good_directory_an_unfinished_import_and_export_into_a_missing_directory(inputs, batch):
    [(_, ok)] = batch.results["healthy"]
    assert ok["rc"] == 0, ok["stdout"]
    assert ok["stdout"].strip().endswith("all reachable") and "problem:" not in ok["stdout"], ok["stdout"]
    # An import killed midway leaves its journal: doctor says the store is partial, and exits 1.
    [(_, partial)] = batch.results["half-imported"]
    journal = batch.paths["half-imported"] / "import-journal.json"
    assert partial["rc"] == 1, partial["stdout"]
    problems = [line for line in partial["stdout"].splitlines() if line.startswith("problem: ")]
    assert len(problems) == 1 and problems[0].startswith(f"problem: {journal}: ") and "partial" in problems[0], problems
    # export -o into a directory that does not exist: one line naming the file, before any work.
    [(_, export)] = batch.results["export -o a missing directory"]
    target = _missing(inputs["root"])
    assert export["rc"] == 2 and export["stdout"] == ""
    assert _one_line_error(export["stderr"], str(target)).endswith(f"cannot write {target}: no such directory {target.parent}")
    assert not (inputs["root"] / "no").exists()


def test_settings_out_of_bounds_are_refused_before_anything_is_written(inputs, batch):
    """``PAGEFAULT_CONTEXT_WINDOW=10**30`` used to pass, and then every turn failed after its archival
    insert was written. Now the console script refuses it at once, although ``import pagefault``
    reads the environment: one line naming the variable, exit 2, and no file of the data directory
    changes. ``--window 0`` is refused too, where it used to be ignored."""
    good = _copy_of_good(inputs, "bounds")
    before = _snapshot(good)
    chat = _pagefault("chat", "--user", USER, "--thread", THREAD, "--data-dir", str(good),
                      env={"PAGEFAULT_CONTEXT_WINDOW": BIG}, stdin="My cat is called Tom.\n")
    assert chat.returncode == 2, chat.stdout + chat.stderr
    assert BIG in _one_line_error(chat.stderr, "PAGEFAULT_CONTEXT_WINDOW", "context_window", "10,000,000")
    assert _snapshot(good) == before
    [(_, window)] = batch.results["window 0"]
    assert window["rc"] == 2
    _one_line_error(window["stderr"], "context_window", "got 0")
    assert "window 0" not in batch.changed


def test_each_numeric_variable_out_of_bounds(batch):
    """Every command refuses each numeric ``PAGEFAULT_*`` out of bounds in one line naming the field
    and the variable, and makes no data directory; doctor reports it (exit 1)."""
    for variable, value, field in NUMERIC_VARIABLES:
        runs = batch.results[f"{variable}={value}"]
        assert len(runs) == 11
        for argv, got in runs:
            if argv[0] == "doctor":
                assert got["rc"] == 1, got
                assert any(line.startswith("problem: settings: ") and field in line and variable in line
                           for line in got["stdout"].splitlines()), got["stdout"]
            else:
                assert got["rc"] == 2, (variable, argv, got)
                _one_line_error(got["stderr"], field, variable)
        assert not batch.paths[f"{variable}={value}"].exists(), f"{variable}={value}: a command made the data directory"
