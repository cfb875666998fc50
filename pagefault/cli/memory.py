"""The memory commands of the CLI: ``export``, ``import`` and ``inspect``.

```
pagefault export --user ana > agent.json      # every tier of ana's agent, versioned JSON
pagefault import agent.json --data-dir new/    # into an empty store
pagefault inspect --user ana --thread t1       # the thread's context window as a chart
```

Progress bars go to stderr, so stdout stays the export alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pagefault.graph.context import Context
from pagefault.maintenance.inspect import render_overview, thread_overview
from pagefault.maintenance.transfer import TransferError, export_agent, import_agent, write_export
from pagefault.persistence.embedded import open_embedded
from pagefault.stores.scope import Scope

MEMORY_COMMANDS = ("export", "import", "inspect")


def _data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"),
                   help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")


def add_memory_commands(sub: Any) -> None:
    """Register export, import and inspect on the CLI's subparsers."""
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
    n = sub.add_parser("inspect", help="show a thread's context window: tokens by segment, core blocks, counts")
    n.add_argument("--user", required=True, help="user id (whose memory)")
    n.add_argument("--agent", default="default", help="agent id (default: default)")
    n.add_argument("--thread", required=True, help="thread id")
    _data_dir(n)


def run_memory_command(args: argparse.Namespace, out: Any = None) -> int:
    """Run export, import or inspect; errors raise ValueError (TransferError is one) for main() to print."""
    out = out or sys.stdout
    if args.command == "export":
        with open_embedded(args.data_dir) as p:
            doc = export_agent(p, Scope(args.user, args.agent), progress=not args.quiet)
        if args.output == "-":
            write_export(doc, out)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                write_export(doc, f)
        print(f"exported user {args.user}: {len(doc['core'])} core block(s), {len(doc['archival'])} archival "
              f"record(s), {len(doc['threads'])} thread(s)", file=sys.stderr)
        return 0
    if args.command == "import":
        source = "stdin" if args.file == "-" else args.file
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as e:
            raise TransferError(f"cannot read {source}: {e}") from e
        with open_embedded(args.data_dir) as p:
            imported = import_agent(p, text, progress=not args.quiet, source=source)
        print(f"imported user {imported.user_id} into {os.path.abspath(args.data_dir)}: {len(imported.core)} core "
              f"block(s), {len(imported.archival)} archival record(s), {len(imported.threads)} thread(s)",
              file=sys.stderr)
        return 0
    ctx = Context(user_id=args.user, agent_id=args.agent, data_dir=args.data_dir)
    with open_embedded(args.data_dir) as p:
        print(render_overview(thread_overview(p, ctx, args.thread)), file=out)
    return 0
