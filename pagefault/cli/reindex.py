"""``pagefault reindex``: a store's archival and recall re-embedded with another model, with a progress
bar on stderr; resumable, and nothing is lost if it is killed (see ``pagefault.maintenance.reindex``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pagefault.cli.arguments import bounded_int
from pagefault.maintenance.reindex import BATCH, reindex
from pagefault.models.embedding_choice import DEFAULT, ENV

REINDEX_COMMANDS = {"reindex"}


def add_reindex_commands(sub: Any) -> None:
    """Register ``pagefault reindex``."""
    p = sub.add_parser("reindex", help="re-embed archival and recall with another embedding model",
                       description="Writes new collections with the new model's vectors and switches to them once "
                                   "every record is in; killed, it resumes where it stopped. Stop the agents that use "
                                   "the store first (it refuses to run beside them).")
    p.add_argument("--embeddings", default=os.environ.get(ENV, "").strip() or DEFAULT,
                   help=f"'{DEFAULT}', 'offline', 'offline-multilingual' or an init_embeddings id such as "
                        f"openai:text-embedding-3-small (default: ${ENV} or {DEFAULT})")
    p.add_argument("--user", default=None,
                   help="the user whose memory is meant: checked to be the store's only user (a store is re-embedded "
                        "whole: one collection holds every user's vectors)")
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"),
                   help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")
    p.add_argument("--batch", type=bounded_int(1, 10_000, "records"), default=BATCH,
                   help=f"records embedded and written together (1 to 10,000; default {BATCH})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def run_reindex_command(args: argparse.Namespace, out: Any = None) -> int:
    """Run ``pagefault reindex`` (a bad choice, user or directory is one line and status 2, from ``main``)."""
    out = out or sys.stdout
    report = reindex(args.data_dir, args.embeddings, user=args.user, progress=not args.quiet, batch=args.batch)
    print(json.dumps(report.to_json()) if args.json else report.line(), file=out)
    return 0
