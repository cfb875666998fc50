"""``pagefault doctor``: which engines hold the memory, whether each one answers, and whether the data
directory and the settings are sound (one ``problem:`` line each, naming the file or setting)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pagefault.maintenance.doctor import as_json, diagnose, report

OPS_COMMANDS = {"doctor"}


def add_ops_commands(sub: Any) -> None:
    p = sub.add_parser("doctor", help="show the configured engines (SQLite, Postgres, Chroma) and check each answers",
                       description="Exit status 0 when every configured engine answers and the data directory and settings "
                                   "are sound, 1 when not (one 'problem:' line each, naming the file or setting).")
    p.add_argument("--data-dir", default=None, help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")
    p.add_argument("--database-url", default=None, help="Postgres URL (default: $PAGEFAULT_DATABASE_URL)")
    p.add_argument("--chroma-url", default=None, help="Chroma server URL (default: $PAGEFAULT_CHROMA_URL)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run_ops_command(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    diagnosis = diagnose(args.data_dir, args.database_url, args.chroma_url)
    print(json.dumps(as_json(diagnosis), indent=2) if args.json else report(diagnosis), file=out)
    return 0 if diagnosis.ok else 1
