"""``pagefault import-history``: append an existing dialog (JSON) to a user's memory."""

from __future__ import annotations

import argparse
import json
import os
import sys

from pagefault.graph.context import Context
from pagefault.maintenance.history_import import DIALOG_SCHEMA_DOC, DialogError, import_history, parse_dialog
from pagefault.persistence.embedded import open_embedded

HISTORY_COMMANDS = {"import-history"}


def add_history_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-history", help="import a multi-session dialog (JSON) into a user's memory",
                       description=f"Each session becomes a thread. Expected shape: {DIALOG_SCHEMA_DOC}")
    p.add_argument("file", help="dialog JSON file ('-' for standard input)")
    p.add_argument("--user", required=True, help="user id whose memory receives the dialog")
    p.add_argument("--agent", default="default", help="agent id")
    p.add_argument("--thread-prefix", default="", help="prefix for the thread ids (thread = prefix + session id)")
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"))
    p.add_argument("--window", type=int, default=None, help="context window in tokens while importing")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def run_history_command(args: argparse.Namespace) -> int:
    """Import the dialog; a file that cannot be read or is not a dialog is one line on stderr and exit 2,
    and so is a dialog that does not fit the store (``HistoryConflict``, a ValueError main() prints)."""
    try:
        raw = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as e:
        print(f"pagefault: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print(f"pagefault: cannot read {args.file}: it is not UTF-8 text ({e.reason} at byte {e.start})", file=sys.stderr)
        return 2
    try:
        dialog = parse_dialog(raw)
    except DialogError as e:
        print(f"pagefault: {args.file}: {e}", file=sys.stderr)
        return 2
    extra = {"context_window": args.window} if args.window is not None else {}
    ctx = Context(user_id=args.user, agent_id=args.agent, data_dir=args.data_dir, **extra)
    with open_embedded(ctx.data_dir) as memory:
        report = import_history(memory.graph(), dialog, ctx, thread_prefix=args.thread_prefix, progress=not args.quiet)
    print(json.dumps({"threads": len(report.threads), "imported": report.imported, "skipped": report.skipped}))
    return 0
