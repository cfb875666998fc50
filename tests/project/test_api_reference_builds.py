"""pdoc builds the API reference from the docstrings, with no warning and nothing fetched from elsewhere:

    pdoc pagefault pagefault.serve pagefault.stores -o docs/api

(pdoc follows a package's ``__all__``, so ``pagefault`` alone would leave ``serve`` and ``stores`` out;
``pagefault.graph`` comes with ``pagefault``). ``tests/unit/test_api_reference.py`` checks the docstrings
themselves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REFERENCE_MODULES = ("pagefault", "pagefault.serve", "pagefault.stores")
"""The modules given to pdoc (``pagefault.graph`` comes with ``pagefault``)."""


def test_pdoc_builds_the_reference(tmp_path):
    script = Path(sys.executable).with_name("pdoc")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "pdoc"]
    out = tmp_path / "api"
    done = subprocess.run([*cli, *REFERENCE_MODULES, "-o", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warn" not in done.stderr.lower(), done.stderr

    index = (out / "pagefault.html").read_text(encoding="utf-8")
    for name in ("PagefaultMiddleware", "build_graph", "memory_tools", "Context", "ContextSettings"):
        assert name in index, name
    for page, names in (("serve.html", ("CLIENT_FIELDS", "ServerSettings")),
                        ("stores.html", ("ArchivalStore", "RecallIndex")),
                        ("graph.html", ("make_builder", "ContextSettings"))):
        html = (out / "pagefault" / page).read_text(encoding="utf-8")
        assert all(n in html for n in names), (page, names)
    # Nothing is fetched when the pages are read: no script or stylesheet from elsewhere.
    assert not re.search(r"""<(script|link)[^>]+(src|href)=["']https?://""", index)
