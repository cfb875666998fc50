"""Command line: ``pagefault demo`` (the seed's paging trace) and ``pagefault chat`` (a REPL)."""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import uuid
from typing import Any, Iterable, Iterator, NoReturn, cast

from chromadb.errors import ChromaError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from pagefault.cli.consolidate import CONSOLIDATE_COMMANDS, add_consolidate_commands, run_consolidate_command
from pagefault.cli.doctor import OPS_COMMANDS, add_ops_commands, run_ops_command
from pagefault.cli.import_history import HISTORY_COMMANDS, add_history_commands, run_history_command
from pagefault.cli.ingest import INGEST_COMMANDS, add_ingest_commands, run_ingest_command
from pagefault.cli.inspect import INSPECT_COMMANDS, add_inspect_commands, run_inspect_command
from pagefault.cli.memory import MEMORY_COMMANDS, add_memory_commands, run_memory_command
from pagefault.cli.reindex import REINDEX_COMMANDS, add_reindex_commands, run_reindex_command
from pagefault.cli.replay import REPLAY_COMMANDS, add_replay_commands, run_replay_command
from pagefault.engines import connections as backends
from pagefault.graph.context import Context
from pagefault.graph.state import PagefaultState
from pagefault.maintenance.doctor import data_dir_problems, uses_data_dir
from pagefault.persistence.embedded import EmbeddedPersistence, open_embedded
from pagefault.persistence.postgres import PostgresPersistence, open_persistence
from pagefault.stores.core import CoreMemory
from pagefault.text.ids import MAX_ID, too_long
from pagefault.tools.handlers import quote
from pagefault.window.main_context import SEGMENTS
from pagefault.window.run import MemoryRun
from pagefault.window.setup import AgentSetup

OFFLINE_NOTE = ("model: offline (a deterministic rule-based stand-in, NOT an LLM; set PAGEFAULT_MODEL, "
                "e.g. openai:gpt-4o-mini, for a real model)")



def context_bar(tokens: dict[str, int], width: int = 40) -> str:
    """One line: tokens by segment against the window, with a proportional bar."""
    window = tokens.get("window") or 1
    total = tokens.get("total", 0)
    filled = min(width, round(width * total / window))
    parts = " | ".join(f"{k} {tokens.get(k, 0)}" for k in SEGMENTS)
    return f"[{'#' * filled}{'.' * (width - filled)}] {total}/{window} tokens ({parts})"


