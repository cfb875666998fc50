"""Many ``pagefault`` commands in one OS process, each as the console script runs it.

The ``pagefault`` script is ``sys.exit(pagefault.cli.main.main())``; this process imports the same
``main`` once and calls it once per command, so a test can try dozens of commands in a fresh
process without paying the start-up for each. It reads a JSON list of runs on stdin, each
``{"argv": [...], "env": {...}, "stdin": "..."}`` (``env``: variables set for that run only, ``stdin``:
what the command reads), and prints a JSON list with one ``{"rc": ..., "stdout": ..., "stderr": ...}``
per run. An exception that escapes ``main`` is printed to the run's stderr as the script would print
it (a traceback) and its ``rc`` is 1, as the script's would be.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from typing import Any


def run(argv: list[str], env: dict[str, str], stdin: str) -> dict[str, Any]:
    """One command: ``main(argv)`` with ``env`` set and ``stdin`` as its input; what it returned and printed."""
    from pagefault.cli.main import main

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    old_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse's usage errors, as the script would exit
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
                rc = 1
    finally:
        sys.stdin = old_stdin
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    runs = json.load(sys.stdin)
    results = [run(r["argv"], r.get("env", {}), r.get("stdin", "")) for r in runs]
    sys.__stdout__.write(json.dumps(results))
