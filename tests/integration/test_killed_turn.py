"""A turn killed mid-way is never lost (issue 21): a process running turns on the embedded default is
SIGKILLed, for real, and one more turn runs in a fresh process. Afterwards every user message any
checkpoint ever held (read from the checkpoints themselves: every input, window and saved write) is in
the thread exactly once and in recall, and in archival at most once (exactly once where the graph
finishes the killed turn, since the offline model saves every statement it answers).

The children (``support.killed_turn``) stop at a chosen point of a turn, say so and wait for the SIGKILL,
or are killed after a random delay. Each entry point is covered: ``pagefault chat``'s REPL, the graph's
``invoke`` / ``stream`` / ``ainvoke`` / ``astream`` (which first finish the run a kill cut short), and
``create_agent`` with ``PagefaultMiddleware`` (whose first step folds in the input of a run killed before
it got past its input checkpoint, and answers tool calls whose tools never ran).
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_messages
from langgraph.checkpoint.sqlite import SqliteSaver
from support.killed_turn import Child, start

from pagefault import Context, MemoryServices, Scope, WindowTooSmall, open_embedded
from pagefault.graph.saved_state import saved_history, saved_values
from pagefault.persistence.compression import checkpoint_serializer
from pagefault.stores.recall import recall_id
from pagefault.window.cut_short import NOT_RUN

USER = "ana"
HELD = "pagefault:held"
"""The channel a line is held on while the call that brings it finishes a cut-short run (``window.cut_short.HELD``)."""


@dataclass
class Thread:
    """A thread as its checkpoints hold it: ``ever``, the text of every user message any checkpoint held;
    ``window``, the messages of the latest; ``next``, the nodes it still had to run; ``source`` and
    ``pending`` (how many tasks had saved writes) of the latest checkpoint."""

    ever: set[str]
    window: list[BaseMessage]
    next_source: str
    pending: int

    def humans(self) -> list[str]:
        return [str(m.content) for m in self.window if isinstance(m, HumanMessage)]


def _read(data_dir: str, thread: str) -> Thread:
    """Read every checkpoint of ``thread`` (with a connection of this process's own, read-only use)."""
    saver = SqliteSaver(sqlite3.connect(str(Path(data_dir) / "checkpoints.sqlite"), check_same_thread=False),
                        serde=checkpoint_serializer())
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ever: set[str] = set()
    try:
        for cp in saved_history(saver, config):
            values = cp.checkpoint["channel_values"]
            messages: list[BaseMessage] = list(values.get("messages") or [])
            start_input = values.get("__start__")
            if isinstance(start_input, dict) and start_input.get("messages"):
                messages += convert_to_messages(start_input["messages"])
            for _task, channel, value in cp.pending_writes or ():
                if channel == "messages":
                    messages += [m for m in (value if isinstance(value, list) else [value]) if isinstance(m, BaseMessage)]
                elif channel == HELD:  # a line held while a cut-short run is finished: the input as sent
                    messages += convert_to_messages(value)
            ever |= {str(m.content) for m in messages if isinstance(m, HumanMessage)}
        latest = saver.get_tuple(config)
        assert latest is not None, f"thread {thread} has no checkpoint"
        window = list(saved_values(saver, latest).get("messages") or [])
        return Thread(ever, window, str((latest.metadata or {}).get("source")),
                      len({task for task, _c, _v in latest.pending_writes or ()}))
    finally:
        saver.conn.close()


def _archived(svc: MemoryServices, scope: Scope) -> list[str]:
    """The text of every archival record of ``scope`` (superseded ones too)."""
    return list(svc.archival.index.collection.get(where={"scope": scope.key}, include=["documents"])["documents"])


def _written_records(data_dir: str) -> int:
    """Archival records written to the directory, read from its SQLite files: journalled (an insert is
    journalled before its tool answers) or already in the BM25 table (read without opening the stores,
    which a later process writes to)."""
    db = sqlite3.connect(str(Path(data_dir) / "lexical.sqlite"))
    try:
        ids = {r[0] for r in db.execute("SELECT rid FROM archival_journal")}
        return len(ids | {r[0] for r in db.execute("SELECT id FROM archival_docs")})
    finally:
        db.close()


def assert_whole_turns(window: list[BaseMessage]) -> None:
    """Every tool call answered exactly once, right after its call; each user message answered."""
    calls = [tc["id"] for m in window if isinstance(m, AIMessage) for tc in m.tool_calls]
    results = [m.tool_call_id for m in window if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results) and len(set(results)) == len(results), (calls, results)
    for i, m in enumerate(window):
        if isinstance(m, HumanMessage):
            rest = window[i + 1:]
            turn = rest[: next((j for j, n in enumerate(rest) if isinstance(n, HumanMessage)), len(rest))]
            assert any(isinstance(n, AIMessage) and not n.tool_calls and n.content for n in turn), (m.content, turn)


def assert_nothing_lost(data_dir: str, thread: str, *, finished: bool) -> Thread:
    """Every user message ever checkpointed is in the thread once, in recall, and in archival at most once
    (``finished``: the killed turns were finished, so each is answered and each statement archived once).
    Run once the children are gone (the stores are read from this process)."""
    t = _read(data_dir, thread)
    humans = t.humans()
    assert t.ever, "nothing was checkpointed"
    for text in sorted(t.ever):
        assert humans.count(text) == 1, f"{text!r} is in the thread {humans.count(text)} times: {humans}"
    assert len(humans) == len(set(humans)), humans
    scope = Scope(USER)
    svc = MemoryServices.open(data_dir)
    svc.recall.writer.flush()
    for i, m in enumerate(t.window):
        if isinstance(m, HumanMessage):
            hits = svc.recall.index.get([recall_id(scope, thread, i)])
            assert hits and str(m.content) in hits[0].text, (m.content, hits)
    archived = _archived(svc, scope)
    for text in t.ever:
        assert archived.count(text) <= 1, f"{text!r} is in archival {archived.count(text)} times"
        if finished and not text.endswith("?"):
            assert archived.count(text) == 1, f"the statement {text!r} was answered but not archived"
    if finished:
        assert_whole_turns(t.window)
    return t


def _kill_at(entry: str, data_dir: str, thread: str, text: str, point: str, *, user: str = USER,
             durability: str | None = None) -> Child:
    """A child that runs ``text`` through ``entry``, stops at ``point`` and is killed there."""
    child = start(entry, data_dir, user, thread, [] if entry == "chat" else [text], point=point, durability=durability)
    if entry == "chat":
        child.send(text)
    kind, _ = child.until("point", "answer", "done")
    assert kind == "point", f"the turn ended before {point}: {child.events}"
    child.kill()
    return child


def _one_more_turn(entry: str, data_dir: str, thread: str, text: str, *, user: str = USER) -> str:
    """One turn in a fresh process; its answer."""
    child = start(entry, data_dir, user, thread, [] if entry == "chat" else [text])
    if entry == "chat":
        child.send(text)
    _, answer = child.until("answer")
    if entry == "chat":
        child.send("/quit")
    child.finish()
    return str(answer)


# -- the graph: a call with new input first finishes the killed run ------------------------------------


@pytest.mark.parametrize(("entry", "point", "left"), [
    ("invoke", "input", ("input", 0)),    # the input checkpoint, nothing ran: the lost message
    ("stream", "before-checkpoint:1", ("input", 1)),  # its input task's writes saved ("one pending write")
    ("chat", "input", ("input", 0)),
])
def test_a_turn_killed_at_its_input_is_finished_by_the_next_call(tmp_path, entry, point, left):
    data, thread = str(tmp_path / "pf"), f"t-{entry}"
    _one_more_turn(entry, data, thread, "My favourite colour is green.")
    _kill_at(entry, data, thread, "My cat is called Tom.", point)
    before = _read(data, thread)
    assert (before.next_source, before.pending) == left
    assert "My cat is called Tom." in before.ever and "My cat is called Tom." not in before.humans()

    answer = _one_more_turn(entry, data, thread, "What is my cat called?")
    t = assert_nothing_lost(data, thread, finished=True)
    assert t.humans() == ["My favourite colour is green.", "My cat is called Tom.", "What is my cat called?"]
    assert "My cat is called Tom." in answer, answer


@pytest.mark.parametrize(("entry", "point", "archived_before"), [
    ("ainvoke", "archival:1", 1),         # the record written, its step not checkpointed
    ("astream", "before-archival:1", 0),  # the model's memory call made and checkpointed, not run
])
def test_a_turn_killed_around_its_memory_call_is_finished_once(tmp_path, entry, point, archived_before):
    data, thread, text = str(tmp_path / "pf"), f"t-{entry}", "The spare key is under the blue flowerpot."
    _kill_at(entry, data, thread, text, point)
    assert _read(data, thread).humans() == [text]
    assert _written_records(data) == archived_before

    answer = _one_more_turn(entry, data, thread, "Where is the spare key?")
    t = assert_nothing_lost(data, thread, finished=True)
    assert t.humans() == [text, "Where is the spare key?"]
    inserts = [m for m in t.window if isinstance(m, ToolMessage) and m.name == "archival_memory_insert"]
    assert len(inserts) == 1 and inserts[0].status == "success", inserts
    assert "blue flowerpot" in answer, answer


def _held_lines(data_dir: str, thread: str) -> list[str]:
    """The text of the lines held in ``thread``'s checkpoints (``HELD`` writes), oldest first."""
    saver = SqliteSaver(sqlite3.connect(str(Path(data_dir) / "checkpoints.sqlite"), check_same_thread=False),
                        serde=checkpoint_serializer())
    try:
        return [str(m.content) for cp in reversed(list(saver.list({"configurable": {"thread_id": thread}})))
                for _task, channel, value in cp.pending_writes or () if channel == HELD
                for m in convert_to_messages(value)]
    finally:
        saver.conn.close()


@pytest.mark.parametrize(("entry", "point"), [
    ("chat", "write:1"),              # the turn's first write to the checkpointer
    ("chat", "before-archival:1"),    # finishing the killed turn: its memory call about to run
    ("chat", "before-checkpoint:1"),  # finishing the killed turn: its first step's results saved, not its checkpoint
    ("astream", "write:1"),           # the same on the async path
])
def test_a_line_typed_after_a_kill_is_saved_before_the_killed_turn_is_finished(tmp_path, entry, point):
    """``chat`` after a kill: the line typed first is saved (held) before the call finishes the turn the kill
    cut short, before any model call: it is the turn's first write. Killed again while it finishes that
    turn, nothing is lost: the next call finishes it, then runs the held line and its own as one turn (the
    offline model answers the last of them; it archives the finished turn's statement once)."""
    data, thread = str(tmp_path / "pf"), f"t-held-{entry}-{point}"
    first, typed, last = ("The spare key is under the blue flowerpot.", "My bike is in locker nine.",
                          "Where is the spare key?")
    _kill_at(entry, data, thread, first, "before-archival:1")  # the model's memory call saved, not run
    _kill_at(entry, data, thread, typed, point)
    assert _held_lines(data, thread) == [typed], "the line was not saved before the killed turn was finished"
    assert typed in _read(data, thread).ever
    answer = _one_more_turn(entry, data, thread, last)
    t = assert_nothing_lost(data, thread, finished=False)
    assert t.humans() == [first, typed, last]
    assert _archived(MemoryServices.open(data), Scope(USER)).count(first) == 1, "the killed turn was finished once"
    calls = [tc["id"] for m in t.window if isinstance(m, AIMessage) for tc in m.tool_calls]
    assert sorted(calls) == sorted(m.tool_call_id for m in t.window if isinstance(m, ToolMessage)), t.window
    assert isinstance(t.window[-1], AIMessage) and "blue flowerpot" in answer, answer
    from pagefault.window.cut_short import HELD as held_channel

    assert held_channel == HELD


HELD_KILLS = 20
HELD_SEED = 44


def test_kills_of_every_chat_turn_at_points_found_from_the_checkpoints(tmp_path):
    """``chat`` killed ``HELD_KILLS`` times in a row, each time in the first turn of a new process (which first
    finishes the turn the last kill cut short), at a point found from the checkpointer (seeded): after or
    before its N-th write, before a step's checkpoint, before an archival insert. Once a turn has written
    anything, its line is in the checkpoints (held, or in its input checkpoint): a line's input is saved
    before the killed turn is finished and before any model call. At the end every line that was saved is
    in the thread once, and every tool call has its result."""
    rng = random.Random(HELD_SEED)
    data, thread = str(tmp_path / "pf"), "t-every-turn"
    saved: list[str] = []
    for n in range(HELD_KILLS):
        line = f"Boat number {n} in the harbour is painted teal and {['amber', 'olive', 'ochre', 'ivory'][n % 4]}."
        point = rng.choice([f"write:{rng.randint(1, 6)}", f"before-write:{rng.randint(2, 6)}",
                            f"before-checkpoint:{rng.randint(1, 3)}", "before-archival:1"])
        child = start("chat", data, USER, thread, point=point)
        child.send(line)
        kind, _ = child.until("point", "answer")
        child.kill()
        if kind == "point":  # the turn had written at least once: its line must be saved
            assert line in _read(data, thread).ever, f"round {n}, killed at {point}: the line was not saved"
        saved.append(line)
    _one_more_turn("chat", data, thread, "Which boat is painted teal?")
    t = assert_nothing_lost(data, thread, finished=False)
    humans = t.humans()
    assert [h for h in humans if h in saved] == [h for h in saved if h in t.ever], humans
    calls = [tc["id"] for m in t.window if isinstance(m, AIMessage) for tc in m.tool_calls]
    assert sorted(calls) == sorted(m.tool_call_id for m in t.window if isinstance(m, ToolMessage))


def test_a_run_that_failed_is_not_run_again(tmp_path):
    """A run the graph refused before it started (a window too small for ana's fixed part) raised to its
    caller with nothing of it saved; the next call does not run it, so its message never reaches ana's thread. (Another
    user's run is refused before anything of it is saved: ``tests/integration/test_refused_run.py``.)"""
    data, thread = str(tmp_path / "pf"), "t-refused"
    with open_embedded(data) as p:
        graph, config = p.graph(), {"configurable": {"thread_id": thread}}
        graph.invoke({"messages": [HumanMessage("My dog is called Rex.")]}, config,
                     context=Context(user_id=USER, data_dir=data))
        with pytest.raises(WindowTooSmall):
            graph.invoke({"messages": [HumanMessage("Forget the dog.")]}, config,
                         context=Context(user_id=USER, data_dir=data, context_window=1000))
        snap = graph.get_state(config)
        assert snap.tasks == () and "Forget the dog." not in _read(data, thread).ever  # refused, nothing saved
        graph.invoke({"messages": [HumanMessage("What is my dog called?")]}, config,
                     context=Context(user_id=USER, data_dir=data))
    assert _read(data, thread).humans() == ["My dog is called Rex.", "What is my dog called?"]


def test_another_users_killed_run_is_not_finished_as_this_users(tmp_path):
    """Each run's checkpoints say whose run wrote them: ana's first run on a thread, killed at its input
    (before it claimed the thread), is not finished by bob's call on that thread id (ana's message would
    land in bob's thread as his). A run on a thread another user owns is refused before anything of it
    is saved (``tests/integration/test_refused_run.py``), so only an unclaimed thread can hold one."""
    data, thread = str(tmp_path / "pf"), "t-bob"
    _kill_at("invoke", data, thread, "My dog is called Rex.", "input")
    _one_more_turn("invoke", data, thread, "Bob was here.", user="bob")
    assert _read(data, thread).humans() == ["Bob was here."]


# -- the middleware: the agent's first step folds in what the killed runs left ---------------------------


def test_the_middleware_folds_in_the_inputs_of_runs_killed_at_their_input(tmp_path):
    data, thread = str(tmp_path / "pf"), "t-mw"
    _one_more_turn("middleware", data, thread, "My favourite colour is green.")
    # Two runs in a row killed right after their input checkpoint; create_agent saves checkpoints in the
    # background, so the run went on without them (its archival write may be done) until the kill.
    _kill_at("middleware", data, thread, "My cat is called Tom.", "input")
    _kill_at("amiddleware", data, thread, "My dog is called Rex.", "input")
    before = _read(data, thread)
    assert {"My cat is called Tom.", "My dog is called Rex."} <= before.ever
    assert before.humans() == ["My favourite colour is green."]

    _one_more_turn("middleware", data, thread, "What are my pets called?")
    t = assert_nothing_lost(data, thread, finished=False)
    assert t.humans() == ["My favourite colour is green.", "My cat is called Tom.", "My dog is called Rex.",
                          "What are my pets called?"]
    calls = [tc["id"] for m in t.window if isinstance(m, AIMessage) for tc in m.tool_calls]
    assert sorted(calls) == sorted(m.tool_call_id for m in t.window if isinstance(m, ToolMessage))
    assert isinstance(t.window[-1], AIMessage) and "From memory" in str(t.window[-1].content), t.window[-1]


@pytest.mark.parametrize(("point", "saved"), [("tool-result:1", True), ("archival:1", False)])
def test_the_middleware_answers_the_tool_calls_of_a_killed_run(tmp_path, point, saved):
    """Killed after its memory call ran: with the call's result saved, the next run's first step puts that
    result in; without it, an error saying the call did not run. Never a call without its result."""
    data, thread, text = str(tmp_path / "pf"), "t-mw-tools", "The spare key is under the blue flowerpot."
    _kill_at("amiddleware", data, thread, text, point, durability="sync")
    before = _read(data, thread)
    assert before.humans() == [text] and isinstance(before.window[-1], AIMessage) and before.window[-1].tool_calls
    assert before.pending == (1 if saved else 0)

    answer = _one_more_turn("amiddleware", data, thread, "Where is the spare key?")
    t = assert_nothing_lost(data, thread, finished=False)
    assert t.humans() == [text, "Where is the spare key?"]
    calls = [tc["id"] for m in t.window if isinstance(m, AIMessage) for tc in m.tool_calls]
    assert [m.tool_call_id for m in t.window if isinstance(m, ToolMessage)] == calls  # each call answered, in order
    (insert,) = [m for m in t.window if isinstance(m, ToolMessage) and m.name == "archival_memory_insert"]
    if saved:
        assert insert.status == "success" and "arc-" in str(insert.content), insert
    else:
        assert insert.status == "error" and insert.content == NOT_RUN, insert
    svc = MemoryServices.open(data)
    assert _archived(svc, Scope(USER)).count(text) == 1  # the insert ran once, before the kill
    assert "blue flowerpot" in answer, answer


# -- kills at random points of a real chat loop ------------------------------------------------------------

KILLS = 10
SEED = 2021


def test_kills_at_random_points_of_a_chat_loop(tmp_path):
    """``pagefault chat``'s REPL, killed ``KILLS`` times at random points (seeded): before or after a random
    write to the checkpointer, before a step's checkpoint, around an archival insert, right after an input
    checkpoint, or after a random delay, after a random number of turns. Each time the next process's first
    turn comes after the kill; after it, every user message ever checkpointed is in the thread once, and at
    the end in recall too, answered, and each statement in archival exactly once. (A kill inside a
    checkpointer call used to leave some of a step's writes saved and the turn unanswered: the embedded
    checkpointer now saves each call in one transaction.)"""
    rng = random.Random(SEED)
    data, thread = str(tmp_path / "pf"), "t-loop"
    colours = ["teal", "amber", "crimson", "ivory", "olive", "violet", "scarlet", "indigo", "ochre", "cobalt"]
    said = iter(f"Boat number {n} in the harbour is painted {colours[n % len(colours)]} and {colours[n // 10 % 10]}."
                for n in range(1000))
    kinds = ["input", "before-checkpoint", "write", "before-write", "archival", "before-archival", "delay"]
    kinds += [rng.choice(kinds) for _ in range(KILLS - len(kinds))]  # each kind at least once
    rng.shuffle(kinds)
    points: list[str] = []
    for _ in range(KILLS):
        child = start("chat", data, USER, thread)
        child.send(next(said))  # the turn after the last kill: nothing checkpointed before it is lost
        child.until("answer")
        if points:
            t = _read(data, thread)
            assert len(t.humans()) == len(set(t.humans())) and t.ever <= set(t.humans()), (points[-1], t.humans())
        for _turn in range(rng.randint(0, 2)):
            child.send(next(said))
            child.until("answer")
        how = kinds.pop()
        point = {"write": f"write:{rng.randint(1, 10)}", "before-write": f"before-write:{rng.randint(1, 10)}",
                 "before-checkpoint": f"before-checkpoint:{rng.randint(1, 4)}", "archival": "archival:1",
                 "before-archival": "before-archival:1", "input": "input"}.get(how)
        if point is None:
            delay = rng.uniform(0.0, 0.5)
            child.send(next(said))
            if child.conn.poll(delay):  # the turn ended first: the kill lands between turns
                child.next_event()
            points.append(f"after {delay:.2f}s")
        else:
            child.arm(point)
            child.send(next(said))
            kind, _ = child.until("point", "answer")
            points.append(point if kind == "point" else f"{point} (after the turn)")
        child.kill()

    _one_more_turn("chat", data, thread, "Which boat is painted teal?")
    t = assert_nothing_lost(data, thread, finished=True)
    assert len(t.ever) >= 2 * KILLS, points  # at least the turn after each kill, and each killed one