class Session:
    """One user's conversation on a thread, run through the graph with streaming."""

    def __init__(self, persistence: EmbeddedPersistence | PostgresPersistence, ctx: Context, thread_id: str,
                 out=sys.stdout) -> None:
        self.graph = persistence.graph()
        self.setup = AgentSetup()  # the graph's: no tools of the user's, the context's model
        self.persistence = persistence
        self.ctx = ctx
        self.config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        self.out = out

    def say(self, text: str, *, trace: bool = True) -> str:
        """Send one user message; print page faults and compactions as they happen."""
        answer = ""
        # With a list of stream modes, every part streamed is a (mode, chunk) pair.
        parts = cast("Iterator[tuple[str, Any]]", self.graph.stream(
            {"messages": [HumanMessage(text)]}, self.config, context=self.ctx, stream_mode=["updates", "custom"]))
        for mode, chunk in parts:
            if mode == "custom":  # pressure warnings and compactions always show
                self._event(chunk)
            elif mode == "updates":
                for node, update in (chunk or {}).items():
                    for m in (update or {}).get("messages", []) if isinstance(update, dict) else []:
                        if isinstance(m, AIMessage) and m.tool_calls and trace:
                            for tc in m.tool_calls:
                                kind = "page-in " if "search" in tc["name"] else "page-out"
                                args = ", ".join(f"{k}={quote(str(v))[:70]}" for k, v in tc["args"].items())
                                print(f"  {kind} -> {tc['name']}({args})", file=self.out)
                        elif isinstance(m, ToolMessage) and trace:
                            first = str(m.content).splitlines()[0] if m.content else ""
                            print(f"           <- {first[:110]}", file=self.out)
                        elif isinstance(m, AIMessage) and not m.tool_calls:
                            answer = str(m.content)
        return answer

    def _event(self, event: Any) -> None:
        if not isinstance(event, dict):
            return
        if event.get("event") == "memory_pressure":
            print(f"  !! memory pressure: {event['tokens']}/{event['window']} tokens", file=self.out)
        elif event.get("event") == "compaction":
            print(f"  ** compaction: evicted {event['evicted']} message(s), truncated {event['truncated']}; "
                  f"{event['tokens_before']} -> {event['tokens_after']} tokens", file=self.out)

    def state(self) -> dict[str, Any]:
        return self.graph.get_state(self.config).values

    def memory_run(self) -> MemoryRun:
        return self.setup.open_run(self.ctx, self.persistence.store, self.config)

    def context_tokens(self) -> dict[str, int]:
        """Tokens by segment of the main context as it stands now: what the model would be sent."""
        values = self.state()
        state = PagefaultState(**{k: v for k, v in values.items() if k in PagefaultState.__dataclass_fields__})
        return self.memory_run().main_context(state, self.setup.tool_schemas).tokens

    def core(self) -> CoreMemory:
        return self.memory_run().core

    def search(self, query: str, k: int = 5) -> list[str]:
        run = self.memory_run()
        svc, scope = run.services, run.scope
        lines = [f"archival {r.id} ({place(r.provenance.thread_id, r.provenance.turn, r.provenance.message_index)}): "
                 f"{quote(r.text)}" for r, _ in svc.archival.search(scope, query, k)]
        lines += [f"recall {place(h.thread_id, h.turn, h.message_index)}: {quote(h.text)}"
                  for h in svc.recall.search(scope, query, k)]
        return lines


def place(thread: str, turn: int, message_index: int) -> str:
    """Where a search hit sits: ``thread t1, turn 1, message 5`` (the conversational turn, then the
    message's position in the thread); ``turn ?`` for a record from before turns were counted."""
    parts = [f"thread {thread or '-'}"]
    if turn >= 0 or message_index >= 0:
        parts.append(f"turn {turn}" if turn >= 0 else "turn ?")
    if message_index >= 0:
        parts.append(f"message {message_index}")
    return ", ".join(parts)


DEMO_FACTS = [
    "My name is Ana and I live in Lisbon.",
    "My sister Lucia works as a marine biologist at the aquarium in Valencia.",
    "Our team's launch deadline is the 3rd of March 2027.",
]
DEMO_FILLER_TOPICS = ["the garden", "a long train journey", "the book club", "weekend cooking", "the old bicycle",
                      "a rainy afternoon", "the neighbourhood market", "a visit to the museum"]


def demo_filler(i: int) -> str:
    topic = DEMO_FILLER_TOPICS[i % len(DEMO_FILLER_TOPICS)]
    return (f"Let me tell you about {topic}. " + " ".join(
        f"Detail {j} of {topic}: it was pleasant, unhurried and a little ordinary, as such things go." for j in range(12)))


