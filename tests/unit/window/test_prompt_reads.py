"""A graph edge that measures the main context to route hands its reads of the stores (core blocks,
procedures, the archival count) on to the step it routes to (``window.run.PromptReads``): a turn asks
the stores once per edge, not once per measurement, and the model still sees every write."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from pagefault import Context, open_embedded
from pagefault.graph.state import PagefaultState
from pagefault.stores import CoreMemory, Scope
from pagefault.window import run as run_module
from pagefault.window.run import MemoryRun


class AppendThenAnswer(BaseChatModel):
    """Fake LLM: on a user message, appends it to core memory's ``human`` block; after the tool's answer,
    says "Noted." Every prompt it is sent is kept."""

    prompts: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "append-then-answer"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "AppendThenAnswer":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        last = messages[-1]
        if isinstance(last, HumanMessage):
            msg = AIMessage("", tool_calls=[{"name": "core_memory_append", "id": f"c{len(self.prompts)}",
                                             "args": {"section": "human", "text": str(last.content)}}])
        else:
            msg = AIMessage("Noted.")
        return ChatResult(generations=[ChatGeneration(message=msg)])


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often a main context was built (and by an edge) and how often the stores were read for one."""
    calls: dict[str, Any] = {"built": 0, "edges": 0, "reads": 0, "parts": []}
    built, reads = MemoryRun.main_context, MemoryRun.prompt_reads

    def main_context(self: MemoryRun, *args: Any, **kwargs: Any) -> Any:
        calls["built"] += 1
        calls["edges"] += bool(kwargs.get("hand_on"))
        return built(self, *args, **kwargs)

    def prompt_reads(self: MemoryRun, parts: frozenset[str] = run_module.PROMPT_PARTS, known: Any = None) -> Any:
        calls["reads"] += 1
        calls["parts"].append(sorted(parts) if known is not None else "all")
        return reads(self, parts, known)

    monkeypatch.setattr(MemoryRun, "main_context", main_context)
    monkeypatch.setattr(MemoryRun, "prompt_reads", prompt_reads)
    return calls


def _turn(tmp_path: Any, texts: list[str], model: BaseChatModel | None = None,
          between: Any = None) -> None:
    data_dir = str(tmp_path / "pf")
    ctx = Context(user_id="ana", data_dir=data_dir)
    with open_embedded(data_dir) as p:
        graph = p.graph(model=model)
        for n, text in enumerate(texts):
            if between is not None and n:
                between(p)
            graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "t"}}, context=ctx)


def test_a_turn_reads_the_stores_once_per_edge(tmp_path, counted):
    # The offline model saves the statement: start edge, reason, memory, its edge, reason again.
    _turn(tmp_path, ["Note 1: Ana keeps the red bike in a shed near Oslo."])
    assert counted["edges"] == 2 and counted["built"] == 4, counted
    assert counted["reads"] == counted["edges"], "each step an edge routed to took the edge's reads"


def test_reads_not_taken_in_time_are_read_again(tmp_path, counted, monkeypatch):
    monkeypatch.setattr(run_module, "HANDOFF_SECONDS", -1.0)  # every handed-on read is already stale
    _turn(tmp_path, ["Note 1: Ana keeps the red bike in a shed near Oslo."])
    assert counted["built"] == 4 and counted["reads"] == 4, counted


def test_the_model_sees_its_own_write_and_another_writers(tmp_path):
    model = AppendThenAnswer()
    model.prompts = []

    def elsewhere(p: Any) -> None:  # another writer of the same scope, between the turns
        CoreMemory(p.store, Scope("ana")).append("human", "Ana's sister is called Mila.")

    _turn(tmp_path, ["I keep bees on the roof.", "I play the oboe."], model=model, between=elsewhere)
    systems = [str(prompt[0].content) for prompt in model.prompts]
    assert len(systems) == 4, "two turns, each a call and its answer after the tool"
    assert "I keep bees on the roof." not in systems[0]
    assert "I keep bees on the roof." in systems[1], "the step after the memory write shows it"
    assert "Mila" not in systems[1] and "Mila" in systems[2], "the next turn shows the other writer's append"
    assert "I play the oboe." in systems[3]


def test_after_a_memory_step_what_its_writes_changed_is_not_read_again(tmp_path, counted, monkeypatch):
    monkeypatch.setattr(run_module, "HANDOFF_SECONDS", 30.0)  # a first turn's warm-up must not make them stale
    # The offline model saves a note in archival memory; "I work as ..." also appends to core memory. Their
    # effects (one record more, the block as saved) say what changed (tests/integration/test_derived_reads.py).
    _turn(tmp_path, ["Note 1: Ana keeps the red bike in a shed near Oslo.", "I work as a nurse in Oslo."])
    assert counted["parts"] == ["all", [], "all", []], counted["parts"]


def test_after_a_memory_step_without_effects_what_its_calls_may_change_is_read_again(tmp_path, counted, monkeypatch):
    monkeypatch.setattr(run_module, "HANDOFF_SECONDS", 30.0)
    monkeypatch.setattr(MemoryRun, "note_writes", lambda self, calls, effects: None)  # as after a resume
    _turn(tmp_path, ["Note 1: Ana keeps the red bike in a shed near Oslo.", "I work as a nurse in Oslo."])
    assert counted["parts"] == ["all", ["records"], "all", ["blocks", "records"]], counted["parts"]


def test_the_parts_a_memory_call_may_change():
    assert run_module.written_by([{"name": "archival_memory_search"}, {"name": "conversation_search"}]) == frozenset()
    assert run_module.written_by([{"name": "core_memory_replace"}, {"name": "procedure_update"}]) == \
        {"blocks", "procedures"}
    assert run_module.written_by([{"name": "archival_memory_insert"}, {"name": "weather"}]) is None


def test_a_note_that_cannot_be_applied_leaves_no_earlier_note_standing(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "HANDOFF_SECONDS", 30.0)
    data_dir = str(tmp_path / "pf")
    ctx = Context(user_id="ana", data_dir=data_dir)
    with open_embedded(data_dir) as p:
        graph = p.graph()
        run = graph.setup.open_run(ctx, p.store, {"configurable": {"thread_id": "t"}})
        key = run._key()
        run.main_context(PagefaultState(), [])  # the thread's last reads, as a step before the memory step
        human = run.core.append("human", "Ana keeps bees.")
        run.note_writes([{"name": "core_memory_append"}], [("blocks", human)])
        assert run_module._derived[key][0] == {"blocks"}
        assert any("bees" in b.value for b in run_module._last[key][0].blocks)
        # The next step's core edit wrote a block the last reads do not hold: nothing may be taken as known.
        other = run.core.set_block("garden", "Tomatoes.")
        run.note_writes([{"name": "core_memory_append"}], [("blocks", other)])
        assert key not in run_module._derived
