"""The memory commands of the CLI: ``export`` and ``import`` (``inspect`` is ``cli/inspect.py``).

```
pagefault export --user ana > agent.json      # every tier of ana's agent, versioned JSON
pagefault import agent.json --data-dir new/    # into an empty store (again, to finish one that was killed)
```

Progress bars go to stderr, so stdout stays the export alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from pagefault.maintenance.transfer import TransferError, export_agent, import_agent, unfinished_import, write_export
from pagefault.persistence.embedded import open_embedded
from pagefault.stores.scope import Scope

MEMORY_COMMANDS = ("export", "import")


def _data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"),
                   help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")


def add_memory_commands(sub: Any) -> None:
    """Register export and import on the CLI's subparsers."""
    e = sub.add_parser("export", help="write one user's whole agent (every memory tier) as JSON")
    e.add_argument("--user", required=True, help="user id (whose memory)")
    e.add_argument("--agent", default="default", help="agent id (default: default)")
    e.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")
    e.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    _data_dir(e)
    i = sub.add_parser("import", help="recreate an exported agent in an empty store")
    i.add_argument("file", help="export file, or - for stdin")
    i.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    _data_dir(i)


def _write_file(path: str, doc: dict[str, Any]) -> None:
    """The export into ``path`` whole or not at all: written beside it, then moved into place."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            write_export(doc, f)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise TransferError(f"cannot write {path}: {e.strerror or e}") from e


def run_memory_command(args: argparse.Namespace, out: Any = None) -> int:
    """Run export or import; errors raise ValueError (TransferError is one) for main() to print."""
    out = out or sys.stdout
    if args.command == "export":
        with open_embedded(args.data_dir) as p:
            doc = export_agent(p, Scope(args.user, args.agent), progress=not args.quiet)
        if args.output == "-":
            write_export(doc, out)
        else:
            _write_file(args.output, doc)
        pending = unfinished_import(args.data_dir)
        if pending:  # another user's import: this export is whole, the directory is not
            print(f"pagefault: warning: {pending}", file=sys.stderr)
        print(f"exported user {args.user}: {len(doc['core'])} core block(s), {len(doc['archival'])} archival "
              f"record(s), {len(doc['threads'])} thread(s)", file=sys.stderr)
        return 0
    if args.command == "import":
        source = "stdin" if args.file == "-" else args.file
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as e:
            raise TransferError(f"cannot read {source}: {getattr(e, 'strerror', None) or e}") from e
        with open_embedded(args.data_dir) as p:
            imported = import_agent(p, text, progress=not args.quiet, source=source,
                                    on_resume=lambda line: print(f"pagefault: {line}", file=sys.stderr))
        print(f"imported user {imported.user_id} into {os.path.abspath(args.data_dir)}: {len(imported.core)} core "
              f"block(s), {len(imported.archival)} archival record(s), {len(imported.threads)} thread(s)",
              file=sys.stderr)
        return 0
    raise ValueError(f"not a memory command: {args.command}")