def run_demo(data_dir: str | None = None, out=sys.stdout) -> dict[str, Any]:
    """The seed's trace: three facts paged out, the window forced past its cap, a page-in answer."""
    data_dir = data_dir or tempfile.mkdtemp(prefix="pagefault-demo-")
    ctx = Context(user_id="demo-user", data_dir=data_dir, context_window=3000, model="offline")
    print(f"pagefault demo  (data in {data_dir})\n{OFFLINE_NOTE}\n", file=out)
    with open_embedded(data_dir) as persistence:
        s = Session(persistence, ctx, "demo-thread", out)
        print("1. The agent writes three facts (page-out):", file=out)
        for fact in DEMO_FACTS:
            print(f"user> {fact}", file=out)
            print(f"agent> {s.say(fact)}", file=out)
            print(f"  context {context_bar(s.context_tokens())}", file=out)
        print("\n2. The conversation fills the main context past its cap:", file=out)
        i = 0
        while s.state().get("compactions", 0) == 0 and i < 30:
            text = demo_filler(i)
            print(f"user> {text[:70]}...", file=out)
            s.say(text, trace=False)
            print(f"  context {context_bar(s.context_tokens())}", file=out)
            i += 1
        st = s.state()
        print(f"  evicted so far: {st['evicted_count']} message(s); summary now {len(st['summary'])} chars", file=out)
        print("\n3. A follow-up whose answer left the window long ago (page-in):", file=out)
        question = "Where does my sister work?"
        print(f"user> {question}", file=out)
        answer = s.say(question)
        print(f"agent> {answer}", file=out)
        print(f"  context {context_bar(s.context_tokens())}", file=out)
        q2 = "When is the launch deadline?"
        print(f"user> {q2}", file=out)
        answer2 = s.say(q2)
        print(f"agent> {answer2}", file=out)
        print("\nCore memory now:", file=out)
        for b in s.core().blocks():
            print(f"  [{b.label} {b.usage}] {b.value[:100]!r}", file=out)
        return {"answer": answer, "answer2": answer2, "state": s.state(), "data_dir": data_dir}


def run_chat(args: argparse.Namespace, inp=sys.stdin, out=sys.stdout) -> None:
    ctx = Context(user_id=args.user, data_dir=args.data_dir, **({"model": args.model} if args.model else {}))
    if ctx.model == "offline":
        print(OFFLINE_NOTE, file=out)
    print(f"user {ctx.user_id}, thread {args.thread}. Commands: /memory /context /search <q> /quit", file=out)
    with open_persistence(ctx.data_dir) as persistence:  # Postgres when PAGEFAULT_DATABASE_URL is set
        s = Session(persistence, ctx, args.thread, out)
        while True:
            print("you> ", end="", file=out, flush=True)
            try:
                line = inp.readline()
            except KeyboardInterrupt:
                break
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            if line in ("/quit", "/exit"):
                break
            try:
                if line == "/memory":
                    for b in s.core().blocks():
                        print(f"[{b.label} {b.usage}]\n{b.value}", file=out)
                elif line == "/context":
                    print(context_bar(s.context_tokens()), file=out)
                elif line.startswith("/search"):
                    q = line[len("/search"):].strip()
                    if not q:
                        print("usage: /search <query>", file=out)
                    for hit in s.search(q) if q else []:
                        print(hit, file=out)
                elif line.startswith("/"):
                    print("unknown command; try /memory /context /search <q> /quit", file=out)
                else:
                    print(f"agent> {s.say(line, trace=args.trace)}", file=out, flush=True)
            except KeyboardInterrupt:
                print("(interrupted; your message is saved in the thread)", file=out)
            except Exception as e:  # keep the REPL alive; the turn's input is already checkpointed
                print(f"error: {type(e).__name__}: {e}", file=out)


