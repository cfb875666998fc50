"""A main context reads the stores (core blocks, procedures, the archival count) afresh each time it is
built (``window.run.PromptReads``): the model sees its own writes at the next step and another writer's at
the next turn, with nothing carried between steps that could go stale."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from pagefault import Context, open_embedded
from pagefault.stores import CoreMemory, Scope


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
