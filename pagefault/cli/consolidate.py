"""``pagefault consolidate``: one consolidation pass over a user's memory, now (see pagefault.consolidation.consolidate)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pagefault.cli.arguments import bounded_float
from pagefault.consolidation.consolidate import ConsolidationPolicy, consolidate
from pagefault.consolidation.sleeptime import judge_for
from pagefault.graph.context import Context
from pagefault.persistence.postgres import open_persistence
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices
from pagefault.window.run import core_memory

CONSOLIDATE_COMMANDS = {"consolidate"}


_DAYS = bounded_float(0, 365_000, "DAYS")  # up to a thousand years
_SIMILARITY = bounded_float(0, 1, "a cosine similarity", low_open=True)


def _expiry(text: str) -> tuple[str, float]:
    tag, sep, days = text.partition("=")
    if not sep or not tag:
        raise argparse.ArgumentTypeError(f"expected TAG=DAYS, got {text!r}")
    return tag, _DAYS(days) * 86_400


def add_consolidate_commands(sub: Any) -> None:
    p = sub.add_parser("consolidate", help="merge duplicates, settle contradictions, expire, shorten full core blocks",
                       description="One consolidation pass over a user's archival and core memory; prints a JSON "
                                   "report. Safe while the agent is serving that user.")
    p.add_argument("--user", required=True, help="user id (whose memory)")
    p.add_argument("--agent", default="default", help="agent id")
    p.add_argument("--expire", action="append", type=_expiry, default=[], metavar="TAG=DAYS",
                   help="records with this tag stop being current DAYS after they became true (repeatable)")
    p.add_argument("--similarity", type=_SIMILARITY, default=ConsolidationPolicy.similarity,
                   help="cosine similarity at which records without a fact key count as near duplicates")
    p.add_argument("--model", default=os.environ.get("PAGEFAULT_MODEL", "offline"),
                   help="'offline' (rules) or a chat model id used to rewrite full core blocks")
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"))


def run_consolidate_command(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    scope = Scope(args.user, args.agent)
    policy = ConsolidationPolicy(similarity=args.similarity, expire_after=dict(args.expire))
    ctx = Context(user_id=scope.user_id, agent_id=scope.agent_id, data_dir=args.data_dir)  # checked before any file opens
    svc = MemoryServices.open(args.data_dir)
    with open_persistence(args.data_dir) as persistence:
        core = core_memory(persistence.store, ctx)
        report = consolidate(svc.archival, scope, core, policy, judge_for(args.model))
    print(json.dumps(report.to_json()), file=out)
    return 0
