"""A warm pytest runner for the mutation check: started once in the scratch copy, it imports the
third-party libraries pagefault and its tests use (never pagefault itself), then runs each test run
it is asked for in a forked child, which imports the (mutated) pagefault afresh. Each run then costs
its tests, not the ~2 s of CPU that importing LangChain, LangGraph, Chroma and pytest's plugins take.

Protocol, one JSON object per line: the runner reads ``{"tests": [...], "out": path}`` on stdin,
answers ``{"pid": n}`` when the child has started (the child leads its own process group, so the
caller can interrupt or kill it and whatever it started), then ``{"code": n}`` when it has exited
(its pytest exit code; -signal if killed). The child writes pytest's output to ``out``.

    python benchmarks/mutation_worker.py     # run from the scratch copy's root, PYTHONPATH at it
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import sys
import threading
import traceback
from importlib.metadata import entry_points
from pathlib import Path

#: Not imported in the runner: the server's own modules read their configuration when imported.
_SKIP_PREFIXES = ("pagefault", "support", "tests", "conftest", "langgraph_api", "langgraph_runtime")


def third_party_imports(root: Path) -> list[str]:
    """Every absolute import of the package and its tests that is not theirs, sorted."""
    names: set[str] = set()
    for path in [*root.glob("pagefault/**/*.py"), *root.glob("tests/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return sorted(n for n in names if not n.startswith(_SKIP_PREFIXES))


def _outside(root: Path, name: str) -> bool:
    """Whether the top-level package of ``name`` is installed, not a module of the repository (``locomo``)."""
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError):
        return False
    where = spec.origin if spec is not None and spec.origin else ""
    return spec is not None and not str(where).startswith(str(root))


def warm(root: Path) -> None:
    """Import what every test run would import anyway (errors ignored: a run reports its own)."""
    for name in third_party_imports(root):
        if not _outside(root, name):
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - best effort: the child imports it again and fails there if it must
            continue
    for ep in entry_points(group="pytest11"):
        try:
            importlib.import_module(ep.value.split(":")[0])
        except Exception:  # noqa: BLE001
            continue
    if any(m == "pagefault" or m.startswith("pagefault.") for m in sys.modules):
        raise SystemExit("mutation_worker: pagefault was imported while warming up; the children would not see mutants")
    if threading.active_count() != 1:
        raise SystemExit(f"mutation_worker: {threading.active_count()} threads after warming up; forking is not safe")


#: The pytest options of every run: stop at the first failure, quiet, no cache, Hypothesis seeded.
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "--hypothesis-seed=0")


def _child(root: Path, tests: list[str], out: str) -> None:
    """Run ``tests`` with pytest, output to ``out``; exit with pytest's code (4 if pagefault is not the copy's)."""
    os.setsid()
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 3
    try:
        import pytest

        import pagefault

        if not str(pagefault.__file__).startswith(str(root)):
            print(f"mutation_worker: pagefault imported from {pagefault.__file__}, not from {root}")
            code = 4
        else:
            code = int(pytest.main([*PYTEST_ARGS, *tests]))
    except BaseException:  # noqa: BLE001 - e.g. the mutant broke ``import pagefault``: that is a failure too
        traceback.print_exc()
        print("ERROR importing pagefault or running pytest")
        code = 3
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    root = Path.cwd()
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p != here]  # the benchmarks' own modules import pagefault
    warm(root)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            sys.stdin.close()
            _child(root, request["tests"], request["out"])
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"code": code}), flush=True)


if __name__ == "__main__":
    main()
