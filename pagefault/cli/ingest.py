"""``pagefault ingest FILE...``: documents into a user's archival memory, with a progress bar.

Each file is split into passages (``pagefault.maintenance.documents``), embedded in batches and inserted with
provenance: the file's absolute path (``message_id="<path>#p<i>"``) and the character offset where
the passage starts. Re-ingesting a file adds nothing new (record ids hash scope and text).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pagefault.cli.arguments import bounded_int
from pagefault.maintenance.documents import DEFAULT_PASSAGE_CHARS, ingest_document
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices

INGEST_COMMANDS = {"ingest"}


def add_ingest_commands(sub: Any) -> None:
    p = sub.add_parser("ingest", help="split, embed and insert text documents into a user's archival memory",
                       description="Each passage records its file and character offset as provenance.")
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files")
    p.add_argument("--user", default="default", help="user id whose archival memory receives the passages")
    p.add_argument("--agent", default="default", help="agent id")
    p.add_argument("--tag", action="append", default=[], help="tag every passage (repeatable)")
    p.add_argument("--max-chars", type=bounded_int(100, 100_000, "characters"), default=DEFAULT_PASSAGE_CHARS,
                   help="longest passage in characters (100 to 100,000)")
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"),
                   help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read it: {e.strerror}") from None


def run_ingest_command(args: argparse.Namespace, out: Any = None) -> int:
    """Ingest every file (all are read first, so a bad path fails before anything is written)."""
    out = out or sys.stdout
    texts = {os.path.abspath(f): read_text(f) for f in args.files}
    archival = MemoryServices.open(args.data_dir).archival
    scope = Scope(args.user, args.agent)
    total = new = 0
    for path, text in texts.items():
        records = ingest_document(archival, scope, text, name=path, tags=args.tag, max_chars=args.max_chars,
                                  progress=not args.quiet)
        added = sum(r.created for r in records)
        total, new = total + len(records), new + added
        print(json.dumps({"file": path, "passages": len(records), "new": added}), file=out)
    print(json.dumps({"files": len(texts), "passages": total, "new": new,
                      "archival_records": archival.count(scope)}), file=out)
    return 0
