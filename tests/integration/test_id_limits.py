"""Thread, user and agent ids are at most 256 characters, on every path a run takes (issue 44, case 7).

A 1,000,000-character thread id was accepted, and each turn on it added 62-72 MiB to the data directory.
Now a run with a thread, user or agent id over ``MAX_ID`` characters is refused with one line that names
the id and its length, before anything is written:

- the graph's ``invoke`` (the thread id from its config, the user and agent from its context);
- a ``create_agent`` app with ``PagefaultMiddleware``, wrapped with ``memory.serialized`` as the README
  says to on the embedded files; unwrapped, its first step refuses the run (LangGraph saved the input
  before any step of an app it compiled runs);
- ``Context(...)`` and ``PagefaultMiddleware(...)`` themselves, and the command line (exit status 2).

Each case compares every file of the data directory before and after (SQLite's ``-shm`` index aside,
which reads change): byte for byte the same.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

BIG = 1_000_000
ERROR = "ids are at most 256 characters"


def _files(data_dir: str) -> dict[str, str]:
    """Every file of ``data_dir`` (but SQLite's shared-memory index) by its SHA-256."""
    out = {}
    for path in sorted(Path(data_dir).rglob("*")):
        if path.is_file() and not path.name.endswith("-shm"):
            out[str(path.relative_to(data_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """An embedded directory with one turn in it, its writers done."""
    from langchain_core.messages import HumanMessage

    from pagefault import Context, MemoryServices, open_embedded

    data_dir = str(tmp_path_factory.mktemp("ids") / "pf")
    with open_embedded(data_dir) as p:
        p.graph().invoke({"messages": [HumanMessage("My name is Ana and I live in Lisbon.")]},
                         {"configurable": {"thread_id": "t0"}}, context=Context(user_id="ana", data_dir=data_dir))
        services = MemoryServices.open(data_dir)
        services.recall.writer.flush()
        if services.archival.journal is not None:
            services.archival.journal.flush()
        yield p


def _ids(kind: str) -> tuple[str, dict[str, str]]:
    """The thread id and the run context of a run whose id ``kind`` is ``BIG`` characters long."""
    thread = "t" * BIG if kind == "thread_id" else f"t-{kind}"
    context = {"user_id": "ana"}
    if kind != "thread_id":
        context[kind] = "x" * BIG
    return thread, context


def _graph_run(memory: Any, thread: str, context: dict[str, str]) -> None:
    from langchain_core.messages import HumanMessage

    memory.graph().invoke({"messages": [HumanMessage("Hello there.")]}, {"configurable": {"thread_id": thread}},
                          context={**context, "data_dir": memory.data_dir})


def _agent(memory: Any) -> Any:
    from langchain.agents import create_agent

    from pagefault import OfflineChatModel, PagefaultMiddleware

    return create_agent(OfflineChatModel(), tools=[], checkpointer=memory.checkpointer, store=memory.store,
                        middleware=[PagefaultMiddleware(user_id="ana", data_dir=memory.data_dir)])


def _middleware_run(memory: Any, thread: str, context: dict[str, str]) -> None:
    memory.serialized(_agent(memory)).invoke({"messages": [{"role": "user", "content": "Hello there."}]},
                                             {"configurable": {"thread_id": thread}}, context=context)


@pytest.mark.parametrize("kind", ["thread_id", "user_id", "agent_id"])
@pytest.mark.parametrize("run", [_graph_run, _middleware_run], ids=["graph", "middleware"])
def test_a_run_with_an_id_too_long_is_refused_and_writes_nothing(memory, run, kind):
    thread, context = _ids(kind)
    before = _files(memory.data_dir)
    with pytest.raises(ValueError) as refused:
        run(memory, thread, context)
    message = str(refused.value)
    assert message.startswith(f"{kind} is longer than 256 characters (it has 1,000,000)") and ERROR in message, message
    assert "\n" not in message and len(message) < 200
    assert _files(memory.data_dir) == before


def test_an_unwrapped_middleware_app_refuses_a_thread_id_too_long_at_its_first_step(memory):
    from pagefault import MemoryServices, Scope

    with pytest.raises(ValueError, match=ERROR):
        _agent(memory).invoke({"messages": [{"role": "user", "content": "Remember: my cat is Tom."}]},
                              {"configurable": {"thread_id": "u" * BIG}})
    services = MemoryServices.open(memory.data_dir)  # no model call: nothing was saved to archival
    assert not any("Tom" in r.text for r, _ in services.archival.search(Scope("ana"), "cat Tom", top_k=5))


@pytest.mark.parametrize("kind", ["user_id", "agent_id"])
def test_settings_with_an_id_too_long_are_refused(kind):
    from pagefault import Context, PagefaultMiddleware

    with pytest.raises(ValueError, match=f"^{kind} is longer than 256 characters .*{ERROR}"):
        Context(**{kind: "x" * BIG})
    with pytest.raises(ValueError, match=ERROR):
        PagefaultMiddleware(**{kind: "x" * BIG})


@pytest.mark.parametrize("flag", ["--thread", "--user"])
def test_the_command_line_refuses_an_id_too_long_before_it_writes(tmp_path, capsys, flag):
    from pagefault.cli.main import main

    data_dir = str(tmp_path / "pf")
    assert main(["chat", flag, "x" * BIG, "--data-dir", data_dir]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pagefault: {flag} is longer than 256 characters (it has 1,000,000)") and ERROR in err, err[:300]
    assert "\n" not in err
    assert not os.path.exists(data_dir)
