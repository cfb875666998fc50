"""Shared fixtures: a fresh embedded data directory per test, real SQLite and real Chroma."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from pagefault import Context, open_embedded


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
