"""One data directory (issue 23): ``open_embedded(dir)`` is where every tier of its runs lives.

A run whose ``Context.data_dir`` is left at its default used to put checkpoints and core memory in
the opened directory but archival, recall and BM25 in ``./.pagefault``; now every tier follows the
directory that was opened, and a ``data_dir`` that names another one is refused, naming both, before
anything is written there."""

from __future__ import annotations

import os

import pytest
from langchain_core.messages import HumanMessage

from pagefault import Context, open_embedded
from pagefault.engines.connections import SplitStorage
from pagefault.stores import MemoryServices, Scope

FACT = "My sister Lucia works at the aquarium in Valencia."
TIERS = ("checkpoints.sqlite", "store.sqlite", "chroma", "lexical.sqlite", "recall.sqlite", "archival_recent.sqlite")


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """A fresh working directory, with no data directory named by the environment."""
    monkeypatch.delenv("PAGEFAULT_DATA_DIR", raising=False)
    monkeypatch.delenv("PAGEFAULT_EMBEDDINGS", raising=False)
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


def _say(graph, ctx, text, thread="t1"):
    return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)


def test_a_run_with_the_default_data_dir_keeps_every_tier_in_the_opened_directory(cwd):
    with open_embedded("mem") as p:
        graph = p.graph()
        _say(graph, Context(user_id="ana"), FACT)
        answer = _say(graph, Context(user_id="ana"), "Where does my sister work?")["messages"][-1].content
    assert "aquarium" in answer.lower()
    assert not (cwd / ".pagefault").exists(), sorted(os.listdir(cwd))
    for name in TIERS:
        assert (cwd / "mem" / name).exists(), name
    svc = MemoryServices.open(str(cwd / "mem"))
    assert [h.text for h, _ in svc.archival.search(Scope("ana"), "where does my sister work", 1)] == [FACT]
    assert svc.recall.count(Scope("ana")) >= 2  # both user turns and the answers, indexed under mem/


def test_a_data_dir_that_names_another_directory_is_refused_naming_both(cwd):
    elsewhere = cwd / "elsewhere"
    with open_embedded("mem") as p:
        graph = p.graph()
        with pytest.raises(SplitStorage) as e:
            _say(graph, Context(user_id="ana", data_dir=str(elsewhere)), FACT)
        message = str(e.value)
        assert str(elsewhere) in message and str(cwd / "mem") in message and "\n" not in message
        assert not elsewhere.exists() and not (cwd / ".pagefault").exists()
        # The same directory, named another way, is no disagreement.
        _say(graph, Context(user_id="ana", data_dir=os.path.join(".", "mem", "")), FACT, thread="t2")
    assert MemoryServices.open(str(cwd / "mem")).archival.count(Scope("ana")) == 1


def test_a_data_dir_from_the_environment_that_disagrees_is_refused_and_says_so(cwd, monkeypatch):
    monkeypatch.setenv("PAGEFAULT_DATA_DIR", str(cwd / "env-dir"))
    with open_embedded("mem") as p:
        with pytest.raises(SplitStorage, match=r"\(PAGEFAULT_DATA_DIR\)"):
            _say(p.graph(), Context(user_id="ana"), FACT)
    assert not (cwd / "env-dir").exists()
