"""``pagefault inspect``: one thread's context window in the terminal, or every page of a user's memory
in the browser (``--web``).

```
pagefault inspect --user ana --thread t1      # the thread's context window as a chart
pagefault inspect --web                       # the web inspector on http://127.0.0.1:8765/inspector/
pagefault inspect --web --user ana --port 9000
```

``--web`` serves the inspector (``pagefault.inspector``) on the embedded files of ``--data-dir``, on
loopback only, until Ctrl-C. It authenticates as a served graph does (``PAGEFAULT_AUTH`` and the JWT
keys): with no key set, it answers only this machine, and its pages say so.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from typing import Any

from pagefault.graph.context import Context
from pagefault.maintenance.inspect import render_overview, thread_overview
from pagefault.persistence.embedded import open_embedded
from pagefault.stores.scope import Scope

INSPECT_COMMANDS = ("inspect",)
#: Where ``--web`` listens by default (loopback only, always).
DEFAULT_PORT = 8765
HOST = "127.0.0.1"


def add_inspect_commands(sub: Any) -> None:
    """Register ``inspect`` on the CLI's subparsers."""
    n = sub.add_parser("inspect", help="show a thread's context window (tokens by segment, core blocks, counts), "
                                       "or with --web every page of a user's memory in the browser")
    n.add_argument("--user", default=None, help="user id (whose memory; required without --web)")
    n.add_argument("--agent", default="default", help="agent id (default: default)")
    n.add_argument("--thread", default=None, help="thread id (required without --web)")
    n.add_argument("--web", action="store_true", help="serve the web inspector on loopback (127.0.0.1) until Ctrl-C")
    n.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"--web's port (default {DEFAULT_PORT})")
    n.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"),
                   help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")


def run_inspect_command(args: argparse.Namespace, out: Any = None) -> int:
    """Run ``inspect``; a user error raises ValueError for main() to print (exit 2)."""
    out = out or sys.stdout
    if args.web:
        return serve_web(args.data_dir, args.port, args.user, args.agent, out)
    if not args.user or not args.thread:
        raise ValueError("inspect needs --user and --thread (or --web for the web inspector)")
    ctx = Context(user_id=args.user, agent_id=args.agent, data_dir=args.data_dir)
    with open_embedded(args.data_dir) as p:
        print(render_overview(thread_overview(p, ctx, args.thread)), file=out)
    return 0


def serve_web(data_dir: str, port: int, user: str | None, agent: str, out: Any) -> int:
    """Serve the web inspector on ``data_dir`` at ``127.0.0.1:port`` until interrupted, printing the URL to
    open (``user``/``agent``: whose pages it points at, else the start page)."""
    # The auth module warns, as it loads, that a server without a key does not authenticate: this one
    # answers loopback only, and says so itself.
    logging.getLogger("pagefault.auth").setLevel(logging.ERROR)
    try:
        import uvicorn

        from pagefault.inspector.app import inspector_app, source_opener
        from pagefault.inspector.layout import ROOT, user_path
        from pagefault.inspector.source import embedded_source
    except ImportError as e:
        raise ValueError(f"inspect --web needs {e.name or 'starlette'}: pip install starlette uvicorn") from None
    if not 0 < port < 65536:
        raise ValueError(f"--port must be from 1 to 65535, got {port}")
    start = user_path(Scope(user, agent), "context") if user else f"{ROOT}/"
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((HOST, port))
    except OSError as e:
        listening.close()
        raise ValueError(f"cannot serve on {HOST}:{port}: {e.strerror or e}") from None
    source = embedded_source(data_dir)
    app = inspector_app(source_opener(source), root_redirect=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"pagefault inspector: http://{HOST}:{port}{start}  (memory in {source.data_dir}; loopback only; "
          "Ctrl-C to stop)", file=out, flush=True)
    try:
        server.run(sockets=[listening])
    except KeyboardInterrupt:
        pass
    finally:
        listening.close()
        source.close()
    return 0
