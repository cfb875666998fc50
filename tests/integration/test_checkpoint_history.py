"""Lean checkpoints, nothing lost, on both checkpointers (SQLite embedded and the machine's Postgres).

The window's big channels are delta channels and checkpoints are compressed (``graph.state``,
``persistence.compression``). A conversation long enough to compact and to write full snapshots of
the delta channels must still give back, through every reader of old checkpoints:
- every model call exactly as the model received it (``pagefault replay``);
- each checkpoint's whole values, read straight from the saver (``graph.saved_state``), equal to the
  graph's own ``get_state_history``;
- the thread's every message (export) and recall derived again from the checkpoints;
and a checkpoint file written before the change opens, reads and goes on.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any, ClassVar, Iterator

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from support.checkpoint_bytes import postgres_bytes, sqlite_bytes
from support.engines import fresh_database

from pagefault import Context, OfflineChatModel, open_embedded
from pagefault.graph.saved_state import SavedHistory, saved_history, saved_values
from pagefault.graph.state import DELTA_CHANNELS
from pagefault.maintenance.replay import model_calls
from pagefault.maintenance.transfer import thread_history
from pagefault.models.offline import SUMMARY_INSTRUCTION
from pagefault.persistence.postgres import open_postgres
from pagefault.stores import MemoryServices, Scope

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "checkpoints_before_delta_channels.sqlite.gz"
TEXTS = ["My name is Ana and I live in Lisbon.", "Always answer in French.", "I moved to Berlin.", "Where do I live?"] + [
    f"Note {i}: the quiet harbour had boats painted blue and green, and gulls on post {i}." for i in range(30)]
THREAD = "t1"
CONFIG = {"configurable": {"thread_id": THREAD}}
#: Issue 25's target: checkpoint bytes per turn, once the window is full.
BYTES_PER_TURN = 10_500


class Recorder(OfflineChatModel):
    """The offline model, keeping every request it receives."""

    sent: ClassVar[list[list[Any]]] = []

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        Recorder.sent.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.fixture(params=["sqlite", "postgres"])
def talked(request, tmp_path) -> Iterator[tuple[Any, Context, list[int], list[list[Any]]]]:
    """A 34-turn conversation on one thread (compacted, past the delta channels' first snapshots), with
    the checkpoint bytes after each turn and what the model received."""
    Recorder.sent.clear()
    data = str(tmp_path / "d")
    ctx = Context(user_id="ana", data_dir=data, context_window=2600, warning_fraction=0.7)
    with fresh_database("pf_ckpt") if request.param == "postgres" else _no_database() as url:
        with (open_postgres(url, data_dir=data) if url else open_embedded(data)) as p:
            graph, sizes = p.graph(model=Recorder()), []
            for text in TEXTS:
                graph.invoke({"messages": [HumanMessage(text)]}, CONFIG, context=ctx)
                sizes.append(postgres_bytes(url, THREAD) if url else sqlite_bytes(Path(data) / "checkpoints.sqlite", THREAD))
            sent = [m for m in Recorder.sent if not str(m[0].content).startswith(SUMMARY_INSTRUCTION)]
            yield p, ctx, sizes, sent


class _no_database:
    def __enter__(self) -> str:
        return ""

    def __exit__(self, *exc: Any) -> None:
        return None


def _view(messages: Any) -> list[tuple[Any, ...]]:
    return [(m.id, m.type, m.content) for m in messages or []]


def test_every_model_call_replays_exactly(talked):
    p, _ctx, _sizes, sent = talked
    state = p.graph().get_state(CONFIG).values
    assert state["compactions"] >= 2 and state["evicted_count"] > 0
    calls = model_calls(p.graph(), THREAD)
    assert len(calls) == len(sent) >= len(TEXTS)
    for call, got in zip(calls, sent):
        assert call.system_prompt == got[0].content
        assert _view(call.messages) == _view(got[1:])
    assert [c.turn for c in calls if c.step == 0] == list(range(len(TEXTS)))


def test_a_saver_read_gives_each_checkpoints_whole_values(talked):
    p, _ctx, _sizes, _sent = talked
    graph = p.graph()
    by_graph = {s.config["configurable"]["checkpoint_id"]: s.values for s in graph.get_state_history(CONFIG)}
    read = saved_history(p.checkpointer, {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}})
    assert len(read) == len(by_graph) > 5 * len(TEXTS)
    for tup in read:
        want, got = by_graph[tup.checkpoint["id"]], tup.checkpoint["channel_values"]
        assert _view(got.get("messages")) == _view(want.get("messages")), tup.checkpoint["id"]
        for key in ("summary", "system_prompt", "tokens", "evicted_count"):
            assert got.get(key, want.get(key)) == want.get(key), (key, tup.checkpoint["id"])
        # and one checkpoint on its own, by the saver's ancestor walk
    latest = p.checkpointer.get_tuple({"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}})
    assert _view(saved_values(p.checkpointer, latest)["messages"]) == _view(graph.get_state(CONFIG).values["messages"])
    # Most checkpoints store no window at all; some store it whole (the snapshots replays start from).
    stored = [p.checkpointer.get_tuple(t.config).checkpoint["channel_values"] for t in read]
    snapshots = [v for v in stored if isinstance(v.get("messages"), _DeltaSnapshot)]
    assert 1 <= len(snapshots) < len(stored) / 10


def test_the_whole_thread_exports_and_recall_derives_again(talked):
    p, ctx, _sizes, _sent = talked
    history = thread_history(p.checkpointer, THREAD)
    assert history is not None
    messages, latest = history
    assert [m.content for m in messages if isinstance(m, HumanMessage)] == TEXTS
    assert len(messages) == latest["evicted_count"] + len(latest["messages"])
    assert len({m.id for m in messages}) == len(messages)
    recall = MemoryServices.open(ctx.data_dir).recall
    other = Scope("rebuilt-for-the-test")
    assert recall.rebuild(SavedHistory(p.checkpointer), other, THREAD) == len(messages)
    assert recall.thread_count(other, THREAD) == len(messages)


def test_checkpoint_bytes_per_turn_are_a_tenth_of_what_they_were(talked):
    _p, _ctx, sizes, _sent = talked
    last = sizes[-11:]
    per_turn = (last[-1] - last[0]) / 10
    print(f"checkpoint bytes per turn, last 10 turns: {per_turn:,.0f}")
    assert per_turn <= BYTES_PER_TURN, f"{per_turn:,.0f} bytes per turn over the last 10 turns"


def test_a_checkpoint_file_from_before_opens_reads_and_goes_on(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    with gzip.open(FIXTURE) as src, open(data / "checkpoints.sqlite", "wb") as dst:
        shutil.copyfileobj(src, dst)
    ctx = Context(user_id="ana", data_dir=str(data))
    with open_embedded(str(data)) as p:
        graph = p.graph()
        old = graph.get_state(CONFIG).values["messages"]
        assert [m.content for m in old if isinstance(m, HumanMessage)] == TEXTS[:4]
        before_calls = model_calls(graph, THREAD)
        assert len(before_calls) >= 4 and all("<core_memory>" in c.system_prompt for c in before_calls)
        graph.invoke({"messages": [HumanMessage("What is my name?")]}, CONFIG, context=ctx)
        now = graph.get_state(CONFIG).values["messages"]
        assert _view(now[:len(old)]) == _view(old)
        assert now[len(old)].content == "What is my name?" and len(now) > len(old) + 1
        calls = model_calls(graph, THREAD)
        assert [(c.checkpoint_id, c.system_prompt) for c in calls[:len(before_calls)]] == [
            (c.checkpoint_id, c.system_prompt) for c in before_calls]
        assert len(calls) > len(before_calls)
        history = thread_history(p.checkpointer, THREAD)
        assert history is not None and _view(history[0]) == _view(now)
        read = saved_history(p.checkpointer, {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}})
        assert _view(read[-1].checkpoint["channel_values"]["messages"]) == _view(now)


def test_a_turn_on_a_thread_whose_last_run_ended_here_rebuilds_its_state_once(tmp_path):
    """The check for a cut-short run needs the thread's state only when its latest checkpoint is not
    where this graph's last run on it ended: a turn then rebuilds the delta channels once (LangGraph's
    own load), not twice."""
    data = str(tmp_path / "d")
    ctx = Context(user_id="ana", data_dir=data)
    with open_embedded(data) as p:
        graph = p.graph()
        graph.invoke({"messages": [HumanMessage("My name is Ana.")]}, CONFIG, context=ctx)
        calls: list[int] = []
        walk = p.checkpointer.get_delta_channel_history

        def counted(**kwargs: Any) -> Any:
            calls.append(1)
            return walk(**kwargs)

        p.checkpointer.get_delta_channel_history = counted  # type: ignore[method-assign]
        graph.invoke({"messages": [HumanMessage("I live in Lisbon.")]}, CONFIG, context=ctx)
        assert len(calls) == 1
        # Another writer on the thread (here: an update between runs): the next turn reads the state to check.
        graph.update_state(CONFIG, {"summary": "changed elsewhere"})
        calls.clear()
        graph.invoke({"messages": [HumanMessage("Where do I live?")]}, CONFIG, context=ctx)
        assert len(calls) == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_without_compactions_every_delta_channel_reads_from_a_full_value_nearby(backend, tmp_path):
    """A window too big to compact: the summary is never written by a compaction. A read of the latest
    checkpoint still starts from each delta channel's full value at most its ``snapshot_every`` writes
    back (the ``reason`` node writes the summary as ``KEEP``), not from the thread's first checkpoint,
    which every turn of a long thread would have walked back to (and read on the way)."""
    data = str(tmp_path / "d")
    ctx = Context(user_id="ana", data_dir=data, context_window=200_000)
    turns = 30
    with fresh_database("pf_ckpt_walk") if backend == "postgres" else _no_database() as url:
        with (open_postgres(url, data_dir=data) if url else open_embedded(data)) as p:
            graph = p.graph()
            for text in TEXTS[:turns]:
                graph.invoke({"messages": [HumanMessage(text)]}, CONFIG, context=ctx)
            values = graph.get_state(CONFIG).values
            assert values["compactions"] == 0 and values["summary"] == ""
            head = p.checkpointer.get_tuple({"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}).config
            history = p.checkpointer.get_delta_channel_history(config=head, channels=list(DELTA_CHANNELS))
            for name, spec in DELTA_CHANNELS.items():
                assert "seed" in history[name], f"{name}: no full value before the thread's first checkpoint"
                assert len(history[name]["writes"]) <= spec.snapshot_every, (name, len(history[name]["writes"]))
            assert [m.content for m in values["messages"] if isinstance(m, HumanMessage)] == TEXTS[:turns]


def test_postgres_savers_read_delta_channels_a_short_page_at_a_time():
    """``open_postgres`` sets LangGraph's page of checkpoints per delta read (its module constant, sync
    and async: were it renamed, this fails instead of every long thread's turn reading 1,024 rows)."""
    import langgraph.checkpoint.postgres as sync_saver
    import langgraph.checkpoint.postgres.aio as async_saver

    from pagefault.persistence.postgres import DELTA_PAGE_ROWS, lean_delta_reads

    lean_delta_reads()
    assert sync_saver._DELTA_PAGE_SIZE == async_saver._DELTA_PAGE_SIZE == DELTA_PAGE_ROWS < 1024
    source = Path(sync_saver.__file__).read_text() + Path(async_saver.__file__).read_text()
    assert source.count("_DELTA_PAGE_SIZE]") == 2, "each saver passes the module's page size to its query"