class CommandLineParser(argparse.ArgumentParser):
    """The CLI's parser (its subcommands' too): a usage error is one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line, with where to find the usage, and exit with status 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


#: Commands that keep threads and core memory in the data directory's SQLite files whatever the setup.
EMBEDDED_COMMANDS = frozenset({"demo", "export", "import", "inspect", "import-history"})


def environment_problem(args: argparse.Namespace) -> str | None:
    """What stops ``args.command`` before it writes anything, as one line: the environment's settings
    (``PAGEFAULT_<FIELD>``, checked by ``Context``), the file it would write (``export -o``: its
    directory must exist and be writable), then the data directory it would use (not a writable
    directory, or a file there that is not what it should be). ``doctor`` reports these itself."""
    if args.command == "doctor":
        return None
    Context()  # a ValueError naming the setting
    for flag in ("user", "agent", "thread"):
        if len(vars(args).get(flag) or "") > MAX_ID:
            raise too_long(f"--{flag}", vars(args)[flag])
    output = vars(args).get("output")  # a file the command writes (export -o), checked before the work
    if output not in (None, "-"):
        folder = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(folder):
            return f"cannot write {output}: {folder} is not a directory" if os.path.exists(folder) else \
                f"cannot write {output}: no such directory {folder}"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"cannot write {output}: {folder} is not writable"
    if args.data_dir is None or not (args.command in EMBEDDED_COMMANDS or
                                     uses_data_dir(backends.database_url(), backends.chroma_url())):
        return None
    problems = data_dir_problems(args.data_dir)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more problem(s): see pagefault doctor --data-dir {args.data_dir})"
    return problems[0] + (more if len(problems) > 1 else "")


def error_line(error: BaseException, data_dir: str | None) -> str:
    """The one line a command's ``error`` becomes, naming the file where the error does
    (``data_dir``: the data directory the command used, named when a database failed in it)."""
    where = os.path.abspath(data_dir) if data_dir else "the data directory"
    if isinstance(error, OSError) and error.filename is not None and not isinstance(error, backends.ServiceUnavailable):
        return f"{error.filename}: {error.strerror or error}"
    if isinstance(error, sqlite3.Error):
        return f"{where}: a database there failed ({error}); pagefault doctor --data-dir {where} checks each file"
    if isinstance(error, ChromaError):
        return f"{os.path.join(where, 'chroma')}: Chroma failed ({type(error).__name__}: {error})"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def main(argv: Iterable[str] | None = None) -> int:
    """The ``pagefault`` command (``argv``: its arguments, default ``sys.argv[1:]``); returns the exit
    status. Every command's settings and data directory are checked before it writes anything, and an
    error from a bad environment (settings, a data directory, a file, an unreachable engine) is one
    line on stderr with status 2, never a traceback."""
    parser = CommandLineParser(prog="pagefault", description="MemGPT-style memory for LangGraph agents")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the paging demo (offline, in a fresh temporary directory)")
    d.add_argument("--data-dir", default=None, help="keep the demo's stores here instead of a temp directory")
    c = sub.add_parser("chat", help="chat in the terminal")
    c.add_argument("--user", default="default", help="user id (whose memory)")
    c.add_argument("--thread", default=None, help="thread id (a new one if omitted)")
    c.add_argument("--data-dir", default=os.environ.get("PAGEFAULT_DATA_DIR", ".pagefault"),
                   help="embedded store directory (default: $PAGEFAULT_DATA_DIR or .pagefault)")
    c.add_argument("--model", default=None, help="model id, e.g. openai:gpt-4o-mini (default: offline)")
    c.add_argument("--trace", action="store_true", help="show page faults as they happen")
    # Each group of subcommands registers its parsers and names the function that runs them.
    groups = [(add_memory_commands, MEMORY_COMMANDS, run_memory_command),  # export, import
              (add_inspect_commands, INSPECT_COMMANDS, run_inspect_command),  # inspect (--web)
              (add_history_commands, HISTORY_COMMANDS, run_history_command),  # import-history
              (add_ops_commands, OPS_COMMANDS, run_ops_command),  # doctor
              (add_replay_commands, REPLAY_COMMANDS, run_replay_command),  # replay
              (add_consolidate_commands, CONSOLIDATE_COMMANDS, run_consolidate_command),  # consolidate
              (add_ingest_commands, INGEST_COMMANDS, run_ingest_command),  # ingest
              (add_reindex_commands, REINDEX_COMMANDS, run_reindex_command)]  # reindex
    runners = {}
    for add, names, run in groups:
        add(sub)
        runners.update(dict.fromkeys(names, run))
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        problem = environment_problem(args)
        if problem is not None:
            print(f"pagefault: {problem}", file=sys.stderr)
            return 2
        if args.command == "demo":
            run_demo(args.data_dir)
        elif args.command in runners:
            return runners[args.command](args)
        else:
            args.thread = args.thread or f"thread-{uuid.uuid4().hex[:8]}"
            run_chat(args)
    except (ValueError, OSError, sqlite3.Error, ChromaError) as e:  # ServiceUnavailable is an OSError
        print(f"pagefault: {error_line(e, args.data_dir)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
