"""Shared fixtures: a fresh embedded data directory per test, real SQLite and real Chroma."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import HumanMessage
from support.scheduling import LONGEST_FIRST

from pagefault import Context, MemoryServices, Scope, open_embedded


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    tests = config.rootpath / "tests"

    def place(item: pytest.Item) -> int:
        path = item.path
        return rank.get(path.relative_to(tests).as_posix(), len(rank)) if path.is_relative_to(tests) else len(rank)

    items.sort(key=place)  # stable: the rest keep their order


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "pf")


@pytest.fixture
def embedded(data_dir):
    p = open_embedded(data_dir)
    yield p
    p.close()


@pytest.fixture
def say():
    """say(graph, ctx, thread, text) -> final state values."""

    def _say(graph, ctx: Context, thread: str, text: str):
        return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)

    return _say


@pytest.fixture
def slow_writers(data_dir):
    """The memory writers of ``data_dir`` set to linger 30 s; ``idle(scope)`` waits (20 s at most) until
    neither holds anything unwritten for ``scope``, and says whether that happened."""
    svc = MemoryServices.open(data_dir)
    writer, journal = svc.recall.writer, svc.archival.journal
    writer.linger = journal.linger = 30.0

    def busy(scope: Scope) -> bool:
        return writer.busy() or bool(journal.pending_in(scope))

    def idle(scope: Scope, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while busy(scope) and time.monotonic() < deadline:
            time.sleep(0.01)
        return not busy(scope)

    return idle
