"""``pagefault replay``: print the main context exactly as the model saw it at a past turn."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from pagefault.maintenance.replay import ReplayError, replay
from pagefault.persistence.postgres import open_persistence
from pagefault.stores.scope import Scope
from pagefault.stores.services import MemoryServices

REPLAY_COMMANDS = {"replay"}


def add_replay_commands(sub: Any) -> None:
    p = sub.add_parser("replay", help="show the main context exactly as the model saw it at a past turn",
                       description="Time travel through the thread's checkpoints: the system prompt (core memory, "
                                   "procedures, summary as they were then) and the messages of one model call.")
    p.add_argument("--thread", required=True, help="thread id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--turn", type=int, help="conversational turn, from 0 (a citation's turn)")
    where.add_argument("--message", type=int, help="a message's position in the thread, from 0 (a citation's "
                                                   "message_index): the turn that message belongs to")
    p.add_argument("--step", type=int, default=0, help="which model call of that turn, from 0 (default: the first)")
    p.add_argument("--user", default=None, help="check that the thread belongs to this user")
    p.add_argument("--agent", default="default", help="agent id (with --user)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a transcript")
    p.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"))


def _belongs(data_dir: str, thread: str, scope: Scope) -> bool:
    recall = MemoryServices.open(data_dir).recall
    recall.writer.flush()
    index = recall.index
    got = index.collection.get(where={"$and": [{"scope": scope.key}, {"thread_id": thread}]}, limit=1, include=[])
    return bool(got["ids"])


def run_replay_command(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    if args.user is not None and not _belongs(args.data_dir, args.thread, Scope(args.user, args.agent)):
        print(f"pagefault: thread {args.thread!r} has no turns of user {args.user!r}", file=sys.stderr)
        return 1
    with open_persistence(args.data_dir) as persistence:
        try:
            call = replay(persistence.graph(), args.thread, args.turn, args.step, message_index=args.message)
        except ReplayError as e:
            print(f"pagefault: {e}", file=sys.stderr)
            return 1
    print(json.dumps(call.to_json(), ensure_ascii=False, indent=1) if args.json else call.text(), file=out)
    return 0
